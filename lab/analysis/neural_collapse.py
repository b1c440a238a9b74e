"""Neural collapse on the training set, read from a run's tables: the terminal phase and the simplex.

Definitions: docs/METRICS.md, "Neural collapse on the training set" (Papyan, Han & Donoho 2020).
:func:`terminal_phase` is the first epoch at which the trained head classifies the whole training sample
right (split "train", ``head_accuracy`` at the head input); the engine's run summary, the app and
notebooks all take it from here. :func:`simplex` turns the Gram matrix of the centred class means (a
``ClassMeans`` event, ``RunRecord.class_means``) into their cosines, the simplex ETF's, the deviation
from it and a plane of the means.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from lab.catalogue import HEAD_LAYER

__all__ = ["terminal_phase", "simplex"]

_ACCURACY = "head_accuracy"


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
    if rows.empty:
        return {}
    # lab.metrics loads torch: only a run with a train-split head accuracy needs it (`runs show` stays light)
    from lab.metrics.classifier_collapse import terminal_phase_epoch

    out: dict[int, int | None] = {}
    for seed, part in rows.groupby("seed", sort=True):
        series = part.groupby("epoch")["value"].mean()              # one row per epoch; repeats agree
        out[int(seed)] = terminal_phase_epoch({int(e): float(v) for e, v in series.items()})
    return out


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
