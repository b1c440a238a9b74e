"""A study's page model: its figures (:func:`lab.study.figures`, every number from :mod:`lab.analysis`) with seeds
as replicates, as plain JSON for the page's script (``study.js``).

Each condition's mean over its seeds carries the 95 % Student-t interval of that mean and n
(:func:`lab.analysis.with_replicate_interval`, docs/METRICS.md "Seeds as replicates"), as the Studies tab shows it:
the g curves per layer, NC1 per layer on the held-out seen images, and g per condition.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from lab import analysis
from lab.export.html.model import _num, _plain

__all__ = ["study_model"]


def _cell(value):
    """One table cell as JSON: a finite float or None for a number, the text of anything else."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return None if value is None else bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return _num(value)
    return str(value)


def _rows(frame: pd.DataFrame, columns) -> list[dict]:
    """``frame``'s rows as dicts of the ``columns`` it has."""
    present = [c for c in columns if c in frame.columns]
    return [{c: _cell(row[c]) for c in present} for row in frame.to_dict("records")]


def _curves(frame: pd.DataFrame) -> dict:
    """``{condition: [{layer, depth, mean, std, n, seed_low, seed_high, low, high}]}`` in depth order."""
    if not len(frame):
        return {}
    frame = analysis.with_replicate_interval(frame)
    out: dict = {}
    for group, part in frame.sort_values(["group", "depth"], kind="stable").groupby("group", sort=False):
        out[str(group)] = _rows(part, ["layer", "depth", "mean", "std", "n", "seed_low", "seed_high", "low", "high"])
    return out


def study_model(study, *, store=None, summary="last") -> dict:
    """Everything a study's page shows: its spec and, per condition, g per layer and NC1 per layer with their seed
    intervals, g and its layer, the law of equi-separation and how often the measures agree on the best layer,
    each run read at its ``summary`` epoch (:func:`lab.study.figures`), which the page names."""
    from lab.study import figures, summary_phrase, summary_text

    figs = figures(study, store=store, summary=summary)
    gen = figs["generalization"]
    if len(gen):
        gen = analysis.with_replicate_interval(gen.assign(n_seeds=gen["n_seeds"].astype(float)), mean="g",
                                               std="g_std", n="n_seeds")
    agreement = figs["agreement"]
    return {
        "name": study.name, "description": getattr(study, "description", None) or "",
        "axes": [str(a) for a in figs["axes"]], "spec": _plain(study.to_dict()) if hasattr(study, "to_dict") else {},
        "level": analysis.REPLICATE_LEVEL, "summary": summary_text(figs),
        "read_at": summary_phrase(figs),   # "the last epoch", "the best epoch by unseen g" or "epoch 3"
        "conditions": [str(g) for g in gen["group"]] if len(gen) else [],
        "layers": _curves(figs["layers"]), "nc1": _curves(figs["nc1"]),
        "generalization": _rows(gen, ["group", "g", "g_std", "n_seeds", "seed_low", "seed_high", "g_low", "g_high",
                                      "best_share", "layer", "heldout_accuracy", "n_runs"]) if len(gen) else [],
        "law": _rows(figs["law"], ["group", "split", "epoch", "ratio", "ratio_std", "r", "r_std", "n_layers",
                                   "n_seeds", "reason"]),
        "agreement": _rows(agreement.reset_index().rename(columns={"index": "measure"}),
                           ["measure", "label", "n_runs", "same_best_layer", "share_same", "median_spearman"])
        if agreement is not None and len(agreement) else [],
    }
