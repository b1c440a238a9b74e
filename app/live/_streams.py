"""What the live view's streams carry: one payload function per plot, from a :class:`~app.live._model.RunModel`.

The view owns the streams (``hv.streams.Pipe``/``Buffer``); these functions only compute the data it
sends them, so a payload is the same whether a plot is being built or updated.
"""
from __future__ import annotations

import pandas as pd

from lab import catalogue
from lab.status import RunStatus

from app.base import ThumbnailSource, plots

from ._model import RunModel

__all__ = ["HEATMAP_METRICS", "curve_specs", "curves_data", "has_seen_split", "heatmap_data", "projection_data",
           "cka_initial_data", "training_gaps"]

HEATMAP_METRICS = catalogue.METRICS
"""Metrics the layer × epoch heatmap can show: every metric of lab.catalogue, in its display order (the live
table, not a copy: iterate it for the names; a metric registered later is among them)."""


def curve_specs(model: RunModel) -> list[tuple[str, tuple[str, ...]]]:
    """(metric, splits) of the metric-vs-layer plots of the metrics the run measures (all when its config names
    none): the catalogue's entries with a ``curve`` (:func:`lab.catalogue.curve_specs`), in display order, each
    with only the splits the run measures (a monitored loop given no seen images has no "seen" split), so that
    a title names no split that was not measured."""
    wanted = model.config.get("metrics")
    specs = catalogue.curve_specs()
    if wanted:
        specs = [s for s in specs if s[0] in wanted]
    absent = set() if has_seen_split(model) else {"seen"}
    specs = [(metric, tuple(s for s in splits if s not in absent)) for metric, splits in specs]
    return [(metric, splits) for metric, splits in specs if splits]


def has_seen_split(model: RunModel) -> bool:
    """Whether the run measures held-out images of its seen classes (a run the engine trains always does)."""
    heldout = (model.n_images or {}).get("heldout")
    return bool(model.seen) and (heldout is None or int(heldout) > 0)


def curves_data(model: RunModel, metric: str, splits) -> pd.DataFrame:
    """Mean and spread over seeds of ``metric`` per (split, epoch, layer), for the metric-vs-layer plot.

    For the metrics the engine bootstraps (``lab.catalogue.metric_names(per_image=True)``), also ``low`` and
    ``high``: the interval over the unseen images (rows ``nmi_low``/``nmi_high`` of
    :class:`~lab.events.LayerConfidence`), the mean over seeds of each seed's bound, as
    :func:`lab.analysis.layer_curve` gives it; NaN where the run has none.
    """
    frames = []
    for split in splits:
        f = model.summary_frame(metric, split)
        f.insert(0, "split", split)
        if metric in catalogue.metric_names(per_image=True):
            for bound in ("low", "high"):
                rows = model.summary_frame(f"{metric}_{bound}", split).rename(columns={"mean": bound})
                f[bound] = (f[["epoch", "layer"]].merge(rows[["epoch", "layer", bound]], how="left")[bound]
                            .to_numpy(dtype=float) if len(rows) and len(f) else float("nan"))
        frames.append(f)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def training_gaps(model: RunModel) -> dict[str, str]:
    """Why a training plot ("loss", "accuracy", "utilization", "cka") would be empty axes (or a flat line), in one
    sentence that says what would fill it: a monitored loop's evaluations that came without its numbers, a run that
    ended without any, a run still training whose first training epoch has not ended (its plot comes back when it
    does); also a value measured at one evaluation only (a line of one point draws nothing: the sentence gives it)."""
    t = model.training
    if not len(t) and not model.ended:
        return {}                               # nothing evaluated yet: the plots wait for the first evaluation
    loss = t[t["train_loss"].notna()] if len(t) else t
    points = _most_per_seed(t, "heldout_accuracy", "train_accuracy")     # a line per seed: its points
    out = {}
    if model.open_ended:
        if len(t) and not len(loss):
            out["loss"] = ("No training loss: the loop passed no train_loss to evaluate; "
                           "mon.evaluate(..., train_loss=loss) draws it here.")
        if len(t) and not points:
            out["accuracy"] = ("No seen accuracy: the loop passed no train_accuracy to evaluate; "
                               "mon.evaluate(..., train_accuracy=accuracy) draws it here.")
    elif not model.ended:                       # still training: what comes next fills them
        if not len(loss):
            out["loss"] = "No training loss yet: it comes when the first training epoch ends."
        if points < 2:
            out["accuracy"] = ("No seen-accuracy curve yet: it is drawn from the second evaluation, after the first "
                               "training epoch.")
    else:
        trains = model.config.get("strategy", "full") != "none"
        why = ("strategy none trains nothing; a run with a training strategy draws them here" if not trains else
               f"the run {RunStatus.phrase_of(model.status)} before its first training epoch ended; a run "
               f"that trains an epoch draws it here")
        if not len(loss):
            out["loss"] = f"No training loss: {why}."
        if not points:
            out["accuracy"] = f"No seen accuracy: {why}."
        elif points < 2:
            out["accuracy"] = ("No seen-accuracy curve: the held-out images were measured at one evaluation only "
                               f"(before training), a single point: {why}.")
    trains = model.open_ended or model.config.get("strategy", "full") != "none"
    first = min(model.epoch_axis() or [0])
    utilization = model.utilization_frame()
    if trains and (not len(utilization) or int(utilization["epoch"].iloc[0]) <= first):
        # only the first evaluation's, 0 by definition: how far each layer's weights moved comes with training
        out["utilization"] = _before_training(model, "No layer utilization", "No layer utilization yet: how far each "
                                              "layer's weights moved from their first evaluation comes")
    cka = cka_initial_data(model)
    cka = cka[cka["n"] > 0] if len(cka) else cka
    if trains and (not len(cka) or int(cka["epoch"].max()) <= first):
        # only the first evaluation's, 1 by definition (each layer against itself): a flat line says nothing
        out["cka"] = _before_training(model, "No CKA to the first evaluation", "No CKA curve yet: each layer's CKA "
                                      "to its first evaluation is 1 there by definition; the curve comes")
    if "loss" not in out and _most_per_seed(t, "train_loss") == 1:    # one training epoch (or one loss passed)
        values = ", ".join(f"{float(row.train_loss):.3g}" + (f" (seed {int(row.seed)})" if len(loss) > 1 else "")
                           for row in loss.itertuples())
        epoch = int(loss["epoch"].iloc[0])
        out["loss"] = (f"Training loss {values} at {model.axis} {epoch}: one value{' per seed' if len(loss) > 1 else ''}"
                       f", no curve" + ("; the next training epoch draws one." if not model.ended
                                        else "."))
    return out


def _before_training(model: RunModel, ended: str, waiting: str) -> str:
    """The sentence of a training measure taken at the first evaluation only: ``ended`` and that the run ended
    before its first training epoch did, or ``waiting`` and what brings it (a loop's next evaluation, or the next
    training epoch)."""
    if model.ended and not model.open_ended:
        return f"{ended}: the run {RunStatus.phrase_of(model.status)} before its first training epoch ended."
    return f"{waiting} with the next {'evaluation' if model.open_ended else 'training epoch'}."


def _most_per_seed(frame: pd.DataFrame, *columns: str) -> int:
    """The most values any seed has in any of ``columns`` (a line per seed: fewer than two draw nothing)."""
    if not len(frame):
        return 0
    return int(max(frame[c].notna().groupby(frame["seed"]).sum().max() for c in columns))


def cka_initial_data(model: RunModel) -> pd.DataFrame:
    """Each layer's CKA to its epoch-0 features per epoch, mean over seeds (epoch, layer, mean, std, n; n = 0 where
    no seed had a defined value)."""
    return model.summary_frame("cka_initial", "unseen")


def heatmap_data(model: RunModel, metric: str, split: str) -> dict:
    """The layer × epoch values of ``metric`` on ``split``, with the choice they show."""
    return {"frame": model.heatmap_frame(metric, split), "metric": metric, "split": split}


def projection_data(model: RunModel, layer: str | None, epoch: int | None,
                    thumbnails: ThumbnailSource | None) -> dict:
    """The 2-D layout of the unseen images at ``layer`` and ``epoch`` (None: the latest), with a hover
    thumbnail per point; an empty frame while no layout has arrived."""
    m = model
    proj = m.projection(layer, epoch) if layer else None
    if proj is None:
        return {"frame": plots.empty_projection_frame(), "title": "unseen classes · waiting for a layout",
                "classes": [plots.plot_text(n) for n in m.unseen]}
    names = [plots.plot_text(n) for n in (proj.class_names or list(m.unseen))]
    labels = [names[int(i)] if 0 <= int(i) < len(names) else str(i) for i in proj.labels]
    thumbs = thumbnails.get(proj.indices) if thumbnails is not None else [""] * len(labels)
    frame = pd.DataFrame({"x": proj.coords[:, 0].astype(float), "y": proj.coords[:, 1].astype(float),
                          "class": labels, "index": proj.indices.astype(int), "thumb": thumbs})
    shown_epoch = epoch if epoch is not None else max(m.projection_epochs(layer))
    title = f"{proj.method.upper()} of unseen classes · {layer} · {m.axis} {shown_epoch}"
    return {"frame": frame, "title": title, "classes": list(names)}
