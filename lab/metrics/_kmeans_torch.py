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

On a GPU the cost of this algorithm is host-device synchronisations and small kernels, not FLOPs,
so the ``n_init`` restarts run together rather than one after another:

- the draws do not depend on the data, so every restart's draws (``choice`` for the first centre,
  then ``uniform`` for each of the K-1 greedy steps; one ``uniform`` call of (K-1)·T numbers is the
  same stream as K-1 calls of T) are made up front, in scikit-learn's order, and cross to the
  device in one copy;
- k-means++ takes each greedy step for all restarts at once: one (R·T, d) x (d, N) GEMM;
- Lloyd assigns all running restarts with one (N, d) x (d, R·K) GEMM per iteration and sums them
  with one one-hot GEMM, and reads back one vector per iteration (per restart: empty clusters,
  labels changed, centre shift). Each restart keeps its own stopping rule; a stopped restart is
  frozen and leaves the GEMMs.
"""
from __future__ import annotations

import numpy as np
import torch

from ._device import _exact_float32

__all__ = ["kmeans_labels_torch"]

_TOL = 1e-4        # KMeans defaults
_MAX_ITER = 300
_BLOCK = 1 << 24   # entries of an (rows, R·K) block (or R·T distance rows of N) at once


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
    first, uniforms = _plusplus_draws(np.random.RandomState(seed), X.shape[0], n_clusters, n_init, X.dtype)
    centers = _kmeans_plusplus(X, norms, n_clusters, first, uniforms)                 # (R, K, d)
    labels, inertia, _ = _lloyd_batched(X, centers, max_iter=max_iter, tol=tol)       # (R, N), [R]
    # KMeans.fit's rule, restart by restart: equal partitions can differ in inertia by rounding alone.
    best = 0
    for r in range(1, n_init):
        if inertia[r] < inertia[best] and not _same_clustering(labels[r], labels[best], n_clusters):
            best = r
    return labels[best].clone()


def _plusplus_draws(rng: np.random.RandomState, n: int, n_clusters: int, n_init: int,
                    dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every restart's k-means++ draws, in the order scikit-learn makes them (restart r's after restart
    r-1's): the first centre ``rng.choice(n, p=uniform weights)`` (R,), then the K-1 steps' uniforms
    (R, K-1, T), each restart's drawn by one call (the same numbers as K-1 calls of T)."""
    n_local_trials = 2 + int(np.log(n_clusters))
    weights = np.ones(n, dtype=np.float32 if dtype == torch.float32 else np.float64)
    first = np.empty(n_init, dtype=np.int64)
    uniforms = np.empty((n_init, n_clusters - 1, n_local_trials))
    for r in range(n_init):
        first[r] = rng.choice(n, p=weights / weights.sum())      # the same draw as scikit-learn's
        if n_clusters > 1:
            uniforms[r] = rng.uniform(size=(n_clusters - 1) * n_local_trials).reshape(n_clusters - 1, -1)
    return first, uniforms


def _sq_distances(A: torch.Tensor, a_norms: torch.Tensor, X: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances (m, N) from the rows of A (m, d) to those of X (N, d)."""
    d = torch.addmm(a_norms[:, None], A, X.T, alpha=-2)          # (m, N)
    return d.add_(norms).clamp_min_(0)


def _kmeans_plusplus(X: torch.Tensor, norms: torch.Tensor, n_clusters: int, first: np.ndarray,
                     uniforms: np.ndarray) -> torch.Tensor:
    """scikit-learn's greedy k-means++ (``sklearn.cluster._kmeans._kmeans_plusplus``) on X's device for
    R restarts at once, from :func:`_plusplus_draws`' draws (R,) and (R, K-1, T): (R, K, d) centres.
    The draws cross to the device in one copy, and nothing crosses back."""
    n, device = X.shape[0], X.device
    n_init, n_local_trials = uniforms.shape[0], uniforms.shape[2]
    # one host-to-device copy: the first ids are exact in float64 (n < 2**53)
    packed = torch.as_tensor(np.concatenate([first.astype(np.float64), uniforms.ravel()]), device=device)
    first_t = packed[:n_init].long()                                                        # (R,)
    uniforms_t = packed[n_init:].view(n_init, n_clusters - 1, n_local_trials)               # (R, K-1, T)
    # restarts in groups whose (g·T, N) candidate distances stay within _BLOCK (at least one restart)
    group = max(1, _BLOCK // (n_local_trials * n))
    ids = []
    for s in range(0, n_init, group):
        ids.append(_plusplus_group(X, norms, n_clusters, first_t[s:s + group], uniforms_t[s:s + group]))
    return X[torch.cat(ids).flatten()].view(n_init, n_clusters, X.shape[1])                # (R, K, d) a copy


def _plusplus_group(X: torch.Tensor, norms: torch.Tensor, n_clusters: int, first: torch.Tensor,
                    uniforms: torch.Tensor) -> torch.Tensor:
    """The centre ids (g, K) of g restarts' greedy k-means++, one step for all g at a time."""
    n, g, n_local_trials = X.shape[0], uniforms.shape[0], uniforms.shape[2]
    rows = torch.arange(g, device=X.device) * n_local_trials                       # (g,) row of candidate 0
    ids = torch.empty((g, n_clusters), dtype=torch.int64, device=X.device)
    ids[:, 0] = first
    closest = _sq_distances(X[first], norms[first], X, norms)                       # (g, N)
    pot = closest.sum(dim=1, dtype=torch.float64)                                   # (g,)
    for k in range(1, n_clusters):
        draws = uniforms[:, k - 1] * pot[:, None]                                   # (g, T) float64
        cumulative = torch.cumsum(closest, 1, dtype=torch.float64)                  # (g, N)
        candidates = torch.searchsorted(cumulative, draws).clamp_(max=n - 1).flatten()   # (g·T,)
        to_candidates = _sq_distances(X[candidates], norms[candidates], X, norms)   # (g·T, N)
        torch.minimum(to_candidates.view(g, n_local_trials, n), closest[:, None],
                      out=to_candidates.view(g, n_local_trials, n))
        pots = to_candidates.sum(dim=1, dtype=torch.float64).view(g, n_local_trials)   # (g, T)
        best = rows + torch.argmin(pots, dim=1)                                     # (g,) rows of the winners
        pot = pots.flatten()[best]
        closest = to_candidates[best]                                               # (g, N)
        ids[:, k] = candidates[best]
    return ids


def _assign(X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
    """Index of each row's nearest centre under each of R restarts' centres (R, K, d): (R, N), ties to the
    lowest index, as scikit-learn's argmin of ``|c|² - 2 x·c`` (|x|² is the same for every centre). One
    GEMM against all R·K centres per block of rows."""
    n_restarts, n_clusters = centers.shape[:2]
    flat = centers.reshape(n_restarts * n_clusters, -1)                                  # (R·K, d)
    c_norms = torch.einsum("ij,ij->i", flat, flat)                                       # (R·K,)
    rows = max(1, _BLOCK // flat.shape[0])
    return torch.cat([torch.addmm(c_norms, X[s:s + rows], flat.T, alpha=-2)
                      .view(-1, n_restarts, n_clusters).argmin(dim=2)                    # (rows, R)
                      for s in range(0, X.shape[0], rows)]).T.contiguous()               # (R, N)


def _sums(X: torch.Tensor, labels: torch.Tensor, n_clusters: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-cluster sums of X (R, K, d) and counts (R, K) under R restarts' labels (R, N). A one-hot matmul
    rather than ``index_add_``, whose CUDA atomics add in a varying order: the result must be the same on
    every run; the counts come from the same one-hot (``bincount`` on CUDA waits for the host)."""
    n_restarts = labels.shape[0]
    width = n_restarts * n_clusters
    sums = X.new_zeros((width, X.shape[1]))
    counts = torch.zeros((n_restarts, n_clusters), dtype=torch.int64, device=X.device)
    rows = max(1, _BLOCK // width)
    arange = torch.arange(n_clusters, device=X.device)[:, None]                         # (K, 1)
    for s in range(0, X.shape[0], rows):
        onehot = labels[:, None, s:s + rows] == arange                                  # (R, K, rows)
        counts += onehot.sum(dim=2)
        sums.addmm_(onehot.view(width, -1).to(X.dtype), X[s:s + rows])
    return sums.view(n_restarts, n_clusters, -1), counts


def _relocate_empty(X, labels, centers_old, sums, counts) -> None:
    """scikit-learn's ``_relocate_empty_clusters_dense`` for one restart (labels (N,), centres (K, d)):
    each empty cluster takes one of the points farthest from their own centre (in place on ``sums``
    and ``counts``)."""
    empty = torch.nonzero(counts == 0).flatten().tolist()
    distances = _to_own_center(X, centers_old[None], labels[None])[0]           # (N,)
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
    labels, inertia, _ = _lloyd_batched(X, centers[None], max_iter=max_iter, tol=tol)
    return labels[0], inertia[0]


def _lloyd_batched(X: torch.Tensor, centers: torch.Tensor, *, max_iter: int,
                   tol: float) -> tuple[torch.Tensor, list[float], list[int]]:
    """R Lloyd runs at once from ``centers`` (R, K, d): labels (R, N), inertia and iterations per restart.

    Each restart follows scikit-learn's ``_kmeans_single_lloyd`` on its own: it stops when its labels
    do not change (its labels are final), or when its squared centre shift is at most ``tol`` or after
    ``max_iter`` iterations (then its labels are recomputed from its final centres). A stopped restart
    is frozen: its centres and labels are no longer touched, and it leaves the next iterations' GEMMs.
    """
    n_restarts, n_clusters, _ = centers.shape
    device = X.device
    centers = centers.clone()                                                    # (R, K, d)
    labels = torch.empty((n_restarts, X.shape[0]), dtype=torch.int64, device=device)
    strict = [False] * n_restarts
    n_iter = [0] * n_restarts
    running = list(range(n_restarts))                                            # restarts not stopped
    index = torch.arange(n_restarts, device=device)                              # (a,) the same, on the device
    current, labels_old = centers, None                                          # (a, K, d), (a, N)
    for it in range(max_iter):
        a = len(running)
        assigned = _assign(X, current)                                           # (a, N)
        sums, counts = _sums(X, assigned, n_clusters)                            # (a, K, d), (a, K)
        new = sums / counts.clamp_min(1)[..., None].to(X.dtype)                  # an empty cluster's sum is 0
        shift = ((new - current) ** 2).sum(dim=(1, 2), dtype=torch.float64)      # (a,)
        changed = ((assigned != labels_old).any(dim=1) if labels_old is not None
                   else torch.ones(a, dtype=torch.bool, device=device))
        # one transfer per iteration for all running restarts: empty clusters, labels changed, shift
        flags = torch.cat([(counts == 0).sum(dim=1).double(), changed.double(), shift]).tolist()
        n_empty, changed, shift = flags[:a], flags[a:2 * a], flags[2 * a:]
        for i in range(a):
            if n_empty[i]:        # rare: relocate for this restart alone
                _relocate_empty(X, assigned[i], current[i], sums[i], counts[i])
                new[i] = sums[i] / counts[i].clamp_min(1)[:, None].to(X.dtype)
                shift[i] = float(((new[i] - current[i]) ** 2).sum(dtype=torch.float64))
        centers.index_copy_(0, index, new)
        labels.index_copy_(0, index, assigned)
        keep = []
        for i, r in enumerate(running):
            n_iter[r] = it + 1
            if not changed[i]:
                strict[r] = True
            elif shift[i] > tol:
                keep.append(i)
        if not keep:
            break
        if len(keep) < a:                 # some stopped: the rest go on without them
            kept = torch.tensor(keep, device=device)
            running = [running[i] for i in keep]
            index, new, assigned = index[kept], new[kept], assigned[kept]
        current, labels_old = new, assigned
    loose = [r for r in range(n_restarts) if not strict[r]]
    if loose:             # as scikit-learn: the labels must belong to the final centres
        loose_index = torch.tensor(loose, device=device)
        labels.index_copy_(0, loose_index, _assign(X, centers[loose_index]))
    inertia = _to_own_center(X, centers, labels).sum(dim=1, dtype=torch.float64).tolist()
    return labels, inertia, n_iter


def _to_own_center(X: torch.Tensor, centers: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Squared distance of each row to its cluster's centre under each of R restarts (centres (R, K, d),
    labels (R, N)): (R, N), in row blocks (no R x N x d temporary)."""
    n_restarts, n_clusters, d = centers.shape
    flat = centers.reshape(n_restarts * n_clusters, d)                                   # (R·K, d)
    offsets = torch.arange(n_restarts, device=X.device)[:, None] * n_clusters            # (R, 1)
    rows = max(1, _BLOCK // (n_restarts * d))
    return torch.cat([((X[s:s + rows] - flat[labels[:, s:s + rows] + offsets]) ** 2).sum(dim=2)
                      for s in range(0, X.shape[0], rows)], dim=1)                      # (R, N)


def _same_clustering(a: torch.Tensor, b: torch.Tensor, n_clusters: int) -> bool:
    """Whether every cluster of ``a`` lies inside one cluster of ``b`` (scikit-learn's
    ``_is_same_clustering``): each row of the contingency table has one non-zero entry."""
    table = torch.bincount(a * n_clusters + b, minlength=n_clusters * n_clusters).reshape(n_clusters, -1)
    return bool(((table > 0).sum(dim=1) <= 1).all())
