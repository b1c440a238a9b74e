"""Run summaries: seed aggregation, g and its best layer, layer curves, and the cross-run tables.

The definitions are in :mod:`lab.analysis` (the package docstring) and METRICS.md.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from lab import catalogue
from lab.analysis._tables import _finite, _names, _resolve_alias, aggregate_seeds, layer_order, pool_runs
from lab.analysis.intervals import CONFIDENCE_SUFFIXES, bootstrap
from lab.analysis.neural_collapse import terminal_phase
from lab.analysis.ranks import rank_correlation, transfer_correlations
from lab.analysis.replicates import with_replicate_interval
from lab.analysis.separation_law import latest_separation_law
from lab.analysis.summary_epochs import at_summary, check_summary, up_to_epoch

_GEN_COLUMNS = ["epoch", "g", "g_std", "n_seeds", "layer", "layer_index", "final_layer", "is_final",
                "g_low", "g_high", "best_share"]


def complete_evaluations(metrics: pd.DataFrame, layers: Sequence[str], *, metric: str | None = None,
                         split: str = "unseen") -> pd.DataFrame:
    """Rows of ``metric`` (None: the g metric, :func:`lab.catalogue.g_metric`) on ``split`` from the (seed, epoch)
    evaluations that measured every layer.

    A row counts as measured even when its value is NaN (the metric was undefined there):
    completeness is about the evaluation having reached the layer.
    """
    metric = catalogue.g_metric() if metric is None else metric
    rows = metrics[(metrics["split"] == split) & (metrics["metric"] == metric)] if len(metrics) else metrics
    if not len(rows) or not layers:
        return rows
    wanted = set(layers)
    have = rows[rows["layer"].isin(wanted)].groupby(["seed", "epoch"])["layer"].nunique()
    done = have[have == len(wanted)].index
    keep = pd.MultiIndex.from_frame(rows[["seed", "epoch"]]).isin(done)
    return rows[keep]


def _confidence(metrics: pd.DataFrame, rows: pd.DataFrame, metric: str, split: str) -> pd.DataFrame:
    """Mean over the seeds of ``rows``' evaluations of the bootstrap rows ``metric_low`` / ``_high`` /
    ``_best_share``, indexed by (epoch, layer), columns low, high, best_share (empty for runs without)."""
    names = {f"{metric}_{suffix}": suffix for suffix in CONFIDENCE_SUFFIXES}
    extra = metrics[(metrics["split"] == split) & metrics["metric"].isin(list(names))]
    if extra.empty or rows.empty:
        return pd.DataFrame(columns=list(CONFIDENCE_SUFFIXES))
    done = pd.MultiIndex.from_frame(rows[["seed", "epoch"]]).unique()
    extra = extra[pd.MultiIndex.from_frame(extra[["seed", "epoch"]]).isin(done)]
    table = (extra.assign(value=_finite(extra["value"])).groupby(["epoch", "layer", "metric"])["value"]
             .mean().unstack("metric").rename(columns=names))
    return table.reindex(columns=list(CONFIDENCE_SUFFIXES))


def generalization(metrics: pd.DataFrame, *, layers: Iterable | None = None,
                   aliases: Mapping[str, str] | None = None, metric: str | None = None,
                   split: str = "unseen") -> pd.DataFrame:
    """The generalization index g per epoch, over seeds (Dyballa et al. 2024).

    Parameters
    ----------
    metrics : long metrics table (one run; any number of seeds)
    layers : the run's layers in input -> output order (names or ``meta["layers"]``); None = the
        order found in ``metrics``. Completeness and the final layer are judged against them.
    aliases : ``{tap: deeper tap}`` for taps whose features equal a deeper tap's
    metric, split : the separability measure maximised (default: the g metric, :func:`lab.catalogue.g_metric`
        (NMI), on the unseen images)

    Returns
    -------
    DataFrame, one row per epoch with a complete evaluation: epoch, g (max over layers of the
    seed-mean), g_std (that layer's seed std, ddof=1; NaN for one seed), n_seeds, layer (the
    arg-max, after ties -> deeper and aliases), layer_index, final_layer (the run's last tap),
    is_final (whether ``layer`` is the final representation), and from the bootstrap over the unseen
    images (NaN for runs without it): g_low, g_high (that layer's interval, mean over seeds) and
    best_share (fraction of the resamples of all seeds in which that layer is best).
    """
    order = layer_order(layers, metrics)
    metric = catalogue.g_metric() if metric is None else metric
    if metrics is None or len(metrics) == 0 or not order:
        return pd.DataFrame(columns=_GEN_COLUMNS)
    # completeness is judged against every listed layer, measured yet or not
    rows = complete_evaluations(metrics, _names(layers), metric=metric, split=split)
    agg = aggregate_seeds(rows, by=("epoch", "layer"))
    agg = agg[np.isfinite(agg["mean"].astype(float))]
    if agg.empty:
        return pd.DataFrame(columns=_GEN_COLUMNS)
    index = {name: i for i, name in enumerate(order)}
    agg = agg.assign(layer_index=agg["layer"].map(index).fillna(len(order)).astype(int))
    conf = _confidence(metrics, rows, metric, split)
    out = []
    for epoch, group in agg.groupby("epoch", sort=True):
        top = group[group["mean"] == group["mean"].max()]
        best = top.loc[top["layer_index"].idxmax()]        # exact ties: the deeper layer
        layer = _resolve_alias(str(best["layer"]), aliases, order)
        out.append({"epoch": int(epoch), "g": float(best["mean"]),
                    "g_std": float(best["std"]) if pd.notna(best["std"]) else np.nan,
                    "n_seeds": int(best["n"]), "layer": layer, "layer_index": index.get(layer, len(order)),
                    "final_layer": order[-1], "is_final": layer == order[-1],
                    **(conf.loc[(epoch, layer)].astype(float).rename({"low": "g_low", "high": "g_high"}).to_dict()
                       if (epoch, layer) in conf.index else {})})
    return pd.DataFrame(out, columns=_GEN_COLUMNS).astype({c: float for c in ("g_low", "g_high", "best_share")})


def latest_generalization(metrics: pd.DataFrame, **kwargs: Any) -> dict | None:
    """The last row of :func:`generalization` as a dict (``g_std`` and the bootstrap's ``g_low``,
    ``g_high``, ``best_share`` None when undefined), or None."""
    table = generalization(metrics, **kwargs)
    if table.empty:
        return None
    row = table.iloc[-1].to_dict()
    for key in ("g_std", "g_low", "g_high", "best_share"):
        row[key] = None if pd.isna(row[key]) else float(row[key])
    row["epoch"], row["n_seeds"], row["layer_index"] = int(row["epoch"]), int(row["n_seeds"]), int(row["layer_index"])
    row["is_final"] = bool(row["is_final"])
    return row


def summary_epoch(metrics: pd.DataFrame, summary="last", *, layers: Iterable | None = None,
                  run: str | None = None) -> int | None:
    """The epoch at which one run is summarised.

    Parameters
    ----------
    metrics : the run's long metrics table (any number of seeds)
    summary : ``"last"``: the last epoch with a complete evaluation of the g metric (:func:`lab.catalogue.g_metric`)
        on the unseen images; ``"best"``: the epoch whose g (max over layers of the seed-mean) is highest, exact ties
        to the earlier epoch; an int: that epoch, which must have a complete evaluation
    layers : the run's layers, input -> output (completeness is judged against them)
    run : the run's name or id, for the error message

    Returns
    -------
    int, or None when the run has no complete evaluation yet (it has nothing to summarise)

    Raises
    ------
    ValueError
        ``summary`` is not one of the above, or the run has no complete evaluation at the epoch asked for.
    """
    summary = check_summary(summary)
    table = generalization(metrics, layers=layers)
    if table.empty:
        return None
    epochs = table["epoch"].astype(int)
    if summary == "last":
        return int(epochs.max())
    if summary == "best":
        # generalization's rows are in epoch order and idxmax keeps the first maximum: ties go to the earlier epoch
        return int(table.loc[table["g"].astype(float).idxmax(), "epoch"])
    if summary not in set(epochs):
        name = f"run {run!r}" if run is not None else "the run"
        raise ValueError(f"{name} has no complete evaluation at epoch {summary}; it has epochs "
                         f"{', '.join(map(str, sorted(set(epochs))))}. Pick one of them, or summary='last'.")
    return summary


def _at_summary(frames: Sequence[pd.DataFrame], summary, layers) -> tuple[list, list | None]:
    """A condition's runs at their summary epochs and those epochs; "last" leaves the tables as they are (None)."""
    if summary == "last":
        return list(frames), None
    epochs = [summary_epoch(f, summary, layers=layers) for f in frames]
    return at_summary(frames, epochs), epochs


def layer_curve(metrics: pd.DataFrame, *, layers: Iterable | None = None, metric: str | None = None,
                split: str = "unseen", epoch: int | None = None) -> pd.DataFrame:
    """One metric (None: the g metric, :func:`lab.catalogue.g_metric`) at every layer at one epoch (default: the
    last complete one), over seeds.

    Returns
    -------
    DataFrame: layer, layer_index, depth (relative depth in [0, 1], input -> output), mean, std, n,
    low, high (the bootstrap interval over the unseen images, mean over seeds) and best_share (the
    fraction of resamples, pooled over seeds, in which the layer is best); NaN where not measured
    """
    order = layer_order(layers, metrics)
    metric = catalogue.g_metric() if metric is None else metric
    cols = ["layer", "layer_index", "depth", "mean", "std", "n", "low", "high", "best_share"]
    if metrics is None or len(metrics) == 0 or not order:
        return pd.DataFrame(columns=cols)
    rows = complete_evaluations(metrics, _names(layers), metric=metric, split=split)
    if not len(rows):
        return pd.DataFrame(columns=cols)
    epoch = int(rows["epoch"].max()) if epoch is None else int(epoch)
    agg = aggregate_seeds(rows[rows["epoch"] == epoch], by=("layer",))
    index = {name: i for i, name in enumerate(order)}
    agg["layer_index"] = agg["layer"].map(index).fillna(len(order)).astype(int)
    agg["depth"] = agg["layer_index"] / max(len(order) - 1, 1)
    conf = _confidence(metrics, rows[rows["epoch"] == epoch], metric, split)
    for column in ("low", "high", "best_share"):
        agg[column] = [float(conf[column].get((epoch, name), np.nan)) for name in agg["layer"]]
    return agg.sort_values("layer_index")[cols].reset_index(drop=True)


def heldout_accuracy(training: pd.DataFrame | None) -> tuple[float | None, int | None]:
    """Mean over seeds of the seen held-out accuracy at the last epoch that has one, and that epoch."""
    if training is None or len(training) == 0 or "heldout_accuracy" not in training:
        return None, None
    rows = training[np.isfinite(training["heldout_accuracy"].astype(float))]
    if rows.empty:
        return None, None
    epoch = int(rows["epoch"].max())
    return float(rows.loc[rows["epoch"] == epoch, "heldout_accuracy"].mean()), epoch


def run_summary(metrics: pd.DataFrame, training: pd.DataFrame | None = None, *,
                layers: Iterable | None = None, aliases: Mapping[str, str] | None = None) -> dict:
    """What a run measured, in one dict: g, its layer and spread at the last complete epoch,
    whether that layer is the final representation, the seen held-out accuracy and the terminal phase.

    Keys: epoch, best_layer, g, g_std, g_low, g_high, best_share, n_seeds, best_is_final, final_layer,
    heldout_accuracy, heldout_epoch (None where not measured), terminal_phase (:func:`terminal_phase` with
    the seeds as strings, as JSON keeps them: ``{"0": first epoch of 100 % train-sample accuracy or None}``),
    separation_law (:func:`lab.analysis.latest_separation_law`: per split, train / seen / unseen, the law of
    equi-separation at its last evaluation, ratio per layer and r with their seed spread, or why it is absent;
    None when the run measured no NC1).
    """
    out: dict[str, Any] = {"epoch": None, "best_layer": None, "g": None, "g_std": None, "g_low": None,
                           "g_high": None, "best_share": None, "n_seeds": 0, "best_is_final": None,
                           "final_layer": None}
    gen = latest_generalization(metrics, layers=layers, aliases=aliases)
    if gen is not None:
        out.update(epoch=gen["epoch"], best_layer=gen["layer"], g=gen["g"], g_std=gen["g_std"],
                   g_low=gen["g_low"], g_high=gen["g_high"], best_share=gen["best_share"],
                   n_seeds=gen["n_seeds"], best_is_final=gen["is_final"], final_layer=gen["final_layer"])
    acc, acc_epoch = heldout_accuracy(training)
    out.update(heldout_accuracy=acc, heldout_epoch=acc_epoch)
    out["terminal_phase"] = {str(seed): epoch for seed, epoch in terminal_phase(metrics).items()}
    out["separation_law"] = latest_separation_law(metrics, layers=layers, aliases=aliases or {})
    return out


RUN_FACTS = ("epochs", "seeds", "layers", "trainable_fraction", "timings")
"""What a run's summary says besides its numbers: the planned (or, for a monitored run, last evaluated) epoch,
the seeds, the layer names (input -> output), the share of trained parameters and the run's timings row
(:meth:`lab.runs.timings.Timings.run_row`)."""


def summarize_run(metrics: pd.DataFrame, training: pd.DataFrame | None, *, status: str,
                  layers: Sequence[str] | None = None, aliases: Mapping[str, str] | None = None, **facts) -> dict:
    """The one summary of a run: the engine's (``RunFinished.summary``), ``meta.json``'s and
    :meth:`lab.store.RunRecord.summary` are this function of the same rows and facts.

    Parameters
    ----------
    metrics, training : the run's tables (the store's long metrics table and its training rows)
    status : the run's status ("running", "finished", ...)
    layers : the run's layer names, input -> output (None: not known yet)
    aliases : ``{tap: deeper tap}`` of identical taps
    **facts : the :data:`RUN_FACTS` other than ``layers``; a fact that is None (not known yet) is left out

    Returns
    -------
    dict: ``status``, the known facts, then :func:`run_summary`'s keys.
    """
    unknown = sorted(set(facts) - set(RUN_FACTS))
    if unknown:
        raise ValueError(f"summarize_run takes the facts {', '.join(RUN_FACTS)}. Got {', '.join(unknown)} instead.")
    facts["layers"] = list(layers) if layers is not None else None
    known = {key: facts[key] for key in RUN_FACTS if facts.get(key) is not None}
    return {"status": status, **known, **run_summary(metrics, training, layers=layers, aliases=aliases)}


def accuracy_vs_g(table: pd.DataFrame, *, accuracy: str = "heldout_accuracy", g: str = "g",
                  n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    """Does seen accuracy rank runs (or backbones) the way g does? (Gerritz et al. 2024)

    Spearman's rho and Kendall's tau between ``table[accuracy]`` and ``table[g]`` (one row per
    run or backbone), with percentile bootstrap intervals over rows.

    Returns
    -------
    dict: n, spearman, spearman_p, spearman_ci (lo, hi), kendall, kendall_p, kendall_ci.
    Coefficients are NaN with fewer than 3 rows or a constant column: one run cannot say
    whether accuracy predicts g.
    """
    rows = table[[accuracy, g]].astype(float) if len(table) else pd.DataFrame(columns=[accuracy, g])
    return rank_correlation(rows[accuracy], rows[g], n_boot=n_boot, seed=seed, level=level, kendall=True)


# ---------------------------------------------------------------------------------------------- studies
# Many runs at once (Dyballa et al., Gerritz et al., Wang & Yang): runs of one group (e.g. one
# backbone, different seeds) are pooled as seeds of one curve.


def _higher_is_better(metric: str) -> bool:
    info = catalogue.METRICS.get(metric)
    return bool(info is None or info.higher_is_better)


def group_curves(groups: Mapping[str, Sequence[pd.DataFrame]], layers: Mapping[str, Iterable], *,
                 metric: str | None = None, split: str = "unseen", aliases: Mapping[str, Mapping] | None = None,
                 summary="last") -> pd.DataFrame:
    """Per group (e.g. backbone), the metric (None: the g metric) at every layer over its pooled runs' seeds, at the
    summary epoch (default the last complete one; :func:`lab.analysis.summary_epoch`), with relative depth and the
    group's best layer marked (Dyballa et al. fig. 2).

    Returns
    -------
    DataFrame: group, layer, layer_index, depth, mean, std, n, low, high, best_share (the bootstrap
    interval and best-layer share of :func:`layer_curve`; NaN for runs recorded without it), best, seed_low,
    seed_high (the 95 % interval of the mean over seeds, :func:`lab.analysis.with_replicate_interval`)
    """
    metric = catalogue.g_metric() if metric is None else metric
    summary = check_summary(summary)
    out = []
    for group, frames in groups.items():
        pooled = pool_runs(_at_summary(frames, summary, layers.get(group))[0])
        if pooled.empty:
            continue
        curve = layer_curve(pooled, layers=layers.get(group), metric=metric, split=split)
        if curve.empty:
            continue
        gen = latest_generalization(pooled, layers=layers.get(group), aliases=(aliases or {}).get(group),
                                    metric=metric, split=split)
        curve.insert(0, "group", group)
        # g is a maximum: only a higher-is-better metric has a "best" layer in this sense
        curve["best"] = (curve["layer"] == (gen["layer"] if gen else None)) & _higher_is_better(metric)
        out.append(curve)
    cols = ["group", "layer", "layer_index", "depth", "mean", "std", "n", "low", "high", "best_share", "best"]
    table = pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)
    return with_replicate_interval(table)


def group_generalization(groups: Mapping[str, Sequence[pd.DataFrame]],
                         trainings: Mapping[str, Sequence[pd.DataFrame]], layers: Mapping[str, Iterable], *,
                         aliases: Mapping[str, Mapping] | None = None, summary="last") -> pd.DataFrame:
    """Per group: g over its pooled runs (with its layer, seed spread and bootstrap interval) and the
    seen held-out accuracy over its runs (mean, std ddof=1) — the points of Gerritz et al.'s accuracy-vs-g plot —
    at each run's summary epoch (default the last complete one; :func:`lab.analysis.summary_epoch`).

    Returns
    -------
    DataFrame: group, g, g_std, g_low, g_high, best_share (those of :func:`generalization`, NaN for runs
    recorded without the bootstrap), layer, is_final, n_seeds, heldout_accuracy, heldout_std, n_runs, then the
    95 % intervals over seeds (:func:`lab.analysis.with_replicate_interval`): g_seed_low, g_seed_high (over the
    n_seeds pooled seeds) and heldout_seed_low, heldout_seed_high over the heldout_n runs with a held-out accuracy
    """
    columns = ["group", "g", "g_std", "g_low", "g_high", "best_share", "layer", "is_final", "n_seeds",
               "heldout_accuracy", "heldout_std", "n_runs"]
    summary = check_summary(summary)
    rows = []
    for group, frames in groups.items():
        runs = trainings.get(group, [])
        frames, epochs = _at_summary(frames, summary, layers.get(group))
        if epochs is not None:
            runs = [up_to_epoch(t, e) for t, e in zip(runs, epochs) if e is not None]
        gen = latest_generalization(pool_runs(frames), layers=layers.get(group), aliases=(aliases or {}).get(group))
        accs = [heldout_accuracy(t)[0] for t in runs]
        accs = np.array([a for a in accs if a is not None], dtype=float)
        rows.append({"group": group, "g": gen["g"] if gen else np.nan, "g_std": gen["g_std"] if gen else None,
                     **{k: np.nan if gen is None or gen[k] is None else gen[k] for k in ("g_low", "g_high", "best_share")},
                     "layer": gen["layer"] if gen else None, "is_final": gen["is_final"] if gen else None,
                     "n_seeds": gen["n_seeds"] if gen else 0,
                     "heldout_accuracy": float(accs.mean()) if len(accs) else np.nan,
                     "heldout_std": float(accs.std(ddof=1)) if len(accs) > 1 else np.nan, "n_runs": len(frames),
                     "heldout_n": len(accs)})
    table = pd.DataFrame(rows, columns=[*columns, "heldout_n"]).astype({"g_std": float, "heldout_std": float})
    table = with_replicate_interval(table, mean="g", std="g_std", n="n_seeds", prefix="g_seed_")
    table = with_replicate_interval(table, mean="heldout_accuracy", std="heldout_std", n="heldout_n",
                                    prefix="heldout_seed_")
    return table[[*columns, "g_seed_low", "g_seed_high", "heldout_n", "heldout_seed_low", "heldout_seed_high"]]


def transfer_vs_g(groups: Mapping[str, Sequence[pd.DataFrame]], layers: Mapping[str, Iterable], *,
                  aliases: Mapping[str, Mapping] | None = None, scores: Sequence[str] | None = None,
                  n_boot: int = 2000, seed: int = 0, level: float = 0.95, summary="last") -> dict:
    """Do scores measured before fine-tuning rank layers the way the unseen NMI they reach after it does?

    Per group (runs pooled as seeds) and layer: each transferability score on the seen held-out images
    at epoch 0, mean over seeds, and the unseen NMI at the last complete epoch, mean over seeds, with its
    bootstrap interval (the layer's value of g's metric). Taps aliased to a deeper tap are left out (the
    same features would count twice). Spearman's rho per score, per group over its layers and over all
    (group, layer) points (:func:`lab.analysis.ranks.transfer_correlations`).

    Parameters
    ----------
    scores : metrics to compare; default the catalogue's transferability family and ``TRANSFER_BASELINE``
    summary : the epoch of the NMI: ``"last"`` (default), ``"best"`` or an epoch (:func:`lab.analysis.summary_epoch`)

    Returns
    -------
    dict: ``scores`` (those some run measured, in the order asked), ``points`` (DataFrame: group, layer,
    layer_index, depth, epoch (of the NMI), nmi, nmi_low, nmi_high (bootstrap over the unseen images), n,
    nmi_seed_low, nmi_seed_high (the 95 % interval of the mean over n seeds), then one column per measured score)
    and ``correlations`` (score, scope, n, spearman, spearman_p, spearman_low, spearman_high).
    """
    wanted = (list(scores) if scores is not None
              else [*catalogue.metric_names(family="transferability"), catalogue.TRANSFER_BASELINE])
    summary = check_summary(summary)
    parts = []
    for group, frames in groups.items():
        pooled = pool_runs(_at_summary(frames, summary, layers.get(group))[0])
        if pooled.empty:
            continue
        nmi = layer_curve(pooled, layers=layers.get(group))
        if nmi.empty:
            continue
        ended = complete_evaluations(pooled, _names(layers.get(group)))["epoch"]
        part = with_replicate_interval(nmi, prefix="nmi_seed_").rename(
            columns={"mean": "nmi", "low": "nmi_low", "high": "nmi_high"})
        part = part.assign(group=group, epoch=int(ended.max()) if len(ended) else np.nan)
        for score in wanted:
            before = layer_curve(pooled, layers=layers.get(group), metric=score, split="seen", epoch=0)
            part[score] = part["layer"].map(dict(zip(before["layer"], before["mean"]))).astype(float)
        alias = (aliases or {}).get(group) or {}
        parts.append(part[~part["layer"].map(lambda name: alias.get(name) in set(part["layer"]))])
    cols = ["group", "layer", "layer_index", "depth", "epoch", "nmi", "nmi_low", "nmi_high", "n", "nmi_seed_low",
            "nmi_seed_high"]
    points = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*cols, *wanted])
    measured = [s for s in wanted if s in points and points[s].notna().any()]
    points = points[[*cols, *measured]]
    return {"scores": measured, "points": points,
            "correlations": transfer_correlations(points, measured, n_boot=n_boot, seed=seed, level=level)}


def run_scalars(training: pd.DataFrame | None, utilization: pd.DataFrame | None = None,
                contribution: pd.DataFrame | None = None) -> pd.DataFrame:
    """One run's per-layer and whole-run quantities of Wang & Yang, at its last epoch, mean over seeds.

    Returns
    -------
    long DataFrame: layer ("" for whole-run values), quantity, value. Quantities: utilization
    (relative ‖W−W⁰‖/‖W⁰‖), contribution (change of seen held-out accuracy when the layer is reset
    to W⁰), generalization_gap (train accuracy − seen held-out accuracy), resilience (accuracy on
    the corrupted training images against their true labels).
    """
    rows = []
    if utilization is not None and len(utilization):
        last = utilization[utilization["epoch"] == utilization["epoch"].max()]
        for layer, value in last.groupby("layer", sort=False)["relative"].mean().items():
            rows.append({"layer": layer, "quantity": "utilization", "value": float(value)})
    if contribution is not None and len(contribution):
        delta = contribution[contribution["metric"] == "heldout_accuracy_delta"]
        for layer, value in delta.groupby("layer", sort=False)["value"].mean().items():
            rows.append({"layer": layer, "quantity": "contribution", "value": float(value)})
    if training is not None and len(training):
        last = training[training["epoch"] == training["epoch"].max()]
        if {"train_accuracy", "heldout_accuracy"} <= set(last):
            gap = (last["train_accuracy"] - last["heldout_accuracy"]).astype(float).mean()
            rows.append({"layer": "", "quantity": "generalization_gap", "value": float(gap)})
        if "resilience" in last and last["resilience"].notna().any():
            rows.append({"layer": "", "quantity": "resilience", "value": float(last["resilience"].mean())})
    return pd.DataFrame(rows, columns=["layer", "quantity", "value"])


def grid_summary(values: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame:
    """Mean, std (ddof=1) and n over repeats (runs) of ``value`` per study cell of ``axes``, layer
    and quantity — the cells of Wang & Yang's width x label-noise heatmaps — with seed_low, seed_high: the 95 %
    interval of the mean over the repeats (:func:`lab.analysis.with_replicate_interval`)."""
    keys = [*axes, *[c for c in ("quantity", "layer") if c in values]]
    return with_replicate_interval(aggregate_seeds(values, by=keys))
