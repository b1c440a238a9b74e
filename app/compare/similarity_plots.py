"""HoloViews figures of representation similarity (linear CKA) of stored runs, for notebooks and the app.

Numbers come from the run store (``cka_initial`` rows, recorded by the engine) and from
:func:`lab.export.tables.cka_matrix` (``lab.metrics.cka`` on the stored embeddings); nothing here
computes a statistic.
"""
from __future__ import annotations

import html

import holoviews as hv
import numpy as np
import pandas as pd

from app.base import plots
from lab.export import tables

__all__ = ["CKA_INITIAL_CAPTION", "cka_to_initial", "initial_curves", "initial_caption", "cka_heatmap",
           "run_heatmap", "table_heatmap", "undefined_text"]

CKA_INITIAL_CAPTION = ("Linear CKA of each layer's unseen-image features to its own epoch-0 features; "
                       "1 = unchanged up to rotation and scale.")
"""What the CKA-to-epoch-0 curves measure (lab.runs.similarity; docs/METRICS.md, cka_initial)."""


def initial_curves(frame: pd.DataFrame, *, layers: list[str], n_epochs: int, height: int = 240,
                   width: int = 420, responsive: bool = False, epochs=None, axis: str = "epoch") -> hv.Overlay:
    """CKA to epoch 0 vs layer, one line per epoch (the latest bold), from ``frame`` (epoch, layer, mean,
    std, n: :func:`lab.export.tables.epoch_table` or the live run model's summary of ``cka_initial``).

    Cells where CKA is undefined (n = 0: no seed had a finite value) are left out: a gap, never a NaN point.
    ``responsive``: grow with the page, ``width`` the least width; ``epochs``: the run's evaluation epochs when
    they are not 0..n_epochs (a monitored loop's steps).
    """
    rows = frame[frame["n"] > 0] if len(frame) else frame
    band = bool(len(rows)) and int(rows["n"].max()) > 1
    # the features it is compared with are those of the first evaluation: epoch 0, or wherever a loop counted in
    # steps first evaluated (metric_label says so)
    label = plots.metric_label("cka_initial", axis=axis)
    return plots.metric_curves(rows.assign(split="unseen"), metric="cka_initial", splits=("unseen",),
                               layers=layers, n_epochs=n_epochs, band=band, height=height, width=width,
                               responsive=responsive, epochs=epochs, axis=axis, label=label)


def initial_caption(frame: pd.DataFrame, axis: str = "epoch") -> str:
    """:data:`CKA_INITIAL_CAPTION`, with the layers of the latest epoch where CKA is not defined (HTML-escaped).
    ``axis``: what the run's evaluation numbers count; a loop counted in steps compares with its first evaluation,
    wherever that was."""
    caption = CKA_INITIAL_CAPTION if axis == "epoch" else CKA_INITIAL_CAPTION.replace(
        "its own epoch-0 features", "its own features at the first evaluation")
    if not len(frame):
        first = "from epoch 1 of a training run" if axis == "epoch" else "from the second evaluation"
        return caption + f" Not measured yet ({first})."
    latest = int(frame["epoch"].max())
    undefined = frame.loc[(frame["epoch"] == latest) & (frame["n"] == 0), "layer"].tolist()
    if not undefined:
        return caption
    names = html.escape(", ".join(map(str, undefined)))
    return caption + f" Not defined at {axis} {latest} for {names} (constant features, or too few images)."


def cka_to_initial(record, *, label: str | None = None, height: int = 320, width: int = 560) -> hv.Overlay:
    """Each layer's CKA to its own epoch-0 features, one line per epoch (which layers fine-tuning moved); a run
    counted in optimizer steps (:func:`lab.export.tables.run_axis`) says step.

    Runs recorded before this was measured, or that did not train, give an empty figure titled so.
    ``label`` (default: the run's name) starts the title.
    """
    axis = tables.run_axis(record)
    frame = tables.epoch_table(record, "cka_initial")
    if frame.empty:
        return hv.Overlay([hv.Curve([])]).opts(title="no CKA to epoch 0 stored (the run did not train, or predates it)",
                                               **plots.PLOT_OPTS)
    frame = frame.assign(layer=frame["layer"].map(plots.plot_text))
    layers = [plots.plot_text(name) for name in tables.run_layers(record)]
    name = label if label is not None else (record.name or record.run_id)
    title = plots.plot_title(f"{name}: {plots.metric_label('cka_initial', axis=axis)}, one line per {axis}")
    return initial_curves(frame, layers=layers, n_epochs=int(frame["epoch"].max()), height=height, width=width,
                          epochs=sorted(set(frame["epoch"])), axis=axis).opts(title=title)


def cka_heatmap(record, *, other=None, epoch: int | None = None, other_epoch: int | None = None,
                seed: int | None = None, title: str | None = None, height: int = 380, width: int = 440) -> hv.HeatMap:
    """Layer x layer linear CKA (unbiased) of a run's stored embeddings, or of two runs (or epochs) layer by layer."""
    table = tables.cka_matrix(record, seed=seed, epoch=epoch, other=other, other_epoch=other_epoch)
    return run_heatmap(table, record, other, title=title, height=height, width=width)


def run_heatmap(table: pd.DataFrame, record, other=None, *, title: str | None = None, height: int = 380,
                width: int = 440) -> hv.HeatMap:
    """:func:`table_heatmap` of ``tables.cka_matrix(record, other=other)``, titled and labelled with the runs' names."""
    name = title or record.name or record.run_id
    if other is None:
        return table_heatmap(table, title=f"{name}: linear CKA between layers", height=height, width=width)
    other_name = other.name or other.run_id
    return table_heatmap(table, title=f"{name} vs {other_name}: linear CKA", ylabel=f"layer of {name}",
                         xlabel=f"layer of {other_name}", height=height, width=width)


def table_heatmap(table: pd.DataFrame, *, title: str, xlabel: str = "layer", ylabel: str = "layer",
                  height: int = 380, width: int = 440) -> hv.HeatMap:
    """A :func:`lab.export.tables.cka_matrix` table (rows x columns) as a heatmap; undefined (NaN) cells are
    left out (an empty cell, never a NaN value in the plot). ``title`` and the labels are user text."""
    long = table.rename_axis(index="row", columns="column").stack(future_stack=True).rename("cka").reset_index()
    long = long[np.isfinite(long["cka"].to_numpy(dtype=float))]
    long = long.assign(row=long["row"].map(plots.plot_text), column=long["column"].map(plots.plot_text))
    return hv.HeatMap(long, kdims=[hv.Dimension("column", values=list(map(plots.plot_text, table.columns))),
                                   hv.Dimension("row", values=list(map(plots.plot_text, table.index)))],
                      vdims=[hv.Dimension("cka", label="linear CKA", range=(0, 1))]).opts(
        cmap="magma", colorbar=True, tools=["hover"], title=plots.plot_title(title), xrotation=45, height=height,
        width=width, xlabel=plots.plot_text(xlabel), ylabel=plots.plot_text(ylabel),
        fontsize={"title": 11, "labels": 9}, **plots.PLOT_OPTS)


def undefined_text(table: pd.DataFrame) -> str:
    """The layers (rows, columns) of a CKA table whose every value is undefined (constant features), as one
    HTML-escaped sentence; "" when every layer has a value."""
    rows = [str(name) for name in table.index if table.loc[name].isna().all()]
    cols = [str(name) for name in table.columns if table[name].isna().all()]
    parts = [f"{', '.join(names)} ({where})" for names, where in ((rows, "rows"), (cols, "columns")) if names]
    return html.escape(f"CKA not defined (constant features), left empty: {'; '.join(parts)}.") if parts else ""
