"""k-means on the features' own device: scikit-learn's ``KMeans(init="k-means++", n_init, random_state)``
algorithm written in torch, for features that live on a GPU (no copy of X to the host).

The same steps as scikit-learn: X centred, tolerance ``1e-4 * mean(var(X))``, greedy k-means++
(``2 + int(log K)`` candidates per centre, the one that lowers the potential most), Lloyd until
the labels stop changing or the squared centre shift falls to the tolerance (then one more
assignment), empty clusters re-seeded with the points farthest from their centres, and of the
``n_init`` restarts the lowest inertia with a different partition wins. Even the random numbers
are scikit-learn's: the few draws of k-means++ come from ``numpy.random.RandomState(seed)`` in the
same order, so a seed picks the same candidates on every device. Arithmetic differs (float32
distances on the device where scikit-learn's k-means++ uses float64, other summation orders), so
labels can differ where two choices are within rounding; tests compare with ``KMeans`` directly.
"""
from __future__ import annotations

import numpy as np
import torch

from ._device import _exact_float32

__all__ = ["kmeans_labels_torch"]

_TOL = 1e-4        # KMeans defaults
_MAX_ITER = 300
_BLOCK = 1 << 24   # entries of an (rows, K) block at once


def kmeans_labels_torch(X: torch.Tensor, n_clusters: int, *, n_init: int, seed: int,
                        max_iter: int = _MAX_ITER) -> torch.Tensor:
    """Cluster labels of k-means++ / Lloyd on X's device, as ``KMeans(n_clusters, n_init=n_init,
    random_state=seed).fit(X).labels_`` up to rounding.

    Parameters
    ----------
    X : torch.Tensor, shape (N, d), float32 or float64
        Computed in its dtype, on its device.
    n_clusters : int
    n_init : int
        Restarts; the one with the lowest inertia wins.
    seed : int
        Seed of the k-means++ draws (scikit-learn's ``random_state``).
    max_iter : int
        Lloyd iterations per restart.

    Returns
    -------
    torch.Tensor of int64, shape (N,), on X's device
    """
    with _exact_float32(X.device):     # TF32 distances would move assignments on CUDA
        return _kmeans_labels(X, n_clusters, n_init=n_init, seed=seed, max_iter=max_iter)


def _kmeans_labels(X: torch.Tensor, n_clusters: int, *, n_init: int, seed: int, max_iter: int) -> torch.Tensor:
    X = X - X.mean(dim=0)                                         # (N, d) a copy, freed on return
    tol = float(X.var(dim=0, unbiased=False).mean()) * _TOL       # centring leaves the variance as is
    norms = torch.einsum("ij,ij->i", X, X)                        # (N,)
    rng = np.random.RandomState(seed)
    best_labels, best_inertia = None, None
    for _ in range(n_init):
        centers = _kmeans_plusplus(X, norms, n_clusters, rng)
        labels, inertia = _lloyd(X, centers, max_iter=max_iter, tol=tol)
        # KMeans.fit's rule: equal partitions can differ in inertia by rounding alone.
        if best_inertia is None or (inertia < best_inertia
                                    and not _same_clustering(labels, best_labels, n_clusters)):
            best_labels, best_inertia = labels, inertia
    return best_labels


def _sq_distances(A: torch.Tensor, a_norms: torch.Tensor, X: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances (m, N) from the rows of A (m, d) to those of X (N, d)."""
    d = torch.addmm(a_norms[:, None], A, X.T, alpha=-2)          # (m, N)
    return d.add_(norms).clamp_min_(0)


def _kmeans_plusplus(X: torch.Tensor, norms: torch.Tensor, n_clusters: int, rng) -> torch.Tensor:
    """scikit-learn's greedy k-means++ (``sklearn.cluster._kmeans._kmeans_plusplus``) on X's device;
    only the uniform draws cross from the host, and nothing crosses back."""
    n, device = X.shape[0], X.device
    n_local_trials = 2 + int(np.log(n_clusters))
    weights = np.ones(n, dtype=np.float32 if X.dtype == torch.float32 else np.float64)
    first = rng.choice(n, p=weights / weights.sum())              # the same draw as scikit-learn's
    ids = [torch.tensor([first], device=device)]
    closest = _sq_distances(X[first:first + 1], norms[first:first + 1], X, norms)[0]   # (N,)
    pot = closest.sum(dtype=torch.float64)
    for _ in range(1, n_clusters):
        draws = torch.as_tensor(rng.uniform(size=n_local_trials), device=device) * pot     # (T,) float64
        cumulative = torch.cumsum(closest, 0, dtype=torch.float64)                          # (N,)
        candidates = torch.searchsorted(cumulative, draws).clamp_(max=n - 1)               # (T,)
        to_candidates = _sq_distances(X[candidates], norms[candidates], X, norms)           # (T, N)
        torch.minimum(closest, to_candidates, out=to_candidates)
        pots = to_candidates.sum(dim=1, dtype=torch.float64)                                # (T,)
        best = torch.argmin(pots)
        pot, closest = pots[best], to_candidates[best]
        ids.append(candidates[best].reshape(1))
    return X[torch.cat(ids)]                                                                # (K, d) a copy


def _assign(X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
    """Index of each row's nearest centre (N,), ties to the lowest index, as scikit-learn's argmin of
    ``|c|² - 2 x·c`` (|x|² is the same for every centre)."""
    c_norms = torch.einsum("ij,ij->i", centers, centers)                  # (K,)
    rows = max(1, _BLOCK // centers.shape[0])
    return torch.cat([torch.addmm(c_norms, X[s:s + rows], centers.T, alpha=-2).argmin(dim=1)
                      for s in range(0, X.shape[0], rows)])


def _sums(X: torch.Tensor, labels: torch.Tensor, n_clusters: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-cluster sums of X (K, d) and counts (K,). A one-hot matmul rather than ``index_add_``, whose
    CUDA atomics add in a varying order: the result must be the same on every run."""
    sums = X.new_zeros((n_clusters, X.shape[1]))
    rows = max(1, _BLOCK // n_clusters)
    arange = torch.arange(n_clusters, device=X.device)
    for s in range(0, X.shape[0], rows):
        onehot = (labels[s:s + rows, None] == arange).to(X.dtype)            # (rows, K)
        sums.addmm_(onehot.T, X[s:s + rows])
    return sums, torch.bincount(labels, minlength=n_clusters)


def _relocate_empty(X, labels, centers_old, sums, counts) -> None:
    """scikit-learn's ``_relocate_empty_clusters_dense``: each empty cluster takes one of the points
    farthest from their own centre (in place on ``sums`` and ``counts``)."""
    empty = torch.nonzero(counts == 0).flatten().tolist()
    distances = _to_own_center(X, centers_old, labels)                      # (N,)
    if float(distances.max()) == 0:       # fewer distinct points than clusters: nothing to move
        return
    far = torch.topk(distances, len(empty)).indices.tolist()
    for new, idx in zip(empty, far):
        old = int(labels[idx])
        sums[old] -= X[idx]
        sums[new] = X[idx]
        counts[new] += 1
        counts[old] -= 1


def _lloyd(X: torch.Tensor, centers: torch.Tensor, *, max_iter: int, tol: float) -> tuple[torch.Tensor, float]:
    """One Lloyd run from ``centers`` (K, d): (labels (N,), inertia), scikit-learn's stopping rules."""
    n_clusters = centers.shape[0]
    labels_old = None
    strict = False
    for _ in range(max_iter):
        labels = _assign(X, centers)
        sums, counts = _sums(X, labels, n_clusters)
        new = sums / counts.clamp_min(1)[:, None].to(X.dtype)     # an empty cluster's sum is 0
        shift = ((new - centers) ** 2).sum(dtype=torch.float64)
        changed = (labels != labels_old).any() if labels_old is not None else torch.ones((), device=X.device)
        # one transfer per iteration: whether to relocate, whether labels changed, the shift
        n_empty, changed, shift_value = torch.stack(
            [(counts == 0).sum().double(), changed.double(), shift]).tolist()
        if n_empty:
            _relocate_empty(X, labels, centers, sums, counts)
            new = sums / counts.clamp_min(1)[:, None].to(X.dtype)
            shift_value = float(((new - centers) ** 2).sum(dtype=torch.float64))
        centers = new
        if not changed:
            strict = True
            break
        if shift_value <= tol:
            break
        labels_old = labels
    if not strict:        # as scikit-learn: the labels must belong to the final centres
        labels = _assign(X, centers)
    inertia = float(_to_own_center(X, centers, labels).sum(dtype=torch.float64))
    return labels, inertia


def _to_own_center(X: torch.Tensor, centers: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Squared distance of each row to its cluster's centre (N,), in row blocks (no N x d temporary)."""
    rows = max(1, _BLOCK // X.shape[1])
    return torch.cat([((X[s:s + rows] - centers[labels[s:s + rows]]) ** 2).sum(dim=1)
                      for s in range(0, X.shape[0], rows)])


def _same_clustering(a: torch.Tensor, b: torch.Tensor, n_clusters: int) -> bool:
    """Whether every cluster of ``a`` lies inside one cluster of ``b`` (scikit-learn's
    ``_is_same_clustering``): each row of the contingency table has one non-zero entry."""
    table = torch.bincount(a * n_clusters + b, minlength=n_clusters * n_clusters).reshape(n_clusters, -1)
    return bool(((table > 0).sum(dim=1) <= 1).all())
