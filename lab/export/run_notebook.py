"""Export stored runs to a Jupyter notebook that reloads, re-plots and reproduces them.

:func:`to_notebook` writes an nbformat v4 notebook that

- opens with a markdown summary of each run (dataset, class split, backbone,
  strategy, seeds, status, best layer and g, when and where it ran, versions);
- reloads the runs from the :class:`lab.store.RunStore` by id, tabulates them with
  :mod:`lab.export.tables` and draws them with ``app.plots`` (the app's HoloViews builders):
  metric-vs-layer curves (mean ± std over seeds), the layer × epoch heatmap, seen
  accuracy vs the generalization index g, and the 2-D layout (UMAP, else PCA) of a
  chosen layer, the linear CKA of each run's layers (layer x layer at its last epoch; to epoch 0
  when it trained), and ``app.EmbeddingView`` (the embedding explorer) of the first run with a
  layout, at its best layer; several runs are overlaid for comparison. Its cells only call the
  library (no ``def`` or ``class``): every number comes from :mod:`lab.analysis`;
- ends with a cell holding each run's exact :class:`lab.config.RunConfig` as a
  Python literal, which re-runs it with :func:`lab.run` when ``RERUN = True``.

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
from lab.export._cells import check_ipynb, fill, py_literal, write_notebook
from lab.export.markdown import comparison_markdown, config_dict, escape_markdown, run_summary_markdown
from lab.store.old_calls import store_was_positional
from lab.store.lookup import is_record, open_store

__all__ = ["to_notebook", "build_notebook", "notebook_summary", "SUMMARY_TAG"]

_PREFERRED_METRICS = ("nmi", "knn_accuracy", "linear_probe_accuracy", "nc1")
SUMMARY_TAG = "summary"
"""Tag of the exported cell whose output is the status table; see :func:`notebook_summary`."""
_SUMMARY_KEY = "layerscope_summary"


# ----------------------------------------------------------------------------------------------
# code cells (templates: {{SLOT}} is replaced by a Python literal, nothing else)
# ----------------------------------------------------------------------------------------------

_SETUP = r'''
import pandas as pd
import holoviews as hv
from IPython.display import display

import lab
from lab.export import tables   # the tables below, with every number from lab.analysis
from app import plots    # the app's plot builders (installed with layerscope; no server needed)

hv.extension("bokeh")
pd.set_option("display.precision", 4)
pd.set_option("display.max_columns", 40)
pd.set_option("display.width", 200)
pd.set_option("display.max_colwidth", None)   # show names in full
'''

_LOAD = r'''
# The store folder and the exported run ids (plain data: point them elsewhere if the runs moved).
STORE_ROOT = {{STORE_ROOT}}
RUN_IDS = {{RUN_IDS}}

store = lab.RunStore(STORE_ROOT)
runs = {run_id: store.load(run_id) for run_id in RUN_IDS}
LABELS = tables.run_labels(runs)   # each run's name, or "name (id)" where names repeat
METRIC_NAMES = list(dict.fromkeys(store.compare(RUN_IDS)["metric"]))

for run_id, run in runs.items():
    if run.status != "finished":
        print(f"note: run {LABELS[run_id]!r} is {run.status}: only the epochs it completed are shown")

# Status, g and its best layer, seen accuracy (RunRecord.summary). The output's metadata carries the
# exact values for programs that read the executed notebook (lab.export.notebook_summary).
status = tables.status_table(runs, LABELS)
display(status, metadata={"layerscope_summary": {run_id: run.summary() for run_id, run in runs.items()}})
'''

_TABLE = r'''
# Mean over seeds of every metric at each layer, at each run's last complete evaluation.
TABLE_SPLIT = "unseen"
table = tables.layer_table(runs, split=TABLE_SPLIT, labels=LABELS)
table
'''

_CURVES = r'''
# Pick what to draw: any of METRIC_NAMES; SPLIT "unseen" or "seen"; EPOCH None = each run's last epoch.
CURVE_METRICS = {{CURVE_METRICS}}
SPLIT = "unseen"
EPOCH = None

curves = [plots.layer_curves(runs, metric, split=SPLIT, epoch=EPOCH, labels=LABELS)
          for metric in CURVE_METRICS if metric in METRIC_NAMES]
if not curves:
    print("no metrics stored yet")
hv.Layout(curves).opts(shared_axes=False).cols(2) if curves else None
'''

_HEATMAP = r'''
HEATMAP_METRIC = "nmi" if "nmi" in METRIC_NAMES else (METRIC_NAMES or [None])[0]
HEATMAP_SPLIT = "unseen"

heatmaps = [plots.layer_epoch_heatmap(run, HEATMAP_METRIC, HEATMAP_SPLIT, label=LABELS[run_id])
            for run_id, run in runs.items() if len(run.metrics)]
if not heatmaps:
    print("no metrics stored yet")
hv.Layout(heatmaps).opts(shared_axes=False).cols(2) if heatmaps else None
'''

_GENERALIZATION = r'''
# Seen accuracy (held-out images of the seen classes) vs g = max over layers of the mean unseen NMI,
# epoch by epoch: does better accuracy on the training classes mean better generalization?
generalization = tables.generalization_table(runs, LABELS)
display(generalization.drop(columns="run_id"))
plots.accuracy_vs_g(generalization, by="run", x="seen_accuracy", y="g")
'''

_PROJECTION = r'''
# The 2-D layout of the unseen images at one layer. Change LAYER (any of tables.run_layers(run)) and re-run.
LAYER = {{LAYER}}
SEED = None       # None: the first stored seed
EPOCH_2D = None   # None: the last epoch with a stored layout of LAYER
METHOD = None     # "umap", "pca" or None (UMAP when stored, else PCA)

hv.Layout([plots.projection_plot(run, LAYER, seed=SEED, epoch=EPOCH_2D, method=METHOD, label=LABELS[run_id])
           for run_id, run in runs.items()]).opts(shared_axes=False).cols(2)
'''

_EXPLORER = r'''
# The embedding explorer of one run, opened at its best layer (needs a live kernel, e.g. JupyterLab).
# Hover a point to see its image; a lasso or box selection sets `explorer.selection` (image indices) and is
# highlighted at every layer and epoch; tick "side by side" to see two layers at once.
# `explorer.selected_frame()` lists the selected images (index, class, layer, epoch, x, y).
import app
from app import EmbeddingView

app.extension()
EXPLORE_RUN = {{EXPLORE_RUN}}   # any of RUN_IDS with a stored layout (None: none has one)

explorer = EmbeddingView(store=store, run_id=EXPLORE_RUN) if EXPLORE_RUN is not None else None
explorer if explorer is not None else print("no exported run stored a 2-D layout (its projection was 'none')")
'''

_CKA = r'''
# Linear CKA (unbiased, lab.metrics.cka) of the unseen images' stored features of each run in CKA_RUNS:
# the table and heatmap compare every layer with every other at the run's last stored epoch (first seed; NaN: not
# defined, a layer with constant features); when the run trained, the curves give each layer's CKA to its own
# epoch-0 features, epoch by epoch (1 = unchanged up to rotation and scale).
from app import similarity_plots

CKA_RUNS = {{CKA_RUNS}}   # the exported runs that stored embeddings (a run with projection 'none' stores none)

cka_tables = {run_id: tables.cka_matrix(runs[run_id]) for run_id in CKA_RUNS}
cka_figures = []
for run_id, cka_table in cka_tables.items():
    display(cka_table, metadata={"layerscope_cka_run": run_id})
    if len(tables.epoch_table(runs[run_id], "cka_initial")):
        cka_figures.append(similarity_plots.cka_to_initial(runs[run_id], label=LABELS[run_id]))
    cka_figures.append(similarity_plots.run_heatmap(cka_table, runs[run_id], title=LABELS[run_id]))
if not CKA_RUNS:
    print("no exported run stored embeddings: no CKA to compute")
hv.Layout(cka_figures).opts(shared_axes=False).cols(2) if cka_figures else None
'''

_IMAGES = r'''
# The answer per image (lab.analysis.image_table) at the last evaluation of IMAGES_RUN: the layer from which each
# unseen image's kNN vote stays right, and the images the final layer forgets (right at the best layer). Then the
# measures per layer on SELECTION (image positions, as the explorer's; None: the forgotten images) over all images,
# and whether the measures agree on the best layer.
IMAGES_RUN = {{IMAGES_RUN}}   # the first exported run with a per-image record (None: none has one)
SELECTION = {{SELECTION}}

if IMAGES_RUN is None:
    print("no per-image record:", lab.analysis.image_record_problem(runs[RUN_IDS[0]]))
else:
    images = lab.analysis.image_table(runs[IMAGES_RUN])
    forgotten = images.index[images["forgotten"].fillna(False)].tolist()
    print(f"epoch {images.attrs['epoch']}: {len(forgotten)} of {len(images)} images forgotten by the final layer")
    display(lab.analysis.arrival_counts(images).to_frame().T)   # images right from that layer to the final one
    report = lab.analysis.selection_report(runs[IMAGES_RUN], forgotten if SELECTION is None else SELECTION)
    display(report, lab.analysis.measure_agreement(runs[IMAGES_RUN]))
    for note in report.attrs["notes"]:
        print("note:", note)
'''

_RERUN = r'''
# The exact configuration of each exported run: plain Python literals, edit them to try variations.
CONFIGS = {{CONFIGS}}
RERUN = {{RERUN}}   # True: train and evaluate every configuration again, from scratch

configs = {run_id: lab.RunConfig.from_dict(config) for run_id, config in CONFIGS.items()}
for run_id, cfg in configs.items():
    print(f"{run_id}: {cfg.describe()}")

if RERUN:
    rerun_store = lab.RunStore(STORE_ROOT)
    for run_id, cfg in configs.items():
        new_id = None
        for event in lab.run(cfg, store=rerun_store):
            if event.kind == "run_started":
                new_id = event.run_id
            elif event.kind == "epoch_finished":
                print(f"  seed {event.seed} epoch {event.epoch}: seen accuracy {event.heldout_accuracy}")
            elif event.kind in ("run_finished", "run_failed", "run_cancelled"):
                print(f"{run_id} re-run as {new_id}: {event.kind} {getattr(event, 'message', '')}")
        if new_id is not None:
            old, new = runs[run_id].metrics, rerun_store.load(new_id).metrics
            keys = ["seed", "epoch", "layer", "split", "metric"]
            both = old.merge(new, on=keys, suffixes=("_stored", "_rerun"))
            print(f"  {len(both)} metric values in common, largest difference "
                  f"{(both['value_stored'] - both['value_rerun']).abs().max():.3g}")
'''


def _curve_metrics(records: list) -> list[str]:
    present = {str(m) for rec in records if len(rec.metrics) for m in rec.metrics["metric"]}
    chosen = [m for m in _PREFERRED_METRICS if m in present]
    # otherwise the first four in the catalogue's display order, then any it does not list
    listed = [m for m in catalogue.METRIC_NAMES if m in present]
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


def _images_run(records: list) -> str | None:
    """The first run with a per-image record (the images cell's), None if none has one."""
    return next((rec.run_id for rec in records if rec.image_record_problem() is None), None)


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


@store_was_positional("store")
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
                  + ". Their completed epochs are shown."]
    cells = [v4.new_markdown_cell("\n".join(intro))]
    cells += [v4.new_markdown_cell(run_summary_markdown(i + 1, rec, root)) for i, rec in enumerate(records)]
    if len(records) > 1:
        cells.append(v4.new_markdown_cell(comparison_markdown(records)))

    layer = _default_layer(records)
    cells += [
        v4.new_markdown_cell("## Reload the runs\n\nThe notebook needs layerscope installed (`lab`, and `app.plots` "
                             "to draw) and the run store at `STORE_ROOT`; no server. Nothing is re-measured: every "
                             "number below is read from the store and summarised by `lab.analysis`."),
        v4.new_code_cell(fill(_SETUP)),
        v4.new_code_cell(fill(_LOAD, STORE_ROOT=py_literal(str(root)), RUN_IDS=py_literal(ids)),
                         metadata={"tags": [SUMMARY_TAG]}),
        v4.new_markdown_cell(
            "## Per-layer metrics\n\nMean over seeds of every metric at each layer, at each run's last "
            "evaluated epoch, on the **unseen** classes (NMI, kNN and linear-probe accuracy measure how well "
            "a layer separates classes it was never trained on; NC1, CDNV, rank and NC2 measure collapse)."),
        v4.new_code_cell(fill(_TABLE), metadata={"tags": ["metric-table"]}),
        v4.new_markdown_cell(
            "## Metric vs layer\n\nEach curve is one run; the bars are ± one standard deviation over seeds. "
            "The layer with the highest unseen NMI is the run's *best layer*, and that NMI is its "
            "generalization index *g*. Edit `CURVE_METRICS`, `SPLIT` or `EPOCH` to look elsewhere."),
        v4.new_code_cell(fill(_CURVES, CURVE_METRICS=py_literal(_curve_metrics(records)))),
        v4.new_markdown_cell(
            "## Layer × epoch\n\nHow fine-tuning changes each layer, epoch by epoch (epoch 0 is the backbone "
            "before any training)."),
        v4.new_code_cell(fill(_HEATMAP)),
        v4.new_markdown_cell(
            "## Seen accuracy vs unseen generalization\n\nThe seed papers' question: does accuracy on the "
            "classes a model was trained on predict how well its best layer separates classes it never saw?"),
        v4.new_code_cell(fill(_GENERALIZATION), metadata={"tags": ["generalization-table"]}),
        v4.new_markdown_cell(
            "## The unseen classes at one layer\n\nA 2-D layout (UMAP when the run stored one, else PCA) of "
            "the unseen images' features at `LAYER` (by default the best layer); colours are classes."),
        v4.new_code_cell(fill(_PROJECTION, LAYER=py_literal(layer))),
        v4.new_markdown_cell(
            "## Explore the layouts\n\nThe same images at every layer: select a group where it mixes at one "
            "layer and see where it goes at the others. Thumbnails need the run's dataset on this machine."),
        v4.new_code_cell(fill(_EXPLORER, EXPLORE_RUN=py_literal(_explore_run(records))),
                         metadata={"tags": ["explorer"]}),
        v4.new_markdown_cell(
            "## Which layers changed, and how layers relate (CKA)\n\nLinear CKA compares two sets of features of "
            "the same images, up to rotation and scale. Per run: each layer against every other at the last "
            "stored epoch, and, for a training run, each layer against its own features before fine-tuning."),
        v4.new_code_cell(fill(_CKA, CKA_RUNS=py_literal(_cka_runs(records))), metadata={"tags": ["cka"]}),
        v4.new_markdown_cell(
            "## The answer per image\n\nWhere each unseen image's nearest neighbour starts (and stays) in its own "
            "class, which images the final layer loses, the measures on a selection of images, and whether the "
            "measures agree on the best layer (docs/METRICS.md, \"The answer per image\")."),
        v4.new_code_cell(fill(_IMAGES, IMAGES_RUN=py_literal(_images_run(records)),
                              SELECTION=_selection_literal(selection)), metadata={"tags": ["images"]}),
        v4.new_markdown_cell(
            "## Reproduce\n\nThe exact `RunConfig` of every run, as a Python literal. Set `RERUN = True` and "
            "execute the cell to train and evaluate it again from scratch (a new run in the same store); it "
            "then prints how far the new metric values are from the stored ones."),
        v4.new_code_cell(fill(_RERUN, CONFIGS=_config_literal(records), RERUN=py_literal(bool(rerun))),
                         metadata={"tags": ["reproduce"]}),
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


@store_was_positional("store", "execute", "timeout")
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

    Returns
    -------
    pathlib.Path
        The written notebook.

    Raises
    ------
    ValueError
        Malformed run ids, a path that is not ``.ipynb``, a bad store.
    lab.store.RunNotFoundError
        A run id not in the store.
    RuntimeError
        ``execute=True`` and a cell failed; the notebook is saved with its outputs
        (including the error) before this is raised.
    """
    target = check_ipynb(path)
    nb = build_notebook(runs, store=store, rerun=rerun, selection=selection)
    return write_notebook(nb, target, execute=execute, timeout=timeout)
