"""The papers' figures of a study, drawn from its finished runs; every number from :mod:`lab.analysis`."""
from __future__ import annotations

import pandas as pd

from lab.study._keys import REPEAT_AXES, group_label, short_value
from lab.study.records import record_key

__all__ = ["figures", "summary_phrase", "summary_text"]


def figures(study, *, store=None, summary="last") -> dict:
    """The papers' figures for a study's finished runs, every number from :mod:`lab.analysis`.

    Every condition-level table aggregates the condition's seeds (its runs pooled): the mean, the 95 % Student-t
    interval of that mean over seeds (``seed_low``, ``seed_high``; :func:`lab.analysis.with_replicate_interval`,
    NaN below 2 seeds) and n, next to the bootstrap interval over the unseen images (``low``, ``high``) where the
    runs recorded it.

    Parameters
    ----------
    study : lab.Study
    store : the run store holding its runs (None: the default store)
    summary : the epoch each run is read at (:func:`lab.analysis.summary_epoch`): ``"last"`` (its last complete
        evaluation, the default), ``"best"`` (its epoch of highest unseen g, ties to the earlier) or an epoch (int).
        A run without a complete evaluation at a given epoch is left out and listed in ``summary["left_out"]``.
        Contribution (measured once, after training) and the measures' agreement read each run's end.

    Returns
    -------
    dict
        One entry per figure:

        - ``layers``: g curve per layer against relative depth, one group per condition, seed spread,
          bootstrap interval over the unseen images (low, high; NaN for runs recorded without it), best
          layer marked (Dyballa et al.), mean, std, n and seed_low, seed_high over seeds —
          :func:`lab.analysis.group_curves`
        - ``generalization``: per condition g with its bootstrap interval (g_low, g_high) and best-layer
          share, its layer, seen accuracy (Gerritz et al.); g_seed_low, g_seed_high over its n_seeds seeds and
          heldout_seed_low, heldout_seed_high over its heldout_n runs (:func:`lab.analysis.group_generalization`)
        - ``ranks``: Spearman / Kendall between seen accuracy and g across conditions, bootstrap CIs
        - ``grid``: per condition, layer and quantity the mean/std over repeats of utilization,
          contribution, generalization gap and resilience (Wang & Yang), with seed_low, seed_high — long, pivot
          to heatmaps
        - ``nc1``: NC1 per layer per condition on the seen held-out images (Li, Liu et al. fig. 10), columns as
          ``layers``
        - ``law``: per condition and split (train, seen, unseen), the law of equi-separation at the summary epoch
          over the condition's pooled seeds: ratio per layer and r with their spread, the layers fitted
          (:func:`lab.analysis.group_separation_law`; no row for a condition without NC1), and ratio_seed_low,
          ratio_seed_high, r_seed_low, r_seed_high (95 % intervals over the n_seeds seeds)
        - ``transfer``: per condition and layer, the transferability scores measured before fine-tuning
          against the unseen NMI reached after it, and their Spearman correlations with intervals
          (:func:`lab.analysis.transfer_vs_g`; ``scores`` empty when the runs measured none)
        - ``agreement``: per measure, over the study's runs, how often its best layer is NMI's and its median
          Spearman with NMI across layers (:func:`lab.analysis.study_agreement`; the label-free measures
          included)
        - ``tunnel``: per condition, the tunnel over its seeds (Masarczyk et al. 2023; Harun et al. 2024): the
          unseen best layer's relative depth and the tunnel share after it, each with its mean, std, 95 % interval
          over the seeds and n (:func:`lab.analysis.group_tunnel`; no row for a condition whose runs lack the
          seen NCC accuracy or the numerical rank)
        - ``axes``: the condition axes (non-repeat axes)
        - ``summary``: which summary was read: ``summary`` ("last", "best" or the epoch), ``label`` (its words),
          ``epochs`` (DataFrame run_id, group, epoch: each run's summary epoch) and ``left_out`` (DataFrame
          run_id, group, reason: runs without that epoch, or without a complete evaluation yet)
    """
    from lab import analysis

    summary = analysis.check_summary(summary)
    records = study.records(store=store)
    axes = [a for a in study.axes if a not in REPEAT_AXES]
    groups, trainings, layers, aliases, scalars, epochs, left_out = {}, {}, {}, {}, [], [], []
    by_key = {c.key: c for c in study.cells()}
    for rec in records:
        cell = by_key.get(record_key(rec, study.axes))
        if cell is None:
            continue
        label = group_label(cell.values, axes)
        try:
            epoch = analysis.summary_epoch(rec.metrics, summary, layers=rec.meta.get("layers"), run=rec.run_id)
        except ValueError as exc:
            left_out.append({"run_id": rec.run_id, "group": label, "reason": str(exc)})
            continue
        if epoch is None and summary != "last":
            left_out.append({"run_id": rec.run_id, "group": label, "reason": "no complete evaluation yet"})
            continue
        epochs.append({"run_id": rec.run_id, "group": label, "epoch": epoch})
        # "last" reads the tables as they are (today's figures); another summary reads them up to the run's epoch
        training, utilization = rec.training, rec.utilization
        if summary != "last":
            training, utilization = analysis.up_to_epoch(training, epoch), analysis.up_to_epoch(utilization, epoch)
        groups.setdefault(label, []).append(rec.metrics)
        trainings.setdefault(label, []).append(training)
        layers.setdefault(label, rec.meta.get("layers"))
        aliases.setdefault(label, rec.meta.get("layer_aliases") or {})
        values = analysis.run_scalars(training, utilization, rec.contribution)
        for axis in axes:
            values[axis] = short_value(cell.values[axis])
        values["group"] = label
        scalars.append(values)
    if summary != "last":
        # each run as it stood at its summary epoch: the group functions' "last complete epoch" is then that one
        by_group: dict = {}
        for row in epochs:
            by_group.setdefault(row["group"], []).append(row["epoch"])
        groups = {g: analysis.at_summary(frames, by_group[g]) for g, frames in groups.items()}
    gen = analysis.group_generalization(groups, trainings, layers, aliases=aliases)
    grid = pd.concat(scalars, ignore_index=True) if scalars else pd.DataFrame(columns=["quantity", "layer", "value"])
    return {
        "axes": axes,
        "summary": {"summary": summary, "label": analysis.summary_label(summary),
                    "epochs": pd.DataFrame(epochs, columns=["run_id", "group", "epoch"]),
                    "left_out": pd.DataFrame(left_out, columns=["run_id", "group", "reason"])},
        "layers": analysis.group_curves(groups, layers, aliases=aliases),
        "generalization": gen,
        "ranks": analysis.accuracy_vs_g(gen),
        "grid": analysis.grid_summary(grid, axes) if len(grid) else grid,
        "nc1": analysis.group_curves(groups, layers, metric="nc1", split="seen"),
        "law": _law_with_intervals(analysis.group_separation_law(groups, layers, aliases=aliases)),
        "transfer": analysis.transfer_vs_g(groups, layers, aliases=aliases),
        "agreement": analysis.study_agreement(records),
        "tunnel": analysis.group_tunnel(groups, layers, aliases=aliases),  # per condition over seeds (METRICS.md)
    }


def _law_with_intervals(law: pd.DataFrame) -> pd.DataFrame:
    """The law per condition with the 95 % intervals over its seeds of the ratio and of r."""
    from lab import analysis

    for quantity in ("ratio", "r"):
        law = analysis.with_replicate_interval(law, mean=quantity, std=f"{quantity}_std", n="n_seeds",
                                               prefix=f"{quantity}_seed_")
    return law


def summary_phrase(figs: dict) -> str:
    """ "the last epoch", "the best epoch by unseen g", "epoch 3", or "" for figures without a summary."""
    summary = figs.get("summary") or {}
    if not summary.get("label"):
        return ""
    return summary["label"] if isinstance(summary.get("summary"), int) else f"the {summary['label']}"


def summary_text(figs: dict) -> str:
    """Which epoch each run was read at (the study's summary), and the runs left out for want of it, as plain text
    (the Studies tab, the study notebook, ``lab study show`` and the study's HTML page all say it in these words)."""
    summary = figs.get("summary") or {}
    epochs, left = summary.get("epochs"), summary.get("left_out")
    if not summary:
        return ""
    counts = epochs["epoch"].dropna().astype(int).value_counts().sort_index() if epochs is not None else {}
    read = ", ".join(f"epoch {e} ({c} run{'s' if c != 1 else ''})" for e, c in counts.items())
    text = f"Summary: each run at {summary_phrase(figs)}" + (f"; read at {read}." if read else "; no run read.")
    if left is not None and len(left):
        text += (f" Left out: {len(left)} run{'s' if len(left) != 1 else ''} without a complete evaluation there "
                 f"({', '.join(sorted(set(str(g) for g in left['group'])))}).")
    return text
