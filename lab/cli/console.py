"""The console of ``python -m lab run``: a progress bar and one summary line per epoch."""
from __future__ import annotations

import math
import sys

import pandas as pd

from lab import analysis
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

    def handle(self, ev) -> None:
        kind = ev.kind
        self.run_id = self.run_id or getattr(ev, "run_id", None)
        self.aliases = getattr(ev, "aliases", None) or self.aliases
        if kind == "run_started":
            self.started = True
            self.seeds = list(ev.seeds)
            self.layers = [layer["name"] if isinstance(layer, dict) else str(layer) for layer in ev.layers] or None
            n = ev.n_images or {}
            sizes = ", ".join(f"{v} {k}" for k, v in n.items())
            self.line(f"run {ev.run_id}: {len(ev.layers)} layers, {len(ev.seen)} seen / {len(ev.unseen)} "
                      f"unseen classes ({sizes}), device {ev.device}")
        elif kind == "progress":
            stage = (ev.seed, ev.epoch, ev.stage, ev.total)
            if self.bar is None:
                self.bar = self._tqdm(total=1, disable=None if self._progress else True, leave=False,
                                      file=sys.stderr, dynamic_ncols=True, unit="step")
            if stage != self._stage:
                self.bar.reset(total=max(int(ev.total), 1))
                where = [f"seed {ev.seed}"] if ev.seed is not None and len(self.seeds) > 1 else []
                where += [f"epoch {ev.epoch}"] if ev.epoch is not None else []
                self.bar.set_description(" ".join([*where, ev.stage]))
                self._stage = stage
            self.bar.n = int(ev.done)
            self.bar.refresh()
        elif kind == "layer_metrics" and ev.split == "unseen":
            self.metric = self.metric or ("nmi" if "nmi" in ev.values else next(iter(ev.values), None))
            if self.metric in ev.values:
                value = ev.values[self.metric]
                self.rows.setdefault(ev.seed, []).append(
                    {"seed": ev.seed, "epoch": ev.epoch, "layer": ev.layer, "split": "unseen",
                     "metric": self.metric, "value": math.nan if value is None else float(value)})
        elif kind == "layer_confidence" and self.metric is not None:
            for name in (f"{self.metric}_{suffix}" for suffix in CONFIDENCE_SUFFIXES):
                if name in ev.values:
                    value = ev.values[name]
                    self.rows.setdefault(ev.seed, []).append(
                        {"seed": ev.seed, "epoch": ev.epoch, "layer": ev.layer, "split": "unseen", "metric": name,
                         "value": math.nan if value is None else float(value)})
        elif kind == "epoch_finished":
            parts = [f"epoch {ev.epoch}" if len(self.seeds) <= 1 else f"seed {ev.seed} epoch {ev.epoch}"]
            best = self.best(ev.seed, ev.epoch)
            if best:
                sure = analysis.confidence_text(best["g_low"], best["g_high"], best["best_share"])
                parts.append(f"best layer {best['layer']} (unseen {self.metric} {best['g']:.3f}"
                             + (f"; {sure}" if sure else "") + ")")
            if ev.heldout_accuracy is not None:
                parts.append(f"seen held-out acc {ev.heldout_accuracy:.3f}")
            if ev.train_loss is not None:
                parts.append(f"train loss {ev.train_loss:.3f}")
            parts.append(f"{ev.seconds:.1f} s")
            self.line(" | ".join(parts))
        elif kind == "generalization" and ev.seed is None and len(self.seeds) > 1:
            std = f" ± {ev.g_std:.3f}" if ev.g_std is not None else ""
            sure = analysis.confidence_text(ev.g_low, ev.g_high, ev.best_share)
            self.line(f"epoch {ev.epoch} over {len(self.seeds)} seeds: g = {ev.g:.3f}{std} at layer {ev.layer}"
                      + (f" ({sure}; 95 % bootstrap over the unseen images, mean over seeds)" if sure else ""))
