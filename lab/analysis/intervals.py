"""How sure one evaluation's answer is: a bootstrap over the unseen images (part of :mod:`lab.analysis`).

The unseen images are resampled with replacement within each class (B resamples, seeded); every
layer is scored on the *same* resample, so that "which layer is best" can be counted per resample.
What is resampled and what is fixed (``docs/METRICS.md``, "Bootstrap interval"):

- resampled: which images are counted, and how often;
- fixed: each layer's k-means clustering (NMI) and each image's leave-one-out k-NN vote (kNN
  accuracy), both fitted once on the full sample. Refitting k-means and the neighbour graph per
  resample would cost B times the metric time; the interval therefore covers the sampling of the
  images given the fitted partition, not the variability of k-means restarts or of the neighbours.

Because every resample keeps the class sizes, NMI needs only each resample's class x cluster
contingency table, and kNN accuracy only the count of correctly voted images: one (B, N) matrix of
resample counts times a per-image indicator, no Python loop over images or resamples.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from lab import catalogue

__all__ = ["bootstrap", "resample_counts", "nmi_from_contingency", "confidence_values", "confidence_text",
           "N_RESAMPLES", "LEVEL", "CONFIDENCE_SUFFIXES"]

N_RESAMPLES = 200
"""Default number of bootstrap resamples of one evaluation."""
LEVEL = 0.95
"""Default coverage of the percentile interval."""
CONFIDENCE_SUFFIXES = ("low", "high", "best_share")
"""Metric rows the bootstrap adds to the store's long table for a metric m: ``m_low``, ``m_high``,
``m_best_share`` (split "unseen", one per seed, epoch and layer)."""
_COLUMNS = ["layer", "metric", "value", "low", "high", "best_share"]


def resample_counts(labels, n_resamples: int = N_RESAMPLES, seed: int = 0) -> np.ndarray:
    """How often each image is drawn in each stratified bootstrap resample.

    Parameters
    ----------
    labels : array-like of int, shape (N,)
    n_resamples : int, >= 1
    seed : int

    Returns
    -------
    numpy.ndarray of int32, shape (n_resamples, N): row b sums to N, and to n_k over each class k.

    Raises
    ------
    ValueError
        Fewer than 2 images in a class (resampling it would always draw the same image), or a bad count.
    """
    labels = np.asarray(labels)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer; got {n_resamples!r}.")
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D array; got shape {labels.shape}.")
    classes, codes, sizes = np.unique(labels, return_inverse=True, return_counts=True)
    if sizes.min() < 2:
        raise ValueError(f"the bootstrap needs at least 2 images in every class; class {classes[sizes.argmin()].item()!r} "
                         "has 1. Add images to it (unseen_per_class) or leave the class out.")
    rng = np.random.default_rng(seed)
    n, B = labels.size, int(n_resamples)
    draws = np.empty((B, n), dtype=np.int64)                    # image drawn in each slot of each resample
    start = 0
    for k, idx in enumerate(np.split(np.argsort(codes, kind="stable"), np.cumsum(sizes)[:-1])):
        draws[:, start:start + sizes[k]] = idx[rng.integers(0, sizes[k], size=(B, sizes[k]))]
        start += sizes[k]
    flat = (np.arange(B)[:, None] * n + draws).ravel()
    return np.bincount(flat, minlength=B * n).reshape(B, n).astype(np.int32)   # (B, N)


def nmi_from_contingency(tables: np.ndarray) -> np.ndarray:
    """Normalized mutual information (arithmetic-mean normalization) of each contingency table.

    The same value as scikit-learn's ``normalized_mutual_info_score`` of labels with that table
    (MI = 0 gives 0, as there; both labelings single-valued gives 1).

    Parameters
    ----------
    tables : array (..., K, C) of counts (classes x clusters)

    Returns
    -------
    numpy.ndarray (...,) in [0, 1]
    """
    t = np.asarray(tables, dtype=np.float64)
    n = t.sum(axis=(-2, -1), keepdims=True)
    p = t / n                                                     # (..., K, C)
    pk, pc = p.sum(axis=-1, keepdims=True), p.sum(axis=-2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        mi = np.where(p > 0, p * (np.log(p) - np.log(pk) - np.log(pc)), 0.0).sum(axis=(-2, -1))
        h_k = -np.where(pk > 0, pk * np.log(pk), 0.0).sum(axis=(-2, -1))
        h_c = -np.where(pc > 0, pc * np.log(pc), 0.0).sum(axis=(-2, -1))
        out = np.where(mi > 0, mi / ((h_k + h_c) / 2), 0.0)
    single = ((t.sum(axis=-1) > 0).sum(axis=-1) == 1) & ((t.sum(axis=-2) > 0).sum(axis=-1) == 1)
    return np.clip(np.where(single, 1.0, out), 0.0, 1.0)


def _per_image(metric: str) -> str | None:
    """What ``metric`` keeps per image (:attr:`lab.catalogue.MetricInfo.per_image`): its k-means ``"cluster"``
    (resampled through contingency tables) or whether its vote is ``"right"`` (resampled as a mean)."""
    info = catalogue.METRICS.get(metric)
    return None if info is None else info.per_image


def _resampled(metric: str, per_image: np.ndarray, codes: np.ndarray, n_classes: int,
               counts: np.ndarray) -> tuple[float, np.ndarray]:
    """The metric on the full sample and on each resample (B,), from what each image contributed."""
    n = codes.size
    if _per_image(metric) == "cluster":
        clusters = np.unique(per_image, return_inverse=True)[1]
        cells = codes * (clusters.max() + 1) + clusters                            # (N,) class x cluster cell
        onehot = np.zeros((n, n_classes * (clusters.max() + 1)), dtype=np.float32)
        onehot[np.arange(n), cells] = 1.0
        tables = (counts.astype(np.float32) @ onehot).reshape(len(counts), n_classes, -1)   # (B, K, C)
        full = np.bincount(cells, minlength=onehot.shape[1]).reshape(n_classes, -1)
        return float(nmi_from_contingency(full)), nmi_from_contingency(tables)
    correct = np.asarray(per_image, dtype=np.float64)                            # (N,) 1 = voted right
    return float(correct.mean()), counts @ correct / n


def bootstrap(samples: Mapping[str, Mapping[str, np.ndarray]], labels, *, layers: Iterable[str] | None = None,
              aliases: Mapping[str, str] | None = None, n_resamples: int = N_RESAMPLES, seed: int = 0,
              level: float = LEVEL) -> pd.DataFrame:
    """Percentile intervals and best-layer shares of the separability of every layer, by one bootstrap.

    Parameters
    ----------
    samples : {layer: {metric: per-image array (N,)}}
        What :func:`lab.metrics.compute_layer` (``return_samples=True``) returns, by each metric's
        ``per_image`` in :data:`lab.catalogue.METRICS`: ``"nmi"`` keeps the k-means cluster of each image
        (``"cluster"``), ``"knn_accuracy"`` whether its leave-one-out vote was right (``"right"``). A layer
        may lack a metric (undefined there): it then takes no part in that metric's best-layer count.
    labels : array-like of int, shape (N,)
        The images' classes (resampling is stratified by them).
    layers : the run's layers, input -> output (default: the order of ``samples``); ties go to the deeper.
    aliases : ``{tap: deeper tap}`` with identical features; a tap's share is counted for its deeper tap,
        as :func:`lab.analysis.generalization` reports it.
    n_resamples, seed : the resamples (:func:`resample_counts`), shared by every layer and metric.
    level : coverage of the interval; its bounds are the (1 - level)/2 and (1 + level)/2 percentiles.

    Returns
    -------
    DataFrame, one row per (layer, metric): layer, metric, value (on all images), low, high, best_share
    (the fraction of resamples in which the layer has the highest value of the metric).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95); got {level!r}.")
    order = [name for name in (layers or samples) if name in samples]
    labels = np.asarray(labels)
    codes = np.unique(labels, return_inverse=True)[1]
    n_classes = int(codes.max()) + 1 if codes.size else 0
    for layer in order:
        for metric, values in samples[layer].items():
            if np.shape(values) != labels.shape:
                raise ValueError(f"samples[{layer!r}][{metric!r}] must hold one value per image ({labels.size}); "
                                 f"got shape {np.shape(values)}.")
    if not order:
        return pd.DataFrame(columns=_COLUMNS)
    counts = resample_counts(labels, n_resamples, seed)                          # (B, N)
    metrics = list(dict.fromkeys(m for layer in order for m in samples[layer]))
    lo_q, hi_q = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    rows = []
    for metric in metrics:
        draws = np.full((len(counts), len(order)), np.nan)                      # (B, L)
        full = np.full(len(order), np.nan)
        for j, layer in enumerate(order):
            if metric in samples[layer]:
                full[j], draws[:, j] = _resampled(metric, np.asarray(samples[layer][metric]), codes, n_classes,
                                                  counts)
        share = _best_share(draws, order, aliases)
        low, high = np.percentile(draws, [lo_q, hi_q], axis=0)
        rows += [{"layer": layer, "metric": metric, "value": full[j], "low": low[j], "high": high[j],
                  "best_share": share[j]} for j, layer in enumerate(order) if metric in samples[layer]]
    return pd.DataFrame(rows, columns=_COLUMNS)


def _best_share(draws: np.ndarray, order: Sequence[str], aliases: Mapping[str, str] | None) -> np.ndarray:
    """Fraction of resamples (rows) in which each layer (column) is the arg-max; ties -> the deeper."""
    finite = np.where(np.isfinite(draws), draws, -np.inf)
    has_best = np.isfinite(draws).any(axis=1)
    best = draws.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)             # last of the maxima
    share = np.bincount(best[has_best], minlength=draws.shape[1]).astype(np.float64)
    position = {name: j for j, name in enumerate(order)}
    for tap in order:
        target, visited = tap, {tap}
        while aliases and aliases.get(target) in position and aliases[target] not in visited:
            target = aliases[target]
            visited.add(target)
        if target != tap:
            share[position[target]] += share[position[tap]]
            share[position[tap]] = 0.0
    return share / max(int(has_best.sum()), 1)


def confidence_values(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """The bootstrap table as the engine stores it: ``{layer: {"nmi_low": ..., "nmi_high": ...,
    "nmi_best_share": ..., ...}}`` (metric rows of the unseen split; see :data:`CONFIDENCE_SUFFIXES`)."""
    out: dict[str, dict[str, float]] = {}
    for row in table.itertuples(index=False):
        values = out.setdefault(str(row.layer), {})
        for suffix in CONFIDENCE_SUFFIXES:
            values[f"{row.metric}_{suffix}"] = float(getattr(row, suffix))
    return out


def confidence_text(low, high, best_share=None, *, digits: int = 2) -> str:
    """How sure one best layer is, in words: ``"best in 81 % of resamples; 0.78-0.83"``.

    Only the parts that were measured are said (``"0.78-0.83"`` without a share); ``""`` when the
    interval is missing or not finite (runs recorded before the bootstrap, a metric without one).
    """
    def finite(value) -> bool:
        return value is not None and isinstance(value, (int, float, np.floating)) and math.isfinite(value)

    if not (finite(low) and finite(high)):
        return ""
    interval = f"{float(low):.{digits}f}-{float(high):.{digits}f}"
    return f"best in {100 * float(best_share):.0f} % of resamples; {interval}" if finite(best_share) else interval
