"""Which epoch a run's summary reads: its last complete evaluation, its best by the unseen g, or a given epoch.

A study's figures summarise each run at one epoch (METRICS.md, "Seeds as replicates", the summary epoch). The
epoch is chosen per run by :func:`lab.analysis.summary_epoch` (beside g, which it reads); the runs of a condition
are then read as they stood at their epochs (:func:`at_summary`), so that every group function of
:mod:`lab.analysis.summary` answers at the summary epoch with its usual "last complete epoch" rule.
"""
from __future__ import annotations

from numbers import Integral
from typing import Sequence

import pandas as pd

__all__ = ["SUMMARIES", "check_summary", "summary_label", "at_summary", "up_to_epoch"]

SUMMARIES = {"last": "last epoch", "best": "best epoch by unseen g"}
"""The named summaries and their words; any other summary is an epoch (an integer >= 0)."""


def check_summary(summary) -> str | int:
    """``summary`` as used: ``"last"``, ``"best"`` or an epoch as a plain int; anything else a ValueError."""
    if isinstance(summary, str) and summary in SUMMARIES:
        return summary
    if isinstance(summary, Integral) and not isinstance(summary, bool) and int(summary) >= 0:
        return int(summary)
    raise ValueError(f"summary must be 'last' (the last complete epoch), 'best' (each run's epoch of highest unseen "
                     f"g) or an epoch (an integer >= 0). Got {summary!r} instead.")


def summary_label(summary) -> str:
    """The words for a summary: "last epoch", "best epoch by unseen g" or "epoch 3"."""
    summary = check_summary(summary)
    return SUMMARIES[summary] if isinstance(summary, str) else f"epoch {summary}"


def up_to_epoch(table: pd.DataFrame | None, epoch: int | None) -> pd.DataFrame | None:
    """A run's table (training, utilization, ...) as it stood at ``epoch``: its rows of epochs up to it (all rows
    when ``epoch`` is None or the table has no epoch column)."""
    if table is None or epoch is None or "epoch" not in table or not len(table):
        return table
    return table[table["epoch"].astype(int) <= int(epoch)]


def at_summary(frames: Sequence[pd.DataFrame], epochs: Sequence[int | None]) -> list[pd.DataFrame]:
    """The metrics tables of one condition's runs as they stand at their summary epochs, ready to pool.

    Each run keeps its rows of epoch 0 (what was measured before training, e.g. the transferability scores) and of
    its summary epoch e. When the runs' summary epochs differ (``"best"``), the rows of e are labelled with the
    condition's latest summary epoch, so that the pooled runs' "last complete epoch" is every run's own summary
    epoch; the ``epoch`` a condition-level table then reports is that latest one.

    Parameters
    ----------
    frames : the runs' long metrics tables
    epochs : their summary epochs (:func:`lab.analysis.summary_epoch`; None for a run with nothing to summarise)

    Returns
    -------
    list of DataFrame, one per run with a summary epoch (runs with none are left out)
    """
    if len(frames) != len(epochs):
        raise ValueError(f"at_summary needs one epoch per run: got {len(frames)} runs and {len(epochs)} epochs.")
    kept = [(frame, int(e)) for frame, e in zip(frames, epochs) if e is not None and frame is not None]
    if not kept:
        return []
    target = max(e for _, e in kept)
    out = []
    for frame, e in kept:
        epoch = frame["epoch"].astype(int)
        parts = [frame[epoch == 0]]
        if target != 0:
            parts.append(frame[epoch == e].assign(epoch=target))
        out.append(pd.concat(parts, ignore_index=True))
    return out
