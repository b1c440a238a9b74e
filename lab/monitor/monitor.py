"""``lab.Monitor``: layer-by-layer evaluation of a model inside a researcher's own training loop.

::

    with lab.Monitor(model, unseen=(images, labels), layers=None) as mon:
        for epoch in range(epochs):
            train_one_epoch(model)                 # the researcher's code
            mon.evaluate(epoch)                     # every layer: metrics, intervals, layouts, CKA to the first

The monitor builds the run's parts around the model (:mod:`lab.runs.attach`): a
:class:`~lab.runs.context.RunContext` on a new run of the store, a :class:`~lab.runs.context.SeedState` holding the
model as a :class:`lab.backbones.Backbone` (:func:`lab.backbones.wrap.wrap`), and the engine's own
:class:`~lab.runs.evaluation.Evaluator`, so every evaluation measures, records and streams exactly what an
epoch of :func:`lab.run` does: metrics per layer with bootstrap intervals, the per-image record, PCA (or UMAP)
layouts, CKA of each layer to its features at the first evaluation, utilization (distance of each tap's
weights from their values when the block was entered), and the per-phase timings. The run reads like any
run of :class:`lab.RunStore` (:class:`lab.RunStatus` "running", then "finished"; "failed" with the exception's
message when the block raises; "cancelled" on KeyboardInterrupt).

What the run's config says: strategy ``"none"`` (lab trained nothing: the researcher's loop did), dataset
``"monitor:<the unseen images>"``, backbone ``"monitor:<model class>"``, the layers and metrics measured; the
run's meta adds ``"monitor"`` (model class, how it was read, data sizes, whether it was wrapped) and
``"epochs"`` (the last evaluated epoch) and ``"axis"`` (``unit``: what the epoch numbers count). When the unseen
images are images (1 or 3 channels), the run keeps 32 px thumbnails of them (``RunRecord.thumbnails``) for the
app's hover, since nothing can load the loop's own tensors again.
"""
from __future__ import annotations

import contextlib
import difflib
import os
import random
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from lab.monitor._eval_set import EvalSet, eval_set, thumbnail_images
from lab.backbones.wrap import layer_names, model_device, model_kind, unwrap, wrap
from lab.status import RunStatus

__all__ = ["Monitor", "MonitorClosedError", "is_main_process", "UNITS"]

UNITS = ("epoch", "step")
"""What a monitored run's evaluation numbers count: the loop's epochs, or its optimizer steps (the run's meta
``axis``; every view labels its x axis with it)."""


HEARTBEAT_SECONDS = 60.0
"""How often an open monitor refreshes its run's ``updated`` time while the loop trains between evaluations, so
that a reader on another host (the app, :mod:`lab.runs.follow`) does not take a long epoch for a dead process
(:data:`lab.store.STALE_AFTER`)."""


class MonitorClosedError(RuntimeError):
    """``evaluate`` outside the monitor's with-block (before it opened, or after it closed)."""


@dataclass
class _Classes:
    """The class names of the run (what ``lab.data.Split`` gives the engine; seen and unseen may share names
    here, since a monitor's classes are whatever its two sets hold)."""

    seen: list = field(default_factory=list)
    unseen: list = field(default_factory=list)


class _NoTraining:
    """The seed state's fine-tuner for a model that lab does not train: no head, nothing to close."""

    def __init__(self, model: nn.Module):
        from lab.finetune import get_strategy

        self.strategy = get_strategy("none")
        self.block = None
        params = list(model.parameters())
        self.n_total = sum(p.numel() for p in params)
        self.n_trainable = sum(p.numel() for p in params if p.requires_grad)
        self.trainable_fraction = self.n_trainable / self.n_total if self.n_total else 0.0

    def close(self) -> None:
        pass


def _check_unit(unit, who: str) -> str:
    if unit not in UNITS:
        raise ValueError(f"{who}: unit must be 'epoch' or 'step' (optimizer steps), what the numbers given to "
                         f"evaluate count. Got {unit!r} instead.")
    return unit


def _check_counts(data: EvalSet, metrics, role: str) -> None:
    from lab.runs.data import images_needed

    need, why = images_needed(metrics)
    counts = np.bincount(data.labels.numpy(), minlength=len(data.classes))
    low = [k for k, n in enumerate(counts) if n < need]
    if low:
        k = low[0]
        raise ValueError(f"{role} class {data.classes[k]!r} has {int(counts[k])} image(s), but {why} needs at least "
                         f"{need} per class; give more images of it, or leave {why.split(' ')[0]} out of metrics.")


def _layers(bb, names, model) -> list[str]:
    """The requested taps in forward order, or the catalogue; unknown names with the closest modules."""
    if names is None:
        return list(bb.layers)
    try:
        return bb.resolve_layers(names, field="layers")
    except ValueError as exc:
        known = list(bb.layers) + [n for n in bb.module_names() if n not in bb.layers]
        bad = next((n for n in names if n not in known), None)
        if bad is None:
            raise
        close = difflib.get_close_matches(bad, known, n=5, cutoff=0.5)
        hint = f"closest: {', '.join(close)}" if close else f"the catalogue's taps: {', '.join(bb.layers)}"
        raise ValueError(f"layers: {bad!r} is no module of {type(model).__name__}; {hint}. Give a name from "
                         f"dict(model.named_modules()) or leave layers=None for the catalogue's blocks.") from exc


class Monitor:
    """Evaluate every layer of ``model`` whenever a training loop asks, written as a run of the store.

    Parameters
    ----------
    model : torch.nn.Module
        A timm model, a Hugging Face ``transformers`` vision model, or any module (then ``layers`` may name
        any of its modules; by default its top-level blocks and its output). DDP / DataParallel / torch.compile
        wrappers are unwrapped. The model is evaluated where it is (its device when ``evaluate`` runs): the
        images are moved to it batch by batch, as :func:`lab.features.extract` does.
    unseen : lab dataset, (images, labels), torch Dataset or DataLoader
        Images of the classes whose separability is measured (at least 2 classes): a lab dataset; a tuple of a
        tensor (N, C, H, W) and N integer labels; a torch Dataset of (image, label); or a DataLoader of
        (images, labels) batches with ``shuffle=False``. Labels are read once, at construction.
    seen : same forms, optional
        Held-out images of the training classes: the collapse and label-free metrics on split "seen".
    layers : list of str, optional
        Catalogue taps or module names (``"blocks.3"``, ``"blocks.3.attn"``, ``"encoder.layer.1"``); None:
        the catalogue (its blocks and ``pre_logits``, the features the classifier sees, or a plain module's
        output).
    metrics : list of str, optional
        Metric names of :data:`lab.catalogue.METRICS`; None: the runs' defaults.
    store : lab.RunStore, None or False
        Where the run is written; None: ``lab.RunStore()``; False: nothing is written.
    name : str, optional
        The run's name in run lists.
    normalize : bool
        False (default): the images go to the model as they are, as the training loop feeds them (uint8 is
        scaled to [0, 1]). True: they are pixels in [0, 1] and the model's own statistics apply (timm's
        pretrained_cfg, the Hugging Face image processor's, else ``(x - 0.5) / 0.5``).
    projection : {"pca", "umap", "none"}
        The layouts of the unseen images per layer (UMAP fits in the background; the run waits for the last
        evaluation's when the block closes).
    pooling, precision, protocol : as :class:`lab.RunConfig`'s fields
    batch_size : int
        Images per extraction batch.
    on_event : callable, optional
        Called with every :mod:`lab.events` event the evaluation streams (layer metrics, layouts, ...).
    unit : {"epoch", "step"}
        What the numbers given to ``evaluate`` count: the loop's epochs (default) or its optimizer steps. Stored
        as the run's meta ``axis``; the app and the exported notebooks label their axes with it. The trainer
        callbacks (:class:`lab.monitor.HFTrainerCallback`, :class:`lab.monitor.LightningCallback`) set it from their own ``unit``.
    all_ranks : bool
        False (default): in a distributed run (torchrun, ``accelerate launch``, Lightning's DDP) only the main
        process (global rank 0) measures and writes the run; on every other rank the monitor checks its input
        as everywhere, writes nothing, and ``evaluate`` measures nothing and returns an empty table
        (:attr:`active` is False). True: every process writes a run of its own.

    Notes
    -----
    ``evaluate`` leaves the model as it found it: every module's train/eval flag, the grad mode, and the random
    number generators of torch, numpy and ``random`` (a loop trains the same with and without the monitor);
    no hook stays attached, and nothing runs between evaluations.
    """

    def __init__(self, model: nn.Module, unseen, seen=None, layers=None, metrics=None, store=None, name=None, *,
                 normalize: bool = False, projection: str = "pca", pooling: str = "auto", batch_size: int = 256,
                 precision: str = "auto", protocol: str = "default",
                 on_event: Callable[[Any], None] | None = None, all_ranks: bool = False, unit: str = "epoch"):
        from lab import catalogue
        from lab.config import RunConfig
        from lab.monitor import MONITORED

        self.unit = _check_unit(unit, "lab.Monitor")

        self.model = model
        self.module = unwrap(model)
        self.unseen = eval_set(unseen, "unseen", min_classes=2)
        self.seen = eval_set(seen, "seen", min_classes=2) if seen is not None else None
        if self.seen is not None and self.seen.image_shape[0] != self.unseen.image_shape[0]:
            raise ValueError(f"seen images have {self.seen.image_shape[0]} channels, unseen images "
                             f"{self.unseen.image_shape[0]}; give both sets as the model takes them.")
        self.backbone = wrap(self.module, self.unseen.image_shape, normalize=bool(normalize))
        self.layers = _layers(self.backbone, layer_names(self.module, layers), self.module)
        kind = model_kind(self.module)
        self.config = RunConfig(
            name=name, dataset=f"{MONITORED}{self.unseen.description}",
            backbone=f"{MONITORED}{type(self.module).__name__}",
            strategy="none", layers=None if layers is None else tuple(self.layers),
            metrics=tuple(metrics) if metrics is not None else catalogue.metric_names(default=True),
            pooling=pooling, projection=projection, eval_batch_size=int(batch_size), precision=precision,
            protocol=protocol, device=str(self.backbone.device), seeds=(0,), train_sample_per_class=0,
            lidar_views=0)
        _check_counts(self.unseen, self.config.unseen_metrics, "unseen")
        if self.seen is not None:
            _check_counts(self.seen, self.config.seen_metrics(0), "seen")
        self._store = store
        self.active = bool(all_ranks) or is_main_process()
        """Whether this process measures and writes the run (False on a distributed run's other ranks)."""
        self._on_event = on_event
        self._kind = kind
        self._normalize = bool(normalize)
        self._state = "new"                 # new -> open -> closed
        self._lock = threading.Lock()
        self._epoch: int | None = None
        self.ctx = None

    # -- the run ------------------------------------------------------------------------------------------
    @property
    def run_id(self) -> str | None:
        """The run's id in the store (None before the with-block opens it)."""
        return self.ctx.run_id if self.ctx is not None else None

    @property
    def status(self) -> str:
        """``"new"``, ``"open"`` (inside the with-block) or ``"closed"``."""
        return self._state

    def __enter__(self) -> "Monitor":
        if self._state != "new":
            raise MonitorClosedError(f"this Monitor already wrote run {self.run_id} ({self._state}); a Monitor "
                                     f"writes one run: create a new lab.Monitor(...) for another.")
        self._state = "open"
        if not self.active:
            return self                     # another rank: rank 0 writes the run
        from lab.runs.attach import open_context

        self.ctx = open_context(self.config, self._store)
        try:
            self._prepare()
        except BaseException as exc:
            self._close(exc)
            raise
        self._beating = threading.Event()
        threading.Thread(target=self._heartbeat, args=(self._beating,), daemon=True,
                         name=f"layerscope-monitor-heartbeat-{self.run_id}").start()
        return self

    def _heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(HEARTBEAT_SECONDS):
            with contextlib.suppress(Exception):        # a full disk shows at the next evaluation, not here
                self.ctx.recorder.heartbeat()

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._state == "open" and not self.active:
            self._state = "closed"
        elif self._state == "open":
            self._close(exc)
        return False

    def _prepare(self) -> None:
        from lab.runs.attach import initial_weights, start_run
        from lab.runs.context import SeedState
        from lab.runs.data import RunData
        from lab.runs.evaluation import Evaluator
        from lab.runs.projections import Projections

        ctx, bb, seen = self.ctx, self.backbone, self.seen
        ctx.use_device(bb.device)
        classes = _Classes(list(seen.classes) if seen is not None else [], list(self.unseen.classes))
        ctx.use_data(RunData(None, classes, None, seen.data if seen is not None else None, self.unseen.data),
                     unseen_labels=self.unseen.labels, heldout_labels=seen.labels if seen is not None else None)
        ctx.use_layers(self.layers)
        # utilization: each tap's distance from its weights as the block opened
        self._seed_state = SeedState(0, bb, _NoTraining(self.module), *initial_weights(bb, ctx.layers))
        self._projections = Projections(ctx)
        # the loop trains the model: CKA of each layer to its first evaluation
        self._evaluator = Evaluator(ctx, self._projections, measure_cka=True)
        n_images = {"unseen": len(self.unseen), "heldout": len(seen) if seen is not None else 0}
        start_run(
            ctx, self._seed_state, classes=sorted(set(classes.seen) | set(classes.unseen)), n_images=n_images,
            describe=f"monitored {type(self.module).__name__} · {self.unseen.description}",
            monitor={"model": f"{type(self.module).__module__}.{type(self.module).__qualname__}", "read_as": self._kind,
                     "wrapped_in": type(self.model).__name__ if self.model is not self.module else None,
                     "layers": list(ctx.layers), "metrics": list(self.config.metrics),
                     "unseen": self.unseen.description, "unseen_images": len(self.unseen),
                     "seen": self.seen.description if self.seen is not None else None,
                     "seen_images": len(self.seen) if self.seen is not None else 0,
                     "normalize": self._normalize},
            axis=self.unit)
        # the app's hover pictures: it cannot load the loop's own tensors again (none when they are no images)
        thumbs = thumbnail_images(self.unseen)
        if thumbs is not None:
            ctx.recorder.thumbnails(thumbs)

    def _use_unit(self, unit: str) -> None:
        """Count the run's evaluations in ``unit`` from now on (a trainer callback's own), written to its meta
        at once so that a reader in another process labels its axes with it from the start."""
        self.unit = _check_unit(unit, "lab.Monitor")
        if self._state == "open" and self.active and self.ctx is not None:
            self.ctx.recorder.update_meta(axis=self.unit)

    # -- one evaluation -------------------------------------------------------------------------------------
    def evaluate(self, epoch: int | None = None, *, train_loss: float | None = None,
                 train_accuracy: float | None = None):
        """Measure every layer now, as epoch ``epoch`` of the run.

        Parameters
        ----------
        epoch : int, optional
            A number larger than the last evaluation's (epochs, or steps); None: the last one plus 1 (0 first).
        train_loss, train_accuracy : float, optional
            The loop's own numbers for this epoch, written to the run's training table.

        Returns
        -------
        pandas.DataFrame
            This evaluation's metric rows (seed, epoch, layer, split, metric, value), as the store keeps them.
        """
        if self._state != "open":
            when = "before its with-block opened" if self._state == "new" else f"after its with-block closed (run {self.run_id})"
            raise MonitorClosedError(f"Monitor.evaluate was called {when}; call it inside "
                                     f"`with lab.Monitor(model, unseen=...) as mon:`.")
        epoch = self._next_epoch(epoch)
        if not self.active:
            self._epoch = epoch
            import pandas as pd

            return pd.DataFrame(columns=["seed", "epoch", "layer", "split", "metric", "value"])
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("Monitor.evaluate is already running in another thread; a run evaluates one epoch "
                               "at a time (call it from one thread, e.g. rank 0).")
        try:
            self._follow_device()
            with _model_kept(self.model, self.backbone.device):
                self._run_epoch(epoch, train_loss, train_accuracy)
            self._epoch = epoch
            self.ctx.recorder.update_meta(epochs=epoch)
        finally:
            self._lock.release()
        return self.ctx.results.metrics(epoch)

    def _next_epoch(self, epoch) -> int:
        if epoch is None:
            return 0 if self._epoch is None else self._epoch + 1
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative integer (an epoch or a step). Got {epoch!r} instead.")
        if self._epoch is not None and epoch <= self._epoch:
            raise ValueError(f"epoch must grow from one evaluation to the next: the last was {self._epoch}, got "
                             f"{epoch}; pass a larger number (or none: {self._epoch + 1}).")
        return int(epoch)

    def _follow_device(self) -> None:
        """The model may have moved since the monitor was built (``model.to("cuda")``): evaluate it there."""
        device = model_device(self.module)
        if device != self.backbone.device:
            self.backbone.device = device
            self.ctx.use_device(device)

    def _run_epoch(self, epoch: int, train_loss, train_accuracy) -> None:
        from lab.device import device_scope
        from lab.runs.attach import evaluate_epoch

        ctx = self.ctx
        started, before = time.perf_counter(), dict(ctx.recorder.timings)
        ctx.recorder.clock.begin_epoch()
        with device_scope(ctx.device):
            for event in evaluate_epoch(ctx, self._evaluator, self._projections, self._seed_state, epoch,
                                        started=started, before=before, train_loss=train_loss,
                                        train_accuracy=train_accuracy):
                if self._on_event is not None:
                    self._on_event(event)

    # -- the end --------------------------------------------------------------------------------------------
    def _close(self, exc: BaseException | None) -> None:
        """Mark the run finished, failed (with ``exc``'s message) or cancelled; stop its threads. Never raises
        past the user's own exception."""
        from lab.errors import user_message
        from lab.runs.attach import close_run

        ctx = self.ctx
        if getattr(self, "_beating", None) is not None:
            self._beating.set()
        status, message, tb = RunStatus.FINISHED, None, None
        try:
            if exc is None:
                for event in self._projections.finish():        # the last evaluation's UMAP layouts
                    if self._on_event is not None:
                        self._on_event(event)
        except Exception as err:                                    # noqa: BLE001 - recorded as the run's failure
            exc = err
        if isinstance(exc, KeyboardInterrupt):
            status, message = RunStatus.CANCELLED, "interrupted (KeyboardInterrupt)"
        elif exc is not None:
            status = RunStatus.FAILED
            message = user_message(exc, folder=ctx.recorder.path)
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        state = getattr(self, "_seed_state", None)
        close_run(ctx, status, message, epochs=self._epoch or 0,
                  trainable_fraction=state.ft.trainable_fraction if state else None, traceback=tb)
        self._state = "closed"
        with contextlib.suppress(Exception):
            if getattr(self, "_projections", None) is not None:
                self._projections.close()
            ctx.worker.close()

    def record(self):
        """The stored run (:class:`lab.store.RunRecord`), as written so far."""
        from lab.store import RunStore

        if not self.active:
            raise ValueError("this Monitor has no stored run: this process is not the main process of a "
                             "distributed run (rank 0 writes it; all_ranks=True has every rank write one).")
        if self.ctx is None or self.ctx.recorder.root is None:
            raise ValueError("this Monitor has no stored run (not opened yet, or store=False).")
        return RunStore(self.ctx.recorder.root).load(self.run_id)

    def __repr__(self) -> str:
        return (f"Monitor({type(self.module).__name__}, layers={len(self.layers)}, unseen={len(self.unseen)} "
                f"images, run={self.run_id}, {self._state})")


def is_main_process() -> bool:
    """Whether this process is the main one (global rank 0) of a distributed run, or not in one: the process
    group's rank once ``torch.distributed`` is initialized, else the launchers' environment (``RANK`` from
    torchrun and ``accelerate launch``; ``LOCAL_RANK`` and ``NODE_RANK`` from Lightning's DDP launcher)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    env = os.environ
    try:
        if "RANK" in env:
            return int(env["RANK"]) == 0
        return int(env.get("LOCAL_RANK", 0)) == 0 and int(env.get("NODE_RANK", 0)) == 0
    except ValueError:          # a variable of the same name set for something else: not a launcher's rank
        return True


@contextlib.contextmanager
def _model_kept(model: nn.Module, device: torch.device):
    """Restore, after the block, every module's train flag, the grad mode and the random number generators."""
    flags = [(m, m.training) for m in model.modules()]
    grad = torch.is_grad_enabled()
    np_state, py_state = np.random.get_state(), random.getstate()
    devices = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        for module, flag in flags:
            module.training = flag
        torch.set_grad_enabled(grad)
        np.random.set_state(np_state)
        random.setstate(py_state)
