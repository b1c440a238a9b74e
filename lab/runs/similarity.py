"""How far fine-tuning moved each layer's representation: linear CKA to its own epoch-0 features.

At the run's first evaluated epoch (epoch 0 of :func:`lab.run`; whichever epoch a monitored loop evaluates first) the
evaluator hands every layer's unseen-image features to :class:`InitialCKA`, which keeps them (at most
:data:`MAX_IMAGES` images, a fixed seeded subset, on the host);
at every later epoch the same images' features are compared with them by :func:`lab.metrics.cka`
(unbiased HSIC). 1 = the layer's representation is unchanged up to rotation and scale; lower =
fine-tuning moved it (Kornblith et al. 2019; Nguyen et al. 2021 compare layers the same way).
"""
from __future__ import annotations

import math
import warnings

__all__ = ["InitialCKA", "CKA_INITIAL", "MAX_IMAGES"]

CKA_INITIAL = "cka_initial"
"""The metric row (split "unseen") of each layer's CKA to its epoch-0 features."""
MAX_IMAGES = 4096
"""Epoch-0 images kept per layer: bounds the memory (MAX_IMAGES x d per layer) whatever N is."""


class InitialCKA:
    """Per (seed, layer): the features at the run's first evaluated epoch, and CKA of a later epoch's to them."""

    def __init__(self, subset_seed: int = 0):
        self._initial: dict = {}
        self._first: int | None = None          # the run's first evaluated epoch: the reference of every seed
        self._rows = None
        self._subset_seed = subset_seed

    def _subset(self, n: int):
        import torch

        if self._rows is None or self._rows[0] != n:
            g = torch.Generator().manual_seed(self._subset_seed)
            keep = torch.arange(n) if n <= MAX_IMAGES else torch.randperm(n, generator=g)[:MAX_IMAGES].sort().values
            self._rows = (n, keep)
        return self._rows[1]

    def measure(self, seed: int, epoch: int, layer: str, X) -> dict[str, float]:
        """``{"cka_initial": value}``: 1 at the first evaluated epoch (and its features kept), later CKA to them;
        NaN with a warning naming the layer where CKA is undefined (constant features)."""
        from lab.metrics import DegenerateFeaturesError, DegenerateLayerWarning, cka

        rows = self._subset(X.shape[0]).to(X.device)
        X = X[rows]                                                               # (n, d)
        if self._first is None:
            self._first = epoch
        if epoch == self._first:
            # kept on the host: every seed's and layer's epoch-0 features would otherwise hold device
            # memory for the whole run (a copy back per later epoch is small: at most MAX_IMAGES rows)
            self._initial[(seed, layer)] = X.detach().to("cpu", copy=True)
            return {CKA_INITIAL: 1.0}
        initial = self._initial.get((seed, layer))
        if initial is None:
            return {}
        try:
            return {CKA_INITIAL: float(cka(initial.to(X.device), X))}
        except DegenerateFeaturesError as exc:
            warnings.warn(f"layer {layer!r}: {CKA_INITIAL} set to NaN: {exc}", DegenerateLayerWarning, stacklevel=2)
            return {CKA_INITIAL: math.nan}
