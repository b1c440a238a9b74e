"""Which epoch a run's summary reads: its last complete evaluation, its best by the unseen g, or a given epoch.

A study's figures summarise each run at one epoch (METRICS.md, "Seeds as replicates: the summary epoch"). The
choice is made here once, per run, on the g metric's complete evaluations (:func:`lab.analysis.generalization`),
and the runs of a condition are then read as they stood at that epoch (:func:`at_summary`), so that every group
function of :mod:`lab.analysis.summary` answers at the summary epoch with its usual "last epoch" rule.
"""
from __future__ import annotations

from numbers import Integral
from typing import Iterable, Sequence

import pandas as pd

__all__ = ["SUMMARIES", "check_summary", "summary_label", "summary_epoch", "at_summary", "up_to_epoch"]

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
    from lab.analysis.summary import generalization

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


def up_to_epoch(table: pd.DataFrame | None, epoch: int | None) -> pd.DataFrame | None:
    """A run's table (training, utilization, ...) as it stood at ``epoch``: its rows of epochs up to it (all rows
    when ``epoch`` is None or the table has no epoch column)."""
    if table is None or epoch is None or "epoch" not in table or not len(table):
        return table
    return table[table["epoch"].astype(int) <= int(epoch)]


def at_summary(frames: Sequence[pd.DataFrame], summary="last", *, layers: Iterable | None = None,
               epochs: Sequence[int | None] | None = None) -> list[pd.DataFrame]:
    """The metrics tables of one condition's runs as they stand at their summary epochs, ready to pool.

    Each run keeps its rows of epoch 0 (what was measured before training, e.g. the transferability scores) and of
    its summary epoch e. When the runs' summary epochs differ (``"best"``), the rows of e are labelled with the
    condition's latest summary epoch, so that the pooled runs' "last complete epoch" is every run's own summary
    epoch; the ``epoch`` a condition-level table then reports is that latest one. With ``"last"`` and no
    ``epochs``, the tables come back unchanged.

    Parameters
    ----------
    frames : the runs' long metrics tables
    summary : as :func:`summary_epoch`
    layers : the runs' layers, input -> output
    epochs : the runs' summary epochs when already known (None for a run with nothing to summarise)

    Returns
    -------
    list of DataFrame, one per run with a summary epoch (runs with none are left out)
    """
    summary = check_summary(summary)
    frames = list(frames)
    if summary == "last" and epochs is None:
        return frames
    if epochs is None:
        epochs = [summary_epoch(f, summary, layers=layers) for f in frames]
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
