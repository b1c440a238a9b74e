"""Export a study to a Jupyter notebook that reloads its runs and draws the papers' figures.

:func:`study_to_notebook` (also ``lab.export.study_to_notebook`` and ``python -m lab export --study``)
writes an nbformat v4 notebook whose cells

- rebuild the :class:`lab.study.Study` from its spec, embedded as a Python literal;
- reload the study's finished runs from the run store (:func:`lab.study.figures`: every number
  from :mod:`lab.analysis`), each read at the study's summary epoch (``summary=``: the last, the best by the
  unseen g, or a given epoch; ``SUMMARY`` in the notebook), and show the status of every cell;
- draw the figures of the app's Studies tab with ``app.study_plots``: g per layer against relative
  depth (with the bootstrap interval where recorded), seen accuracy against g with the rank
  correlations, the Wang & Yang heatmaps, NC1 per layer per condition and the transferability scores
  before fine-tuning against the unseen NMI after it, each next to its table; every condition's number is the
  mean over its seeds with the 95 % interval of that mean and n (METRICS.md, "Seeds as replicates");
- say whether the measures agree over the study's runs (:func:`lab.analysis.study_agreement`: how often
  each measure's best layer is NMI's, the label-free ones included, and its median Spearman with NMI).

Cells only call the library (no ``def`` or ``class``). Everything a user typed (the study's name,
description and axis values, the store's path) reaches markdown escaped and code only as literals
built by :func:`lab.export.py_literal`; nothing typed is ever executed as code.

The tables the executed notebook showed can be read back with :func:`notebook_tables`: each is
displayed with its exact values in the output's metadata (:func:`table_metadata`).
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

from lab.export import _study_cells as template
from lab._numpydoc import doc
from lab.export._cells import WRITE_DOCS, check_ipynb, fill, py_literal, write_notebook
from lab.export.markdown import escape_markdown
from lab.store.lookup import open_store

__all__ = ["study_to_notebook", "build_study_notebook", "table_metadata", "notebook_tables"]

_TABLE_KEY = "layerscope_table"

# ----------------------------------------------------------------------------------------------
# tables carried in output metadata
# ----------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A JSON value for one table cell: numpy scalars as Python ones, NaN and NA as None."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (ValueError, TypeError):
            pass
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return str(value)


def table_metadata(name: str, frame) -> dict:
    """Display metadata carrying a table's exact values, for :func:`notebook_tables` to read back.

    Parameters
    ----------
    name : str
        The table's name (e.g. ``"generalization"``).
    frame : pandas.DataFrame
        Shape (rows, columns); its values are written as JSON (floats exactly, NaN as null).

    Returns
    -------
    dict
        ``{"layerscope_table": {"name", "columns", "dtypes", "data"}}``: pass as ``metadata=`` of
        ``IPython.display.display``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a table needs a non-empty name. Got {name!r} instead.")
    if not hasattr(frame, "columns") or not hasattr(frame, "itertuples"):
        raise ValueError(f"table {name!r} must be a pandas DataFrame. Got {type(frame).__name__} instead.")
    return {_TABLE_KEY: {
        "name": name,
        "columns": [str(c) for c in frame.columns],
        "dtypes": [str(t) for t in frame.dtypes],
        "data": [[_plain(v) for v in row] for row in frame.itertuples(index=False, name=None)],
    }}


def _frame(payload: Mapping):
    import pandas as pd

    frame = pd.DataFrame(payload["data"], columns=payload["columns"])
    for column, dtype in zip(payload["columns"], payload["dtypes"]):
        try:
            if dtype.startswith("float"):
                frame[column] = frame[column].astype(dtype)          # null -> NaN
            elif dtype.startswith(("int", "uint", "bool")) and frame[column].notna().all():
                frame[column] = frame[column].astype(dtype)
            elif dtype == "object":
                frame[column] = frame[column].astype(object)
        except (TypeError, ValueError):
            pass                           # a column whose values no longer fit its dtype stays as read
    return frame


def notebook_tables(nb) -> dict:
    """The tables an executed study notebook showed, by name, with the exact values it computed.

    Parameters
    ----------
    nb : nbformat.NotebookNode or path of an executed ``.ipynb`` file

    Returns
    -------
    dict of str -> pandas.DataFrame
        ``"status"`` (one row per cell), ``"generalization"`` (g per condition), and the other tables
        the notebook displayed with :func:`table_metadata`.

    Raises
    ------
    ValueError
        The notebook shows no such table: it was not executed, or not exported by :func:`study_to_notebook`.
    """
    import nbformat

    if isinstance(nb, (str, os.PathLike)):
        nb = nbformat.read(str(nb), as_version=4)
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            payload = out.get("metadata", {}).get(_TABLE_KEY)
            if payload is not None:
                found[str(payload["name"])] = _frame(payload)
    if not found:
        raise ValueError("the notebook shows no layerscope table; execute it first "
                         "(lab.export.execute_notebook, or study_to_notebook(..., execute=True)).")
    return found


# ----------------------------------------------------------------------------------------------
# the notebook
# ----------------------------------------------------------------------------------------------


def _resolve_study(study_or_spec, store):
    from lab.study import Study, find_study, load_study

    if isinstance(study_or_spec, (Study, Mapping)):
        return load_study(study_or_spec)
    if isinstance(study_or_spec, (str, os.PathLike)):
        return find_study(os.fspath(study_or_spec), store=store)
    raise ValueError(f"study must be a lab.Study, a spec mapping, a spec file or the name of a study run into the "
                     f"store. Got {type(study_or_spec).__name__} instead.")


def _spec_literal(study) -> str:
    try:
        spec = json.loads(json.dumps(study.to_dict(), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"study {study.name!r} holds a value that is not plain data ({exc}); a study spec is "
                         "made of text, numbers, booleans, lists and mappings") from None
    return py_literal(spec)


def _axes_markdown(study) -> str:
    from lab.study.spec import short_value

    lines = []
    for axis, values in study.axes.items():
        shown = ", ".join(f"`{escape_markdown(short_value(v))}`" for v in values)
        lines.append(f"- **{escape_markdown(axis)}** ({len(values)}): {shown}")
    return "\n".join(lines) or "- no axes: one run of the base configuration"


def build_study_notebook(study_or_spec, *, store=None, summary="last"):
    """Build (but do not write) the notebook of :func:`study_to_notebook`.

    Returns
    -------
    nbformat.NotebookNode
        A valid nbformat v4 notebook without outputs.
    """
    import nbformat
    from nbformat import v4

    import lab

    from lab.analysis import check_summary, summary_label

    summary = check_summary(summary)
    store = open_store(store)
    study = _resolve_study(study_or_spec, store)
    status = study.status(store=store)
    run_ids = [None if rid is None or (isinstance(rid, float) and math.isnan(rid)) else str(rid)
               for rid in status["run_id"]]
    if not any(run_ids):
        raise ValueError(f"study {study.name!r} has no runs in the store {store.root}; run it first "
                         f"(python -m lab study run SPEC) or give the store that holds its runs")
    root = Path(store.root).resolve()
    now = _dt.datetime.now(_dt.timezone.utc).astimezone()
    counts = status["status"].value_counts()
    name = escape_markdown(study.name)
    intro = [
        f"# layerscope study: {name}",
        "",
        *([escape_markdown(study.description), ""] if study.description else []),
        f"Exported by `lab.export` {escape_markdown(now.strftime('%Y-%m-%d %H:%M:%S %Z'))} "
        f"\\(layerscope {escape_markdown(lab.__version__)}\\). The study is the grid of every combination "
        f"of its axes, {len(status)} runs:",
        "",
        _axes_markdown(study),
        "",
        "At export: " + ", ".join(f"{n} {escape_markdown(str(s))}" for s, n in counts.items()) + ". The cells "
        "below reload the finished runs from the run store and draw the papers' figures; nothing is re-measured.",
        "",
        f"Each run is read at its **{escape_markdown(summary_label(summary))}** (`SUMMARY` below: `\"last\"`, "
        "`\"best\"`, the epoch of highest unseen g, or an epoch). A condition's runs differ only in their seeds: "
        "every table and figure shows their mean, the 95 % interval of that mean over the seeds (Student t; none "
        "for one seed) and n.",
    ]
    if counts.get("finished", 0) < len(status):
        intro += ["", "> ⚠️ Not every cell had a finished run at export: the figures show the finished ones. "
                  "`RUN_MISSING = True` in the last cell runs the others."]
    cells = [
        v4.new_markdown_cell("\n".join(intro)),
        v4.new_markdown_cell("## Reload the study\n\nThe notebook needs layerscope installed (`lab`, and "
                             "`app.study_plots` to draw) and the run store at `STORE_ROOT`. `SPEC` is the study "
                             "as plain data; `figures()` reads its finished runs, the newest per cell."),
        v4.new_code_cell(fill(template.SETUP)),
        v4.new_code_cell(fill(template.LOAD, STORE_ROOT=py_literal(str(root)), SPEC=_spec_literal(study),
                               RUN_IDS=py_literal(run_ids), SUMMARY=py_literal(summary)),
                         metadata={"tags": ["study-status"]}),
        v4.new_markdown_cell(
            "## g per layer against relative depth (Dyballa et al.)\n\nAt every layer, the unseen classes' "
            "features are clustered (k-means) and compared with the true classes by NMI. One curve per condition "
            "(runs that differ only in their seeds are pooled; n in the legend), the band is the 95 % interval of the "
            "mean over seeds, the vertical bars (where recorded) the 95 % bootstrap interval over the unseen images, "
            "the star marks the best layer, whose NMI is the condition's generalization index g. Relative depth "
            "runs from 0 (first measured layer) to 1 (last)."),
        v4.new_code_cell(fill(template.LAYERS), metadata={"tags": ["study-layers"]}),
        v4.new_markdown_cell(
            "## Seen accuracy against g (Gerritz et al.)\n\nOne point per condition: accuracy on held-out images "
            "of the seen classes against g, error bars the 95 % interval of each mean over seeds. Spearman's ρ and "
            "Kendall's τ "
            "measure whether ordering the conditions by seen accuracy gives the same order as ordering them by "
            "g (+1 the same, −1 reversed, 0 unrelated), with 95 % bootstrap intervals over conditions; below "
            "three conditions there is no coefficient."),
        v4.new_code_cell(fill(template.GENERALIZATION), metadata={"tags": ["study-generalization"]}),
        v4.new_markdown_cell(
            "## Condition heatmaps (Wang & Yang, figures 1-3)\n\nOver the first two condition axes, the mean over "
            "repeats (the table adds n and the 95 % interval over repeats) of: **utilization** ‖W − W⁰‖ / ‖W⁰‖ of "
            "each layer; **contribution**, the change of seen "
            "held-out accuracy when that layer alone is reset to its initial weights; the **generalization gap** "
            "(training minus held-out accuracy); **resilience**, the accuracy on the training images whose labels "
            "were corrupted, against their true labels. A study with fewer than two condition axes, or without "
            "`contribution: true`, shows what it lacks."),
        v4.new_code_cell(fill(template.GRID), metadata={"tags": ["study-grid"]}),
        v4.new_markdown_cell(
            "## NC1 per layer per condition (Li, Liu et al., figure 10)\n\nNeural collapse at each layer on the "
            "held-out images of the seen classes: the within-class spread in units of the between-class spread "
            "(near 0: each class collapsed to a point). Log scale; the band is the 95 % interval of the mean over "
            "seeds."),
        v4.new_code_cell(fill(template.NC1), metadata={"tags": ["study-nc1"]}),
        v4.new_markdown_cell(
            "## The law of equi-separation per condition (He & Su 2023)\n\nlog10 NC1 fitted against depth at the "
            "last epoch, per split (train sample, held-out images of the seen classes, unseen classes): the ratio "
            "by which each layer multiplies NC1 (below 1: each deeper layer separates the classes better) and "
            "Pearson r of the fit (near −1 or +1 where the law holds), mean and std over the condition's seeds, "
            "with the 95 % interval of each mean (`ratio_seed_low` … `r_seed_high`) and n (`n_seeds`)."),
        v4.new_code_cell(fill(template.LAW), metadata={"tags": ["study-law"]}),
        v4.new_markdown_cell(
            "## Transferability scores before fine-tuning against g (You et al. 2021; Shao et al. 2022)\n\n"
            "At epoch 0, before any training, each layer's features of held-out images of the seen classes are "
            "scored by LogME, SFDA and plain kNN accuracy; after fine-tuning, the unseen classes' NMI at that "
            "layer is what g maximises. Spearman's ρ says whether a score orders the layers (of one condition, "
            "and of all conditions together) as their unseen NMI does, with a 95 % bootstrap interval over the "
            "points from 5 points on. Studies whose runs did not measure the scores say so."),
        v4.new_code_cell(fill(template.TRANSFER), metadata={"tags": ["study-transfer"]}),
        v4.new_markdown_cell(
            "## Do the measures agree on the best layer?\n\nFor every measure a run computed besides NMI: in how "
            "many of the study's runs its best layer (at the run's last complete NMI evaluation) is NMI's, and the "
            "median over runs of Spearman's ρ between its layer order and NMI's. RankMe, α-ReQ, TwoNN ID and LiDAR "
            "read no label: if they agree with NMI, the best layer can be found without the unseen classes' "
            "labels."),
        v4.new_code_cell(fill(template.AGREEMENT), metadata={"tags": ["study-agreement"]}),
        v4.new_markdown_cell(
            "## Run what is missing\n\nA study resumes: running it again runs only the cells without a finished "
            "run. From a terminal: `python -m lab study run SPEC`, then `python -m lab study show NAME`."),
        v4.new_code_cell(fill(template.RUN), metadata={"tags": ["study-run"]}),
    ]
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["layerscope"] = {
        "study": study.name, "store": str(root), "run_ids": run_ids, "exported": now.isoformat(timespec="seconds"),
        "lab_version": lab.__version__, "status": {str(k): int(v) for k, v in counts.items()}, "summary": summary,
    }
    nbformat.validate(nb)
    return nb


@doc(**WRITE_DOCS)
def study_to_notebook(study_or_spec, path: str | os.PathLike, *, store=None, execute: bool = False,
                      timeout: int = 600, summary="last") -> Path:
    """Write a notebook that reloads a study's finished runs and draws its figures and tables.

    Parameters
    ----------
    study_or_spec : lab.Study, mapping, spec file path, or str
        The study; a string that is not a ``.yaml``/``.yml``/``.json`` file names a study run into
        ``store`` (its spec is saved in the store's ``.studies/`` folder by ``python -m lab study run``).
    path, store, execute, timeout
        As for :func:`lab.export.to_notebook`; ``store`` holds the study's runs.
    summary : "last", "best" or int
        The epoch each run is read at (:func:`lab.study.figures`): its last complete evaluation (default), its
        epoch of highest unseen g, or that epoch (runs without it are left out, and the notebook says so).

    {returns}

    Raises
    ------
    ValueError
        A path that is not ``.ipynb``, an unknown study name, a bad spec, a study with no run in the store, or a
        summary that is not "last", "best" or an epoch.
    {execute_failed}
    """
    target = check_ipynb(path)
    return write_notebook(build_study_notebook(study_or_spec, store=store, summary=summary), target, execute=execute,
                          timeout=timeout, what="study notebook")
