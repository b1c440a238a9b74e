"""The run's numbers as the engine reports them, all from :mod:`lab.analysis`.

:class:`Results` keeps the metric rows (the store's long ``metrics`` table, in memory)
and the training rows of the run, and turns them into the per-seed and across-seed
:class:`~lab.events.Generalization` and :class:`~lab.events.Aggregate` events and the run
summary. It computes nothing itself: the same functions give the store's summary, the
CLI, the app and exported notebooks their numbers.
"""
from __future__ import annotations

import math
from typing import Mapping

from lab import catalogue
from lab.events import Aggregate, EpochFinished, Event, Generalization
from lab.runs.timings import TRAINING_ROW_KEYS

__all__ = ["Results", "write_training_row", "read_training_row"]

_METRIC_COLUMNS = ["seed", "epoch", "layer", "split", "metric", "value"]


def _none_if_nan(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _curve_splits() -> list[str]:
    """The splits of the live metric-vs-layer curves (:func:`lab.catalogue.curve_specs`), in the split table's
    order: the ones whose across-seed means an :class:`~lab.events.Aggregate` carries (the training sample has
    none: the collapse view aggregates its own rows)."""
    return catalogue.split_order(split for _, splits in catalogue.curve_specs() for split in splits)


def _finite(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def write_training_row(seed: int, epoch: int, *, train_loss: float | None, train_accuracy: float | None,
                       heldout_accuracy: float | None, heldout_loss: float | None, resilience: float | None,
                       seconds: float, spent: Mapping[str, float]) -> dict:
    """The row that closes epoch (seed, epoch) in the store's training table (:meth:`Recorder.end_epoch` writes
    it last, so a completed epoch on disk is whole). ``spent``: inclusive seconds per timed key during the epoch
    (:meth:`lab.runs.timings.Timings.since`); :func:`read_training_row` reads the row back."""
    return {"seed": seed, "epoch": epoch, "train_loss": train_loss, "train_accuracy": train_accuracy,
            "heldout_accuracy": heldout_accuracy, "heldout_loss": heldout_loss, "resilience": resilience,
            "seconds": seconds, **{f"{key}_seconds": spent[key] for key in TRAINING_ROW_KEYS}}


def read_training_row(run_id: str, row: Mapping, *, timings: dict | None = None) -> EpochFinished:
    """The :class:`~lab.events.EpochFinished` of a training row (:func:`write_training_row`'s, or one read back
    from the store, where a missing number is NaN). ``timings``: the epoch's stage row when the clock is at hand
    (the engine's); else the row's ``*_seconds`` and the epoch's ``total``."""
    seconds = _finite(row.get("seconds")) or 0.0
    if timings is None:
        kept = {key: _finite(row.get(f"{key}_seconds")) for key in TRAINING_ROW_KEYS}
        timings = {**{k: v for k, v in kept.items() if v is not None}, "total": seconds} \
            if any(v is not None for v in kept.values()) else None
    return EpochFinished(run_id, seed=int(row["seed"]), epoch=int(row["epoch"]),
                         train_loss=_finite(row.get("train_loss")), train_accuracy=_finite(row.get("train_accuracy")),
                         heldout_accuracy=_finite(row.get("heldout_accuracy")), seconds=seconds,
                         heldout_loss=_finite(row.get("heldout_loss")), resilience=_finite(row.get("resilience")),
                         timings=timings)


def _confidence(gen: dict) -> dict:
    return {key: _none_if_nan(gen.get(key)) for key in ("g_low", "g_high", "best_share")}


class Results:
    """Metric and training rows of one run, and the events and summary lab.analysis makes of them.

    Attributes
    ----------
    layers : the run's chosen taps, input -> output (set once the backbone is loaded)
    aliases : ``{tap: deeper tap}`` for taps whose pooled features equal a deeper tap's
    """

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.layers: list[str] = []
        self.aliases: dict[str, str] = {}
        self._metrics: dict[int, list[dict]] = {}        # epoch -> rows of every seed
        self._training: list[dict] = []

    def add_metrics(self, rows: list[dict]) -> None:
        """Rows ``{seed, epoch, layer, split, metric, value}``."""
        for row in rows:
            self._metrics.setdefault(int(row["epoch"]), []).append(row)

    def add_training(self, row: dict) -> None:
        """One row per completed seed epoch (``heldout_accuracy`` among its keys)."""
        self._training.append(row)

    def metrics(self, epoch: int | None = None):
        """The metric rows (of one epoch, or all) as the store's long DataFrame."""
        import pandas as pd

        if epoch is None:
            rows = [row for epoch_rows in self._metrics.values() for row in epoch_rows]
        else:
            rows = self._metrics.get(int(epoch), [])
        return pd.DataFrame(rows, columns=_METRIC_COLUMNS)

    def training(self):
        import pandas as pd

        return pd.DataFrame(self._training)

    # -- events -------------------------------------------------------------------------------------
    def seed_generalization(self, seed: int, epoch: int) -> Generalization | None:
        """g of one seed at one epoch (None when unseen NMI was not measured at every layer)."""
        from lab import analysis

        rows = self.metrics(epoch)
        gen = analysis.latest_generalization(rows[rows["seed"] == seed], layers=self.layers, aliases=self.aliases)
        if gen is None:
            return None
        return Generalization(self.run_id, epoch=epoch, g=gen["g"], layer=gen["layer"], seed=seed,
                              aliases=dict(self.aliases), **_confidence(gen))

    def across_seeds(self, epoch: int) -> list[Event]:
        """Aggregate events (mean, std ddof=1 and seed count per layer and split) and the across-seed
        Generalization of one epoch; empty when fewer than two seeds reported it."""
        from lab import analysis

        rows = self.metrics(epoch)
        if rows["seed"].nunique() < 2:
            return []
        agg = analysis.aggregate_seeds(rows)
        seeds = rows.groupby(["layer", "split"])["seed"].nunique()
        out: list[Event] = []
        for split in _curve_splits():
            for layer in self.layers:
                n_seeds = int(seeds.get((layer, split), 0))
                if n_seeds < 2:
                    continue
                part = agg[(agg["layer"] == layer) & (agg["split"] == split)]
                mean = {str(m): float(v) for m, v in zip(part["metric"], part["mean"])}
                std = {str(m): float(v) for m, v in zip(part["metric"], part["std"])}
                out.append(Aggregate(self.run_id, epoch=epoch, layer=layer, split=split, mean=mean, std=std,
                                     n_seeds=n_seeds))
        gen = analysis.latest_generalization(rows, layers=self.layers, aliases=self.aliases)
        if gen is not None:
            out.append(Generalization(self.run_id, epoch=epoch, g=gen["g"], layer=gen["layer"],
                                      g_std=_none_if_nan(gen["g_std"]), aliases=dict(self.aliases),
                                      **_confidence(gen)))
        return out

    # -- summary --------------------------------------------------------------------------------------
    def summary(self, *, status: str, **facts) -> dict:
        """:func:`lab.analysis.summarize_run` of the rows so far with the run's ``facts`` (epochs, seeds,
        trainable_fraction, timings): the summary the stored run gives too (``RunRecord.summary``)."""
        from lab import analysis

        return analysis.summarize_run(self.metrics(), self.training(), status=status, layers=self.layers or None,
                                      aliases=self.aliases, **facts)
