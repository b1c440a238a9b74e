"""HoloViews figures of representation similarity (linear CKA) of stored runs, for notebooks and the app.

Numbers come from the run store (``cka_initial`` rows, recorded by the engine) and from
:func:`lab.export.tables.cka_matrix` (``lab.metrics.cka`` on the stored embeddings); nothing here
computes a statistic.
"""
from __future__ import annotations

import holoviews as hv

from app import plots
from lab.export import tables

__all__ = ["cka_to_initial", "cka_heatmap"]


def cka_to_initial(record, *, height: int = 320, width: int = 560) -> hv.Overlay:
    """Each layer's CKA to its own epoch-0 features, one line per epoch (which layers fine-tuning moved).

    Runs recorded before this was measured, or that did not train, give an empty figure titled so.
    """
    frame = tables.epoch_table(record, "cka_initial")
    if frame.empty:
        return hv.Overlay([hv.Curve([])]).opts(title="no CKA to epoch 0 stored (the run did not train, or predates it)")
    return plots.epoch_curves(record, "cka_initial", height=height, width=width)


def cka_heatmap(record, *, other=None, epoch: int | None = None, other_epoch: int | None = None,
                seed: int | None = None, title: str | None = None, height: int = 380, width: int = 440) -> hv.HeatMap:
    """Layer x layer linear CKA (unbiased) of a run's stored embeddings, or of two runs (or epochs) layer by layer."""
    table = tables.cka_matrix(record, seed=seed, epoch=epoch, other=other, other_epoch=other_epoch)
    long = table.rename_axis(index="row", columns="column").stack(future_stack=True).rename("cka").reset_index()
    long["row"], long["column"] = long["row"].map(plots.plot_text), long["column"].map(plots.plot_text)
    name = plots.plot_text(title or record.name or record.run_id)
    return hv.HeatMap(long, kdims=[hv.Dimension("column", values=list(map(plots.plot_text, table.columns))),
                                   hv.Dimension("row", values=list(map(plots.plot_text, table.index)))],
                      vdims=[hv.Dimension("cka", label="linear CKA", range=(0, 1))]).opts(
        cmap="magma", colorbar=True, tools=["hover"], clipping_colors={"NaN": (0, 0, 0, 0)},
        title=plots.plot_title(f"{name}: linear CKA between layers"), xrotation=45, height=height, width=width,
        xlabel="layer" if other is None else "layer (other)", ylabel="layer", fontsize={"title": 11, "labels": 9})
