"""The console of ``python -m lab run``: a progress bar and one summary line per epoch."""
from __future__ import annotations

import math
import sys

import pandas as pd

from lab import analysis, catalogue
from lab import events as ev
from lab.analysis.intervals import CONFIDENCE_SUFFIXES

__all__ = ["RunConsole"]


class RunConsole:
    """Turns events into a tqdm bar and one summary line per epoch.

    The per-seed best layer of an epoch is :func:`lab.analysis.generalization` over that seed's
    rows (with the bootstrap rows of :class:`~lab.events.LayerConfidence`, so its interval and
    best-layer share too), so it follows the same rules as every other place that names a best layer.
    """

    def __init__(self, progress: bool):
        from tqdm.auto import tqdm

        self._tqdm = tqdm
        self._progress = progress
        self.bar = None                   # made on the first Progress event
        self.rows: dict[int, list[dict]] = {}        # seed -> its unseen rows of self.metric (and its bootstrap)
        self.metric: str | None = None
        self.layers: list[str] | None = None
        self.aliases: dict[str, str] = {}
        self.seeds: list[int] = []
        self.started = False
        self.run_id: str | None = None
        self._stage: tuple | None = None

    def line(self, text: str) -> None:
        self._tqdm.write(text, file=sys.stdout)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def best(self, seed: int, epoch: int) -> dict | None:
        """The best layer of one seed's epoch: its row of :func:`lab.analysis.generalization` over
        that seed's rows, or None (nothing measured, or the epoch did not reach every layer)."""
        rows = self.rows.get(seed)
        if not rows or self.metric is None:
            return None
        table = analysis.generalization(pd.DataFrame(rows), layers=self.layers, aliases=self.aliases,
                                        metric=self.metric)
        table = table[table["epoch"] == epoch]
        return None if table.empty else table.iloc[0].to_dict()

    def handle(self, event) -> None:
        kind = event.kind
        self.run_id = self.run_id or getattr(event, "run_id", None)
        self.aliases = getattr(event, "aliases", None) or self.aliases
        if kind == ev.RunStarted.kind:
            self.started = True
            self.seeds = list(event.seeds)
            self.layers = [layer["name"] if isinstance(layer, dict) else str(layer)
                           for layer in event.layers] or None
            n = event.n_images or {}
            sizes = ", ".join(f"{v} {k}" for k, v in n.items())
            self.line(f"run {event.run_id}: {len(event.layers)} layers, {len(event.seen)} seen / "
                      f"{len(event.unseen)} unseen classes ({sizes}), device {event.device}")
        elif kind == ev.Progress.kind:
            stage = (event.seed, event.epoch, event.stage, event.total)
            if self.bar is None:
                self.bar = self._tqdm(total=1, disable=None if self._progress else True, leave=False,
                                      file=sys.stderr, dynamic_ncols=True, unit="step")
            if stage != self._stage:
                self.bar.reset(total=max(int(event.total), 1))
                where = [f"seed {event.seed}"] if event.seed is not None and len(self.seeds) > 1 else []
                where += [f"epoch {event.epoch}"] if event.epoch is not None else []
                self.bar.set_description(" ".join([*where, event.stage]))
                self._stage = stage
            self.bar.n = int(event.done)
            self.bar.refresh()
        elif kind == ev.LayerMetrics.kind and event.split == "unseen":
            g = catalogue.g_metric()
            self.metric = self.metric or (g if g in event.values else next(iter(event.values), None))
            if self.metric in event.values:
                value = event.values[self.metric]
                self.rows.setdefault(event.seed, []).append(
                    {"seed": event.seed, "epoch": event.epoch, "layer": event.layer, "split": "unseen",
                     "metric": self.metric, "value": math.nan if value is None else float(value)})
        elif kind == ev.LayerConfidence.kind and self.metric is not None:
            for name in (f"{self.metric}_{suffix}" for suffix in CONFIDENCE_SUFFIXES):
                if name in event.values:
                    value = event.values[name]
                    self.rows.setdefault(event.seed, []).append(
                        {"seed": event.seed, "epoch": event.epoch, "layer": event.layer, "split": "unseen",
                         "metric": name, "value": math.nan if value is None else float(value)})
        elif kind == ev.EpochFinished.kind:
            parts = [f"epoch {event.epoch}" if len(self.seeds) <= 1 else f"seed {event.seed} epoch {event.epoch}"]
            best = self.best(event.seed, event.epoch)
            if best:
                sure = analysis.confidence_text(best["g_low"], best["g_high"], best["best_share"])
                parts.append(f"best layer {best['layer']} (unseen {self.metric} {best['g']:.3f}"
                             + (f"; {sure}" if sure else "") + ")")
            if event.heldout_accuracy is not None:
                parts.append(f"seen held-out acc {event.heldout_accuracy:.3f}")
            if event.train_loss is not None:
                parts.append(f"train loss {event.train_loss:.3f}")
            parts.append(f"{event.seconds:.1f} s")
            self.line(" | ".join(parts))
        elif kind == ev.Generalization.kind and event.seed is None and len(self.seeds) > 1:
            std = f" ± {event.g_std:.3f}" if event.g_std is not None else ""
            sure = analysis.confidence_text(event.g_low, event.g_high, event.best_share)
            why = f" ({sure}; 95 % bootstrap over the unseen images, mean over seeds)" if sure else ""
            self.line(f"epoch {event.epoch} over {len(self.seeds)} seeds: g = {event.g:.3f}{std} at layer "
                      f"{event.layer}{why}")
