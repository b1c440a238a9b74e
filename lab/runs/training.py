"""One fine-tuning epoch on the seen classes, through :meth:`lab.finetune.FineTuner.train_epoch`.

The epoch runs in the engine's worker thread; each batch becomes a ``Progress("train")``
event (and a chance to emit finished UMAP layouts), and the run's cancel token is checked
before every batch. Batches come pinned (and from worker processes for a memory-mapped
folder) when the model is on CUDA (:meth:`lab.data.ImageDataset.loader_options`); the device
running out of memory fails the epoch with a message naming ``batch_size`` (the epochs already
finished are stored).
"""
from __future__ import annotations

from typing import Callable, Generator, Iterable

import numpy as np

import lab.finetune  # noqa: F401  before any run holds a model: see its torch._dynamo import
from lab.device import out_of_memory_hint
from lab.events import Event
from lab.runs.context import RunContext, SeedState

__all__ = ["Trainer", "train_loader"]


class Trainer:
    """Trains one seed's model epoch by epoch."""

    def __init__(self, ctx: RunContext, between: Callable[[], Iterable[Event]] | None = None):
        self.ctx = ctx
        self.between = between                 # events to emit between batches (finished layouts)

    def epoch(self, state: SeedState, epoch: int) -> Generator[Event, None, tuple[float, float]]:
        """Train one epoch; returns (mean loss, accuracy) over its samples.

        A step that fails (a diverging loss ...) raises ValueError naming the epoch and batch.
        """
        ctx = self.ctx
        loader = train_loader(ctx, state, epoch)
        done = [0]

        def fn(progress, should_stop):
            def on_batch(n, total):
                done[0] = n
                progress(n, total)

            return state.ft.train_epoch(loader, should_stop=should_stop, progress=on_batch)

        oom = out_of_memory_hint(f"training (epoch {epoch})", "batch_size", ctx.cfg.batch_size, state.bb.device)
        with ctx.recorder.timed("train"), oom:
            try:
                stats = yield from ctx.worker.stream(fn, stage="train", seed=state.seed, epoch=epoch,
                                                     coalesce=False, between=self.between)
            except ValueError as exc:
                raise ValueError(f"epoch {epoch}, batch {done[0]}: {exc}") from exc
        return stats["loss"], stats["accuracy"]


def train_loader(ctx: RunContext, state: SeedState, epoch: int):
    """Augmented (if configured), shuffled batches of the seen training images, seeded per (seed, epoch)."""
    cfg, train = ctx.cfg, ctx.data.train
    seed = state.seed * 100_003 + epoch
    if state.train_labels is not None:
        # The dataset's own loader over a view whose labels are the (noisy) training labels.
        train = train.relabel(np.asarray(state.train_labels, dtype=np.int64))      # no copy of the images
    return train.train_loader(cfg.batch_size, augment=cfg.augment, seed=seed, shuffle=True,
                              **train.loader_options(state.bb.device))
