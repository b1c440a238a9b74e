"""The run's lifecycle and its seed/epoch loop.

:func:`run` validates the config and hands out the generator of :class:`_Engine`. The
engine resolves the data and the backbone, then for every seed and epoch trains
(:mod:`lab.runs.training`), evaluates (:mod:`lab.runs.evaluation`, with layouts from
:mod:`lab.runs.projections`) and reports what :mod:`lab.analysis` makes of the numbers
(:mod:`lab.runs.results`); contribution (:mod:`lab.runs.contribution`) follows each seed.
Everything is written through one recorder (:mod:`lab.runs.recorder`); the run's context and the
evaluation that closes each epoch are :mod:`lab.runs.attach`'s, shared with :class:`lab.Monitor`. Every way a run
ends (finished, failed, cancelled, closed by the consumer) is handled in
:meth:`_Engine.events`.
"""
from __future__ import annotations

import contextlib
import os
import time
import traceback
from typing import Generator, Iterator

import numpy as np

from lab._cancel import Cancelled
from lab.catalogue import STRATEGIES
from lab.config import RunConfig
from lab.events import Event, RunCancelled, RunFailed, RunFinished
from lab.runs.attach import close_run, evaluate_epoch, initial_weights, open_context, start_run
from lab.runs.contribution import Contribution
from lab.runs.context import RunContext, SeedState
from lab.runs.data import RunData, absolute_dataset, prepare_data
from lab.runs.evaluation import Evaluator
from lab.runs.projections import Projections
from lab.runs.training import Trainer
from lab.runs.worker import CancelToken
from lab.status import RunStatus

__all__ = ["run"]


def run(config: RunConfig | dict, store=None, cancel: CancelToken | None = None) -> Iterator[Event]:
    """Run ``config`` and stream its events (a generator; see :mod:`lab.runs` for the order).

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
    config = absolute_dataset(config)       # stored as an absolute path: the run can be rebuilt elsewhere
    if cancel is not None and not hasattr(cancel, "cancelled"):
        raise ValueError(f"cancel must be a lab.runs.CancelToken. Got {type(cancel).__name__} instead.")
    return _Engine(config, store, cancel).events()


class _Engine:
    """One run. ``events()`` is the generator handed out by :func:`run`."""

    def __init__(self, config: RunConfig, store, cancel: CancelToken | None):
        self.cfg = config
        self.store_arg = store
        self.cancel = cancel or CancelToken()
        self.ctx: RunContext | None = None
        self.t0 = time.perf_counter()
        self.trainable_fraction: float | None = None
        self.summary: dict = {}

    @property
    def run_id(self) -> str:
        return self.ctx.run_id if self.ctx is not None else ""

    # -- lifecycle ---------------------------------------------------------------------------------
    def events(self) -> Generator[Event, None, None]:
        ending: Event | None = None
        try:
            self.ctx = open_context(self.cfg, self.store_arg, self.cancel)
            self.projections = Projections(self.ctx)
            yield from self._run()
        except GeneratorExit as exc:
            _forget_frames(exc)
            self._close(RunStatus.CANCELLED, "closed by the consumer before the run finished")
            raise
        except KeyboardInterrupt as exc:
            _forget_frames(exc)
            self._close(RunStatus.CANCELLED, "interrupted (KeyboardInterrupt)")
            raise
        except Cancelled as exc:
            _forget_frames(exc)
            message = "cancelled by the user"
            self._close(RunStatus.CANCELLED, message)
            ending = RunCancelled(self.run_id, seconds=time.perf_counter() - self.t0, message=message)
        except BaseException as exc:   # noqa: BLE001 - every failure becomes one event
            message = _failure_message(exc, folder=self.ctx.recorder.path if self.ctx is not None else None,
                                       store_root=self._store_root())
            self._close(RunStatus.FAILED, message, tb=traceback.format_exc())
            _forget_frames(exc)
            ending = RunFailed(self.run_id, message=message, seconds=time.perf_counter() - self.t0)
        finally:
            self._release()
        if ending is not None:         # after the release: a consumer that starts the next run has the memory
            yield ending
            return
        self._close(RunStatus.FINISHED, None)
        yield RunFinished(self.run_id, seconds=time.perf_counter() - self.t0, summary=self.summary)

    def _release(self) -> None:
        """Stop the run's threads and give its device memory back. The model, optimizer and features
        are referenced only from the finished (or cleared) frames of the run by now."""
        import lab.device

        if self.ctx is None:
            return
        self.projections.close()
        self.ctx.worker.close()
        if self.ctx.device is not None:
            lab.device.release_device_memory(self.ctx.device)

    def _store_root(self):
        if self.ctx is not None and self.ctx.recorder.root is not None:
            return self.ctx.recorder.root
        if self.store_arg is False:
            return None
        root = getattr(self.store_arg, "root", None)
        if root is None and self.store_arg is None:
            from lab.store import default_root

            root = default_root()
        return root

    def _close(self, status: RunStatus, message: str | None, tb: str | None = None) -> None:
        """Mark the run in the store with what it measured so far; never raises."""
        if self.ctx is not None:
            self.summary = close_run(self.ctx, status, message, epochs=self.cfg.n_epochs,
                                     trainable_fraction=self.trainable_fraction, traceback=tb)

    # -- the run -----------------------------------------------------------------------------------
    def _run(self) -> Generator[Event, None, None]:
        import lab.device

        cfg, ctx = self.cfg, self.ctx
        t = time.perf_counter()
        ctx.use_device(lab.device.check_device(cfg.device, cfg.precision))
        self._load_data()
        ctx.check()
        checkpoint = self._checkpoint()
        evaluator, trainer = Evaluator(ctx, self.projections), Trainer(ctx, between=self.projections.poll)
        with lab.device.device_scope(ctx.device):      # a cuda:1 run must not open a context on GPU 0
            for si, seed in enumerate(cfg.seeds):
                state = self._setup_seed(seed, checkpoint)
                ctx.recorder.clock.add("load", time.perf_counter() - t)
                if si == 0:
                    yield start_run(ctx, state, classes=self.classes, n_images=self.n_images,
                                    describe=cfg.describe())
                last_seed = si == len(cfg.seeds) - 1
                for epoch in range(cfg.n_epochs + 1):
                    yield from self._epoch(state, epoch, evaluator, trainer, last_seed=last_seed)
                with ctx.recorder.timed("projection"), self._out_of_memory("the last epoch's layouts"):
                    yield from self.projections.finish()
                if cfg.save_weights and state.ft.strategy.trains:
                    ctx.recorder.weights(seed, state.bb.model.state_dict())
                if cfg.contribution:
                    with self._out_of_memory("the contribution analysis"):
                        yield from Contribution(ctx).run(state)
                state.ft.close()
                state = None               # this seed's model and optimizer go before the next seed loads
                t = time.perf_counter()

    def _load_data(self) -> None:
        """Resolve the datasets, keeping what the run needs, not the whole dataset's images (nor the
        training images when nothing trains): the engine's peak memory is a performance goal."""
        cfg = self.cfg
        data = prepare_data(cfg)
        ds = data.dataset
        self.classes, self.in_chans, self.image_size = list(ds.classes), int(ds.in_chans), int(ds.image_size)
        self.n_images = data.n_images
        self.ctx.use_data(RunData(None, data.split, data.train if STRATEGIES[cfg.strategy].trains else None,
                                  data.heldout, data.unseen, data.train_sample, data.train_sample_indices))

    def _checkpoint(self) -> str | None:
        """The checkpoint file to load: ``run:ID[/seed]`` is a stored run's fine-tuned weights, looked
        up in this run's store first, then in the default store."""
        spec = self.cfg.checkpoint
        if not (isinstance(spec, str) and spec.startswith("run:")):
            return spec
        from lab.backbones import resolve_checkpoint
        from lab.store import RunStore

        return str(resolve_checkpoint(spec, store=RunStore(self.ctx.recorder.root)).path)

    def _setup_seed(self, seed: int, checkpoint: str | None) -> SeedState:
        import torch

        import lab.backbones
        from lab import finetune

        cfg, ctx = self.cfg, self.ctx
        torch.manual_seed(seed)
        np.random.seed(seed % (2**32))
        bb = lab.backbones.load(
            cfg.backbone, pretrained=cfg.pretrained, checkpoint=checkpoint, num_classes=0,
            in_chans=self.in_chans, img_size=cfg.img_size or self.image_size, device=ctx.device,
        )
        # Catalogue taps or any module of the model, input -> output order.
        layers = list(bb.layers) if cfg.layers is None else bb.resolve_layers(cfg.layers, field="layers")
        bad = [name for name in cfg.projection_layers or () if name not in layers]
        if bad:
            raise ValueError(f"projection_layers: {bad[0]!r} is not a tap of {cfg.backbone}; "
                             f"valid: {', '.join(bb.layers)}.")
        ctx.use_layers(layers)
        ft = finetune.prepare(
            bb, len(ctx.data.split.seen), cfg.strategy, block=cfg.block, lr=cfg.learning_rate,
            weight_decay=cfg.decay, optimizer=cfg.optimizer, seed=seed, precision=cfg.precision,
        )
        if ctx.data.train is not None:          # None when nothing is trained (strategy "none")
            ft.schedule(cfg.lr_schedule, cfg.n_epochs * -(-len(ctx.data.train) // cfg.batch_size))
        self.trainable_fraction = ft.trainable_fraction
        state = SeedState(seed, bb, ft, *initial_weights(bb, ctx.layers, every=cfg.contribution))
        if cfg.label_noise > 0:
            targets = np.asarray(ctx.data.train.targets, dtype=np.int64)
            state.train_labels, state.corrupted = finetune.corrupt_labels(
                targets, cfg.label_noise, len(ctx.data.split.seen), seed=seed)
        return state

    @contextlib.contextmanager
    def _out_of_memory(self, stage: str):
        """The device running out of memory in ``stage`` (metrics, PCA, held-out loss, layouts: past
        extraction and training, which name their batch size) as one line with what to lower."""
        from lab.device import DeviceOutOfMemoryError, OutOfMemoryError

        try:
            yield
        except OutOfMemoryError as exc:
            raise DeviceOutOfMemoryError(_out_of_memory_advice(self.cfg, self.ctx.device, stage)) from exc

    # -- one epoch -----------------------------------------------------------------------------------
    def _epoch(self, state: SeedState, epoch: int, evaluator: Evaluator, trainer: Trainer, *,
               last_seed: bool) -> Generator[Event, None, None]:
        ctx = self.ctx
        rec = ctx.recorder
        t_epoch, before = time.perf_counter(), dict(rec.timings)
        rec.clock.begin_epoch()
        train_loss = train_acc = None
        if epoch > 0:
            train_loss, train_acc = yield from trainer.epoch(state, epoch)
        yield from evaluate_epoch(ctx, evaluator, self.projections, state, epoch, started=t_epoch, before=before,
                                  train_loss=train_loss, train_accuracy=train_acc, guard=self._out_of_memory)
        if last_seed and len(self.cfg.seeds) > 1:
            yield from ctx.results.across_seeds(epoch)


def _out_of_memory_advice(cfg: RunConfig, device, stage: str) -> str:
    """One line: the stage that ran out of memory and the options that shrink what it holds."""
    fixes = [f"evaluate fewer images: lower unseen_per_class (now {cfg.unseen_per_class}) and seen_per_class "
             f"(now {cfg.seen_per_class})"]
    if cfg.pooling == "flatten":
        fixes.append("use pooling='mean' instead of 'flatten'")
    fixes += ["use a smaller img_size", "or free the device from other processes"]
    return (f"the {device.type} device ran out of memory in {stage} (metrics, layouts or the held-out loss, "
            f"after feature extraction); {', '.join(fixes)}.")


def _forget_frames(exc: BaseException) -> None:
    """Clear the local variables of the frames in ``exc``'s traceback (and its causes'): they hold the
    failed step's model, activations and features, which must go before the device memory is released
    and not when the exception object happens to be collected."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def _failure_message(exc: BaseException, folder=None, store_root=None) -> str:
    """One paragraph for RunFailed (:func:`lab.errors.user_message`): the message itself for input
    errors, path and fix for operating-system errors, and for a genuine bug the file that keeps
    its traceback (the run's folder when it can be written, else the user's cache)."""
    from lab.errors import find_os_error, user_message

    fix = None
    os_error = find_os_error(exc)
    if os_error is not None and store_root is not None and os_error.filename is not None:
        path, root = os.path.abspath(os_error.filename), os.path.abspath(store_root)
        if path == root or path.startswith(root + os.sep) or root.startswith(path + os.sep):
            fix = "choose another run store with --runs-dir or $LAB_RUNS_DIR"
    return user_message(exc, fix=fix, folder=folder)
