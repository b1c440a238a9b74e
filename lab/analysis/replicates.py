"""Seeds as replicates: a condition's mean over its seeds, the 95 % interval of that mean, and n.

A study runs each condition (one cell of its grid but the seeds) once per seed; the seeds are replicates of one
measurement. Their spread says how much the answer moves with the seed, and the interval of the mean is what a
figure of conditions draws (METRICS.md, "Seeds as replicates"): Student's t, since n is small (3 seeds gives
t = 4.30, not 1.96), and undefined below 2 seeds.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["REPLICATE_LEVEL", "replicate_interval", "with_replicate_interval"]

REPLICATE_LEVEL = 0.95
"""Coverage of the interval of a mean over seeds."""


def _half_width(std, n, level: float):
    std, n = np.asarray(std, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = stats.t.ppf((1 + level) / 2, np.where(n >= 2, n - 1, np.nan))
        return np.where(n >= 2, t * std / np.sqrt(n), np.nan)


def replicate_interval(values: Iterable[float], level: float = REPLICATE_LEVEL) -> dict:
    """Mean over the finite ``values`` (one per seed), their std (ddof=1), the ``level`` Student-t interval of
    the mean and n. With fewer than 2 values std, low and high are NaN (one seed says nothing of the spread).

    Returns
    -------
    dict: mean, std, low, high, n

    Examples
    --------
    >>> row = replicate_interval([0.5, 0.6, 0.7])
    >>> round(row["mean"], 3), round(row["low"], 3), round(row["high"], 3), row["n"]
    (0.6, 0.352, 0.848, 3)
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95); got {level!r}.")
    x = np.asarray(list(values), dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    mean = float(x.mean()) if n else np.nan
    std = float(x.std(ddof=1)) if n > 1 else np.nan
    half = float(_half_width(std, n, level))
    return {"mean": mean, "std": std, "low": mean - half, "high": mean + half, "n": n}


def with_replicate_interval(frame: pd.DataFrame, *, mean: str = "mean", std: str = "std", n: str = "n",
                            prefix: str = "seed_", level: float = REPLICATE_LEVEL) -> pd.DataFrame:
    """``frame`` (rows of a mean over seeds, its std with ddof=1 and n, as :func:`lab.analysis.aggregate_seeds`
    gives them) with ``<prefix>low`` and ``<prefix>high``: the ``level`` Student-t interval of each mean (NaN where
    n < 2)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95); got {level!r}.")
    half = _half_width(frame[std], frame[n], level) if len(frame) else np.array([], dtype=float)
    means = frame[mean].astype(float).to_numpy() if len(frame) else np.array([], dtype=float)
    return frame.assign(**{f"{prefix}low": means - half, f"{prefix}high": means + half})
