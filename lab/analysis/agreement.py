"""Do the measures agree on the best layer? (part of :mod:`lab.analysis`)

For one evaluation, the best layer by each separability measure a run computed, and by each label-free one
(which never read the unseen labels), how sure the bootstrap is of it, and how closely each measure orders the
layers the way NMI does (docs/METRICS.md, "Do the measures agree?"). A label-free measure's best layer is its
largest value (RankMe, LiDAR), its smallest (TwoNN ID) or its closest to ``best_at`` (alpha-ReQ: 1), as
:data:`lab.catalogue.METRICS` records the literature's reading. Every best layer comes from :func:`lab.analysis.generalization` run on that measure (ties to the
deeper layer, identical taps reported as the deeper tap, complete evaluations only, seed means), every
layer value from :func:`lab.analysis.layer_curve`: nothing here re-derives g.
"""
from __future__ import annotations

import sys
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from lab import catalogue
from lab.analysis.ranks import rank_correlation
from lab.analysis.summary import _higher_is_better, _names, generalization, layer_curve, layer_order
from lab.store.lookup import load_run

__all__ = ["measure_agreement", "agreement_table", "AGREEMENT_COLUMNS"]

AGREEMENT_COLUMNS = ["label", "split", "epoch", "best_layer", "value", "best_share", "spearman", "n_layers"]
"""The columns of :func:`measure_agreement` (index: measure)."""


def _info(measure: str):
    return catalogue.METRICS.get(measure)


def _measures(measures: Sequence[str] | None) -> tuple[str, ...]:
    """The measures to compare: those given, else the catalogue's (``compared``), in its order."""
    return catalogue.metric_names(compared=True) if measures is None else tuple(measures)


def _best_at(measure: str) -> float | None:
    info = _info(measure)
    return None if info is None else info.best_at


def _oriented(metrics: pd.DataFrame, measure: str, higher: bool) -> pd.DataFrame:
    """``metrics`` with the values of ``measure`` negated when lower is better, or minus their distance to the
    entry's ``best_at`` (so that the best is a maximum and a higher value ranks a layer higher); every other
    row (the bootstrap's) unchanged."""
    target = _best_at(measure)
    if higher and target is None:
        return metrics
    own = metrics["metric"] == measure
    value = metrics["value"].astype(float)
    oriented = -(value - target).abs() if target is not None else -value
    return metrics.assign(value=value.where(~own, oriented))


def agreement_table(metrics: pd.DataFrame, *, layers: Iterable | None = None,
                    aliases: Mapping[str, str] | None = None, epoch: int | None = None,
                    measures: Sequence[str] | None = None) -> pd.DataFrame:
    """:func:`measure_agreement` on a run's long metrics table (``RunRecord.metrics``).

    Parameters
    ----------
    metrics : long metrics table of one run (any number of seeds)
    layers : the run's layers, input -> output (names or ``meta["layers"]``)
    aliases : ``{tap: deeper tap}`` with identical features (``meta["layer_aliases"]``)
    epoch : the evaluation; None: the last complete NMI evaluation (without NMI: the last complete one of
        any measure). Transferability estimators (LogME) exist at epoch 0 only and are taken there.
    measures : metric names; None: the catalogue's entries with ``compared``
        (``lab.catalogue.metric_names(compared=True)``)
    """
    measures = _measures(measures)
    reference_name = catalogue.g_metric()
    order = layer_order(layers, metrics)
    aliases = dict(aliases or {})
    notes: list[str] = []
    rows: dict[str, dict] = {}
    gens: dict[str, pd.DataFrame] = {}
    for measure in measures:
        info = _info(measure)
        split = "seen" if info is not None and info.family == "transferability" else "unseen"
        higher = _higher_is_better(measure)
        gen = generalization(_oriented(metrics, measure, higher), layers=layers, aliases=aliases,
                             metric=measure, split=split)
        if not gen.empty:
            gens[measure] = gen.assign(split=split, higher=higher)
    if epoch is None:
        ends = ([gens[reference_name]] if reference_name in gens
                else [g for m, g in gens.items() if g["split"].iloc[0] == "unseen"])
        epoch = int(max(g["epoch"].max() for g in ends)) if ends else None
    if reference_name not in gens:
        g_label = _label(reference_name)
        notes.append(f"the run has no complete {g_label} evaluation: no rank correlation with {g_label}")
    # per layer, with taps identical to a deeper tap left out (the same features would count twice)
    kept = [name for name in order if aliases.get(name) not in set(order)]
    reference = None
    for measure, gen in gens.items():
        split, higher = gen["split"].iloc[0], bool(gen["higher"].iloc[0])
        at = 0 if split == "seen" else epoch
        row = gen[gen["epoch"] == at]
        if row.empty:
            notes.append(f"{measure}: no complete evaluation at epoch {at}")
            continue
        best = row.iloc[0]
        curve = layer_curve(_oriented(metrics, measure, higher), layers=layers, metric=measure, split=split,
                            epoch=at)
        values = curve.set_index("layer")["mean"].astype(float).reindex(kept)
        if measure == reference_name:
            reference = values
        if _best_at(measure) is not None:         # the value itself, not its distance to best_at
            raw = layer_curve(metrics, layers=layers, metric=measure, split=split, epoch=at).set_index("layer")
            value = float(raw["mean"].get(str(best["layer"]), np.nan))
        else:
            value = float(best["g"]) if higher else -float(best["g"])
        rows[measure] = {"label": _label(measure), "split": split, "epoch": int(at), "best_layer": str(best["layer"]),
                         "value": value, "best_share": float(best["best_share"]), "_values": values}
    out = []
    for measure, row in rows.items():
        values = row.pop("_values")
        rho, n = np.nan, int(values.notna().sum())
        if reference is not None:
            r = rank_correlation(values.to_numpy(), reference.to_numpy(), n_boot=1, min_interval_n=sys.maxsize)
            rho, n = r["spearman"], r["n"]
            if not np.isfinite(rho):
                notes.append(f"{measure}: no rank correlation with {_label(reference_name)} over {n} layer(s) "
                             "(needs 3 layers that both measured, neither constant)")
        out.append({"measure": measure, **row, "spearman": rho, "n_layers": n})
    left = [m for m in measures if m not in rows]
    if left:
        notes.append(f"not measured by the run (or no complete evaluation): {', '.join(left)}")
    table = pd.DataFrame(out, columns=["measure", *AGREEMENT_COLUMNS]).set_index("measure")
    table = table.astype({"value": float, "best_share": float, "spearman": float})
    table.attrs.update(epoch=epoch, layers=_names(layers) or order, notes=notes)
    return table


def _label(measure: str) -> str:
    return catalogue.metric_label(measure)


def measure_agreement(run, epoch: int | None = None, *, measures: Sequence[str] | None = None,
                      store=None) -> pd.DataFrame:
    """Do the measures agree? For one evaluation, the best layer by each measure the run computed.

    Parameters
    ----------
    run : the run's id in ``store``, or its :class:`lab.store.RunRecord`
    epoch : the evaluation; None: the last complete one (as g's)
    measures : metric names; None (default): the catalogue's ``metric_names(compared=True)`` (NMI, kNN accuracy, linear
        probe, NCC accuracy, LogME, then the label-free RankMe, alpha-ReQ, TwoNN ID and LiDAR)
    store : None (the default store), a :class:`lab.store.RunStore` or a folder path; unused for a record

    Returns
    -------
    DataFrame, one row per measure the run computed (index ``measure``), with :data:`AGREEMENT_COLUMNS`:
    label, split and epoch measured (LogME: the seen held-out images at epoch 0, before fine-tuning),
    best_layer and its value (the seed mean, by :func:`lab.analysis.generalization` on that measure: ties to
    the deeper layer, identical taps as the deeper tap; lower-is-better measures take the minimum, alpha-ReQ
    the value closest to 1), best_share (the fraction of bootstrap resamples in which that layer is best,
    pooled over seeds; NaN for measures without a bootstrap: all but NMI and kNN accuracy, the label-free ones
    included), spearman (Spearman's rho between the measure's layer order, best first, and NMI's, over the
    seed-mean values of the layers both measured, identical taps counted once; NaN with fewer than 3 layers
    or a constant side) and n_layers (the layers it was computed over). The label-free rows (RankMe,
    alpha-ReQ, TwoNN ID, LiDAR) are measured on the unseen images without their labels, at the same epoch.
    ``attrs["notes"]`` says what could not be given and why.
    """
    rec = load_run(run, store)
    return agreement_table(rec.metrics, layers=rec.meta.get("layers"), aliases=rec.meta.get("layer_aliases"),
                           epoch=epoch, measures=measures)
