"""Evaluating one seed's model at one epoch.

1. unseen classes: every chosen layer in one extraction, metrics per layer as soon as ready
   (and its PCA layout); the run's very first evaluation first extracts the first layer alone
   (a forward that stops after it costs a few percent of the network) so that a consumer sees
   a result within seconds. The first evaluation also finds the taps whose features are
   identical to a deeper tap's; every later one drops the pairs that no longer are (a
   randomly initialised ResNet's zero-initialised residual branches make whole stages
   identical until training moves them), so the aliases left hold at every evaluation. Once
   every layer is measured, a bootstrap over the unseen images gives each layer's interval and
   best-layer share (:func:`lab.analysis.bootstrap`, from the clusters and kNN votes just computed), and
   the per-image record keeps those votes and clusters with each image's class-centre margin (a run
   that measures kNN accuracy; ``RunRecord.image_record``).
   A training run also records each layer's CKA to its epoch-0 features (``cka_initial``);
   Each layer's class means go out as a ``ClassMeans`` event (:mod:`lab.runs.collapse_eval`).
   The label-free measures (RankMe, alpha-ReQ, TwoNN) are among the metrics of each layer; with
   ``lidar_views``, LiDAR follows on augmented views of the unseen images (:mod:`lab.runs.label_free_eval`);
2. seen held-out images: collapse and label-free metrics per layer (at epoch 0 also the transferability estimators,
   LogME and SFDA, with the seen kNN accuracy as their baseline), and held-out loss/accuracy from the head,
   with the classifier-side collapse measures at the head input;
2b. the seen training sample (split "train"): collapse metrics and ClassMeans per layer, the classifier side
   at the head input (:class:`lab.runs.collapse_eval.TrainCollapse`);
3. label noise: accuracy on the corrupted training images against their true labels;
4. utilization: distance of each tap's weights from epoch 0.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Generator, Mapping, Sequence

import numpy as np

from lab import catalogue
from lab.events import Event, LayerConfidence, LayerMetrics, LayerUtilization
from lab.runs.collapse_eval import TrainCollapse, class_means_event
from lab.runs.compute import compute_metrics
from lab.runs.context import RunContext, SeedState
from lab.runs.label_free_eval import LidarViews
from lab.runs.projections import Projections
from lab.runs.similarity import InitialCKA

_log = logging.getLogger(__name__)

__all__ = ["Evaluator", "Evaluation", "find_aliases", "ALIAS_RTOL", "ALIAS_ATOL"]

ALIAS_RTOL, ALIAS_ATOL = 1e-5, 1e-6
"""Tolerances under which two taps' pooled features count as identical (float32 pooling by
different kernels, e.g. a mean in a hook against timm's global pool, differs in the last bits)."""


@dataclass
class Evaluation:
    """What one epoch's evaluation measured besides its events."""

    heldout_accuracy: float | None = None
    heldout_loss: float | None = None
    resilience: float | None = None
    aliases: dict | None = None          # the identical taps, when they changed at this evaluation


def find_aliases(features: Mapping, order: Sequence[str], *, rtol: float = ALIAS_RTOL,
                 atol: float = ALIAS_ATOL) -> dict[str, str]:
    """Taps whose pooled features equal a deeper tap's.

    Parameters
    ----------
    features : {tap: Tensor (N, d)} pooled features of the same images
    order : the taps, input -> output (only taps in both are compared)

    Returns
    -------
    ``{tap: deepest tap with the same features}``; only same-shape features are compared
    (``torch.allclose`` with ``rtol``, ``atol``), e.g. ResNet's ``{"layer4.1": "pre_logits"}``.
    """
    names = [name for name in order if name in features]
    out: dict[str, str] = {}
    for i, name in enumerate(names):
        for deeper in reversed(names[i + 1:]):
            if _same(features[name], features[deeper], rtol=rtol, atol=atol):
                out[name] = deeper
                break
    return out


def _same(a, b, *, rtol: float = ALIAS_RTOL, atol: float = ALIAS_ATOL) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    # a few rows first: different taps almost always differ there already
    return bool(torch.allclose(a[:8], b[:8], rtol=rtol, atol=atol) and torch.allclose(a, b, rtol=rtol, atol=atol))


class Evaluator:
    """Measures one seed's model at one epoch, streaming LayerMetrics, layouts and utilization."""

    def __init__(self, ctx: RunContext, projections: Projections, *, measure_cka: bool | None = None):
        """``measure_cka``: record how far each layer moved from its features at the first evaluation (None: when
        the run trains; a monitor's loop trains the model itself)."""
        self.ctx = ctx
        self.projections = projections
        self.first = True
        self.aliases: dict[str, str] | None = None     # identical taps at every evaluation so far
        measure_cka = ctx.cfg.n_epochs > 0 if measure_cka is None else measure_cka
        # a training run records how far each layer moved from its epoch-0 features
        self.initial_cka = InitialCKA(ctx.cfg.split_seed) if measure_cka else None
        # The per-image record holds the votes the kNN accuracy computes anyway (the catalogue's "right"
        # per image): without that metric, no record (RunRecord.image_record_problem says so).
        self.image_record = catalogue.per_image_metric("right") in ctx.cfg.unseen_metrics
        self.collapse = TrainCollapse(ctx)
        self.lidar = LidarViews(ctx)

    def evaluate(self, state: SeedState, epoch: int) -> Generator[Event, None, Evaluation]:
        ctx = self.ctx
        out = Evaluation()
        first, self.first = self.first, False
        out.aliases = yield from self._unseen(state, epoch, first=first)
        yield from self.lidar.measure(state, epoch)
        out.heldout_loss, out.heldout_accuracy = yield from self._seen(state, epoch)
        yield from self.collapse.train(state, epoch)
        if state.corrupted is not None and len(state.corrupted):
            out.resilience = yield from self._resilience(state, epoch)
        for layer, absolute, relative in self._utilization(state, epoch):
            ctx.recorder.utilization([{"seed": state.seed, "epoch": epoch, "layer": layer,
                                       "absolute": absolute, "relative": relative}])
            yield LayerUtilization(ctx.run_id, seed=state.seed, epoch=epoch, layer=layer,
                                   absolute=absolute, relative=relative)
        return out

    # -- 1. unseen classes ---------------------------------------------------------------------------
    def _unseen(self, state: SeedState, epoch: int, *, first: bool) -> Generator[Event, None, dict | None]:
        ctx, cfg, seed = self.ctx, self.ctx.cfg, state.seed
        layers = ctx.layers
        stages = [layers[:1], layers[1:]] if first and len(layers) > 1 else [list(layers)]
        y = ctx.unseen_labels.to(state.bb.device)
        kept: dict = {}                       # features of every stage, to check the identical taps
        per_image: dict[str, dict] = {}       # layer -> what each image contributed (for the bootstrap)
        previous_proj = None
        for stage_layers in stages:
            feats = yield from ctx.extract(state, ctx.data.unseen, stage_layers, stage="extract", epoch=epoch)
            for layer in stage_layers:
                ctx.check()
                X = feats[layer]                                                         # (N, d)
                with ctx.recorder.timed("metrics"):
                    vals = compute_metrics(X, y, cfg.unseen_metrics, cfg.protocol, layer,
                                           samples=per_image.setdefault(layer, {}), margins=self.image_record)
                    if self.initial_cka is not None:
                        vals.update(self.initial_cka.measure(seed, epoch, layer, X))
                ctx.record_metrics(seed, epoch, layer, "unseen", vals)
                yield LayerMetrics(ctx.run_id, seed=seed, epoch=epoch, layer=layer, split="unseen", values=vals)
                yield class_means_event(ctx, seed, epoch, layer, "unseen", X, y, ctx.data.split.unseen)
                if layer in ctx.proj_layers:
                    yield self.projections.layer(seed, epoch, layer, X, previous_proj)
                    previous_proj = layer
                yield from self.projections.poll()
            kept.update(feats)
            del feats
        aliases = self._check_aliases(kept)
        if self.image_record:
            ctx.recorder.images(seed, epoch, layers, ctx.unseen_labels.numpy(), per_image)
        yield from self._confidence(seed, epoch, per_image, y)
        return aliases

    def _confidence(self, seed: int, epoch: int, per_image: dict, y) -> Generator[Event, None, None]:
        """Bootstrap rows (``nmi_low``, ``nmi_high``, ``nmi_best_share``, ... per layer) of this evaluation."""
        from lab import analysis

        ctx = self.ctx
        wanted = {layer: {m: v for m, v in got.items() if m in catalogue.metric_names(per_image=True)}
                  for layer, got in per_image.items()}
        if not any(wanted.values()):
            return
        labels = y.cpu().numpy()
        if np.unique(labels, return_counts=True)[1].min() < 2:
            # resampling a class of one image always draws that image: no interval, the run goes on
            _log.warning("no bootstrap interval at epoch %d: an unseen class has a single image", epoch)
            return
        with ctx.recorder.timed("bootstrap"):
            table = analysis.bootstrap(wanted, labels, layers=ctx.layers, aliases=self.aliases,
                                       n_resamples=analysis.N_RESAMPLES, seed=seed * 100_003 + epoch)
        for layer, vals in analysis.confidence_values(table).items():
            ctx.record_metrics(seed, epoch, layer, "unseen", vals)
            yield LayerConfidence(ctx.run_id, seed=seed, epoch=epoch, layer=layer, values=vals)

    def _check_aliases(self, feats: Mapping) -> dict | None:
        """Find the identical taps (first evaluation) or drop those that differ now; the new map
        when it changed, else None."""
        if self.aliases is None:
            self.aliases = find_aliases(feats, self.ctx.layers)
            return dict(self.aliases)
        held = {a: b for a, b in self.aliases.items() if a in feats and b in feats and _same(feats[a], feats[b])}
        if held == self.aliases:
            return None
        self.aliases = held
        return dict(held)

    # -- 2. seen held-out images -----------------------------------------------------------------------
    def _seen(self, state: SeedState, epoch: int) -> Generator[Event, None, tuple[float | None, float | None]]:
        ctx, cfg, seed, ft = self.ctx, self.ctx.cfg, state.seed, state.ft
        if ctx.data.heldout is None:            # no held-out seen images (a monitor given none): no seen split
            return None, None
        seen_metrics = cfg.seen_metrics(epoch)
        extra = []
        if ft.strategy.trains:
            extra.append(catalogue.HEAD_LAYER)
            if ft.strategy.skip and ft.block not in extra:
                extra.append(ft.block)
        seen_layers = list(ctx.layers) if seen_metrics else []
        layers = seen_layers + [name for name in extra if name not in seen_layers]
        if not layers:
            return None, None
        feats = yield from ctx.extract(state, ctx.data.heldout, layers, stage="extract", epoch=epoch)
        y = ctx.heldout_labels.to(state.bb.device)
        for layer in seen_layers:
            ctx.check()
            with ctx.recorder.timed("metrics"):
                vals = compute_metrics(feats[layer], y, seen_metrics, cfg.protocol, layer)
            ctx.record_metrics(seed, epoch, layer, "seen", vals)
            yield LayerMetrics(ctx.run_id, seed=seed, epoch=epoch, layer=layer, split="seen", values=vals)
        if not ft.strategy.trains:
            return None, None
        if ft.strategy.skip and cfg.pooling != "auto":
            # The head sees the block's spatial mean / class token: re-extract with that pooling.
            feats = yield from ctx.extract(state, ctx.data.heldout, extra, stage="extract", epoch=epoch,
                                           pooling="auto")
        pre, block = feats[catalogue.HEAD_LAYER], feats.get(ft.block) if ft.strategy.skip else None
        del feats
        logits = ft.logits_from_features(pre, block)
        yield from self.collapse.head(state, epoch, "seen", pre, block, y, logits)
        return ft.score(logits, y)

    # -- 3. label noise -----------------------------------------------------------------------------------
    def _resilience(self, state: SeedState, epoch: int) -> Generator[Event, None, float]:
        import torch
        from torch.utils.data import Subset

        ctx, ft = self.ctx, state.ft
        layers = [catalogue.HEAD_LAYER] + ([ft.block] if ft.strategy.skip else [])
        subset = Subset(ctx.data.train, [int(i) for i in state.corrupted])
        feats = yield from ctx.extract(state, subset, layers, stage="extract", epoch=epoch, pooling="auto")
        logits = ft.logits_from_features(feats[catalogue.HEAD_LAYER], feats.get(ft.block) if ft.strategy.skip else None)
        clean = torch.as_tensor(np.asarray(ctx.data.train.targets)[state.corrupted], dtype=torch.long)
        return ft.score(logits, clean)[1]

    # -- 4. utilization ------------------------------------------------------------------------------------
    def _utilization(self, state: SeedState, epoch: int) -> list[tuple[str, float, float]]:
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
