"""The run's parts that do not depend on who loaded the model: one run's context, and one epoch's evaluation.

:func:`lab.run` (:mod:`lab.runs.engine`) and :class:`lab.Monitor` (a researcher's own training loop) share
them, so a monitored run is written by the same recorder and measured by the same
:class:`~lab.runs.evaluation.Evaluator` as any run of the engine:

- :func:`open_context`: a new run in the store and the :class:`~lab.runs.context.RunContext` around it;
- :func:`initial_weights`: the taps' weights at the start, the reference of utilization (and contribution);
- :func:`evaluate_epoch`: evaluate one seed's model at one epoch, then close the epoch (its training row,
  timings, projections' news and the seed's :class:`~lab.events.Generalization`).
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, ContextManager, Generator, Mapping

from lab.device import exact_float32
from lab.events import EpochFinished, Event
from lab.runs.context import RunContext, SeedState
from lab.runs.evaluation import Evaluation, Evaluator
from lab.runs.projections import Projections
from lab.runs.recorder import open_recorder
from lab.runs.results import Results
from lab.runs.timings import TRAINING_ROW_KEYS
from lab.runs.worker import CancelToken, Worker

__all__ = ["open_context", "initial_weights", "evaluate_epoch"]


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
    spent = rec.since(before)
    row = {"seed": state.seed, "epoch": epoch, "train_loss": train_loss, "train_accuracy": train_accuracy,
           "heldout_accuracy": ev.heldout_accuracy, "heldout_loss": ev.heldout_loss,
           "resilience": ev.resilience, "seconds": seconds,
           **{f"{key}_seconds": spent[key] for key in TRAINING_ROW_KEYS}}
    timings = rec.end_epoch(row, drop_embeddings=projections.superseded(state.seed, epoch))
    ctx.results.add_training(row)
    yield from projections.poll()
    yield EpochFinished(ctx.run_id, seed=state.seed, epoch=epoch, train_loss=train_loss,
                        train_accuracy=train_accuracy, heldout_accuracy=ev.heldout_accuracy, seconds=seconds,
                        heldout_loss=ev.heldout_loss, resilience=ev.resilience, timings=timings)
    gen = ctx.results.seed_generalization(state.seed, epoch)
    if gen is not None:
        projections.focus(state.seed, gen.layer)        # the next layouts start at the best layer
        yield gen
    return ev
