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

The parts, one job each:

==============  =======================================================================
engine          :func:`run`; the run's lifecycle and its seed/epoch loop
data            :func:`prepare_data`, :class:`RunData` (the datasets of a config)
training        one epoch through ``FineTuner.train_epoch`` (progress, cancellation)
evaluation      one epoch's metrics per layer (unseen, seen held-out), resilience,
                utilization; the identical-tap check of the first evaluation
collapse_eval   the seen training sample (split "train"), the classifier side at the
                head input, ClassMeans (neural collapse on the training set)
projections     PCA layouts at once, UMAP in the background
contribution    re-initialise each tap, measure, restore (Wang & Yang)
results         g, seed aggregates and the summary, from :mod:`lab.analysis`
recorder        the one writer of a run (store, I/O thread, row buffers, timings)
names           :func:`check_names`: dataset, backbone and checkpoint resolved before anything loads
worker          :class:`CancelToken`; the thread that streams a long call's progress
==============  =======================================================================

Event order (see :mod:`lab.events`)::

    RunStarted
      per seed, for epoch 0 (before training), 1, ..., E:
        Progress("train")*                      (epochs >= 1, one per batch)
        Progress("extract")* LayerMetrics(unseen) ClassMeans(unseen) ProjectionReady(pca)   (per layer)
        LayerConfidence*                                                 (per layer, bootstrap)
        Progress("extract")* LayerMetrics(seen)* [LayerMetrics(seen, pre_logits): the head's]
        Progress("extract")* LayerMetrics(train) ClassMeans(train)        (per layer; the train sample)
        [LayerMetrics(train, pre_logits): the classifier side, when a head is trained]
        LayerUtilization*  ProjectionReady(umap)*  EpochFinished  Generalization(seed)
        Aggregate* Generalization(seed=None)    (several seeds: once the last seed reports the epoch)
      ProjectionReady(umap)*                    (the last epoch's layouts, when ready)
      LayerContribution*                        (config.contribution)
    RunFinished | RunFailed | RunCancelled

Identical taps: at the run's first evaluation, taps whose pooled unseen features equal a
deeper tap's (ResNet's last block and ``pre_logits``) are found; they are stored in the
run's meta as ``layer_aliases``, carried by every ``Generalization`` event (``aliases``),
and g's best layer names the deeper tap (:func:`lab.analysis.generalization`).

Cancellation: call ``token.cancel()`` on the :class:`CancelToken` passed as
``cancel`` (checked before every training and extraction batch and between layers)
or ``close()`` the generator (takes effect at the next event, i.e. within one
batch, because the engine yields a Progress event per batch). Either way the run
is stored with status "cancelled" and everything finished so far stays readable.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from lab.lazy import lazy_exports

if TYPE_CHECKING:       # what the names below are (for readers and the API reference); loaded on first use
    from lab._cancel import Cancelled
    from lab.runs.compute import few_threads as _few_threads   # benchmarks/run.py times metrics the same way
    from lab.runs.data import RunData, prepare_data
    from lab.runs.engine import run
    from lab.runs.names import check_names
    from lab.runs.worker import CancelToken

__all__ = ["run", "CancelToken", "RunData", "prepare_data", "Cancelled", "check_names"]

# The engine loads torch; a light submodule (lab.runs.timings, read by `python -m lab runs show`) must not.
__getattr__, __dir__ = lazy_exports(__name__, {
    "run": ".engine:run", "CancelToken": ".worker:CancelToken", "RunData": ".data:RunData",
    "prepare_data": ".data:prepare_data", "Cancelled": "lab._cancel:Cancelled", "check_names": ".names:check_names",
    "_few_threads": ".compute:few_threads",
})
