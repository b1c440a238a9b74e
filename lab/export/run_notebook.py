"""Export stored runs to a Jupyter notebook that reloads, re-plots and reproduces them.

:func:`to_notebook` writes an nbformat v4 notebook that

- opens with a markdown summary of each run (dataset, class split, backbone,
  strategy, seeds, status, best layer and g, when and where it ran, versions);
- reloads the runs from the :class:`lab.store.RunStore` by id, tabulates them with
  :mod:`lab.export.tables` and draws them with ``app.plots`` (the app's HoloViews builders):
  metric-vs-layer curves (mean ± std over seeds), the layer × epoch heatmap, seen
  accuracy vs the generalization index g, the law of equi-separation across layers (ratio per layer
  and r per split, log10 NC1 against depth, r against epoch), and the 2-D layout (UMAP, else PCA) of a
  chosen layer, the linear CKA of each run's layers (layer x layer at its last epoch; to epoch 0
  when it trained), and ``app.EmbeddingView`` (the embedding explorer) of the first run with a
  layout, at its best layer; several runs are overlaid for comparison. Its cells only call the
  library (no ``def`` or ``class``): every number comes from :mod:`lab.analysis`;
- ends with a cell holding each run's exact :class:`lab.config.RunConfig` as a
  Python literal, which re-runs it with :func:`lab.run` when ``RERUN = True``.

Where it names what the runs' epoch numbers count (text, table columns, plot axes and titles) it uses their
unit, :func:`lab.export.tables.runs_axis`: "step" for a loop :class:`lab.Monitor` counted in optimizer steps.

Security: everything a user typed (run names, class names, paths, ids) reaches
the notebook only as data. Markdown gets it escaped (HTML entities and
backslash-escaped punctuation, see :func:`escape_markdown`); code cells get it
only as Python literals built by :func:`repr` and checked with
:func:`ast.literal_eval` (see :func:`py_literal`), or read it from the store at
run time. A run named ``"); import os; os.system("echo pwned")  #`` therefore
shows that name and runs nothing else.

Examples
--------
>>> import lab
>>> store = lab.RunStore("runs")                                  # doctest: +SKIP
>>> lab.export.to_notebook([run_id], "run.ipynb", store=store)   # doctest: +SKIP

A whole study (:mod:`lab.study`) exports with :func:`study_to_notebook` (in :mod:`lab.export.study_notebook`):

>>> lab.export.study_to_notebook("utilization-vs-noise", "study.ipynb", store=store)   # doctest: +SKIP
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

from lab import analysis, catalogue
from lab.export import _run_cells as template
from lab.export import tables
from lab._numpydoc import doc
from lab.export._cells import WRITE_DOCS, check_ipynb, fill, py_literal, write_notebook
from lab.export.markdown import comparison_markdown, config_dict, escape_markdown, run_summary_markdown
from lab.store.lookup import is_record, open_store

__all__ = ["to_notebook", "build_notebook", "notebook_summary", "SUMMARY_TAG"]

SUMMARY_TAG = "summary"
"""Tag of the exported cell whose output is the status table; see :func:`notebook_summary`."""
_SUMMARY_KEY = "layerscope_summary"


def _curve_metrics(records: list) -> list[str]:
    present = {str(m) for rec in records if len(rec.metrics) for m in rec.metrics["metric"]}
    chosen = [m for m in catalogue.metric_names(export=True) if m in present]
    # otherwise the first four in the catalogue's display order, then any it does not list
    listed = [m for m in catalogue.METRICS if m in present]
    return chosen or (listed + sorted(present - set(listed)))[:4]


def _default_layer(records: list) -> str | None:
    for rec in records:
        best = rec.summary().get("best_layer")
        if best:
            return str(best)
    for rec in records:
        layers = analysis.layer_order(rec.meta.get("layers"), rec.metrics)
        if layers:
            return str(layers[-1])
    return None


def _explore_run(records: list) -> str | None:
    """The first run with a stored 2-D layout (the explorer's), None if none has one."""
    return next((rec.run_id for rec in records if len(rec.projection_keys())), None)


def _cka_runs(records: list) -> list[str]:
    """The runs with stored embeddings (the CKA cell's)."""
    return [rec.run_id for rec in records if len(rec.embedding_keys())]


def _law_run(records: list) -> str | None:
    """The first run that measured the law's metric (NC1: the law cell's plots), None if none did."""
    law = catalogue.law_metric()
    return next((rec.run_id for rec in records if len(rec.metrics) and (rec.metrics["metric"] == law).any()), None)


def _images_run(records: list) -> str | None:
    """The first run with a per-image record (the images cell's), None if none has one."""
    return next((rec.run_id for rec in records if rec.image_record_problem() is None), None)


def _layer_by_epoch(axis: str) -> str:
    """The heading and sentence of the layer x epoch cell, in the runs' unit (:func:`tables.runs_axis`)."""
    if axis == "epoch":
        return ("## Layer × epoch\n\nHow fine-tuning changes each layer, epoch by epoch (epoch 0 is the backbone "
                "before any training).")
    if axis == "step":
        return ("## Layer × step\n\nHow training changes each layer, step by step: the training loop counted its "
                "evaluations in optimizer steps (step 0: before its first step).")
    return (f"## Layer × {escape_markdown(axis)}\n\nHow training changes each layer, evaluation by evaluation, "
            "counted in epochs or in optimizer steps as each run counts them (0: before any training).")


def _code(source: str, tag: str | None = None, *, literals: dict[str, str] | None = None, **values):
    """A code cell: the template ``source`` filled with ``values``, each written as a Python literal
    (:func:`py_literal`), and with ``literals`` (Python source already); tagged ``tag``."""
    from nbformat import v4

    cell = v4.new_code_cell(fill(source, **{k: py_literal(v) for k, v in values.items()}, **(literals or {})))
    if tag is not None:
        cell.metadata["tags"] = [tag]
    return cell


def _selection_literal(selection) -> str:
    if selection is None:
        return "None"
    values = list(selection)
    if any(isinstance(v, bool) or not hasattr(v, "__index__") for v in values):     # ints, numpy ints
        raise ValueError(f"selection must be a list of image positions (integers); got {values[:5]!r}")
    return py_literal([int(v) for v in values])


def _config_literal(records: list) -> str:
    configs = {}
    for rec in records:
        cfg = config_dict(rec)
        # JSON round trip: the literal holds exactly what config.json holds (tuples -> lists)
        configs[rec.run_id] = json.loads(json.dumps(cfg, allow_nan=False))
    return py_literal(configs)


# ----------------------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------------------

def _run_id_list(runs) -> list[str]:
    if isinstance(runs, str) or is_record(runs):
        runs = [runs]
    try:
        ids = [run.run_id if is_record(run) else run for run in runs]
    except TypeError:
        raise ValueError(f"runs must be a run id or a list of run ids. Got {runs!r} instead.") from None
    if not ids:
        raise ValueError("runs must name at least one run; `python -m lab runs list` shows the stored runs.")
    bad = [r for r in ids if not isinstance(r, str)]
    if bad:
        raise ValueError(f"run ids must be strings. Got {bad[0]!r} instead.")
    dups = sorted({r for r in ids if ids.count(r) > 1})
    if dups:
        raise ValueError(f"runs lists {', '.join(map(repr, dups))} more than once.")
    return ids


def build_notebook(runs, *, store=None, rerun: bool = False, selection=None):
    """Build (but do not write) the notebook of :func:`to_notebook`.

    Parameters
    ----------
    runs : str, record or list of them
        Stored runs, by id or record (validated by the store: unknown or malformed ids raise).
    store : lab.RunStore, path or None
        The store holding the runs; None = the default store (``$LAB_RUNS_DIR`` or ``./runs``).
    rerun : bool
        Initial value of the final cell's ``RERUN`` switch (re-train every run when executed).
    selection : list of int, optional
        Image positions for the per-image cell's ``SELECTION`` (its :func:`lab.analysis.selection_report`);
        None: the images the final layer forgets.

    Returns
    -------
    nbformat.NotebookNode
        A valid nbformat v4 notebook without outputs.
    """
    import nbformat
    from nbformat import v4

    import lab

    ids = _run_id_list(runs)
    store = open_store(store)
    records = [store.load(run_id) for run_id in ids]
    root = Path(store.root).resolve()
    now = _dt.datetime.now(_dt.timezone.utc).astimezone()

    title_names = ", ".join(escape_markdown(r.name or r.run_id) for r in records)
    axis = tables.runs_axis(records)    # "epoch", "step" (a loop counted in optimizer steps) or "epoch or step"
    units = escape_markdown(" or ".join(unit + "s" for unit in axis.split(" or ")))
    unfinished = [r for r in records if r.status != "finished"]
    intro = [
        f"# layerscope {'run' if len(records) == 1 else 'runs'}: {title_names}",
        "",
        f"Exported by `lab.export` {escape_markdown(now.strftime('%Y-%m-%d %H:%M:%S %Z'))} "
        f"\\(layerscope {escape_markdown(lab.__version__)}\\). The cells below reload "
        f"{'this run' if len(records) == 1 else 'these runs'} from the run store by id, tabulate and draw "
        "them, and end with the exact configuration, which re-runs from scratch when `RERUN = True`.",
    ]
    if unfinished:
        intro += ["", "> ⚠️ Not every run had finished when this notebook was exported: "
                  + "; ".join(f"{escape_markdown(r.name or r.run_id)} is **{escape_markdown(r.status)}**"
                              for r in unfinished)
                  + f". Their completed {units} are shown."]
    cells = [v4.new_markdown_cell("\n".join(intro))]
    cells += [v4.new_markdown_cell(run_summary_markdown(i + 1, rec, root)) for i, rec in enumerate(records)]
    if len(records) > 1:
        cells.append(v4.new_markdown_cell(comparison_markdown(records)))

    layer = _default_layer(records)
    cells += [
        v4.new_markdown_cell("## Reload the runs\n\nThe notebook needs layerscope installed (`lab`, and `app.plots` "
                             "to draw) and the run store at `STORE_ROOT`; no server. Nothing is re-measured: every "
                             "number below is read from the store and summarised by `lab.analysis`."),
        _code(template.SETUP),
        _code(template.LOAD, SUMMARY_TAG, STORE_ROOT=str(root), RUN_IDS=ids),
        v4.new_markdown_cell(
            "## Per-layer metrics\n\nMean over seeds of every metric at each layer, at each run's last "
            f"evaluated {escape_markdown(axis)}, on the **unseen** classes (NMI, kNN and linear-probe accuracy "
            "measure how well a layer separates classes it was never trained on; NC1, CDNV, rank and NC2 measure "
            "collapse)."),
        _code(template.TABLE, "metric-table"),
        v4.new_markdown_cell(
            "## Metric vs layer\n\nEach curve is one run; the bars are ± one standard deviation over seeds. "
            "The layer with the highest unseen NMI is the run's *best layer*, and that NMI is its "
            "generalization index *g*. Edit `CURVE_METRICS`, `SPLIT` or `EPOCH` to look elsewhere."),
        _code(template.CURVES, CURVE_METRICS=_curve_metrics(records)),
        v4.new_markdown_cell(_layer_by_epoch(axis)),
        _code(template.HEATMAP, G_METRIC=catalogue.g_metric()),
        v4.new_markdown_cell(
            "## Seen accuracy vs unseen generalization\n\nThe seed papers' question: does accuracy on the "
            "classes a model was trained on predict how well its best layer separates classes it never saw?"),
        _code(template.GENERALIZATION, "generalization-table"),
        v4.new_markdown_cell(
            "## Collapse across layers: the law of equi-separation\n\nHe & Su (2023) found that in a trained "
            "network log NC1 falls *linearly* with depth: each layer multiplies it by the same ratio. Below, per "
            "split (the seen classes' training sample, their held-out images, the unseen classes), that ratio and "
            "Pearson r of the fit, as the runs measured them; the unseen classes can follow it in reverse "
            "(a ratio above 1)."),
        _code(template.SEPARATION_LAW, "separation-law", LAW_RUN=_law_run(records)),
        v4.new_markdown_cell(
            "## The unseen classes at one layer\n\nA 2-D layout (UMAP when the run stored one, else PCA) of "
            "the unseen images' features at `LAYER` (by default the best layer); colours are classes."),
        _code(template.PROJECTION, LAYER=layer),
        v4.new_markdown_cell(
            "## Explore the layouts\n\nThe same images at every layer: select a group where it mixes at one "
            "layer and see where it goes at the others. Thumbnails need the run's dataset on this machine."),
        _code(template.EXPLORER, "explorer", EXPLORE_RUN=_explore_run(records)),
        v4.new_markdown_cell(
            "## Which layers changed, and how layers relate (CKA)\n\nLinear CKA compares two sets of features of "
            "the same images, up to rotation and scale. Per run: each layer against every other at the last "
            f"stored {escape_markdown(axis)}, and, for a training run, each layer against its own features before "
            "fine-tuning."),
        _code(template.CKA, "cka", CKA_RUNS=_cka_runs(records)),
        v4.new_markdown_cell(
            "## The answer per image\n\nWhere each unseen image's nearest neighbour starts (and stays) in its own "
            "class, which images the final layer loses, the measures on a selection of images, and whether the "
            "measures agree on the best layer (docs/METRICS.md, \"The answer per image\")."),
        _code(template.IMAGES, "images", IMAGES_RUN=_images_run(records),
              literals={"SELECTION": _selection_literal(selection)}),
        v4.new_markdown_cell(
            "## Reproduce\n\nThe exact `RunConfig` of every run, as a Python literal. Set `RERUN = True` and "
            "execute the cell to train and evaluate it again from scratch (a new run in the same store); it "
            "then prints how far the new metric values are from the stored ones."),
        _code(template.RERUN, "reproduce", RERUN=bool(rerun), literals={"CONFIGS": _config_literal(records)}),
    ]
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["layerscope"] = {
        "run_ids": ids, "store": str(root), "exported": now.isoformat(timespec="seconds"),
        "lab_version": lab.__version__, "status": {r.run_id: r.status for r in records},
    }
    nbformat.validate(nb)
    return nb


def notebook_summary(nb) -> dict[str, dict]:
    """What an executed exported notebook showed for each run: :meth:`RunRecord.summary` as the kernel got it.

    The cell tagged ``"summary"`` displays the status table (run, status, epoch, best layer, g, ...)
    and carries the exact values in that output's metadata (``"layerscope_summary"``); this reads them.

    Parameters
    ----------
    nb : nbformat.NotebookNode or path of a ``.ipynb`` file, executed

    Returns
    -------
    dict
        ``{run_id: summary dict}`` with keys epoch, best_layer, g, g_std, n_seeds, heldout_accuracy, ...

    Raises
    ------
    ValueError
        The notebook has no summary cell, or it was not executed.
    """
    import nbformat

    if isinstance(nb, (str, os.PathLike)):
        nb = nbformat.read(str(nb), as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and SUMMARY_TAG in c.metadata.get("tags", [])]
    if not cells:
        raise ValueError("the notebook has no cell tagged 'summary'; export it again with lab.export.to_notebook.")
    for out in cells[0].get("outputs", []):
        found = out.get("metadata", {}).get(_SUMMARY_KEY)
        if found is not None:
            return {str(k): dict(v) for k, v in found.items()}
    raise ValueError("the notebook's summary cell has no output; execute it first "
                     "(lab.export.execute_notebook, or to_notebook(..., execute=True)).")


@doc(**WRITE_DOCS)
def to_notebook(runs, path: str | os.PathLike, *, store=None, execute: bool = False, timeout: int = 600,
                rerun: bool = False, selection=None) -> Path:
    """Write a notebook that reloads, re-plots and can reproduce stored runs.

    Parameters
    ----------
    runs : str, record or list of them
        Runs in ``store``, by id or record; with several, the plots overlay them for comparison.
        Runs still running or interrupted export too; the summary says so.
    path : path
        The ``.ipynb`` file to write (its folder is created).
    store : lab.RunStore, path or None
        Where the runs live; None = ``$LAB_RUNS_DIR`` or ``./runs``.
    execute : bool
        Also execute the notebook with nbclient (kernel: this interpreter) and save it with its outputs.
    timeout : int
        Seconds allowed per cell when executing.
    rerun : bool
        Initial value of the final cell's ``RERUN`` switch; with ``execute=True`` the runs are trained again.
    selection : list of int, optional
        Image positions the per-image cell reports on (:func:`build_notebook`).

    {returns}

    Raises
    ------
    ValueError
        Malformed run ids, a path that is not ``.ipynb``, a bad store.
    lab.store.RunNotFoundError
        A run id not in the store.
    {execute_failed}
    """
    target = check_ipynb(path)
    nb = build_notebook(runs, store=store, rerun=rerun, selection=selection)
    return write_notebook(nb, target, execute=execute, timeout=timeout)
