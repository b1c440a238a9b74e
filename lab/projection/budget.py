"""The budget of a UMAP layout: fit on a class-stratified sample, place the rest with ``transform``.

A UMAP fit costs about its number of points times its optimisation epochs, on one CPU thread
when seeded; at 50,000 images a fit takes minutes and a live view falls behind the run. So
:func:`lab.projection.umap_layout` fits at most ``fit_points`` images (:func:`fit_subset`: the
same classes' shares, the same images at every epoch and layer) and places every other image
with the fitted model's ``transform`` (McInnes et al. 2018, section 4.3), whose neighbour
search is :class:`ExactIndex`: exact kNN of the new points among the fitted ones, on the
tensor's device. With a CUDA device and RAPIDS cuML installed, cuML's UMAP does both
(:func:`umap_backend`); without cuML the run goes on with umap-learn after one warning line.
"""
from __future__ import annotations

import functools
import logging

import numpy as np
import torch

_log = logging.getLogger(__name__)

__all__ = ["fit_subset", "ExactIndex", "umap_backend", "cuml_fit_transform", "BACKENDS"]

BACKENDS = ("umap-learn", "cuml")
"""UMAP implementations: umap-learn (CPU, always there) and RAPIDS cuML (CUDA, optional)."""

_QUERY_ROWS = 4096       # rows of a distance block in ExactIndex.query: (4096, n_fit) float32


def fit_subset(labels, n: int, *, seed: int = 0) -> np.ndarray:
    """Sorted indices of at most ``n`` points, each class keeping its share (largest remainders).

    Parameters
    ----------
    labels : array (N,) of class labels
    n : the budget (>= 1)
    seed : the sample's seed (the same seed and labels give the same sample)

    Returns
    -------
    ndarray (min(n, N),) int64, ascending; ``arange(N)`` when N <= n. Every class with images gets at
    least one when ``n`` is at least the number of classes.
    """
    from lab.features import to_numpy

    labels = to_numpy(labels)                                      # a tensor on any device, or an array
    total = labels.shape[0]
    if n >= total:
        return np.arange(total, dtype=np.int64)
    classes, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    exact = n * counts / total                                     # (K,) each class's share of the budget
    quota = np.floor(exact).astype(np.int64)
    if n >= len(classes):
        quota = np.maximum(quota, 1)
    # hand out what rounding left by largest remainder, taking back from the largest quotas if over
    order = np.argsort(-(exact - quota), kind="stable")
    i = 0
    while quota.sum() < n:
        c = order[i % len(order)]
        if quota[c] < counts[c]:
            quota[c] += 1
        i += 1
    while quota.sum() > n:
        quota[np.argmax(quota)] -= 1
    rng = np.random.default_rng(seed)
    picked = [rng.choice(np.flatnonzero(inverse == c), size=int(q), replace=False) for c, q in enumerate(quota) if q]
    return np.sort(np.concatenate(picked)).astype(np.int64)


class ExactIndex:
    """The neighbour search umap's ``transform`` calls (``precomputed_knn[2]``): exact Euclidean kNN of
    new points among the fitted ones, in blocks of rows on the fitted points' device.

    Parameters
    ----------
    points : Tensor (n_fit, d), the points the UMAP was fitted on
    """

    _angular_trees = False            # read by umap's transform (it picks the search epsilon from it)

    def __init__(self, points: torch.Tensor):
        self.points = points.float()                                   # (n_fit, d)

    def query(self, X, k: int, epsilon: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(indices (n, k) int64, distances (n, k) float32)`` of each row of ``X`` (n, d), nearest first."""
        from lab.features import to_numpy

        X = torch.as_tensor(to_numpy(X, np.float32))
        k = min(int(k), self.points.shape[0])
        idx, dst = [], []
        for start in range(0, X.shape[0], _QUERY_ROWS):
            block = X[start:start + _QUERY_ROWS].to(self.points.device)                   # (b, d)
            d, i = torch.cdist(block, self.points).topk(k, largest=False)                  # (b, k) each
            idx.append(i.cpu())
            dst.append(d.cpu())
        return torch.cat(idx).numpy().astype(np.int64), torch.cat(dst).numpy().astype(np.float32)


def umap_backend(device=None) -> str:
    """"cuml" when ``device`` is a CUDA device and RAPIDS cuML imports, else "umap-learn".

    A CUDA device whose cuML does not import (not installed, or a broken install) warns once per
    process, in one line, and uses umap-learn: cuML is an optional extra, never required.
    """
    kind = device.type if isinstance(device, torch.device) else str(device or "cpu").split(":")[0]
    if kind != "cuda":
        return "umap-learn"
    return "cuml" if _cuml() is not None else "umap-learn"


@functools.lru_cache(maxsize=1)
def _cuml():
    """cuML's UMAP class, or None (after one warning) when it does not import."""
    try:
        from cuml.manifold import UMAP
    except Exception as exc:      # noqa: BLE001 - any failure to import an optional extra means "not there"
        text = str(exc).splitlines()[0] if str(exc) else ""
        _log.warning("cuML's UMAP is not available (%s: %s); UMAP layouts use umap-learn on the CPU",
                     type(exc).__name__, text)
        return None
    return UMAP


def cuml_fit_transform(X_fit: np.ndarray, X_rest: np.ndarray | None, *, n_neighbors: int, min_dist: float,
                       seed: int, n_epochs: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """cuML's UMAP fitted on ``X_fit`` (n_fit, d), and ``X_rest`` placed by its ``transform``.

    cuML starts from a spectral layout (it takes no initial coordinates), so its layouts of
    consecutive epochs are not aligned the way umap-learn's are.
    """
    UMAP = _cuml()
    extra = {} if n_epochs is None else {"n_epochs": int(n_epochs)}
    reducer = UMAP(n_neighbors=n_neighbors, n_components=2, min_dist=min_dist, random_state=seed,
                   init="spectral", output_type="numpy", **extra)
    fitted = np.asarray(reducer.fit_transform(X_fit), dtype=np.float32)
    rest = np.asarray(reducer.transform(X_rest), dtype=np.float32) if X_rest is not None and len(X_rest) else None
    return fitted, rest
