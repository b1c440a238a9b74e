"""The run's parts that do not depend on who loaded the model: one run's context, and one epoch's evaluation.

:func:`lab.run` (:mod:`lab.runs.engine`) and :class:`lab.Monitor` (a researcher's own training loop) share
them, so a monitored run is written by the same recorder and measured by the same
:class:`~lab.runs.evaluation.Evaluator` as any run of the engine:

- :func:`open_context`: a new run in the store and the :class:`~lab.runs.context.RunContext` around it (its
  data, device and layers filled in by the context's own ``use_*`` methods);
- :func:`initial_weights`: the taps' weights at the start, the reference of utilization (and contribution);
- :func:`start_run`: the run's description in its meta (layers, classes, split, sizes, what trains), once
  the model is loaded;
- :func:`evaluate_epoch`: evaluate one seed's model at one epoch, then close the epoch (its training row,
  timings, projections' news and the seed's :class:`~lab.events.Generalization`);
- :func:`close_run`: the run's summary (or, should that fail, its timings) and its final status.
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, ContextManager, Generator, Mapping

from lab.device import exact_float32
from lab.events import Event, RunStarted
from lab.runs.context import RunContext, SeedState
from lab.runs.evaluation import Evaluation, Evaluator
from lab.runs.projections import Projections
from lab.runs.recorder import open_recorder
from lab.runs.results import Results, read_training_row, write_training_row
from lab.runs.worker import CancelToken, Worker

__all__ = ["open_context", "initial_weights", "start_run", "evaluate_epoch", "close_run"]


def open_context(config, store, cancel: CancelToken | None = None) -> RunContext:
    """A new run of ``config`` in ``store`` (None: ``RunStore()``; False: nothing written) and its context.

    The context's data, device and layers are the caller's to fill in."""
    cancel = cancel or CancelToken()
    recorder = open_recorder(store, config)
    return RunContext(config, recorder, cancel, Worker(cancel, recorder.run_id), Results(recorder.run_id))


def initial_weights(bb, layers, *, every: bool = False) -> tuple[list[str], dict[str, dict]]:
    """The taps of ``layers`` that are modules (utilization is measured on them) and CPU copies of their
    weights now: only of those with trainable weights (what can move), or of every one with ``every`` (layer
    contribution re-initialises them, and their batch-norm statistics move too)."""
    weighted, initial = [], {}
    for name in layers:
        module = bb.tap_module(name)
        if module is None:
            continue
        weighted.append(name)
        if every or any(p.requires_grad for p in module.parameters()):
            initial[name] = {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}
    return weighted, initial


def start_run(ctx: RunContext, state: SeedState, *, classes: list, n_images: dict, describe: str,
              **extra) -> RunStarted:
    """Write the run's description to its meta once the model is loaded, and return the RunStarted it makes.

    Parameters
    ----------
    classes : every class name of the run's data
    n_images : images per part of the data (``{"unseen": ..., "heldout": ...}``)
    describe : the run's one-line description
    **extra : more meta fields (the monitor's ``monitor``, and ``axis``: what its epoch numbers count)
    """
    cfg, bb, ft = ctx.cfg, state.bb, state.ft
    layers = [{"name": name, "kind": bb.tap(name).kind, "dim": int(bb.tap(name).dim)} for name in ctx.layers]
    split = {"seen": list(ctx.data.split.seen), "unseen": list(ctx.data.split.unseen)}
    ctx.recorder.update_meta(
        layers=layers, classes=classes, split=split, device=str(ctx.device), n_images=n_images,
        seeds=list(cfg.seeds), trainable_fraction=ft.trainable_fraction, n_trainable=ft.n_trainable,
        n_parameters=ft.n_total, epochs=cfg.n_epochs, block=ft.block, projection_layers=ctx.proj_layers,
        describe=describe,
        backbone=bb.info,             # what was loaded and the input normalization it used
        **extra)
    return RunStarted(ctx.run_id, config=cfg.to_dict(), layers=layers, classes=classes, seen=split["seen"],
                      unseen=split["unseen"], device=str(ctx.device), n_images=n_images, seeds=list(cfg.seeds),
                      trainable_fraction=ft.trainable_fraction, axis=extra.get("axis", "epoch"))


def evaluate_epoch(ctx: RunContext, evaluator: Evaluator, projections: Projections, state: SeedState, epoch: int, *,
                   started: float, before: Mapping[str, float], train_loss: float | None = None,
                   train_accuracy: float | None = None,
                   guard: Callable[[str], ContextManager] | None = None) -> Generator[Event, None, Evaluation]:
    """Evaluate ``state``'s model at ``epoch`` and close the epoch; streams the events, returns the Evaluation.

    Parameters
    ----------
    started : ``time.perf_counter()`` when the epoch began (its training included)
    before : a copy of ``ctx.recorder.timings`` taken then (the epoch's timings are the difference)
    train_loss, train_accuracy : the epoch's training numbers, None when nothing was trained
    guard : ``guard(stage)`` is a context manager around the evaluation (the engine's out-of-memory advice)
    """
    rec = ctx.recorder
    guard = guard or (lambda stage: contextlib.nullcontext())
    with rec.timed("evaluate"), guard(f"evaluation at epoch {epoch}"), exact_float32():
        ev = yield from evaluator.evaluate(state, epoch)
    seconds = time.perf_counter() - started
    if ev.aliases is not None:
        ctx.results.aliases = ev.aliases
        rec.update_meta(layer_aliases=ev.aliases)
    row = write_training_row(state.seed, epoch, train_loss=train_loss, train_accuracy=train_accuracy,
                             heldout_accuracy=ev.heldout_accuracy, heldout_loss=ev.heldout_loss,
                             resilience=ev.resilience, seconds=seconds, spent=rec.since(before))
    timings = rec.end_epoch(row, drop_embeddings=projections.superseded(state.seed, epoch))
    ctx.results.add_training(row)
    yield from projections.poll()
    yield read_training_row(ctx.run_id, row, timings=timings)
    gen = ctx.results.seed_generalization(state.seed, epoch)
    if gen is not None:
        projections.focus(state.seed, gen.layer)        # the next layouts start at the best layer
        yield gen
    return ev


def close_run(ctx: RunContext, status: str, message: str | None = None, *, epochs: int,
              trainable_fraction: float | None, traceback: str | None = None) -> dict:
    """Mark the run ``status`` in the store with its summary (:meth:`Results.summary`; only the timings when the
    summary cannot be computed: it must not mask the run's own outcome); returns the summary. Never raises.

    ``epochs``: the planned epochs (a monitored run: the last evaluated one)."""
    timings = ctx.recorder.clock.run_row()
    try:
        summary = ctx.results.summary(status=status, epochs=epochs, seeds=list(ctx.cfg.seeds),
                                      trainable_fraction=trainable_fraction, timings=timings)
    except Exception:              # noqa: BLE001 - a summary must not mask the run's own outcome
        summary = {"timings": timings}
    ctx.recorder.close(status, message=message, summary=summary, traceback=traceback)
    return summary
