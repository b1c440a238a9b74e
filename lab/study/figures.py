"""The papers' figures of a study, drawn from its finished runs; every number from :mod:`lab.analysis`."""
from __future__ import annotations

import pandas as pd

from lab.study._keys import REPEAT_AXES, group_label, short_value
from lab.study.records import record_key

__all__ = ["figures"]


def figures(study, *, store=None) -> dict:
    """The papers' figures for a study's finished runs, every number from :mod:`lab.analysis`.

    Returns
    -------
    dict
        One entry per figure:

        - ``layers``: g curve per layer against relative depth, one group per condition, seed spread,
          bootstrap interval over the unseen images (low, high; NaN for runs recorded without it), best
          layer marked (Dyballa et al.) — :func:`lab.analysis.group_curves`
        - ``generalization``: per condition g with its bootstrap interval (g_low, g_high) and best-layer
          share, its layer, seen accuracy (Gerritz et al.)
        - ``ranks``: Spearman / Kendall between seen accuracy and g across conditions, bootstrap CIs
        - ``grid``: per condition, layer and quantity the mean/std over repeats of utilization,
          contribution, generalization gap and resilience (Wang & Yang) — long, pivot to heatmaps
        - ``nc1``: NC1 per layer per condition on the seen held-out images (Li, Liu et al. fig. 10)
        - ``law``: per condition and split (train, seen, unseen), the law of equi-separation at the last epoch
          over the condition's pooled seeds: ratio per layer and r with their spread, the layers fitted
          (:func:`lab.analysis.group_separation_law`; no row for a condition without NC1)
        - ``transfer``: per condition and layer, the transferability scores measured before fine-tuning
          against the unseen NMI reached after it, and their Spearman correlations with intervals
          (:func:`lab.analysis.transfer_vs_g`; ``scores`` empty when the runs measured none)
        - ``agreement``: per measure, over the study's runs, how often its best layer is NMI's and its median
          Spearman with NMI across layers (:func:`lab.analysis.study_agreement`; the label-free measures
          included)
        - ``axes``: the condition axes (non-repeat axes)
    """
    from lab import analysis

    records = study.records(store=store)
    axes = [a for a in study.axes if a not in REPEAT_AXES]
    groups, trainings, layers, aliases, scalars = {}, {}, {}, {}, []
    by_key = {c.key: c for c in study.cells()}
    for rec in records:
        cell = by_key.get(record_key(rec, study.axes))
        if cell is None:
            continue
        label = group_label(cell.values, axes)
        groups.setdefault(label, []).append(rec.metrics)
        trainings.setdefault(label, []).append(rec.training)
        layers.setdefault(label, rec.meta.get("layers"))
        aliases.setdefault(label, rec.meta.get("layer_aliases") or {})
        values = analysis.run_scalars(rec.training, rec.utilization, rec.contribution)
        for axis in axes:
            values[axis] = short_value(cell.values[axis])
        values["group"] = label
        scalars.append(values)
    gen = analysis.group_generalization(groups, trainings, layers, aliases=aliases)
    grid = pd.concat(scalars, ignore_index=True) if scalars else pd.DataFrame(columns=["quantity", "layer", "value"])
    return {
        "axes": axes,
        "layers": analysis.group_curves(groups, layers, aliases=aliases),
        "generalization": gen,
        "ranks": analysis.accuracy_vs_g(gen),
        "grid": analysis.grid_summary(grid, axes) if len(grid) else grid,
        "nc1": analysis.group_curves(groups, layers, metric="nc1", split="seen"),
        "law": analysis.group_separation_law(groups, layers, aliases=aliases),
        "transfer": analysis.transfer_vs_g(groups, layers, aliases=aliases),
        "agreement": analysis.study_agreement(records),
        "tunnel": analysis.group_tunnel(groups, layers, aliases=aliases),  # per condition over seeds (METRICS.md)
    }
