"""Wang & Yang's tools ("With greater distance comes worse performance"): the label-noise corruption of the
training labels (:func:`corrupt_labels`) and the exact, reversible layer re-initialisation that the contribution
analysis measures with (:func:`reinitialized`)."""
from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
import torch
from torch import nn

__all__ = ["corrupt_labels", "reinitialized"]


def corrupt_labels(targets, fraction: float, n_classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Replace exactly ``round(fraction * n)`` labels by a different, uniformly drawn class.

    Wang & Yang's label-noise setting. Seeded (``numpy.random.default_rng(seed)``).

    Returns
    -------
    noisy : ndarray (n,) int64
        The training labels to use (a new array; ``targets`` is not modified).
    corrupted : ndarray (m,) int64
        Sorted indices of the corrupted samples, m = round(fraction * n).
    """
    clean = np.asarray(targets, dtype=np.int64)
    n = clean.shape[0]
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be between 0.0 and 1.0. Got {fraction!r} instead.")
    m = int(round(fraction * n))
    noisy = clean.copy()
    if m == 0:
        return noisy, np.zeros(0, dtype=np.int64)
    if n_classes < 2:
        raise ValueError(f"label noise needs at least 2 classes. Got {n_classes}.")
    rng = np.random.default_rng(seed)
    corrupted = np.sort(rng.choice(n, size=m, replace=False)).astype(np.int64)
    shift = rng.integers(1, n_classes, size=m)                  # never 0: the label always changes
    noisy[corrupted] = (clean[corrupted] + shift) % n_classes
    return noisy, corrupted


@contextlib.contextmanager
def reinitialized(module: nn.Module, initial_state: dict[str, torch.Tensor]) -> Iterator[nn.Module]:
    """Temporarily set ``module``'s parameters and buffers to ``initial_state``; restore exactly after.

    ``initial_state`` is ``module.state_dict()`` as captured at epoch 0. Values are
    copied in place (tensor identities, and so optimizer references, are kept), and
    the current values are restored bit for bit in ``finally``.
    """
    current = module.state_dict()
    missing = set(current) - set(initial_state)
    if missing:
        raise ValueError(f"initial_state lacks {sorted(missing)[:3]} of this module; capture it with "
                         f"module.state_dict() at epoch 0.")
    saved = {k: v.detach().clone() for k, v in current.items()}
    try:
        with torch.no_grad():
            for k, v in current.items():
                v.copy_(initial_state[k].to(v.device, v.dtype))
        yield module
    finally:
        with torch.no_grad():
            for k, v in current.items():
                v.copy_(saved[k])
