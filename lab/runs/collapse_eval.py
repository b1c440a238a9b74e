"""Neural collapse on the training set at one evaluation (docs/METRICS.md, "Neural collapse on the training set").

Part of :mod:`lab.runs.evaluation`, with one job: the split "train", a fixed sample of the seen classes'
training images (``RunData.train_sample``: evaluation transform, the labels the network trains on, the
corrupted ones under label noise), and the classifier side of neural collapse (Papyan, Han & Donoho 2020).

- every chosen layer: the collapse family on split "train", and the geometry of the class means
  (:class:`~lab.events.ClassMeans`, also emitted for the unseen split by the evaluation);
- the head input, for strategies that train a head: the classifier family (the head's W against the class
  means, NC4 and the head's accuracy) on "train" and on the seen held-out images ("seen"), recorded at layer
  ``lab.catalogue.HEAD_LAYER`` ("pre_logits"). For SCL FT the head input is what that head sees: the
  pre-logits plus the pooled block, zero-padded (:func:`lab.finetune.combine_skip`), recorded under
  "pre_logits" too. Strategy "none" trains no head: no classifier rows.

The train sample's extraction counts in the run's "extract" timings like every other extraction.
"""
from __future__ import annotations

import logging
from typing import Generator

import numpy as np

from lab import catalogue
from lab.events import ClassMeans, Event, LayerMetrics
from lab.runs.compute import compute_metrics
from lab.runs.context import RunContext, SeedState

_log = logging.getLogger(__name__)

__all__ = ["TrainCollapse", "class_means_event"]


def class_means_event(ctx: RunContext, seed: int, epoch: int, layer: str, split: str, X, y,
                      class_names) -> ClassMeans:
    """The ClassMeans event of one layer (Gram of the centred class means), recorded by the recorder too.

    ``y`` (N,) indexes ``class_names``; the event names the classes present, in sorted-label order.
    """
    import lab.metrics

    labels = np.unique(y.cpu().numpy() if hasattr(y, "cpu") else np.asarray(y))
    classes = [str(class_names[int(k)]) for k in labels]
    with ctx.recorder.timed("metrics"):
        gram = lab.metrics.class_gram(X, y)                                              # (K, K)
    ctx.recorder.class_means(seed, epoch, layer, split, classes, gram)
    return ClassMeans(ctx.run_id, seed=seed, epoch=epoch, layer=layer, split=split, classes=classes, gram=gram)


class TrainCollapse:
    """Measures split "train" and the classifier-side family of one seed's model at one epoch."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        cfg = ctx.cfg
        self.sample = ctx.data.train_sample
        self.metrics = cfg.collapse_metrics if self.sample is not None else ()
        self.head_metrics = cfg.classifier_metrics
        self._warned = False

    # -- split "train" ------------------------------------------------------------------------------
    def train(self, state: SeedState, epoch: int) -> Generator[Event, None, None]:
        """The collapse family and ClassMeans at every chosen layer, and the classifier family at the head input."""
        import torch

        ctx, cfg, ft, seed = self.ctx, self.ctx.cfg, state.ft, state.seed
        if self.sample is None:
            return
        indices = ctx.data.train_sample_indices
        labels = state.train_labels[indices] if state.train_labels is not None else self.sample.targets
        y = torch.as_tensor(np.asarray(labels, dtype=np.int64)).to(state.bb.device)      # (n,)
        head = self._wants_head(state)
        extra = [name for name in self._head_layers(ft) if head and name not in ctx.layers]
        feats = yield from ctx.extract(state, self.sample, list(ctx.layers) + extra, stage="extract", epoch=epoch)
        names = self._measurable(y)
        seen = list(ctx.data.split.seen)
        for layer in ctx.layers:
            ctx.check()
            with ctx.recorder.timed("metrics"):
                vals = compute_metrics(feats[layer], y, names, cfg.protocol, layer)
            if vals:
                ctx.record_metrics(seed, epoch, layer, "train", vals)
                yield LayerMetrics(ctx.run_id, seed=seed, epoch=epoch, layer=layer, split="train", values=vals)
            yield class_means_event(ctx, seed, epoch, layer, "train", feats[layer], y, seen)
        if not head:
            return
        if ft.strategy.skip and cfg.pooling != "auto":
            # the head sees the block's spatial mean / class token: re-extract with that pooling
            feats = yield from ctx.extract(state, self.sample, self._head_layers(ft), stage="extract",
                                           epoch=epoch, pooling="auto")
        pre, block = feats[catalogue.HEAD_LAYER], feats.get(ft.block) if ft.strategy.skip else None
        del feats
        yield from self.head(state, epoch, "train", pre, block, y, ft.logits_from_features(pre, block))

    # -- the classifier family ------------------------------------------------------------------------
    def head(self, state: SeedState, epoch: int, split: str, pre, block, y, logits) -> Generator[Event, None, None]:
        """The classifier family at the head input on ``split``: ``pre`` (N, D) pre-logits, ``block`` the
        SCL block's pooled features or None, ``y`` (N,), ``logits`` (N, K) the head's outputs."""
        import torch

        import lab.metrics
        from lab.finetune import combine_skip

        ctx, ft = self.ctx, state.ft
        if not self._wants_head(state):
            return
        X = combine_skip(pre, block) if block is not None else pre                       # (N, D) the head input
        present = torch.unique(y.long(), sorted=True)                                    # the classes of y, sorted
        W = ft.head.weight.detach()[present.to(ft.head.weight.device)]                   # (K, D)
        logits = logits[:, present.to(logits.device)]                                    # (N, K)
        layer = catalogue.HEAD_LAYER
        ctx.check()
        with ctx.recorder.timed("metrics"):
            vals = compute_metrics(X, y.to(X.device), self.head_metrics, ctx.cfg.protocol, layer,
                                   head=lab.metrics.Head(W.to(X.device), logits))
        ctx.record_metrics(state.seed, epoch, layer, split, vals)
        yield LayerMetrics(ctx.run_id, seed=state.seed, epoch=epoch, layer=layer, split=split, values=vals)

    # -- internals --------------------------------------------------------------------------------------
    def _wants_head(self, state: SeedState) -> bool:
        return bool(self.head_metrics) and state.ft.strategy.trains

    @staticmethod
    def _head_layers(ft) -> list[str]:
        return [catalogue.HEAD_LAYER] + ([ft.block] if ft.strategy.skip and ft.block != catalogue.HEAD_LAYER else [])

    def _measurable(self, y) -> tuple[str, ...]:
        """The collapse metrics this sample can give: a class with fewer training images than a metric needs
        per class (``per_class``, e.g. nc1's within-class spread) leaves that metric out, with one warning."""
        counts = np.unique(y.cpu().numpy(), return_counts=True)[1]
        fewest = int(counts.min()) if counts.size else 0
        dropped = [m for m in self.metrics if catalogue.METRICS[m].per_class > fewest]
        if dropped and not self._warned:
            self._warned = True
            _log.warning("split 'train': a seen class has %d training image(s) in the sample; %s need more per "
                         "class and are left out", fewest, ", ".join(dropped))
        return tuple(m for m in self.metrics if m not in dropped)

