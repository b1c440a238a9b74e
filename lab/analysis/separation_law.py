"""The law of equi-separation across layers (He & Su, PNAS 2023, arXiv 2210.17020), read from a run's tables.

Definition: docs/METRICS.md, "The law of equi-separation". Per (seed, epoch, split), log10 NC1 is fitted against
the layer index over the run's tapped layers in depth order (:func:`lab.analysis.layer_order`), a tap whose
features are identical to a deeper tap's (the run's ``layer_aliases``: e.g. an MLP's last hidden layer and
``pre_logits``) counted once, as that deeper tap. NC1 is He & Su's separation fuzziness D divided by K for
balanced classes, so the slope, the ratio per layer and Pearson r are theirs.

Each function takes a stored run's record, whose meta gives the layers and aliases, or its metrics table with
``aliases=`` passed (``{}`` for none): a table without them is refused, as nothing tells an MLP's last hidden
layer from ``pre_logits``. A row's ``reason`` is a :class:`LawReason`, its words with :class:`LawCode` codes.

Examples
--------
>>> import pandas as pd
>>> m = pd.DataFrame({"seed": 0, "epoch": 3, "split": "train", "metric": "nc1",
...                   "layer": ["a", "b", "c", "d"], "value": [8.0, 4.0, 2.0, 1.0]})
>>> row = separation_law(m, layers=["a", "b", "c", "d"], aliases={}).iloc[0]
>>> round(float(row["ratio"]), 6), round(float(row["r"]), 6), int(row["n_layers"])
(0.5, -1.0, 4)
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from lab import catalogue
from lab.analysis._law_reason import LawCode, LawReason
from lab.analysis._tables import _resolve_alias, aggregate_seeds, layer_order, pool_runs

__all__ = ["separation_law", "separation_law_across_seeds", "law_across_seeds", "separation_law_points",
           "latest_separation_law", "group_separation_law", "LawCode", "LawReason", "SEPARATION_LAW_COLUMNS", "SEPARATION_LAW_POINT_COLUMNS", "LATEST_LAW_KEYS",
           "MIN_LAW_LAYERS"]

SEPARATION_LAW_COLUMNS = ["seed", "epoch", "split", "slope", "ratio", "r", "n_layers", "reason"]
"""The columns of :func:`separation_law`."""
SEPARATION_LAW_POINT_COLUMNS = ["seed", "epoch", "split", "layer", "index", "log10_nc1", "fitted", "in_fit"]
"""The columns of :func:`separation_law_points`."""
LATEST_LAW_KEYS = ("epoch", "ratio", "ratio_std", "r", "r_std", "slope", "n_layers", "n_seeds", "reason")
"""The keys of each split's entry in :func:`latest_separation_law` (and the run summary's ``separation_law``)."""
MIN_LAW_LAYERS = 3
"""The fewest distinct layers with a finite, positive NC1 the law is fitted over: a line through two points
always fits, so it says nothing about a law."""

_SPLIT_ORDER = catalogue.SPLITS
_QUANTITIES = ("slope", "ratio", "r")


def _split_names(present: Iterable) -> list[str]:
    """The distinct splits, train / seen / unseen first, then any other by name."""
    return sorted({str(s) for s in present},
                  key=lambda s: (_SPLIT_ORDER.index(s), "") if s in _SPLIT_ORDER else (len(_SPLIT_ORDER), s))


def _splits(wanted: str | Sequence[str] | None, present: Iterable[str]) -> list[str]:
    """The splits to report, train / seen / unseen first: those asked for that the run has (all it has for
    None); a split the run lacks gives no rows."""
    have = _split_names(present)
    if wanted is None:
        return have
    asked = {wanted} if isinstance(wanted, str) else {str(s) for s in wanted}
    return [s for s in have if s in asked]


def _split_key(column: pd.Series) -> pd.Series:
    """Sort key: train, seen, unseen, then any other split by name."""
    rank = {name: i for i, name in enumerate(_split_names(column))}
    return column.map(rank)


def _sorted(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    return table.sort_values(by, key=lambda c: _split_key(c) if c.name == "split" else c,
                             kind="stable").reset_index(drop=True)


def _distinct(order: Sequence[str], aliases: Mapping[str, str] | None) -> list[str]:
    """The layers in depth order with every tap identical to a deeper tap left out (the deeper one stays)."""
    return [name for name in order if _resolve_alias(name, aliases, order) == name]


def _fit(index: np.ndarray, values: np.ndarray) -> tuple[float, float, float]:
    """(slope, Pearson r, intercept) of the least-squares line through (index, log10 values)."""
    y = np.log10(values)
    dx, dy = index - index.mean(), y - y.mean()
    sxx, syy, sxy = float(dx @ dx), float(dy @ dy), float(dx @ dy)
    slope = sxy / sxx
    r = sxy / np.sqrt(sxx * syy) if syy > 0 else np.nan
    return slope, float(np.clip(r, -1.0, 1.0)) if np.isfinite(r) else np.nan, float(y.mean() - slope * index.mean())


def _one(values: pd.Series, distinct: Sequence[str]) -> dict:
    """The law over one evaluation's NC1 per layer (``values`` indexed by layer name)."""
    notes, index, kept = [], [], []
    missing = [name for name in distinct if name not in values.index]
    bad = []
    for i, name in enumerate(distinct):
        if name not in values.index:
            continue
        v = float(values[name])
        if np.isfinite(v) and v > 0:
            index.append(i)
            kept.append(v)
        else:
            bad.append(f"{name} ({v:g})")
    if bad:
        notes.append((LawCode.NOT_FINITE, f"{LawCode.NOT_FINITE.words} at {', '.join(bad)}: left out"))
    if missing:
        notes.append((LawCode.NOT_MEASURED, f"{LawCode.NOT_MEASURED.words} at {', '.join(missing)}"))
    n = len(kept)
    if n < MIN_LAW_LAYERS:
        few = (LawCode.TOO_FEW_LAYERS, f"{n} layer(s) with a finite, positive NC1, at least {MIN_LAW_LAYERS} needed")
        return {"slope": np.nan, "ratio": np.nan, "r": np.nan, "n_layers": n, "reason": LawReason([few, *notes]),
                "intercept": np.nan, "fitted_index": index}
    slope, r, intercept = _fit(np.asarray(index, dtype=float), np.asarray(kept, dtype=float))
    if not np.isfinite(r):
        notes.append((LawCode.R_UNDEFINED, f"NC1 is the same at every layer: {LawCode.R_UNDEFINED.words}"))
    return {"slope": slope, "ratio": 10.0 ** slope, "r": r, "n_layers": n,
            "reason": LawReason(notes) if notes else None, "intercept": intercept, "fitted_index": index}


def _unpack(run, layers, aliases, who: str):
    """(metrics table, layers, aliases) of ``run``: a record (anything with ``metrics`` and ``meta``, e.g.
    :class:`lab.store.RunRecord`, whose meta gives what is not passed) or a long metrics table with its
    ``aliases`` passed. Records are told apart by not being a table rather than by lab.store's check: the
    store's package imports the run summary, which reads the law."""
    if run is None:                                         # no rows yet: nothing to fit, nothing to count
        return None, layers, aliases or {}
    if isinstance(run, pd.DataFrame):
        if {"slope", "r"} <= set(run.columns) and "metric" not in run.columns:
            raise ValueError(f"{who}: this is the table separation_law returned, already fitted; give split, "
                             "layers and aliases to that call, not this one, and pass its table to "
                             "lab.analysis.law_across_seeds for the mean over seeds")
        if aliases is None:
            raise TypeError(f"{who}: a metrics table needs aliases= by keyword, the run's {{tap: deeper tap}} of "
                            "identical features (RunRecord.meta['layer_aliases']; {} when it has none), or an "
                            "MLP's last hidden layer and pre_logits count as two layers. Got a table without them; "
                            f"pass aliases=record.meta.get('layer_aliases') or {{}}, or pass the record itself.")
        return run, layers, aliases
    if not (hasattr(run, "metrics") and hasattr(run, "meta")):
        raise TypeError(f"{who}: the law is read from a RunRecord, or its metrics table (RunRecord.metrics) with "
                        f"aliases=. Got {type(run).__name__} {run!r:.60} instead; load a run id with "
                        "lab.RunStore().load(id).")
    meta = run.meta or {}
    return (run.metrics, meta.get("layers") if layers is None else layers,
            (meta.get("layer_aliases") or {}) if aliases is None else aliases)


def _evaluations(metrics, split, seed, layers, aliases, who):
    """(seed, epoch, split, NC1 per distinct layer, the distinct layers in depth order) of each evaluation with NC1
    rows, in the table's order: what :func:`separation_law` and :func:`separation_law_points` fit."""
    metrics, layers, aliases = _unpack(metrics, layers, aliases, who)
    if metrics is None or len(metrics) == 0:
        return
    rows = metrics[metrics["metric"] == catalogue.law_metric()]
    if seed is not None:
        rows = rows[rows["seed"] == seed]
    splits = _splits(split, rows["split"].unique())
    rows = rows[rows["split"].isin(splits)]
    if rows.empty:
        return
    order = [name for name in layer_order(layers, metrics) if name in set(rows["layer"].astype(str))]
    distinct = _distinct(order, aliases)
    values = rows.assign(layer=rows["layer"].astype(str), value=rows["value"].astype(float))
    for (s, e, sp), part in values.groupby(["seed", "epoch", "split"], sort=False):
        per_layer = part.groupby("layer", sort=False)["value"].mean()    # repeats of one value agree
        per_layer = per_layer[per_layer.index.isin(distinct)]
        yield int(s), int(e), str(sp), per_layer, distinct


def separation_law(run, *, split: str | Sequence[str] | None = None, seed: int | None = None,
                   layers: Iterable | None = None, aliases: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The law of equi-separation per (seed, epoch, split): log10 NC1 fitted against the layer index.

    Parameters
    ----------
    run : lab.store.RunRecord or pandas.DataFrame
        A stored run's record, whose ``meta["layers"]`` and ``meta["layer_aliases"]`` give ``layers`` and
        ``aliases`` unless they are passed; or a run's long metrics table (seed, epoch, layer, split, metric,
        value; ``RunRecord.metrics``), which needs ``aliases`` passed (a table without them is refused with a
        TypeError: nothing is guessed). The table :func:`separation_law` returned is refused with a ValueError
        (its mean over seeds is :func:`law_across_seeds`'s).
    split : str or sequence of str, optional
        The splits to fit (names of ``lab.catalogue.SPLITS``); None: every split with NC1 rows. A split the run lacks
        (an old run without the train sample) gives no rows.
    seed : int, optional
        One seed; None: every seed.
    layers : the run's layers, input -> output (names or ``meta["layers"]``); None: the table's order
    aliases : ``{tap: deeper tap}`` for taps with identical features (``meta["layer_aliases"]``; ``{}`` for
        none); each such tap is left out, so the tensor counts once, at the deeper tap's place. Required with a
        table; None with a record: the record's.

    Returns
    -------
    pandas.DataFrame
        :data:`SEPARATION_LAW_COLUMNS`, one row per (seed, epoch, split) with NC1 rows, sorted by seed, epoch
        and split (train, seen, unseen): ``slope`` of the least-squares line of log10 NC1 against the layer
        index l = 0, 1, ... over the distinct layers; ``ratio`` = 10**slope, the factor by which each layer
        multiplies NC1 (below 1: each deeper layer separates the classes better); ``r``, Pearson's r of
        (l, log10 NC1), −1 or +1 for an exact geometric sequence; ``n_layers``, the layers fitted; ``reason``,
        None when every distinct layer was fitted, else a :class:`LawReason`: one line naming the layers left
        out (NC1 NaN, infinite or not positive, or not measured at that evaluation) with its :class:`LawCode`
        codes. With fewer than :data:`MIN_LAW_LAYERS` layers left the law is absent: slope, ratio and r are NaN
        and ``reason`` says why (code :attr:`LawCode.TOO_FEW_LAYERS`). A layer left out keeps the others'
        indices (l is the depth among the distinct layers).
    """
    out = [{"seed": s, "epoch": e, "split": sp, **_one(per_layer, distinct)}
           for s, e, sp, per_layer, distinct in _evaluations(run, split, seed, layers, aliases, "separation_law")]
    if not out:
        return pd.DataFrame(columns=SEPARATION_LAW_COLUMNS)
    table = pd.DataFrame(out, columns=SEPARATION_LAW_COLUMNS)
    # object, not pandas' inferred str dtype, which would turn each LawReason into a plain str and lose its codes
    table["reason"] = pd.Series([row["reason"] for row in out], dtype=object)
    table = _sorted(table, ["seed", "epoch", "split"])
    return table.astype({"slope": float, "ratio": float, "r": float, "n_layers": int})


def separation_law_points(run, *, split: str | Sequence[str] | None = None, seed: int | None = None,
                          epoch: int | None = None, layers: Iterable | None = None,
                          aliases: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The points :func:`separation_law` fits and its line through them, one row per distinct layer of each
    (seed, epoch, split): what a plot of log10 NC1 against depth draws, with nothing fitted again.

    Parameters are :func:`separation_law`'s; ``epoch``: one evaluation (None: every one).

    Returns
    -------
    pandas.DataFrame
        :data:`SEPARATION_LAW_POINT_COLUMNS`, sorted by seed, epoch, split and depth: ``layer`` and its
        ``index`` l among the distinct layers (input -> output), ``log10_nc1`` (NaN where NC1 is not finite
        and positive or not measured), ``fitted`` the law's line at l (intercept + slope · l, the least-squares
        line of :func:`separation_law`; NaN where the law is absent) and ``in_fit`` (the point was fitted).
    """
    out = []
    for s, e, sp, per_layer, distinct in _evaluations(run, split, seed, layers, aliases, "separation_law_points"):
        if epoch is not None and e != int(epoch):
            continue
        law = _one(per_layer, distinct)
        fitted = set(law["fitted_index"])
        for i, name in enumerate(distinct):
            value = float(per_layer[name]) if name in per_layer.index else np.nan
            line = law["intercept"] + law["slope"] * i
            out.append({"seed": s, "epoch": e, "split": sp, "layer": name, "index": i,
                        "log10_nc1": np.log10(value) if i in fitted else np.nan,
                        "fitted": line if np.isfinite(law["slope"]) else np.nan, "in_fit": i in fitted})
    if not out:
        return pd.DataFrame(columns=SEPARATION_LAW_POINT_COLUMNS)
    table = _sorted(pd.DataFrame(out, columns=SEPARATION_LAW_POINT_COLUMNS), ["seed", "epoch", "split", "index"])
    return table.astype({"index": int, "log10_nc1": float, "fitted": float, "in_fit": bool})


def separation_law_across_seeds(run, *, split: str | Sequence[str] | None = None,
                                layers: Iterable | None = None,
                                aliases: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The law's slope, ratio and r per (epoch, split), mean and spread over seeds.

    Parameters are :func:`separation_law`'s (``run``: a record, or a metrics table with ``aliases``). Each seed's
    values come from :func:`separation_law`; their mean, standard deviation (ddof=1; NaN for one seed) and number
    are :func:`lab.analysis.aggregate_seeds`'s, as for every other measure (a seed without the law counts in none
    of them). A view that already holds :func:`separation_law`'s table gives it to :func:`law_across_seeds`,
    which fits nothing again.

    Returns
    -------
    pandas.DataFrame
        epoch, split, then ``slope``, ``slope_std``, ``ratio``, ``ratio_std``, ``r``, ``r_std`` and
        ``n_seeds`` (the seeds with a fitted law), one row per (epoch, split), sorted as
        :func:`separation_law`'s. ``ratio`` is the mean of the seeds' ratios.
    """
    metrics, layers, aliases = _unpack(run, layers, aliases, "separation_law_across_seeds")
    return _across(separation_law(metrics, split=split, layers=layers, aliases=aliases))


def law_across_seeds(law: pd.DataFrame) -> pd.DataFrame:
    """:func:`separation_law_across_seeds` of the table :func:`separation_law` returned, its rows used as they
    are: a view that shows both fits the law once.

    Parameters
    ----------
    law : pandas.DataFrame
        :func:`separation_law`'s table (:data:`SEPARATION_LAW_COLUMNS`).

    Returns
    -------
    pandas.DataFrame
        :func:`separation_law_across_seeds`'s columns and rows.
    """
    if not isinstance(law, pd.DataFrame) or not set(SEPARATION_LAW_COLUMNS) <= set(law.columns):
        got = sorted(law.columns) if isinstance(law, pd.DataFrame) else type(law).__name__
        raise TypeError(f"law_across_seeds takes the table separation_law returned (columns "
                        f"{', '.join(SEPARATION_LAW_COLUMNS)}). Got {got} instead; for a run or its metrics table "
                        "call separation_law_across_seeds.")
    return _across(law)


def _across(per_seed: pd.DataFrame) -> pd.DataFrame:
    """:func:`separation_law_across_seeds` of the per-seed rows :func:`separation_law` gave."""
    columns = ["epoch", "split", *[f"{q}{s}" for q in _QUANTITIES for s in ("", "_std")], "n_seeds"]
    if per_seed.empty:
        return pd.DataFrame(columns=columns)
    long = per_seed.melt(id_vars=["seed", "epoch", "split"], value_vars=list(_QUANTITIES), var_name="metric")
    agg = aggregate_seeds(long, by=("epoch", "split", "metric"))
    wide = agg.pivot(index=["epoch", "split"], columns="metric", values=["mean", "std", "n"])
    out = pd.DataFrame(index=wide.index)
    for q in _QUANTITIES:
        out[q] = wide[("mean", q)].astype(float)
        out[f"{q}_std"] = wide[("std", q)].astype(float)
    out["n_seeds"] = wide[("n", "slope")].astype(int)
    return _sorted(out.reset_index(), ["epoch", "split"])[columns]


def _number(value) -> float | None:
    """A finite float, or None (JSON keeps no NaN)."""
    value = float(value)
    return value if np.isfinite(value) else None


def latest_separation_law(run, *, layers: Iterable | None = None,
                          aliases: Mapping[str, str] | None = None) -> dict | None:
    """The law at each split's last evaluation, over seeds: what the run summary reports.

    Parameters are :func:`separation_law`'s (``run``: a RunRecord, or a long metrics table with ``aliases``).

    Returns
    -------
    dict or None
        None when the run has no NC1 rows (nc1 not among its metrics). Otherwise ``{split: entry}`` for the
        splits with NC1 rows, train, seen (the held-out images of the seen classes) and unseen first, each entry
        :data:`LATEST_LAW_KEYS`: ``epoch``, the split's last epoch with NC1 rows; ``ratio``, ``r`` and ``slope``,
        the mean over the seeds with a fitted law at that epoch, and ``ratio_std``, ``r_std`` their spread
        (:func:`separation_law_across_seeds`; None for one seed); ``n_layers``, the most layers fitted in a
        seed; ``n_seeds``, the seeds with a fitted law; ``reason``, None when every seed fitted every distinct
        layer, else the seeds' reasons (:func:`separation_law`; one every seed gives said once, others with
        their seeds), e.g. why the law is absent. Values are floats
        or None (never NaN), so the dict is JSON as it is.
    """
    metrics, layers, aliases = _unpack(run, layers, aliases, "latest_separation_law")
    if metrics is None or len(metrics) == 0:
        return None
    rows = metrics[metrics["metric"] == catalogue.law_metric()]
    if rows.empty:
        return None
    last = rows.groupby("split", sort=False)["epoch"].transform("max")
    rows = rows[rows["epoch"] == last]                     # each split's last evaluation only
    # the full table fixes the depth order (a layer missing at the last epoch keeps its place)
    order = layer_order(layers, metrics)
    per_seed = separation_law(rows, layers=order, aliases=aliases)
    across = _across(per_seed).set_index("split")
    out = {}
    for split, part in per_seed.groupby("split", sort=False):
        mean = across.loc[split]
        seeds_of: dict[str, list[int]] = {}                # a reason every seed gives is said once
        for s, why in zip(part["seed"], part["reason"]):
            if isinstance(why, str):
                seeds_of.setdefault(why, []).append(int(s))
        reasons = [why if len(seeds) == len(part) else
                   f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}: {why}"
                   for why, seeds in seeds_of.items()]
        out[str(split)] = {"epoch": int(part["epoch"].iloc[0]), "ratio": _number(mean["ratio"]),
                           "ratio_std": _number(mean["ratio_std"]), "r": _number(mean["r"]),
                           "r_std": _number(mean["r_std"]), "slope": _number(mean["slope"]),
                           "n_layers": int(part["n_layers"].max()), "n_seeds": int(mean["n_seeds"]),
                           "reason": "; ".join(reasons) if reasons else None}
    return out


def group_separation_law(groups: Mapping[str, Sequence[pd.DataFrame]], layers: Mapping[str, Iterable], *,
                         aliases: Mapping[str, Mapping] | None = None) -> pd.DataFrame:
    """Per group (a study's condition), the law at each split's last evaluation over its pooled runs' seeds.

    Parameters
    ----------
    groups : ``{group: [metrics table of each run]}``; a group's runs are pooled as seeds of one condition
        (:func:`lab.analysis.pool_runs`)
    layers, aliases : ``{group: the runs' layers}`` and ``{group: their aliases}`` (``{}`` for a group without
        identical taps); every group needs its aliases, as a table does in :func:`separation_law`

    Returns
    -------
    pandas.DataFrame
        group, split, then :data:`LATEST_LAW_KEYS` (:func:`latest_separation_law` of the pooled runs), one row
        per group and split with NC1 rows; a group without NC1 has no row.
    """
    rows = []
    for group, frames in groups.items():
        if aliases is None or group not in aliases:
            raise TypeError(f"group_separation_law: no aliases for group {group!r}. Pass aliases={{group: the runs' "
                            "meta['layer_aliases']}, {} for a group without identical taps; nothing is guessed.")
        law = latest_separation_law(pool_runs(frames), layers=layers.get(group), aliases=aliases[group])
        rows.extend({"group": group, "split": split, **entry} for split, entry in (law or {}).items())
    table = pd.DataFrame(rows, columns=["group", "split", *LATEST_LAW_KEYS])
    return table.astype({q: float for q in ("ratio", "ratio_std", "r", "r_std", "slope")})
