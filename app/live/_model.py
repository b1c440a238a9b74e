"""Accumulate the engine's events of one run into small display tables.

:class:`RunModel` is plain Python (no Panel): the live view feeds it every
:mod:`lab.events` event and reads back the frames its plots show. It holds no
science: values come from the events, and every number derived from them (the
mean and spread over the seeds that have reported so far, g and its best layer)
comes from :mod:`lab.analysis`, the functions the engine, the store and the CLI use.
"""
from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lab import analysis
from lab import events as ev
from lab.catalogue import g_metric, metric_label
from lab.monitor import is_monitored
from lab.status import RunStatus

__all__ = ["RunModel", "STAGE_LABELS", "verdict_html"]

STAGE_LABELS = {
    "load": "loading data and backbone",
    "train": "training",
    "extract": "extracting features",
    "metrics": "computing metrics",
    "project": "projecting embeddings",
    "contribution": "measuring layer contribution",
}

_METRIC_COLUMNS = ["seed", "epoch", "layer", "split", "metric", "value"]
_TRAINING_COLUMNS = ["seed", "epoch", "train_loss", "train_accuracy", "heldout_accuracy", "heldout_loss", "seconds"]


@dataclass
class _Projection:
    method: str
    coords: np.ndarray          # (n, 2)
    labels: np.ndarray          # (n,)
    indices: np.ndarray         # (n,)
    class_names: list[str]


@dataclass
class RunModel:
    """State of one run, built only from its events.

    Attributes
    ----------
    status : str
        "idle", "queued", "running", "finished", "failed", "cancelled" or "interrupted" (a followed run whose
        process stopped without closing it).
    open_ended : bool
        The run was recorded by :class:`lab.Monitor`: the researcher's loop numbers its evaluations (epochs
        or steps) and has no planned end, so :attr:`n_epochs` is the latest evaluated epoch.
    axis : str
        What the run's epoch numbers count: "epoch", or "step" for a loop that counts optimizer steps
        (:attr:`lab.events.RunStarted.axis`); every plot's x axis says it.
    """

    run_id: str | None = None
    status: str = "idle"
    message: str = ""
    config: dict = field(default_factory=dict)
    layers: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    device: str = ""
    n_images: dict = field(default_factory=dict)
    n_epochs: int = 0
    open_ended: bool = False
    axis: str = "epoch"
    started_at: float | None = None
    ended_at: float | None = None
    seconds: float | None = None            # the run's duration as its end event gives it
    progress: ev.Progress | None = None
    generalization: ev.Generalization | None = None      # latest across-seed (or only-seed) value
    aliases: dict = field(default_factory=dict)           # {tap: deeper tap with identical features}
    summary: dict = field(default_factory=dict)
    epoch_timings: dict = field(default_factory=dict)     # seconds per stage of the last finished epoch
    _metric_rows: list[dict] = field(default_factory=list, repr=False)
    _metric_frame: pd.DataFrame | None = field(default=None, repr=False)
    _aggregates: dict = field(default_factory=dict, repr=False)      # (epoch, layer, split) -> Aggregate
    _training: list[dict] = field(default_factory=list, repr=False)
    _utilization: list[dict] = field(default_factory=list, repr=False)
    _projections: dict = field(default_factory=dict, repr=False)     # (seed, epoch, layer) -> {method: _Projection}
    _epochs_done: set = field(default_factory=set, repr=False)        # {(seed, epoch)}
    _epochs_seen: set = field(default_factory=set, repr=False)        # every epoch with a measurement
    _summary: pd.DataFrame | None = field(default=None, repr=False)
    _epoch_times: list = field(default_factory=list, repr=False)     # arrival of each EpochFinished
    dirty_metrics: set = field(default_factory=set, repr=False)       # metrics changed since last read
    _g_rows: int = field(default=0, repr=False)             # rows of g's metric (and its interval) on unseen images
    _metric_layers: set = field(default_factory=set, repr=False)      # every layer with a metric row
    _verdict: tuple | None = field(default=None, repr=False)          # (what it was computed from, verdict)

    # ------------------------------------------------------------------ ingest
    def apply(self, event: ev.Event) -> set[str]:
        """Fold one event in; return the names of the views it changes.

        View names: "status", "progress", "curves", "heatmap", "projection",
        "training", "utilization", "verdict".
        """
        if self.run_id is None and getattr(event, "run_id", None):
            self.run_id = event.run_id
        kind = event.kind
        if kind == ev.RunStarted.kind:
            return self._on_started(event)
        if kind == ev.Progress.kind:
            self.progress = event
            if self.status in ("idle", "queued"):            # the view's own states before a run reports
                self.status = RunStatus.RUNNING
            return {"progress"}
        if kind in (ev.LayerMetrics.kind, ev.LayerConfidence.kind):
            split = getattr(event, "split", "unseen")     # the bootstrap's rows are of the unseen images
            self._grow(event.epoch)
            g_family = {g_metric(), *(f"{g_metric()}_{suffix}" for suffix in analysis.CONFIDENCE_SUFFIXES)}
            for metric, value in event.values.items():
                self._metric_rows.append({
                    "seed": event.seed, "epoch": event.epoch, "layer": event.layer,
                    "split": split, "metric": metric, "value": _as_float(value),
                })
                self.dirty_metrics.add(metric)
                self._g_rows += split == "unseen" and metric in g_family
            self._metric_layers.add(event.layer)
            self._metric_frame = None
            self._summary = None
            return {"curves", "heatmap", "verdict", "status"}
        if kind == ev.Aggregate.kind:
            self._aggregates[(event.epoch, event.layer, event.split)] = event
            self.dirty_metrics.update(event.mean)
            self._summary = None
            return {"curves", "heatmap"}
        if kind == ev.EpochFinished.kind:
            self._grow(event.epoch)
            self._epochs_done.add((event.seed, event.epoch))
            self._epoch_times.append(time.monotonic())
            self.epoch_timings = dict(getattr(event, "timings", None) or {})
            self._training.append({
                "seed": event.seed, "epoch": event.epoch, "train_loss": _as_float(event.train_loss),
                "train_accuracy": _as_float(event.train_accuracy),
                "heldout_accuracy": _as_float(event.heldout_accuracy),
                "heldout_loss": _as_float(event.heldout_loss), "seconds": _as_float(event.seconds),
            })
            return {"training", "progress", "verdict", "status"}
        if kind == ev.LayerUtilization.kind:
            self._utilization.append({
                "seed": event.seed, "epoch": event.epoch, "layer": event.layer,
                "absolute": _as_float(event.absolute), "relative": _as_float(event.relative),
            })
            return {"utilization"}
        if kind == ev.ProjectionReady.kind:
            key = (event.seed, event.epoch, event.layer)
            self._projections.setdefault(key, {})[event.method] = _Projection(
                event.method, np.asarray(event.coords, dtype=np.float32), np.asarray(event.labels),
                np.asarray(event.indices), list(event.class_names) or list(self.unseen),
            )
            return {"projection", "status"}
        if kind == ev.Generalization.kind:
            self.aliases = dict(getattr(event, "aliases", None) or {}) or self.aliases
            if event.seed is None or self.generalization is None or self.generalization.seed is not None:
                self.generalization = event
            return {"verdict"}
        if kind == ev.RunFinished.kind:
            self.summary = dict(event.summary or {})
            return self._end(event.status, "", event.seconds)
        if kind in (ev.RunFailed.kind, ev.RunCancelled.kind, ev.RunInterrupted.kind):
            return self._end(event.status, event.message, event.seconds)
        return set()

    def _grow(self, epoch) -> None:
        """An open-ended run's epochs are those it has evaluated."""
        if epoch is None:
            return
        self._epochs_seen.add(int(epoch))
        if self.open_ended and int(epoch) > self.n_epochs:
            self.n_epochs = int(epoch)

    def _on_started(self, event: ev.RunStarted) -> set[str]:
        self.config = dict(event.config or {})
        self.layers = [layer["name"] if isinstance(layer, dict) else str(layer) for layer in event.layers]
        self.classes = list(event.classes)
        self.seen = list(event.seen)
        self.unseen = list(event.unseen)
        self.seeds = list(event.seeds)
        self.device = event.device
        self.n_images = dict(event.n_images or {})
        self.open_ended = is_monitored(self.config)
        self.axis = str(getattr(event, "axis", None) or "epoch")
        epochs = 0 if self.open_ended else self.config.get("epochs")       # an open-ended run grows (_grow)
        if epochs is None:
            epochs = 0 if self.config.get("strategy") == "none" else 3
        self.n_epochs = int(epochs)
        self.status = RunStatus.RUNNING
        self.started_at = self.started_at or time.monotonic()
        return {"status", "progress", "curves", "heatmap", "projection", "training", "utilization", "verdict"}

    def _end(self, status: RunStatus, message: str, seconds: float | None = None) -> set[str]:
        self.status = status
        self.message = message or ""
        self.ended_at = time.monotonic()
        # how long the run took, as it reports it: a run read from the store arrives all at once, and the time
        # between its first and last event here is not its duration
        self.seconds = float(seconds) if seconds else None
        return {"status", "progress", "verdict", "heatmap"}        # the heatmap drops the epochs never reached

    @property
    def ended(self) -> bool:
        """The run has ended: finished, failed, cancelled or interrupted (:attr:`lab.RunStatus.ended`)."""
        return RunStatus.has_ended(self.status)

    # ------------------------------------------------------------------ frames
    @property
    def metrics(self) -> pd.DataFrame:
        """Long table of per-seed metric values [seed, epoch, layer, split, metric, value]."""
        if self._metric_frame is None:
            self._metric_frame = pd.DataFrame(self._metric_rows, columns=_METRIC_COLUMNS)
        return self._metric_frame

    def metric_names(self, split: str | None = None) -> list[str]:
        frame = self.metrics
        if split is not None:
            frame = frame[frame["split"] == split]
        return list(dict.fromkeys(frame["metric"]))

    def summary_table(self) -> pd.DataFrame:
        """Mean and std across seeds per (metric, split, epoch, layer) (cached until new metrics arrive).

        Columns: metric, split, epoch, layer, mean, std, n, layer_index. Computed by
        :func:`lab.analysis.aggregate_seeds` (std with ddof=1, NaN below two seeds); where the
        engine has sent the :class:`~lab.events.Aggregate` of a cell, its values are used.
        """
        if self._summary is not None:
            return self._summary
        frame = self.metrics
        cols = ["metric", "split", "epoch", "layer", "mean", "std", "n", "layer_index"]
        if frame.empty:
            self._summary = pd.DataFrame(columns=cols)
            return self._summary
        out = analysis.aggregate_seeds(frame, by=("metric", "split", "epoch", "layer"))
        if self._aggregates:
            agg_rows = [
                {"metric": metric, "split": split, "epoch": epoch, "layer": layer,
                 "agg_mean": _as_float(value), "agg_std": _as_float(agg.std.get(metric, math.nan)),
                 "agg_n": agg.n_seeds}
                for (epoch, layer, split), agg in self._aggregates.items() for metric, value in agg.mean.items()
            ]
            out = out.merge(pd.DataFrame(agg_rows), on=["metric", "split", "epoch", "layer"], how="left")
            has = out["agg_mean"].notna()
            out.loc[has, "mean"] = out.loc[has, "agg_mean"]
            out.loc[has, "std"] = out.loc[has, "agg_std"]
            out.loc[has, "n"] = out.loc[has, "agg_n"]
            out = out.drop(columns=["agg_mean", "agg_std", "agg_n"])
            out.loc[out["n"] < 2, "std"] = math.nan
        order = {name: i for i, name in enumerate(analysis.layer_order(self.layers, frame))}
        out["layer_index"] = out["layer"].map(order).fillna(len(order)).astype(int)
        self._summary = out.sort_values(["metric", "split", "epoch", "layer_index"]).reset_index(drop=True)
        return self._summary

    def summary_frame(self, metric: str, split: str) -> pd.DataFrame:
        """Rows of :meth:`summary_table` for one metric on one split: epoch, layer, mean, std, n, layer_index."""
        table = self.summary_table()
        rows = table[(table["metric"] == metric) & (table["split"] == split)]
        return rows.drop(columns=["metric", "split"]).reset_index(drop=True)

    def heatmap_frame(self, metric: str, split: str) -> pd.DataFrame:
        """Every (epoch, layer) cell of :meth:`heatmap_epochs` with the metric's mean; NaN where not measured."""
        epochs = self.heatmap_epochs()
        grid = pd.MultiIndex.from_product([epochs, self.layers], names=["epoch", "layer"]).to_frame(index=False)
        summary = self.summary_frame(metric, split)
        if summary.empty:
            grid["value"] = np.nan
            return grid
        merged = grid.merge(summary[["epoch", "layer", "mean"]], on=["epoch", "layer"], how="left")
        return merged.rename(columns={"mean": "value"})

    @property
    def training(self) -> pd.DataFrame:
        return pd.DataFrame(self._training, columns=_TRAINING_COLUMNS)

    def utilization_frame(self) -> pd.DataFrame:
        """Relative utilization per layer at the latest epoch reported (mean over seeds)."""
        frame = pd.DataFrame(self._utilization, columns=["seed", "epoch", "layer", "absolute", "relative"])
        if frame.empty:
            return pd.DataFrame(columns=["layer", "relative", "absolute", "epoch"])
        latest = frame["epoch"].max()
        frame = frame[frame["epoch"] == latest]
        out = frame.groupby("layer", sort=False)[["relative", "absolute"]].mean().reset_index()
        out["epoch"] = latest
        order = {name: i for i, name in enumerate(self.layers)}
        return out.sort_values("layer", key=lambda s: s.map(order).fillna(len(order))).reset_index(drop=True)

    def epoch_axis(self) -> list[int]:
        """The run's evaluation epochs: 0..n_epochs, or for an open-ended run those evaluated so far."""
        if not self.open_ended:
            return list(range(self.n_epochs + 1))
        return sorted(self._epochs_seen) or [0]

    def heatmap_epochs(self) -> list[int]:
        """The heatmap's columns. While the run goes, every epoch it plans (:meth:`epoch_axis`): the empty columns
        show how far it has to go, and the grid keeps its size and place as each evaluation fills a column. Once it
        has ended, only the epochs it evaluated: a failed, cancelled or interrupted run never reaches the rest, and
        columns that stay empty for good would read as values missing from the evaluations it made."""
        if self.ended and self._epochs_seen:
            return sorted(self._epochs_seen)
        return self.epoch_axis()

    def curve_epochs(self) -> list[int] | None:
        """What :func:`app.base.plots.metric_curves` takes as ``epochs`` (None: 0..n_epochs)."""
        return self.epoch_axis() if self.open_ended else None

    def projection_keys(self) -> list[tuple[int, int, str]]:
        return list(self._projections)

    def projection(self, layer: str, epoch: int | None = None, seed: int | None = None) -> _Projection | None:
        """The best available projection (UMAP over PCA) at a layer; latest epoch when epoch is None."""
        keys = [k for k in self._projections if k[2] == layer
                and (seed is None or k[0] == seed) and (epoch is None or k[1] == epoch)]
        if not keys:
            return None
        seed_pref = self.seeds[0] if self.seeds else None
        keys.sort(key=lambda k: (k[1], k[0] == seed_pref))
        methods = self._projections[keys[-1]]
        for method in ("umap", "pca"):
            if method in methods:
                return methods[method]
        return next(iter(methods.values()))

    def projection_epochs(self, layer: str | None = None) -> list[int]:
        return sorted({k[1] for k in self._projections if layer is None or k[2] == layer})

    def projection_layers(self) -> list[str]:
        present = {k[2] for k in self._projections}
        return [name for name in self.layers if name in present] + sorted(present - set(self.layers))

    # ------------------------------------------------------------------ derived text
    @property
    def epochs_done(self) -> int:
        return len(self._epochs_done)

    @property
    def epochs_total(self) -> int:
        return max(1, len(self.seeds or [0]) * (self.n_epochs + 1))

    def _train_fraction(self) -> float:
        """Fraction of the current training epoch done (from the per-batch Progress events)."""
        p = self.progress
        if p is None or p.stage != "train" or not p.total:
            return 0.0
        return min(1.0, p.done / p.total)

    def fraction_done(self) -> float:
        """Fraction of (seed, epoch) evaluations finished, refined by the training progress."""
        if self.status == RunStatus.FINISHED:
            return 1.0
        if self.open_ended:
            return 0.0                  # no planned end: the status line counts the evaluations instead
        return min((self.epochs_done + 0.9 * self._train_fraction()) / self.epochs_total, 0.999)

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left, from the pace of training epochs (epoch 0 only evaluates, so it is not used).

        None until a training epoch is at least a fifth done (an earlier guess would mislead).
        """
        if self.started_at is None or self.status != RunStatus.RUNNING or not self._epoch_times or self.open_ended:
            return None
        now = now or time.monotonic()
        remaining = self.epochs_total - self.epochs_done
        if self.n_epochs == 0:       # evaluation only: one evaluation per seed
            return (self._epoch_times[-1] - self.started_at) / self.epochs_done * remaining
        partial = self._train_fraction()
        trained = self.epochs_done - 1 + partial     # epochs since the end of the first evaluation
        if trained < 0.2:
            return None
        per_epoch = (now - self._epoch_times[0]) / trained
        return max(0.0, per_epoch * (remaining - partial))

    def latest_epoch(self) -> int | None:
        frame = self.metrics
        return None if frame.empty else int(frame["epoch"].max())

    def verdict(self) -> dict:
        """What the run has measured so far, from :func:`lab.analysis.latest_generalization`.

        Keys (each only when measured): epoch, g, g_std, g_low, g_high, best_share, layer (the best layer, after the
        identical-features rule), metric, label, n_seeds, seeds_total, final_layer, is_final
        (whether the best layer is the final representation), heldout_accuracy, accuracy_epoch.
        """
        # all it is computed from: g's rows, the layers (their order counts every metric's layers), the training
        # rows, the seeds. The live view asks after every batch of events (each one outside a served page): most
        # change none of them (progress, other metrics), and g over the whole run costs tens of milliseconds
        inputs = (self._g_rows, len(self._metric_layers), len(self._training), tuple(self.layers),
                  tuple(self.aliases.items()), len(self.seeds))
        if self._verdict is not None and self._verdict[0] == inputs:
            return dict(self._verdict[1])
        out: dict = {}
        gen = analysis.latest_generalization(self.metrics, layers=self.layers or None, aliases=self.aliases)
        if gen is not None:
            out.update(epoch=gen["epoch"], g=gen["g"], g_std=gen["g_std"], layer=gen["layer"], metric=g_metric(),
                       g_low=gen["g_low"], g_high=gen["g_high"], best_share=gen["best_share"],
                       label=metric_label(g_metric()), n_seeds=gen["n_seeds"], seeds_total=len(self.seeds) or 1,
                       final_layer=gen["final_layer"], is_final=gen["is_final"])
        accuracy, epoch = analysis.heldout_accuracy(self.training)
        if accuracy is not None:
            out.update(heldout_accuracy=accuracy, accuracy_epoch=epoch)
        self._verdict = (inputs, out)
        return dict(out)


def verdict_html(v: dict, *, running: bool = False, axis: str = "epoch") -> str:
    """The verdict line of :meth:`RunModel.verdict`: only what was measured.

    The best layer and its g with the seed spread, the seen-class held-out accuracy, and
    whether the best layer is the final representation. One run cannot say whether seen
    accuracy predicts g, so the line draws no such conclusion. ``axis``: what the run's epochs count.
    """
    if "g" not in v:
        return ("<span style='color:#666'>Verdict: waiting for the first unseen-class NMI of every layer…</span>"
                if running else "")
    g = f"{v['g']:.3f}"
    if v.get("g_std") is not None and math.isfinite(v["g_std"]):
        g += f" ± {v['g_std']:.3f}"
    n, total = v.get("n_seeds", 1), v.get("seeds_total", 1)
    seeds = f"{n} seed{'s' if n != 1 else ''}" if n >= total else f"{n} of {total} seeds so far"
    text = (f"<b>Best layer for unseen classes: <span class='ls-best-layer'>{html.escape(str(v['layer']))}"
            f"</span></b> (g = {html.escape(v.get('label', 'NMI'))} {g}, {axis} {v['epoch']}, "
            f"{seeds}{_confidence_text(v)})")
    if v.get("heldout_accuracy") is not None and math.isfinite(v["heldout_accuracy"]):
        text += (f" &nbsp;·&nbsp; seen-class held-out accuracy <b>{100 * v['heldout_accuracy']:.1f} %</b>"
                 f" ({axis} {v['accuracy_epoch']})")
    if v.get("final_layer"):
        where = "is" if v.get("is_final") else "is not"
        text += f" &nbsp;·&nbsp; the best layer {where} the final representation ({html.escape(str(v['final_layer']))})"
    return text


def _confidence_text(v: dict) -> str:
    """"; best in 81 % of resamples; 0.78-0.83" from the bootstrap, or "" for runs without one."""
    share, low, high = v.get("best_share"), v.get("g_low"), v.get("g_high")
    if share is None or low is None or high is None or not all(map(math.isfinite, (share, low, high))):
        return ""
    return f"; {analysis.confidence_text(low, high, share)}"


def _as_float(value) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
