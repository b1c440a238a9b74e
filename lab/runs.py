"""The streaming run engine: ``lab.run(config)`` is a generator of typed events.

Flow of one run (ARCHITECTURE.md, "The flow of one run")::

    RunConfig -> data.load + Split -> backbones.load -> [fine-tune epochs on the seen classes]
                                                           | after epoch 0 and every epoch
                                                           v
            features.extract(unseen), then features.extract(seen held-out): every chosen layer, once
                                                           |
                 metrics per layer -> LayerMetrics (as soon as each layer is done) -> consumers
                                                           |
                                               RunStore (append, atomic)

Event order (see :mod:`lab.events`)::

    RunStarted
      per seed, for epoch 0 (before training), 1, ..., E:
        Progress("train")*                      (epochs >= 1, one per batch)
        Progress("extract")* LayerMetrics(unseen) ProjectionReady(pca)   (per layer)
        Progress("extract")* LayerMetrics(seen)*                         (per layer)
        LayerUtilization*  ProjectionReady(umap)*  EpochFinished  Generalization(seed)
        Aggregate* Generalization(seed=None)    (several seeds: once the last seed reports the epoch)
      ProjectionReady(umap)*                    (the last epoch's layouts, when ready)
      LayerContribution*                        (config.contribution)
    RunFinished | RunFailed | RunCancelled

UMAP layouts are fitted in a background thread (:class:`lab.projection.Projector`)
and arrive whenever they are ready; fits of an older epoch that have not started
when a newer epoch is evaluated are dropped (PCA layouts of every epoch are always
emitted and stored).

Cancellation: call ``token.cancel()`` on the :class:`CancelToken` passed as
``cancel`` (checked before every training and extraction batch and between layers)
or ``close()`` the generator (takes effect at the next event, i.e. within one
batch, because the engine yields a Progress event per batch). Either way the run
is stored with status "cancelled" and everything finished so far stays readable.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import math
import queue
import secrets
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as _wait
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterator

import numpy as np

from lab.config import RunConfig
from lab.events import (
    Aggregate, EpochFinished, Event, Generalization, LayerContribution, LayerMetrics, LayerUtilization,
    Progress, ProjectionReady, RunCancelled, RunFailed, RunFinished, RunStarted,
)

__all__ = ["run", "CancelToken", "RunData", "prepare_data"]


class CancelToken:
    """Cooperative cancellation for :func:`run`: ``token.cancel()`` from any thread.

    The engine checks ``token.cancelled`` before every training and extraction
    batch and between layers, then ends the run with a ``RunCancelled`` event.
    """

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Ask the run to stop (idempotent, thread-safe)."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self.cancelled})"


class _Stop(Exception):
    """Internal: the token was cancelled."""


# ---------------------------------------------------------------------------------------------- data


@dataclass
class RunData:
    """The datasets of a run, resolved from its config (deterministic; the app and notebooks
    rebuild them with :func:`prepare_data` to show the images behind a projection).

    Attributes
    ----------
    dataset : lab dataset (all classes)
    split : lab.data.Split
    train : seen classes, training partition (labels index ``split.seen``)
    heldout : seen classes, held-out partition, capped at ``seen_per_class``
    unseen : unseen classes, capped at ``unseen_per_class`` (labels index ``split.unseen``);
        ``ProjectionReady.indices`` index this dataset
    """

    dataset: Any
    split: Any
    train: Any
    heldout: Any
    unseen: Any

    @property
    def n_images(self) -> dict[str, int]:
        return {"train": len(self.train), "heldout": len(self.heldout), "unseen": len(self.unseen)}


def prepare_data(config: RunConfig) -> RunData:
    """Load the dataset and build the split, train/held-out partitions and evaluation samples."""
    import lab.data

    cfg = config
    ds = lab.data.load(cfg.dataset, image_size=cfg.img_size)
    Split = lab.data.Split
    if cfg.seen is None and cfg.unseen is None:
        if cfg.n_unseen > len(ds.classes) - 2:
            raise ValueError(
                f"n_unseen={cfg.n_unseen} leaves fewer than 2 seen classes of the {len(ds.classes)} in "
                f"{cfg.dataset!r}; choose n_unseen <= {len(ds.classes) - 2}."
            )
        split = Split.random(ds.classes, n_unseen=cfg.n_unseen, seed=cfg.split_seed)
    else:
        unknown = [c for c in (cfg.seen or ()) + (cfg.unseen or ()) if c not in ds.classes]
        if unknown:
            shown = ", ".join(map(repr, ds.classes[:12])) + (" ..." if len(ds.classes) > 12 else "")
            raise ValueError(f"class {unknown[0]!r} is not in dataset {cfg.dataset!r}; its classes are {shown}.")
        unseen = list(cfg.unseen) if cfg.unseen is not None else [c for c in ds.classes if c not in cfg.seen]
        seen = list(cfg.seen) if cfg.seen is not None else [c for c in ds.classes if c not in unseen]
        split = Split(seen=seen, unseen=unseen)
    split.validate(ds.classes, need_seen=2)
    seen_ds = ds.subset(list(split.seen))
    train = seen_ds.partition("train", test_fraction=cfg.heldout_fraction, seed=cfg.split_seed)
    heldout = seen_ds.partition("test", test_fraction=cfg.heldout_fraction, seed=cfg.split_seed)
    if cfg.seen_per_class is not None:
        heldout = heldout.sample_per_class(cfg.seen_per_class, seed=cfg.split_seed)
    unseen = ds.subset(list(split.unseen))
    if cfg.unseen_per_class is not None:
        unseen = unseen.sample_per_class(cfg.unseen_per_class, seed=cfg.split_seed)
    for name, part in (("training", train), ("held-out", heldout), ("unseen", unseen)):
        if len(part) == 0:
            raise ValueError(f"the {name} set of {cfg.dataset!r} is empty; check the split and heldout_fraction.")
    return RunData(ds, split, train, heldout, unseen)


# ---------------------------------------------------------------------------------------------- store


class _NullWriter:
    """Stands in for a RunWriter when ``store=False``: nothing is written."""

    def __init__(self, config: RunConfig):
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.run_id = f"{stamp}-unsaved-{secrets.token_hex(2)}"
        self.path = None

    def __getattr__(self, name):
        if name.startswith(("append_", "save_", "update_meta", "heartbeat", "finish")):
            return lambda *a, **k: None
        raise AttributeError(name)


# ---------------------------------------------------------------------------------------------- engine


def run(config: RunConfig | dict, store=None, cancel: CancelToken | None = None) -> Iterator[Event]:
    """Run ``config`` and stream its events (a generator; see the module docstring for the order).

    Parameters
    ----------
    config : RunConfig or dict
        A dict is validated with :meth:`RunConfig.from_dict` *now* (ValueError on bad input).
    store : RunStore, None or False
        Where to persist the run; None opens ``RunStore()`` (``$LAB_RUNS_DIR`` or ``./runs``);
        False persists nothing (tests, quick looks).
    cancel : CancelToken, optional
        Cooperative cancellation from another thread (or the consumer itself).

    Returns
    -------
    generator of :mod:`lab.events` events
        Always ends with exactly one of RunFinished, RunFailed, RunCancelled (unless closed
        by the consumer, which also stores the run as "cancelled"). Problems with the
        data, the backbone or the training (bad class names, an unknown model, a
        diverging loss ...) end the run with ``RunFailed`` instead of raising.
    """
    if isinstance(config, dict):
        config = RunConfig.from_dict(config)
    if not isinstance(config, RunConfig):
        raise ValueError(f"config must be a lab.RunConfig or a dict. Got {type(config).__name__} instead.")
    if cancel is not None and not hasattr(cancel, "cancelled"):
        raise ValueError(f"cancel must be a lab.runs.CancelToken. Got {type(cancel).__name__} instead.")
    return _Engine(config, store, cancel).events()


@dataclass
class _SeedState:
    """Per-seed objects of the engine."""

    seed: int
    bb: Any
    ft: Any
    weighted: list               # chosen taps whose weights a module holds (utilization, contribution)
    initial_modules: dict        # tap -> module.state_dict() at epoch 0 (CPU copies) where it can change
    train_labels: np.ndarray | None = None      # labels used for training (noisy when label_noise > 0)
    corrupted: np.ndarray | None = None         # indices (into data.train) of corrupted labels


class _Engine:
    """One run. ``events()`` is the generator handed out by :func:`run`."""

    def __init__(self, config: RunConfig, store, cancel: CancelToken | None):
        self.cfg = config
        self.store_arg = store
        self.cancel = cancel or CancelToken()
        self.writer = None
        self.run_id = ""
        self.t0 = time.perf_counter()
        self.rows: list[dict] = []                # metric rows of the epoch being evaluated
        self.util_rows: list[dict] = []
        # (epoch) -> seed -> {"values": {(layer, split): {metric: v}}}
        self.history: dict[int, dict[int, dict]] = {}
        self.timings = {"load": 0.0, "train": 0.0, "extract": 0.0, "metrics": 0.0, "projection": 0.0,
                        "store": 0.0, "evaluate": 0.0}
        self.projector = None
        self.prev_pca: dict[tuple[int, str], np.ndarray] = {}
        self.summary: dict = {}
        self.first_eval = True
        self.heldout: dict[int, dict[int, float | None]] = {}
        self.trainable_fraction: float | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._io: ThreadPoolExecutor | None = None
        self._io_futures: list = []

    # -- small helpers ---------------------------------------------------------------------------
    def _check(self) -> None:
        if self.cancel.cancelled:
            raise _Stop()

    def _should_stop(self) -> bool:
        return self.cancel.cancelled

    def _open_writer(self):
        if self.store_arg is False:
            return _NullWriter(self.cfg)
        from lab.store import RunStore

        store = self.store_arg if self.store_arg is not None else RunStore()
        if not hasattr(store, "create"):
            raise ValueError(f"store must be a lab.RunStore, None or False. Got {type(store).__name__} instead.")
        return store.create(self.cfg, name=self.cfg.name)

    def _timed(self, key: str, t: float) -> None:
        self.timings[key] += time.perf_counter() - t

    def _save(self, method: str, *args, **kwargs) -> None:
        """Write an array file (embeddings, a layout) on the store's I/O thread, off the critical path.

        Every write of an epoch is waited for (:meth:`_sync_io`) before the epoch's training row
        closes it, so a completed epoch on disk is always whole.
        """
        if isinstance(self.writer, _NullWriter):
            return
        if self._io is None:
            self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-store")
        self._io_futures.append(self._io.submit(getattr(self.writer, method), *args, **kwargs))

    def _sync_io(self) -> None:
        futures, self._io_futures = self._io_futures, []
        for fut in futures:
            fut.result()                       # re-raises a failed write

    def _threaded(self, fn: Callable, *, stage: str, seed: int | None, epoch: int | None
                  ) -> Generator[Event, None, Any]:
        """Run ``fn(progress, should_stop)`` in a worker thread, yielding its Progress as events.

        Lets the consumer see per-batch progress and ``close()`` the generator during a long
        extraction: on GeneratorExit the worker is stopped (within one batch) and joined.
        """
        q: queue.SimpleQueue = queue.SimpleQueue()
        stop = threading.Event()
        box: dict = {}

        def should_stop() -> bool:
            return stop.is_set() or self.cancel.cancelled

        def progress(done, total) -> None:
            q.put((done, total))

        def target() -> None:
            try:
                box["value"] = fn(progress, should_stop)
            except BaseException as exc:       # noqa: BLE001 - re-raised in the generator's thread
                box["error"] = exc
            finally:
                q.put(None)

        if self._pool is None:
            # One persistent worker: a new thread per extraction would get fresh malloc arenas
            # and grow the process's peak memory.
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-extract")
        worker = self._pool.submit(target)
        try:
            while True:
                item = q.get()
                if item is None:
                    break
                # Skip stale progress when the consumer is slower than the batches.
                while True:
                    try:
                        nxt = q.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        q.put(None)
                        break
                    item = nxt
                done, total = item
                yield Progress(self.run_id, stage, int(done), int(total if total is not None else done),
                               seed=seed, epoch=epoch)
        except BaseException:
            stop.set()
            _wait([worker])
            raise
        _wait([worker])
        if "error" in box:
            raise box["error"]
        return box["value"]

    # -- the generator ---------------------------------------------------------------------------
    def events(self) -> Generator[Event, None, None]:
        status, message = "finished", None
        try:
            self.writer = self._open_writer()
            self.run_id = self.writer.run_id
            yield from self._run()
        except GeneratorExit:
            self._close("cancelled", "closed by the consumer before the run finished")
            raise
        except KeyboardInterrupt:
            self._close("cancelled", "interrupted (KeyboardInterrupt)")
            raise
        except BaseException as exc:   # noqa: BLE001 - every failure becomes one event
            if self._is_cancel(exc):
                status, message = "cancelled", "cancelled by the user"
            else:
                status, message = "failed", _failure_message(exc)
            if status == "cancelled":
                self._close("cancelled", message)
                yield RunCancelled(self.run_id, seconds=time.perf_counter() - self.t0, message=message)
            else:
                self._close("failed", message, tb=traceback.format_exc())
                yield RunFailed(self.run_id, message=message, seconds=time.perf_counter() - self.t0)
            return
        finally:
            if self.projector is not None:
                self.projector.close()
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            if self._io is not None:
                self._io.shutdown(wait=True)
        self._close("finished", None)
        yield RunFinished(self.run_id, seconds=time.perf_counter() - self.t0, summary=self.summary)

    def _is_cancel(self, exc: BaseException) -> bool:
        if isinstance(exc, _Stop):
            return True
        from lab.finetune import Cancelled as FtCancelled
        try:
            from lab.features import Cancelled as FeatCancelled
        except ImportError:            # pragma: no cover
            FeatCancelled = FtCancelled
        return isinstance(exc, (FtCancelled, FeatCancelled)) and self.cancel.cancelled

    def _close(self, status: str, message: str | None, tb: str | None = None) -> None:
        """Flush what the current epoch has so far and mark the run; never raises."""
        if self.writer is None:
            return
        try:
            try:
                self._sync_io()
            except Exception:          # noqa: BLE001 - a failed array write must not hide the outcome
                pass
            self._flush_rows()
            if tb:
                self.writer.update_meta(traceback=tb)
            self.writer.finish(status, message=message,
                               summary={**self.summary, "timings": dict(self.timings)} or None)
        except Exception:              # noqa: BLE001 - the store must not mask the run's own outcome
            pass

    def _flush_rows(self) -> None:
        if self.rows:
            rows, self.rows = self.rows, []
            self.writer.append_metrics(rows)
        if self.util_rows:
            rows, self.util_rows = self.util_rows, []
            self.writer.append_utilization(rows)

    # -- the run ---------------------------------------------------------------------------------
    def _run(self) -> Generator[Event, None, None]:
        import torch

        import lab.store
        from lab.device import resolve_device

        cfg = self.cfg
        # checkpoint="run:ID[/seed]" loads a stored run's fine-tuned weights: the engine holds the store.
        self.checkpoint = cfg.checkpoint
        if cfg.checkpoint and cfg.checkpoint.startswith("run:"):
            self.checkpoint = str(lab.store.resolve_checkpoint(cfg.checkpoint))
        t = time.perf_counter()
        self.device = resolve_device(cfg.device)
        data = prepare_data(cfg)
        # Keep what the run needs, not the whole dataset's images (nor the training images when
        # nothing trains): the engine's peak memory is a performance goal.
        ds = data.dataset
        self.classes, self.in_chans, self.image_size = list(ds.classes), int(ds.in_chans), int(ds.image_size)
        self.n_images = data.n_images
        self.data = RunData(None, data.split, data.train if cfg.strategy != "none" else None,
                            data.heldout, data.unseen)
        del data, ds
        self._check()
        self.unseen_labels = torch.as_tensor(np.asarray(self.data.unseen.targets), dtype=torch.long)
        self.heldout_labels = torch.as_tensor(np.asarray(self.data.heldout.targets), dtype=torch.long)
        self.unseen_indices = np.arange(len(self.data.unseen), dtype=np.int64)

        first = True
        n_seeds = len(cfg.seeds)
        for si, seed in enumerate(cfg.seeds):
            state = self._setup_seed(seed)
            self._timed("load", t)
            if first:
                yield self._run_started(state)
                first = False
            for epoch in range(cfg.n_epochs + 1):
                yield from self._epoch(state, epoch, last_seed=(si == n_seeds - 1))
            yield from self._finish_projections(seed)
            if cfg.save_weights and state.ft.strategy.trains:
                t = time.perf_counter()
                self.writer.save_weights(seed, state.bb.model.state_dict())
                self._timed("store", t)
            if cfg.contribution:
                yield from self._contribution(state)
            state.ft.close()
            t = time.perf_counter()
        self.summary = self._summary()

    def _setup_seed(self, seed: int) -> _SeedState:
        import torch

        import lab.backbones
        from lab import finetune

        cfg = self.cfg
        torch.manual_seed(seed)
        np.random.seed(seed % (2**32))
        bb = lab.backbones.load(
            cfg.backbone, pretrained=cfg.pretrained, checkpoint=self.checkpoint, num_classes=0,
            in_chans=self.in_chans, img_size=cfg.img_size or self.image_size, device=self.device,
        )
        if cfg.layers is None:
            self.layers = list(bb.layers)
        else:
            valid = set(bb.layers)
            bad = [name for name in cfg.layers if name not in valid]
            if bad:
                raise ValueError(f"layers: {bad[0]!r} is not a tap of {cfg.backbone}; valid: {', '.join(bb.layers)}.")
            self.layers = [name for name in bb.layers if name in cfg.layers]   # input -> output order
        self.proj_layers = [] if cfg.projection == "none" else (
            list(self.layers) if cfg.projection_layers is None
            else [name for name in self.layers if name in cfg.projection_layers])
        if cfg.projection_layers is not None:
            bad = [name for name in cfg.projection_layers if name not in bb.layers]
            if bad:
                raise ValueError(f"projection_layers: {bad[0]!r} is not a tap of {cfg.backbone}; "
                                 f"valid: {', '.join(bb.layers)}.")
        ft = finetune.prepare(
            bb, len(self.data.split.seen), cfg.strategy, block=cfg.block, lr=cfg.learning_rate,
            weight_decay=cfg.decay, optimizer=cfg.optimizer, seed=seed,
        )
        # Epoch-0 copies only of what can move: modules with trained weights (utilization), or every
        # tap's module when contribution re-initialises them (their batch-norm statistics move too).
        weighted, initial_modules = [], {}
        for name in self.layers:
            module = bb.tap_module(name)
            if module is None:
                continue
            weighted.append(name)
            if cfg.contribution or any(p.requires_grad for p in module.parameters()):
                initial_modules[name] = {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}
        state = _SeedState(seed, bb, ft, weighted, initial_modules)
        if cfg.label_noise > 0:
            targets = np.asarray(self.data.train.targets, dtype=np.int64)
            state.train_labels, state.corrupted = finetune.corrupt_labels(
                targets, cfg.label_noise, len(self.data.split.seen), seed=seed)
        return state

    def _run_started(self, state: _SeedState) -> RunStarted:
        cfg, data, bb = self.cfg, self.data, state.bb
        layers = [{"name": name, "kind": bb.tap(name).kind, "dim": int(bb.tap(name).dim)} for name in self.layers]
        split = {"seen": list(data.split.seen), "unseen": list(data.split.unseen)}
        meta = dict(
            layers=layers, classes=self.classes, split=split, device=str(self.device),
            n_images=self.n_images, seeds=list(cfg.seeds), trainable_fraction=state.ft.trainable_fraction,
            n_trainable=state.ft.n_trainable, n_parameters=state.ft.n_total, epochs=cfg.n_epochs,
            block=state.ft.block, projection_layers=self.proj_layers, describe=cfg.describe(),
        )
        self.writer.update_meta(**meta)
        return RunStarted(
            self.run_id, config=cfg.to_dict(), layers=layers, classes=self.classes,
            seen=list(data.split.seen), unseen=list(data.split.unseen), device=str(self.device),
            n_images=self.n_images, seeds=list(cfg.seeds), trainable_fraction=state.ft.trainable_fraction,
        )

    # -- one epoch ---------------------------------------------------------------------------------
    def _epoch(self, state: _SeedState, epoch: int, *, last_seed: bool) -> Generator[Event, None, None]:
        t_epoch = time.perf_counter()
        before = dict(self.timings)
        seed = state.seed
        train_loss = train_acc = None
        if epoch > 0:
            train_loss, train_acc = yield from self._train(state, epoch)
        t_eval = time.perf_counter()
        ev = yield from self._evaluate(state, epoch)
        self._timed("evaluate", t_eval)
        seconds = time.perf_counter() - t_epoch
        t = time.perf_counter()
        self._sync_io()
        self._flush_rows()
        spent = {f"{key}_seconds": self.timings[key] - before[key]
                 for key in ("train", "evaluate", "extract", "metrics", "projection")}
        self.writer.append_training({
            "seed": seed, "epoch": epoch, "train_loss": train_loss, "train_accuracy": train_acc,
            "heldout_accuracy": ev["heldout_accuracy"], "heldout_loss": ev["heldout_loss"],
            "resilience": ev["resilience"], "seconds": seconds, **spent,
        })
        self.writer.heartbeat()
        self._timed("store", t)
        for res in self._poll_projections():
            yield res
        yield EpochFinished(self.run_id, seed=seed, epoch=epoch, train_loss=train_loss, train_accuracy=train_acc,
                            heldout_accuracy=ev["heldout_accuracy"], seconds=seconds,
                            heldout_loss=ev["heldout_loss"], resilience=ev["resilience"])
        values = ev["values"]
        self.history.setdefault(epoch, {})[seed] = values
        self.heldout.setdefault(epoch, {})[seed] = ev["heldout_accuracy"]
        self.trainable_fraction = state.ft.trainable_fraction
        g = _generalization({k: v for k, v in values.items()}, self.layers)
        if g is not None:
            yield Generalization(self.run_id, epoch=epoch, g=g[1], layer=g[0], seed=seed)
        if last_seed and len(self.cfg.seeds) > 1:
            yield from self._aggregate(epoch)

    def _train(self, state: _SeedState, epoch: int) -> Generator[Event, None, tuple[float, float]]:
        """One epoch on the seen training images; a Progress event (and a cancel check) per batch."""
        ft = state.ft
        t = time.perf_counter()
        loader = self._train_loader(state, epoch)
        total = len(loader)
        ft.model.train()
        loss_sum, correct, n = 0.0, 0, 0
        try:
            for i, (x, y) in enumerate(loader):
                self._check()
                try:
                    loss, right = ft.train_step(x, y)
                except ValueError as exc:
                    raise ValueError(f"epoch {epoch}, batch {i}: {exc}") from exc
                loss_sum += loss * len(y)
                correct += right
                n += len(y)
                yield Progress(self.run_id, "train", i + 1, total, seed=state.seed, epoch=epoch)
                for res in self._poll_projections():
                    yield res
        finally:
            ft.model.eval()
            self._timed("train", t)
        if n == 0:
            raise ValueError("the training data yielded no batches; check the seen classes and heldout_fraction.")
        return loss_sum / n, correct / n

    def _train_loader(self, state: _SeedState, epoch: int):
        """Augmented (if configured), shuffled batches of the seen training images, seeded per (seed, epoch)."""
        cfg = self.cfg
        seed = state.seed * 100_003 + epoch
        train = self.data.train
        if state.train_labels is None:
            return train.train_loader(cfg.batch_size, augment=cfg.augment, seed=seed, shuffle=True)
        return _relabelled_loader(train, state.train_labels, cfg.batch_size, augment=cfg.augment, seed=seed)

    # -- evaluation ---------------------------------------------------------------------------------
    def _extract(self, state: _SeedState, data, layers: list[str], *, stage: str, epoch: int | None,
                 pooling: str | None = None):
        import lab.features

        bb = state.bb
        pooling = pooling or self.cfg.pooling
        batch_size = self.cfg.eval_batch_size

        def fn(progress, should_stop):
            return lab.features.extract(bb, data, layers=layers, pooling=pooling, batch_size=batch_size,
                                        progress=progress, should_stop=should_stop)

        t = time.perf_counter()
        feats = yield from self._threaded(fn, stage=stage, seed=state.seed, epoch=epoch)
        self._timed("extract", t)
        return feats

    def _evaluate(self, state: _SeedState, epoch: int) -> Generator[Event, None, dict]:
        import torch

        import lab.metrics
        from lab.projection import pca_layout

        cfg, seed, ft = self.cfg, state.seed, state.ft
        values: dict[tuple[str, str], dict[str, float]] = {}
        unseen_metrics = tuple(cfg.metrics)
        seen_metrics = cfg.collapse_metrics

        # 1. unseen classes: every chosen layer in one extraction; metrics per layer as soon as ready.
        #    The run's very first evaluation first extracts the first layer alone (a forward that stops
        #    after it costs a few percent of the network) so that a consumer sees a result within seconds.
        if self.first_eval and len(self.layers) > 1:
            stages = [self.layers[:1], self.layers[1:]]
        else:
            stages = [list(self.layers)]
        self.first_eval = False
        y = self.unseen_labels.to(state.bb.device)
        labels = self.unseen_labels.numpy()
        class_names = list(self.data.split.unseen)
        previous_proj = None
        for stage_layers in stages:
            feats = yield from self._extract(state, self.data.unseen, stage_layers, stage="extract", epoch=epoch)
            for layer in stage_layers:
                self._check()
                X = feats[layer]                                                         # (N, d)
                t = time.perf_counter()
                vals = _compute(lab.metrics, X, y, unseen_metrics, cfg.protocol, layer)
                self._timed("metrics", t)
                values[(layer, "unseen")] = vals
                self._add_rows(seed, epoch, layer, "unseen", vals)
                yield LayerMetrics(self.run_id, seed=seed, epoch=epoch, layer=layer, split="unseen", values=vals)
                if layer in self.proj_layers:
                    t = time.perf_counter()
                    self._save("save_embeddings", seed, epoch, layer, X.detach().to("cpu", torch.float16),
                               labels, self.unseen_indices)
                    with _few_threads(X):
                        pca = pca_layout(X, reference=self.prev_pca.get((seed, layer)))
                    self.prev_pca[(seed, layer)] = pca
                    self._save("save_projection", seed, epoch, layer, "pca", pca, labels, self.unseen_indices,
                               class_names=class_names)
                    if cfg.projection == "umap" and X.shape[0] >= 4:
                        self._submit_umap(seed, epoch, layer, X, previous_proj, pca)
                    self._timed("projection", t)
                    yield ProjectionReady(self.run_id, seed=seed, epoch=epoch, layer=layer, method="pca",
                                          coords=pca, labels=labels, indices=self.unseen_indices,
                                          class_names=class_names)
                    previous_proj = layer
                for res in self._poll_projections():
                    yield res
            del feats

        # 2. seen held-out sample: collapse metrics per layer, and held-out loss/accuracy from the head
        extra = []
        if ft.strategy.trains:
            extra.append("pre_logits")
            if ft.strategy.skip and ft.block not in extra:
                extra.append(ft.block)
        seen_layers = list(self.layers) if seen_metrics else []
        layers = seen_layers + [name for name in extra if name not in seen_layers]
        heldout_loss = heldout_acc = None
        if layers:
            pooling_ok = cfg.pooling == "auto"
            feats = yield from self._extract(state, self.data.heldout, layers, stage="extract", epoch=epoch)
            y = self.heldout_labels.to(state.bb.device)
            for layer in seen_layers:
                self._check()
                t = time.perf_counter()
                vals = _compute(lab.metrics, feats[layer], y, seen_metrics, cfg.protocol, layer)
                self._timed("metrics", t)
                values[(layer, "seen")] = vals
                self._add_rows(seed, epoch, layer, "seen", vals)
                yield LayerMetrics(self.run_id, seed=seed, epoch=epoch, layer=layer, split="seen", values=vals)
            if ft.strategy.trains:
                if ft.strategy.skip and not pooling_ok:
                    # The head sees the block's spatial mean / class token: re-extract with that pooling.
                    feats = yield from self._extract(state, self.data.heldout, extra, stage="extract",
                                                     epoch=epoch, pooling="auto")
                logits = ft.logits_from_features(feats["pre_logits"], feats.get(ft.block) if ft.strategy.skip else None)
                heldout_loss, heldout_acc = ft.score(logits, y)
            del feats

        # 3. resilience (label noise): accuracy on the corrupted training images against their true labels
        resilience = None
        if state.corrupted is not None and len(state.corrupted):
            resilience = yield from self._resilience(state, epoch)

        # 4. utilization: distance of each tap's weights from epoch 0
        for layer, absolute, relative in self._utilization(state, epoch):
            self.util_rows.append({"seed": seed, "epoch": epoch, "layer": layer,
                                   "absolute": absolute, "relative": relative})
            yield LayerUtilization(self.run_id, seed=seed, epoch=epoch, layer=layer,
                                   absolute=absolute, relative=relative)
        return {"values": values, "heldout_accuracy": heldout_acc, "heldout_loss": heldout_loss,
                "resilience": resilience}

    def _resilience(self, state: _SeedState, epoch: int) -> Generator[Event, None, float]:
        import torch
        from torch.utils.data import Subset

        ft = state.ft
        layers = ["pre_logits"] + ([ft.block] if ft.strategy.skip else [])
        subset = Subset(self.data.train, [int(i) for i in state.corrupted])
        feats = yield from self._extract(state, subset, layers, stage="extract", epoch=epoch, pooling="auto")
        logits = ft.logits_from_features(feats["pre_logits"], feats.get(ft.block) if ft.strategy.skip else None)
        clean = torch.as_tensor(np.asarray(self.data.train.targets)[state.corrupted], dtype=torch.long)
        return ft.score(logits, clean)[1]

    def _utilization(self, state: _SeedState, epoch: int) -> list[tuple[str, float, float]]:
        """(layer, ||W - W0||, ||W - W0|| / ||W0||) for every chosen tap that owns weights.

        Computed per tap module against its own epoch-0 state dict, which also covers
        taps whose weights are a group of modules (the stem). Zero by definition at epoch 0
        and for strategy "none".
        """
        import lab.metrics

        out = []
        for layer in state.weighted:
            init = state.initial_modules.get(layer)
            if epoch == 0 or init is None:          # untouched: frozen, or nothing trained yet
                out.append((layer, 0.0, 0.0))
                continue
            module = state.bb.tap_module(layer)
            row = lab.metrics.utilization(module, init, {layer: ""}).loc[layer]
            out.append((layer, float(row["utilization"]), float(row["relative_utilization"])))
        return out

    def _add_rows(self, seed: int, epoch: int, layer: str, split: str, vals: dict) -> None:
        self.rows.extend({"seed": seed, "epoch": epoch, "layer": layer, "split": split, "metric": m,
                          "value": float(v)} for m, v in vals.items())

    # -- projections --------------------------------------------------------------------------------
    def _submit_umap(self, seed, epoch, layer, X, previous_layer, pca) -> None:
        from lab.projection import Projector, knn_graph, warm_up

        if self.projector is None:
            warm_up()
            self.projector = Projector(seed=0)
        k = min(self.projector.n_neighbors, X.shape[0] - 1)
        self.projector.submit(seed, epoch, layer, X, previous_layer=previous_layer, pca=pca, knn=knn_graph(X, k))

    def _poll_projections(self) -> list[ProjectionReady]:
        if self.projector is None:
            return []
        out = []
        for res in self.projector.poll():
            out.append(self._projection_event(res))
        return out

    def _projection_event(self, res) -> ProjectionReady:
        labels = self.unseen_labels.numpy()
        t = time.perf_counter()
        self._save("save_projection", res.seed, res.epoch, res.layer, res.method, res.coords, labels,
                   self.unseen_indices, class_names=list(self.data.split.unseen))
        self._timed("store", t)
        return ProjectionReady(self.run_id, seed=res.seed, epoch=res.epoch, layer=res.layer, method=res.method,
                               coords=res.coords, labels=labels, indices=self.unseen_indices,
                               class_names=list(self.data.split.unseen))

    def _finish_projections(self, seed: int) -> Generator[Event, None, None]:
        """Wait for this seed's queued UMAP fits (the last epoch's), emitting each as it lands."""
        if self.projector is None:
            return
        while self.projector.pending:
            self._check()
            for res in self.projector.wait(timeout=0.25):
                yield self._projection_event(res)

    # -- several seeds ----------------------------------------------------------------------------
    def _aggregate(self, epoch: int) -> Generator[Event, None, None]:
        per_seed = self.history.get(epoch, {})
        if len(per_seed) < 2:
            return
        keys = [(layer, split) for split in ("unseen", "seen") for layer in self.layers]
        for layer, split in keys:
            dicts = [v[(layer, split)] for v in per_seed.values() if (layer, split) in v]
            if len(dicts) < 2:
                continue
            metrics = list(dict.fromkeys(m for d in dicts for m in d))      # first-seen order
            mean, std = {}, {}
            for m in metrics:
                xs = np.array([d.get(m, np.nan) for d in dicts], dtype=float)
                mean[m] = float(np.nanmean(xs)) if np.isfinite(xs).any() else float("nan")
                std[m] = float(np.nanstd(xs, ddof=1)) if np.isfinite(xs).sum() > 1 else float("nan")
            yield Aggregate(self.run_id, epoch=epoch, layer=layer, split=split, mean=mean, std=std,
                            n_seeds=len(dicts))
        curves = {}
        for layer in self.layers:
            xs = [v.get((layer, "unseen"), {}).get("nmi") for v in per_seed.values()]
            xs = [x for x in xs if x is not None and math.isfinite(x)]
            if xs:
                curves[layer] = (float(np.mean(xs)), float(np.std(xs, ddof=1)) if len(xs) > 1 else None)
        if curves:
            best = max(curves, key=lambda name: curves[name][0])
            yield Generalization(self.run_id, epoch=epoch, g=curves[best][0], layer=best, g_std=curves[best][1])

    # -- contribution (Wang & Yang) ------------------------------------------------------------------
    def _contribution(self, state: _SeedState) -> Generator[Event, None, None]:
        """Re-initialise each tap's module to its epoch-0 weights; measure; restore exactly."""
        from lab.finetune import reinitialized

        bb, seed = state.bb, state.seed
        base = yield from self._probe(state)
        taps = [name for name in state.weighted if name in state.initial_modules]
        for i, layer in enumerate(taps):
            self._check()
            yield Progress(self.run_id, "contribution", i, len(taps), seed=seed)
            module = bb.tap_module(layer)
            with reinitialized(module, state.initial_modules[layer]):
                vals = yield from self._probe(state)
            for key in list(base):
                if key in vals and vals[key] is not None and base[key] is not None:
                    vals[f"{key}_delta"] = vals[key] - base[key]
            vals = {k: float(v) for k, v in vals.items() if v is not None}
            self.writer.append_contribution([{"seed": seed, "layer": layer, "metric": k, "value": v}
                                             for k, v in vals.items()])
            yield LayerContribution(self.run_id, seed=seed, layer=layer, values=vals)
        yield Progress(self.run_id, "contribution", len(taps), len(taps), seed=seed)

    def _probe(self, state: _SeedState) -> Generator[Event, None, dict]:
        """Held-out loss/accuracy and unseen NMI (pre-logits, and g over the chosen layers)."""
        import lab.metrics

        cfg, ft = self.cfg, state.ft
        out: dict[str, float | None] = {}
        layers = ["pre_logits"] + ([ft.block] if ft.strategy.skip and ft.block != "pre_logits" else [])
        feats = yield from self._extract(state, self.data.heldout, layers, stage="contribution", epoch=None,
                                         pooling="auto")
        logits = ft.logits_from_features(feats["pre_logits"], feats.get(ft.block) if ft.strategy.skip else None)
        out["heldout_loss"], out["heldout_accuracy"] = ft.score(logits, self.heldout_labels)
        ulayers = list(dict.fromkeys(self.layers + ["pre_logits"]))
        feats = yield from self._extract(state, self.data.unseen, ulayers, stage="contribution", epoch=None)
        y = self.unseen_labels.to(state.bb.device)
        nmis = {}
        for layer in ulayers:
            self._check()
            with _few_threads(feats[layer]):
                nmis[layer] = float(lab.metrics.nmi(feats[layer], y, protocol=cfg.protocol))
        out["unseen_nmi"] = nmis["pre_logits"]
        out["unseen_g"] = max(v for k, v in nmis.items() if k in self.layers) if self.layers else None
        return out

    # -- summary ------------------------------------------------------------------------------------
    def _summary(self) -> dict:
        epochs = sorted(self.history)
        out: dict[str, Any] = {"epochs": self.cfg.n_epochs, "seeds": list(self.cfg.seeds),
                               "layers": list(self.layers), "trainable_fraction": self.trainable_fraction}
        if not epochs:
            return out
        last = epochs[-1]
        accs = [a for a in self.heldout.get(last, {}).values() if a is not None]
        out["heldout_accuracy"] = float(np.mean(accs)) if accs else None
        per_seed = self.history[last]
        curves = {}
        for layer in self.layers:
            xs = [v.get((layer, "unseen"), {}).get("nmi") for v in per_seed.values()]
            xs = [x for x in xs if x is not None and math.isfinite(x)]
            if xs:
                curves[layer] = xs
        if curves:
            best = max(curves, key=lambda name: float(np.mean(curves[name])))
            xs = curves[best]
            out.update(best_layer=best, g=float(np.mean(xs)),
                       g_std=float(np.std(xs, ddof=1)) if len(xs) > 1 else None, epoch=last)
        return out


# ---------------------------------------------------------------------------------------------- helpers


def _compute(metrics_module, X, y, names, protocol, layer) -> dict[str, float]:
    """One layer's metrics via ``lab.metrics.compute_layer``; a metric undefined here is NaN."""
    if not names:
        return {}
    with _few_threads(X):
        values = metrics_module.compute_layer(X, y, metrics=tuple(names), protocol=protocol, layer=layer)
    return {k: float(v) for k, v in values.items()}


_SMALL_PROBLEM = 4_000_000   # elements of X below which metrics run single-threaded


@contextlib.contextmanager
def _few_threads(X):
    """Run small CPU metric computations on one thread (torch, OpenMP and BLAS pools).

    Measured here on 2 shared cores: for (1500, 128) features numerical_rank took 5.5 s with 2
    threads and 0.03 s with 1, nmi 5.7 s vs 0.14 s; small matrices gain nothing from threads,
    and a busy machine makes their synchronisation very costly.
    """
    import torch

    if getattr(X, "device", None) is None or X.device.type != "cpu" or X.numel() > _SMALL_PROBLEM:
        yield
        return
    from threadpoolctl import threadpool_limits

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(previous)


def _generalization(values: dict, layers: list[str]) -> tuple[str, float] | None:
    """(layer, g): the layer with the highest unseen NMI, or None when NMI was not measured."""
    best = None
    for layer in layers:
        v = values.get((layer, "unseen"), {}).get("nmi")
        if v is not None and math.isfinite(v) and (best is None or v > best[1]):
            best = (layer, float(v))
    return best


def _failure_message(exc: BaseException) -> str:
    """One paragraph for RunFailed: the message itself for input errors, type + message otherwise."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (ValueError, FileNotFoundError, KeyError)):
        return text
    if isinstance(exc, MemoryError) or "out of memory" in text.lower():
        return (f"ran out of memory ({type(exc).__name__}: {text}). Lower batch_size or eval_batch_size, "
                f"cap unseen_per_class / seen_per_class, measure fewer layers, or use a smaller img_size.")
    return (f"{type(exc).__name__}: {text}. This looks like a bug in layerscope rather than a problem with the "
            f"config; the traceback is stored in the run's meta.json.")


def _relabelled_loader(train, labels: np.ndarray, batch_size: int, *, augment: bool, seed: int):
    """The dataset's own (augmenting) training loader, over a copy whose labels are ``labels``."""
    view = type(train)(train.images, np.asarray(labels, dtype=np.int64), train.classes, train.name,
                       getattr(train, "info", None))
    return view.train_loader(batch_size, augment=augment, seed=seed, shuffle=True)
