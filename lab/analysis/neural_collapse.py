"""Neural collapse on the training set, read from a run's tables: the terminal phase and the simplex.

Definitions: docs/METRICS.md, "Neural collapse on the training set" (Papyan, Han & Donoho 2020).
:func:`terminal_phase` is the first epoch at which the trained head classifies the whole training sample
right (split "train", ``head_accuracy`` at the head input); the engine's run summary, the app and
notebooks all take it from here. :func:`simplex` turns the Gram matrix of the centred class means (a
``ClassMeans`` event, ``RunRecord.class_means``) into their cosines, the simplex ETF's, the deviation
from it and a plane of the means.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lab.catalogue import HEAD_LAYER

__all__ = ["terminal_phase", "terminal_phase_epoch", "simplex"]

_ACCURACY = "head_accuracy"
_PERFECT = 1.0 - 1e-12


def terminal_phase(metrics: pd.DataFrame, *, layer: str = HEAD_LAYER) -> dict[int, int | None]:
    """The first epoch of the terminal phase of training, per seed.

    Parameters
    ----------
    metrics : pandas.DataFrame
        A run's long metrics table (seed, epoch, layer, split, metric, value), as ``RunRecord.metrics``
        and the engine keep it.
    layer : str
        The head input the accuracy is recorded at (``lab.catalogue.HEAD_LAYER``).

    Returns
    -------
    dict of int to int or None
        ``{seed: first epoch whose head_accuracy on split "train" is 1.0, or None}`` for every seed with a
        train-split head accuracy (:func:`lab.metrics.terminal_phase_epoch`); empty when none was measured
        (strategy "none", or ``train_sample_per_class=0``).
    """
    if metrics is None or len(metrics) == 0:
        return {}
    rows = metrics[(metrics["metric"] == _ACCURACY) & (metrics["split"] == "train") & (metrics["layer"] == layer)]
    out: dict[int, int | None] = {}
    for seed, part in rows.groupby("seed", sort=True):
        series = part.groupby("epoch")["value"].mean()              # one row per epoch; repeats agree
        out[int(seed)] = terminal_phase_epoch({int(e): float(v) for e, v in series.items()})
    return out


def _accuracy_value(epoch, value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(
            f"train accuracies must be numbers in [0, 1]; got {value!r} ({type(value).__name__}) at epoch {epoch}."
        )
    value = float(value)
    if math.isnan(value):
        return None
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"train accuracies must be fractions in [0, 1]; got {value!r} at epoch {epoch}. "
            "Divide percentages by 100."
        )
    return value


def terminal_phase_epoch(train_accuracies: Mapping[int, float] | Sequence[float]) -> int | None:
    """The first epoch of the terminal phase of training: train-sample accuracy reaches 1.

    Parameters
    ----------
    train_accuracies : Mapping[int, float] or Sequence[float]
        Accuracy (a fraction in [0, 1]) on the training sample per epoch: a mapping epoch → accuracy
        (epochs in any order; a pandas Series indexed by epoch works too), or a sequence whose position i is epoch i (epoch 0 = before training,
        as the engine numbers epochs). None or NaN marks an epoch without a measurement (epoch 0
        has no training accuracy) and is skipped.

    Returns
    -------
    int or None
        The smallest epoch whose accuracy is ≥ 1 − 1e-12 (1.0 up to rounding), None if there is none.

    Raises
    ------
    ValueError
        On an accuracy outside [0, 1] (e.g. a percentage), a non-number, or a non-integer epoch.

    References
    ----------
    Papyan, Han & Donoho (2020), PNAS 117(40): the terminal phase of training starts at the
    epoch where the training error first vanishes.
    """
    if isinstance(train_accuracies, Mapping) or callable(getattr(train_accuracies, "items", None)):
        items = list(train_accuracies.items())   # a dict, or a pandas Series indexed by epoch
    elif isinstance(train_accuracies, (str, bytes)) or not isinstance(train_accuracies, (Sequence, np.ndarray)):
        raise ValueError(
            "train_accuracies must be a mapping epoch → accuracy or a sequence of accuracies (position = "
            f"epoch); got {type(train_accuracies).__name__}."
        )
    else:
        items = list(enumerate(train_accuracies))
    for epoch, _ in items:
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
            raise ValueError(
                f"train_accuracies' epochs must be integers; got {epoch!r} ({type(epoch).__name__})."
            )
    for epoch, value in sorted(items, key=lambda item: int(item[0])):
        accuracy = _accuracy_value(epoch, value)
        if accuracy is not None and accuracy >= _PERFECT:
            return int(epoch)
    return None


def simplex(gram) -> dict[str, np.ndarray | float]:
    """The centred class means against a simplex equiangular tight frame, from their Gram matrix.

    Parameters
    ----------
    gram : array-like, shape (K, K)
        MᵀM, M = [μ_1 − μ_G, …, μ_K − μ_G] (d × K) the centred class means (``ClassMeans.gram``); K ≥ 2.

    Returns
    -------
    dict
        ``"cosines"`` (K, K): cos(μ_k − μ_G, μ_k' − μ_G) (1 on the diagonal; NaN for a mean at μ_G);
        ``"ideal"`` (K, K): the simplex ETF's, 1 on the diagonal and −1/(K − 1) off it;
        ``"deviation"`` float: mean over pairs k ≠ k' of |cos − ideal| (``nc2_equiangularity`` of the means);
        ``"coords"`` (K, 2): the means in their own best plane, from the Gram's two leading eigenvectors
        scaled by the square roots of their eigenvalues (classical scaling), so the pairwise distances of the
        rows are those of the means projected on that plane; exact for K = 3 (three centred means span a
        plane). Defined up to a rotation or reflection of the plane.

    Raises
    ------
    ValueError
        When ``gram`` is not a square matrix of at least 2 × 2 finite numbers.
    """
    G = np.asarray(gram, dtype=np.float64)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] < 2:
        raise ValueError(f"gram must be a square (K, K) matrix with K >= 2; got shape {G.shape}.")
    if not np.isfinite(G).all():
        raise ValueError("gram contains non-finite values (NaN or inf); pass ClassMeans.gram as stored.")
    K = G.shape[0]
    G = (G + G.T) / 2.0
    norms = np.sqrt(np.clip(np.diag(G), 0.0, None))                                # (K,) ‖μ_k − μ_G‖
    with np.errstate(invalid="ignore", divide="ignore"):
        cosines = G / np.outer(norms, norms)                                       # (K, K)
    cosines = np.clip(cosines, -1.0, 1.0)
    ideal = np.full((K, K), -1.0 / (K - 1))
    np.fill_diagonal(ideal, 1.0)
    off = ~np.eye(K, dtype=bool)
    deviation = float(np.abs(cosines - ideal)[off].mean())
    w, V = np.linalg.eigh(G)                                                       # ascending
    top = np.argsort(w)[::-1][:2]
    coords = V[:, top] * np.sqrt(np.clip(w[top], 0.0, None))                       # (K, 2)
    return {"cosines": cosines, "ideal": ideal, "deviation": deviation, "coords": coords}
