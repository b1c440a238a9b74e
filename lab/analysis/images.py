"""The answer per image and per selection (part of :mod:`lab.analysis`): the per-image record of an evaluation.

Every evaluation of a run that measures kNN accuracy stores, for every unseen image and tapped layer,
whether its leave-one-out kNN vote is right, its nearest-class-centre margin and its k-means cluster
(``RunRecord.image_record``; docs/METRICS.md, "The answer per image"). From them:

- :func:`image_table`: one row per image: its class, the layer from which it stays right to the end
  (``arrival_layer``), whether the best layer has it right and the final layer wrong (``forgotten``),
  and one column per layer;
- :func:`selection_report`: for any set of images (a lasso, a filter, a list), per layer the share that
  is right, their mean margin, the NMI of their classes against the layer's clusters and the CDNV of
  their classes, next to the same on all images; a selection that cannot give a measure says why in
  ``attrs["notes"]``, never by raising;
- :func:`has_image_record` / :func:`image_record_problem`: whether a run has the record, and why not.

Each takes the run first, as an id or a :class:`lab.store.RunRecord` already read, and ``store=`` as a
keyword (None: the default store; a :class:`lab.store.RunStore`; a folder path), as every function on
stored runs does (:mod:`lab.store.lookup`).
"""
from __future__ import annotations

import numbers
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from lab.analysis.intervals import nmi_from_contingency
from lab.analysis.summary import generalization
from lab.store.lookup import load_run

__all__ = ["image_table", "image_answers", "arrival_counts", "selection_report", "selection_measures",
           "has_image_record", "image_record_problem", "SELECTION_COLUMNS", "IMAGE_VALUES"]

IMAGE_VALUES = ("right", "margin", "cluster")
"""What :func:`image_table`'s per-layer columns can hold."""
SELECTION_COLUMNS = ["layer_index", "n", "n_classes", "share_right", "mean_margin", "nmi", "cdnv",
                     "all_share_right", "all_mean_margin", "all_nmi", "all_cdnv"]
"""The columns of :func:`selection_report` (index: layer)."""
_SHOWN = 5            # indices quoted in a note


def image_record_problem(run, *, seed: int | None = None, epoch: int | None = None, store=None) -> str | None:
    """Why ``run`` (an id in ``store``, or a record) has no per-image record (for ``seed``, ``epoch``), in one
    line, or None when it has one.

    Cheap (lists files, reads none): what a view calls to disable its per-image controls with a reason.
    ``seed`` None: the run's first seed; ``epoch`` None: its latest evaluation.
    """
    return load_run(run, store).image_record_problem(seed, epoch)


def has_image_record(run, *, seed: int | None = None, epoch: int | None = None, store=None) -> bool:
    """Whether :func:`image_table` and :func:`selection_report` can read ``run`` (why not:
    :func:`image_record_problem`)."""
    return image_record_problem(run, seed=seed, epoch=epoch, store=store) is None


def image_answers(right: pd.DataFrame, best_layer: str | None = None) -> pd.DataFrame:
    """Arrival layer, layers right and forgetting of each image, from its right/wrong answer per layer.

    Parameters
    ----------
    right : DataFrame, one row per image, one column per layer in input -> output order; True where the
        image's vote is right, False where wrong, NA where the layer has no vote (counts as not right)
    best_layer : the evaluation's best layer (one of the columns), or None when unknown

    Returns
    -------
    DataFrame with right's index: ``arrival_layer`` (the first layer from which the image is right at that
    layer and every later one, the final layer included; None when the final layer has it wrong),
    ``n_right`` (how many layers have it right) and ``forgotten`` (right at ``best_layer`` and wrong at the
    final layer; always False when the best layer is the final one; NA when ``best_layer`` is None).
    """
    layers = list(right.columns)
    votes = right.astype("boolean").fillna(False).to_numpy(dtype=bool)                  # (N, L)
    # stays[:, j]: right at layer j and at every later one
    stays = np.flip(np.logical_and.accumulate(np.flip(votes, axis=1), axis=1), axis=1) if layers else votes
    first = stays.argmax(axis=1) if layers else np.zeros(len(right), dtype=int)
    arrived = stays.any(axis=1)
    arrival = pd.Series([layers[j] if ok else None for j, ok in zip(first, arrived)], index=right.index,
                        dtype=object)
    if best_layer is None or not layers:
        forgotten = pd.Series(pd.NA, index=right.index, dtype="boolean")
    else:
        if best_layer not in layers:
            raise ValueError(f"best_layer {best_layer!r} is not one of the layers {layers}")
        forgotten = pd.Series(votes[:, layers.index(best_layer)] & ~votes[:, -1], index=right.index, dtype="boolean")
    return pd.DataFrame({"arrival_layer": arrival, "n_right": votes.sum(axis=1), "forgotten": forgotten},
                        index=right.index)


def arrival_counts(table: pd.DataFrame) -> pd.Series:
    """How many images arrive at each layer, from an :func:`image_table`: indexed by its layers (input -> output)
    then ``"never"`` (wrong at the final layer); ``name`` "images"."""
    layers = list(table.attrs.get("layers") or [])
    counts = table["arrival_layer"].value_counts()
    values = [int(counts.get(layer, 0)) for layer in layers] + [int(table["arrival_layer"].isna().sum())]
    return pd.Series(values, index=pd.Index([*layers, "never"], name="arrival_layer"), name="images")


def _best_layer(rec, seed: int, epoch: int) -> str | None:
    """The best layer of one seed's evaluation by g (:func:`lab.analysis.generalization` on that seed's rows)."""
    metrics = rec.metrics
    if metrics is None or not len(metrics):
        return None
    table = generalization(metrics[metrics["seed"] == seed], layers=rec.meta.get("layers"),
                           aliases=rec.meta.get("layer_aliases"))
    row = table[table["epoch"] == epoch]
    return None if row.empty else str(row["layer"].iloc[0])


def _unseen_names(rec) -> list[str]:
    """The run's unseen class names, which the record's class codes index."""
    return [str(name) for name in (rec.meta.get("split") or {}).get("unseen") or []]


def _class_names(names: Sequence[str] | None, codes: np.ndarray) -> list[str]:
    names = list(names or [])
    return [str(names[c]) if 0 <= c < len(names) else str(c) for c in codes]


def _load(run, store, seed: int | None, epoch: int | None):
    rec = load_run(run, store)
    return rec, rec.image_record(seed, epoch)


def image_table(run, epoch: int | None = None, *, seed: int | None = None, values: str = "right",
                store=None) -> pd.DataFrame:
    """One row per unseen image of one evaluation: its class, arrival layer, forgetting, one column per layer.

    Parameters
    ----------
    run : the run's id in ``store``, or its :class:`lab.store.RunRecord`
    epoch : the evaluation; None: the latest with a record
    seed : None: the run's first seed
    values : what the per-layer columns hold: ``"right"`` (its leave-one-out kNN vote is right; boolean, NA
        where the layer has no vote), ``"margin"`` (its nearest-class-centre margin) or ``"cluster"`` (its
        k-means cluster, -1 where NMI was not measured)
    store : None (the default store), a :class:`lab.store.RunStore` or a folder path; unused for a record

    Returns
    -------
    DataFrame indexed by ``image`` (the position among the unseen images, as the stored embeddings' and
    layouts' ``indices``): ``class`` (name), ``label`` (code), ``arrival_layer``, ``forgotten``, ``n_right``
    (:func:`image_answers`), then one column per layer, input -> output. ``attrs``: run_id, seed, epoch,
    layers, best_layer (the seed's g layer at that epoch, by :func:`lab.analysis.generalization`),
    final_layer, values, notes.

    Raises
    ------
    lab.errors.NoImageRecordError
        A KeyError with one line saying why the run has no record there (e.g. it predates it) and how to get one.
    ValueError
        ``values`` not one of :data:`IMAGE_VALUES`.
    """
    rec, record = _load(run, store, seed, epoch)
    return record_table(rec, record, values=values)


def record_table(rec, record, *, values: str = "right") -> pd.DataFrame:
    """:func:`image_table` of an :class:`~lab.store.ImageRecord` already read from ``rec``
    (``rec.image_record(seed, epoch)``), for a view that also keeps the record; ``attrs`` also holds
    ``class_names``, the unseen class names the record's class codes index."""
    if values not in IMAGE_VALUES:
        raise ValueError(f"values must be one of {', '.join(map(repr, IMAGE_VALUES))}; got {values!r}")
    layers = list(record.layers)
    index = pd.RangeIndex(record.n_images, name="image")
    right = pd.DataFrame({layer: pd.array(np.where(record.voted[i], record.right[i], None), dtype="boolean")
                          for i, layer in enumerate(layers)}, index=index)
    notes = [f"layer {layer} has no kNN votes (kNN accuracy undefined there); counted as not right"
             for layer, voted in zip(layers, record.voted) if not voted]
    best = _best_layer(rec, record.seed, record.epoch)
    if best is not None and best not in layers:
        best = None
    if best is None:
        notes.append(f"no best layer at epoch {record.epoch} (NMI not measured at every layer): forgotten is NA")
    answers = image_answers(right, best)
    if values == "right":
        per_layer = right
    elif values == "margin":
        per_layer = pd.DataFrame(record.margin.T.astype(np.float64), index=index, columns=layers)
    else:
        per_layer = pd.DataFrame(record.cluster.T, index=index, columns=layers)
    names = _unseen_names(rec)
    table = pd.concat([pd.DataFrame({"class": _class_names(names, record.labels), "label": record.labels},
                                    index=index), answers[["arrival_layer", "forgotten", "n_right"]], per_layer],
                      axis=1)
    table.attrs.update(run_id=rec.run_id, seed=record.seed, epoch=record.epoch, layers=layers, best_layer=best,
                       final_layer=layers[-1], values=values, notes=notes, class_names=names)
    return table


def _clean_indices(indices: Any, n: int, notes: list[str]) -> np.ndarray | None:
    """The distinct valid positions of ``indices`` among ``n`` images (sorted), or None when they are not
    integers; what was dropped, and why, goes to ``notes``."""
    if isinstance(indices, (str, bytes)) or not isinstance(indices, Iterable):
        notes.append(f"the selection must be a list of image positions (integers 0-{n - 1}); got "
                     f"{type(indices).__name__}: no measure on it")
        return None
    items = list(indices.tolist() if hasattr(indices, "tolist") else indices)
    bad = [v for v in items if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral)]
    if bad:
        shown = ", ".join(repr(v)[:20] for v in bad[:_SHOWN])
        notes.append(f"the selection must hold image positions (integers 0-{n - 1}); {len(bad)} "
                     f"{'is' if len(bad) == 1 else 'are'} not ({shown}{', ...' if len(bad) > _SHOWN else ''}): "
                     "no measure on it")
        return None
    values = np.asarray(items, dtype=np.int64)
    outside = values[(values < 0) | (values >= n)]
    if outside.size:
        shown = ", ".join(map(str, outside[:_SHOWN].tolist()))
        one = outside.size == 1
        notes.append(f"{outside.size} of the selected indices ({shown}{', ...' if outside.size > _SHOWN else ''}) "
                     f"{'is not a position' if one else 'are not positions'} among the {n} unseen images "
                     f"(0-{n - 1}) and {'was' if one else 'were'} left out")
    inside = values[(values >= 0) & (values < n)]
    kept = np.unique(inside)
    if kept.size < inside.size:
        repeats = inside.size - kept.size
        notes.append(f"{repeats} repeated {'index was' if repeats == 1 else 'indices were'} counted once")
    return kept


def _measures(record, chosen: np.ndarray, classes: np.ndarray) -> dict[str, np.ndarray]:
    """share_right, mean_margin, nmi, cdnv per layer (L,) of the images ``chosen`` whose classes are ``classes``."""
    L = len(record.layers)
    out = {name: np.full(L, np.nan) for name in ("share_right", "mean_margin", "nmi", "cdnv")}
    if chosen.size == 0:
        return out
    labels = record.labels[chosen]
    codes = np.searchsorted(classes, labels)                                  # (n,) 0..k-1
    where = np.searchsorted(record.classes, classes)                          # rows of cdnv_pairs
    upper = np.triu_indices(classes.size, 1)
    with np.errstate(invalid="ignore"):
        for i in range(L):
            if record.voted[i]:
                out["share_right"][i] = record.right[i, chosen].mean()
            margins = record.margin[i, chosen].astype(np.float64)
            if np.isfinite(margins).all():
                out["mean_margin"][i] = margins.mean()
            if classes.size < 2:
                continue
            clusters = record.cluster[i, chosen]
            if (clusters >= 0).all():
                ids = np.unique(clusters, return_inverse=True)[1]
                table = np.zeros((classes.size, ids.max() + 1))
                np.add.at(table, (codes, ids), 1)
                out["nmi"][i] = float(nmi_from_contingency(table))
            terms = record.cdnv_pairs[i][np.ix_(where, where)][upper]
            if terms.size and np.isfinite(terms).all():
                out["cdnv"][i] = terms.mean()
    return out


def _gaps(record, values: np.ndarray, what: str, why: str) -> str | None:
    missing = [layer for layer, v in zip(record.layers, values) if not np.isfinite(v)]
    return f"{what}: not given at layer(s) {', '.join(missing)} ({why})" if missing else None


def selection_report(run, indices: Sequence[int], epoch: int | None = None, *, seed: int | None = None,
                     store=None) -> pd.DataFrame:
    """Per layer, how a selection of unseen images fares, next to all images (one evaluation's record).

    Parameters
    ----------
    run : the run's id in ``store``, or its :class:`lab.store.RunRecord`
    indices : positions among the unseen images (:func:`image_table`'s index): integers 0 to N - 1.
        Positions outside that range are left out and repeats counted once, each with a note; anything
        that is not a list of integers gives no measure, with a note
    epoch : the evaluation; None: the latest with a record
    seed : None: the run's first seed
    store : None (the default store), a :class:`lab.store.RunStore` or a folder path; unused for a record

    Returns
    -------
    DataFrame indexed by ``layer`` (input -> output) with :data:`SELECTION_COLUMNS`. ``n`` and ``n_classes``:
    the distinct selected images and their classes. On the selected images: ``share_right`` (the share whose
    leave-one-out kNN vote is right), ``mean_margin`` (their mean nearest-class-centre margin) and ``nmi``
    (their classes against their k-means clusters of the layer, fitted on all images; scikit-learn's
    ``normalized_mutual_info_score``). On whole classes: ``cdnv``, the mean over pairs of the selected classes
    of the pair's CDNV term computed on all images of the two classes. ``all_*``: the same four on every
    unseen image (equal to the run's kNN accuracy, NMI and CDNV of that layer; the mean margin is over the
    stored float16 margins).

    NMI and CDNV need at least two classes in the selection; a measure that cannot be given is NaN and
    ``attrs["notes"]`` says which and why (empty selection, one class, indices out of range, a layer where
    the run did not measure it). ``attrs`` also holds run_id, seed, epoch, n_images, classes (the selected
    classes' names).

    Raises
    ------
    lab.errors.NoImageRecordError
        The run (seed, epoch) has no per-image record (a KeyError with one line saying why); a bad selection
        never raises.
    """
    rec, record = _load(run, store, seed, epoch)
    frame = selection_measures(record, indices, class_names=_unseen_names(rec))
    frame.attrs = {"run_id": rec.run_id, **frame.attrs}
    return frame


def selection_measures(record, indices: Sequence[int], *, class_names: Sequence[str] | None = None) -> pd.DataFrame:
    """:func:`selection_report` on a record already read (``RunRecord.image_record(seed, epoch)``), for a view
    that reports every new selection without reading the store again.

    Parameters
    ----------
    record : :class:`lab.store.ImageRecord`
    indices : positions among its unseen images (as in :func:`selection_report`)
    class_names : the run's unseen class names, indexed by the record's class codes (``meta["split"]["unseen"]``);
        None: the codes

    Returns
    -------
    The DataFrame of :func:`selection_report` (its ``attrs`` without run_id).
    """
    notes: list[str] = []
    chosen = _clean_indices(indices, record.n_images, notes)
    chosen = np.empty(0, dtype=np.int64) if chosen is None else chosen
    classes = np.unique(record.labels[chosen])
    if chosen.size == 0 and not any("no measure" in note for note in notes):
        notes.append("the selection holds no image: no measure on it")
    elif classes.size == 1:
        name = _class_names(class_names, classes)[0]
        notes.append(f"the selection holds one class ({name}): NMI and CDNV need at least two classes")
    picked = _measures(record, chosen, classes)
    every = _measures(record, np.arange(record.n_images), record.classes)
    if chosen.size:
        for note in (_gaps(record, every["share_right"], "share right", "no kNN votes there"),
                     _gaps(record, every["mean_margin"], "mean margin", "all class means coincide"),
                     _gaps(record, every["nmi"], "NMI", "not measured there") if classes.size > 1 else None,
                     _gaps(record, picked["cdnv"], "CDNV", "two selected classes have coinciding means")
                     if classes.size > 1 else None):
            if note:
                notes.append(note)
    frame = pd.DataFrame({"layer_index": np.arange(len(record.layers)), "n": chosen.size, "n_classes": classes.size,
                          **picked, **{f"all_{k}": v for k, v in every.items()}},
                         index=pd.Index(list(record.layers), name="layer"))[SELECTION_COLUMNS]
    frame.attrs.update(seed=record.seed, epoch=record.epoch, n_images=record.n_images,
                       classes=_class_names(class_names, classes), notes=notes)
    return frame
