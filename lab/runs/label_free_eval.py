"""LiDAR at one evaluation: augmented views of the unseen images (docs/METRICS.md, "Label-free layer quality").

Part of :mod:`lab.runs.evaluation`, with one job. The other label-free measures (RankMe, alpha-ReQ, TwoNN)
read the features every evaluation extracts anyway and are computed with the other metrics; LiDAR needs
``RunConfig.lidar_views`` (q >= 2) views of each image, each view one more forward pass:

- the images: at most ``lidar_images`` unseen images, a class-stratified sample drawn once with
  ``split_seed`` (the same images at every epoch and seed);
- the views: the dataset's training augmentation (the mild random affine of
  :meth:`lab.data.ImageDataset.train_loader`), applied whether or not the run augments its training images,
  since LiDAR measures how the features vary under it; view v is drawn with a seed of its own, the same at
  every epoch, so that epochs differ by the model only;
- the measure: per layer, :func:`lab.metrics.lidar` of the (n, q, d) views, recorded on split "unseen" and
  streamed as a LayerMetrics like every other metric (NaN with a DegenerateLayerWarning naming the layer where
  it is undefined).

Its forward passes and its metric are timed under their own stage, "lidar" (:data:`lab.runs.timings.STAGES`).
"""
from __future__ import annotations

from typing import Generator

from lab.events import Event, LayerMetrics
from lab.runs.compute import few_threads
from lab.runs.context import RunContext, SeedState

__all__ = ["LidarViews", "lidar_sample"]

LIDAR = "lidar"
_VIEW_SEED = 7919            # view v draws its augmentation from split_seed * _VIEW_SEED + v


def lidar_sample(unseen, budget: int, *, seed: int):
    """At most ``budget`` images of ``unseen``, the same number from every class (all of it when it fits).

    Parameters
    ----------
    unseen : lab dataset of the unseen images
    budget : the most images (``RunConfig.lidar_images``)
    seed : the draw's seed (``split_seed``)
    """
    if len(unseen) <= budget:
        return unseen
    per_class = max(1, budget // max(1, len(unseen.classes)))
    return unseen.sample_per_class(per_class, seed=seed)


class LidarViews:
    """Measures LiDAR of one seed's model at one evaluation, when the run asks for it."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        cfg = ctx.cfg
        self.on = LIDAR in cfg.metrics and cfg.lidar_views >= 2
        self._images = None

    @property
    def images(self):
        """The unseen images that get views (drawn on first use)."""
        if self._images is None:
            cfg = self.ctx.cfg
            self._images = lidar_sample(self.ctx.data.unseen, cfg.lidar_images, seed=cfg.split_seed)
        return self._images

    def measure(self, state: SeedState, epoch: int) -> Generator[Event, None, None]:
        """Extract every view at every chosen layer, then record and stream LiDAR per layer."""
        import torch

        import lab.metrics

        ctx, cfg, seed = self.ctx, self.ctx.cfg, state.seed
        if not self.on:
            return
        images, layers = self.images, list(ctx.layers)
        views: dict[str, list] = {layer: [] for layer in layers}
        for v in range(cfg.lidar_views):
            ctx.check()
            loader = images.train_loader(cfg.eval_batch_size, augment=True, seed=cfg.split_seed * _VIEW_SEED + v,
                                         shuffle=False, **images.loader_options(state.bb.device))
            feats = yield from ctx.extract(state, loader, layers, stage="extract", epoch=epoch, timing="lidar")
            for layer in layers:
                views[layer].append(feats[layer])                                     # (n, d)
            del feats
        for layer in layers:
            ctx.check()
            V = torch.stack(views.pop(layer), dim=1)                                  # (n, q, d)
            with ctx.recorder.timed("lidar"), few_threads(V):
                values = lab.metrics.compute_layer(V[:, 0], None, metrics=(LIDAR,), layer=layer, views=V)
            values = {k: float(x) for k, x in values.items()}
            ctx.record_metrics(seed, epoch, layer, "unseen", values)
            yield LayerMetrics(ctx.run_id, seed=seed, epoch=epoch, layer=layer, split="unseen", values=values)
