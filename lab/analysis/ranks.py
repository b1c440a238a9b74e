"""Rank correlations with bootstrap intervals (part of :mod:`lab.analysis`).

Two questions of the papers are rank questions: does seen accuracy order runs the way g does
(Gerritz et al. 2024, :func:`lab.analysis.accuracy_vs_g`), and does a transferability score measured
before fine-tuning order layers the way the unseen NMI they reach after it does (You et al. 2021;
Shao et al. 2022; :func:`lab.analysis.transfer_vs_g`). Both use :func:`rank_correlation`.

The interval is a percentile bootstrap over the points (rows resampled with replacement, seeded);
resamples in which either column is constant have no coefficient and are left out. Spearman's rho
of all resamples is one vectorised computation (ranks with ties averaged, then Pearson's r of the
ranks, row by row); Kendall's tau, asked for only by the accuracy-vs-g question, loops.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["rank_correlation", "transfer_correlations", "TRANSFER_CORRELATION_COLUMNS", "ALL_CONDITIONS",
           "MIN_INTERVAL_POINTS"]

ALL_CONDITIONS = "all conditions"
"""The ``scope`` of a correlation over every (condition, layer) point of a study."""
MIN_INTERVAL_POINTS = 5
"""Fewest points for which :func:`transfer_correlations` gives a bootstrap interval: resampling 3 or 4
points with replacement mostly repeats the same order, so its interval would look sure when it is not."""
TRANSFER_CORRELATION_COLUMNS = ["score", "scope", "n", "spearman", "spearman_p", "spearman_low", "spearman_high"]


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair of ``x`` and ``y`` (B, n); NaN for a row with a constant side."""
    from scipy import stats

    rx, ry = stats.rankdata(x, axis=1), stats.rankdata(y, axis=1)        # (B, n), ties averaged
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))          # (B,)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if not len(values):
        return float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def rank_correlation(x, y, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95,
                     kendall: bool = False, min_interval_n: int = 3) -> dict:
    """Spearman's rho (and optionally Kendall's tau) of paired values, with percentile bootstrap intervals.

    Parameters
    ----------
    x, y : array-like of float, shape (n,); pairs with a non-finite side are left out
    n_boot : bootstrap resamples of the pairs
    seed : seed of the resamples
    level : coverage of the percentile interval
    kendall : also Kendall's tau (a Python loop over the resamples)
    min_interval_n : fewest pairs for an interval (NaN below)

    Returns
    -------
    dict: n, spearman, spearman_p, spearman_ci (lo, hi), and with ``kendall`` also kendall, kendall_p,
    kendall_ci. Coefficients are NaN with fewer than 3 pairs or a constant side (no order to compare).
    """
    from scipy import stats

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = len(x)
    nan2 = (float("nan"), float("nan"))
    out = {"n": n, "spearman": float("nan"), "spearman_p": float("nan"), "spearman_ci": nan2}
    if kendall:
        out.update(kendall=float("nan"), kendall_p=float("nan"), kendall_ci=nan2)
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return out
    sp = stats.spearmanr(x, y)
    out.update(spearman=float(sp.statistic), spearman_p=float(sp.pvalue))
    if kendall:
        kd = stats.kendalltau(x, y)
        out.update(kendall=float(kd.statistic), kendall_p=float(kd.pvalue))
    if n < min_interval_n:
        return out
    picks = np.random.default_rng(seed).integers(0, n, size=(int(n_boot), n))      # (B, n)
    out["spearman_ci"] = _percentiles(_spearman_rows(x[picks], y[picks]), level)
    if kendall:
        taus = [stats.kendalltau(x[p], y[p]).statistic for p in picks if np.ptp(x[p]) > 0 and np.ptp(y[p]) > 0]
        out["kendall_ci"] = _percentiles(np.asarray(taus, dtype=float), level)
    return out


def transfer_correlations(points: pd.DataFrame, scores: Sequence[str], *, target: str = "nmi",
                          n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Spearman's rho between each score column of ``points`` and ``target``, per condition and over all.

    Parameters
    ----------
    points : one row per (group, layer): ``group``, ``target`` and one column per score
    scores : the score columns to correlate
    target : the column the scores should rank like (the unseen NMI after fine-tuning)

    Returns
    -------
    DataFrame with :data:`TRANSFER_CORRELATION_COLUMNS`: one row per score and scope (each group, then
    :data:`ALL_CONDITIONS` when there are several groups); spearman_low/high is the percentile bootstrap
    interval over the scope's points (NaN below :data:`MIN_INTERVAL_POINTS` points).
    """
    rows = []
    groups = list(dict.fromkeys(points["group"])) if len(points) else []
    scopes = [(g, points[points["group"] == g]) for g in groups]
    if len(groups) > 1:
        scopes.append((ALL_CONDITIONS, points))
    for score in scores:
        for scope, part in scopes:
            r = rank_correlation(part[score], part[target], n_boot=n_boot, seed=seed, level=level,
                                 min_interval_n=MIN_INTERVAL_POINTS)
            rows.append({"score": score, "scope": scope, "n": r["n"], "spearman": r["spearman"],
                         "spearman_p": r["spearman_p"], "spearman_low": r["spearman_ci"][0],
                         "spearman_high": r["spearman_ci"][1]})
    return pd.DataFrame(rows, columns=TRANSFER_CORRELATION_COLUMNS)
