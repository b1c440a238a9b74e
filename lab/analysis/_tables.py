"""The layer order and the seed aggregation that every table of :mod:`lab.analysis` builds on.

They sit apart from :mod:`lab.analysis.summary` so that the measures the run summary gathers (the law of
equi-separation, :mod:`lab.analysis.separation_law`) can use them without importing the summary back.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

_AGG_KEYS = ("split", "metric", "epoch", "layer")


def _names(layers: Iterable | None) -> list[str]:
    """Layer names from a list of names or of the store's layer dicts (``{"name": ...}``)."""
    out = []
    for item in layers or ():
        out.append(str(item["name"]) if isinstance(item, Mapping) else str(item))
    return list(dict.fromkeys(out))


def layer_order(layers: Iterable | None = None, metrics: pd.DataFrame | None = None) -> list[str]:
    """The run's layers from input to output.

    Parameters
    ----------
    layers : names (or the store's ``meta["layers"]`` dicts) in the order the engine measured them
    metrics : optional long metrics table; layers it has that ``layers`` lacks follow, first seen first

    Returns
    -------
    list of str
    """
    listed = _names(layers)
    if metrics is None or len(metrics) == 0:
        return listed
    stored = list(dict.fromkeys(metrics["layer"].astype(str)))
    if not listed:
        return stored
    present, known = set(stored), set(listed)
    return [name for name in listed if name in present] + [name for name in stored if name not in known]


def _finite(values: pd.Series) -> pd.Series:
    return values.where(np.isfinite(values.astype(float)))


def aggregate_seeds(metrics: pd.DataFrame, by: Sequence[str] = _AGG_KEYS) -> pd.DataFrame:
    """Mean, std (ddof=1) and n over seeds of every group ``by`` (default split, metric, epoch, layer).

    Non-finite values (a metric undefined at a layer) are left out of all three; a group
    with no finite value has mean NaN and n 0; std is NaN where n < 2.

    Returns
    -------
    DataFrame with the ``by`` columns, then ``mean``, ``std``, ``n``
    """
    by = list(by)
    if metrics is None or len(metrics) == 0:
        return pd.DataFrame(columns=[*by, "mean", "std", "n"])
    frame = metrics.assign(value=_finite(metrics["value"]))
    grouped = frame.groupby(by, sort=False)["value"]
    out = grouped.agg(mean="mean", std="std", n="count").reset_index()          # pandas' std: ddof=1
    out["n"] = out["n"].astype(int)
    out.loc[out["n"] < 2, "std"] = np.nan
    return out


def _resolve_alias(layer: str, aliases: Mapping[str, str] | None, layers: Sequence[str]) -> str:
    seen = {layer}
    while aliases and layer in aliases and aliases[layer] in layers and aliases[layer] not in seen:
        layer = aliases[layer]
        seen.add(layer)
    return layer


def pool_runs(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate several runs' long tables, renumbering seeds so that each run's seeds stay apart.

    Runs of a study cell differ by their ``seeds`` axis; pooled, every (run, seed) is one seed of
    the group's curve.
    """
    parts = []
    offset = 0
    for frame in frames:
        if frame is None or len(frame) == 0:
            continue
        seeds = {s: i + offset for i, s in enumerate(sorted(frame["seed"].unique()))} if "seed" in frame else {}
        part = frame.copy()
        if seeds:
            part["seed"] = part["seed"].map(seeds)
            offset += len(seeds)
        parts.append(part)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
