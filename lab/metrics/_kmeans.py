"""k-means labels exactly as scikit-learn's ``KMeans(init="k-means++", n_init, random_state)``.

Why not ``KMeans(...).fit`` itself: at the sizes layerscope evaluates (N ~ 10^3, K ~ 5) a
third of its time is overhead around the numerics, mostly k-means++'s generic chunked
distance helper (5 calls per restart). Here k-means++ is scikit-learn's own algorithm
with the same float64 distances cast to the input's float type and the same draws from
the same ``RandomState`` stream, every restart runs scikit-learn's compiled Lloyd, and the
best restart is chosen by scikit-learn's rule, so the labels are the same (tests compare
them with ``KMeans`` on many inputs). If scikit-learn's private helpers move or take other
arguments (checked when this module loads, and a TypeError from them caught when called),
``KMeans`` is used as is: slower, the same labels.
"""
from __future__ import annotations

import inspect

import numpy as np
from sklearn.cluster import KMeans

try:   # private in scikit-learn; guarded so an upgrade degrades to KMeans, never breaks
    from sklearn.cluster._kmeans import _is_same_clustering, _kmeans_single_lloyd, _tolerance
    from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
except ImportError:          # pragma: no cover - depends on the installed scikit-learn
    _kmeans_single_lloyd = None

__all__ = ["kmeans_labels"]


def _takes(function, *names: str) -> bool:
    """Whether ``function`` accepts these parameter names (and has no other required ones)."""
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):          # pragma: no cover - a builtin without a signature
        return False
    required = {n for n, p in params.items() if p.default is p.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return set(names) <= set(params) and required <= set(names)


if _kmeans_single_lloyd is not None and not (
        _takes(_kmeans_single_lloyd, "X", "sample_weight", "centers_init", "max_iter", "verbose", "tol", "n_threads")
        and _takes(_tolerance, "X", "tol") and _takes(_is_same_clustering, "labels1", "labels2", "n_clusters")):
    _kmeans_single_lloyd = None     # pragma: no cover - an installed scikit-learn whose helpers changed

_TOL = 1e-4        # KMeans defaults
_MAX_ITER = 300


def kmeans_labels(X: np.ndarray, n_clusters: int, *, n_init: int, seed: int) -> np.ndarray:
    """Cluster labels of ``KMeans(n_clusters, init="k-means++", n_init=n_init, random_state=seed).fit(X)``.

    Parameters
    ----------
    X : numpy.ndarray, shape (N, d)
        Dense features; float32 stays float32 (as in scikit-learn), other types become float64.
    n_clusters : int
    n_init : int
        Restarts; the one with the lowest inertia wins.
    seed : int
        ``random_state``.

    Returns
    -------
    numpy.ndarray of int32, shape (N,)
    """
    if _kmeans_single_lloyd is not None:
        try:
            return _kmeans_private(X, n_clusters, n_init=n_init, seed=seed)
        except TypeError:        # a private helper's arguments changed after all: the public path
            pass
    return KMeans(n_clusters, init="k-means++", n_init=n_init, random_state=seed).fit(X).labels_


def _kmeans_private(X: np.ndarray, n_clusters: int, *, n_init: int, seed: int) -> np.ndarray:
    """:func:`kmeans_labels` through scikit-learn's private k-means helpers."""
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
    X = np.array(X, dtype=dtype, order="C", copy=True)
    tol = _tolerance(X, _TOL)                     # on the raw X, as KMeans does
    X -= X.mean(axis=0)                           # KMeans centres X for accurate distances
    rng = np.random.RandomState(seed)
    weights = np.ones(X.shape[0], dtype=dtype)
    X64 = X.astype(np.float64)
    norms64 = np.einsum("ij,ij->i", X64, X64)     # (N,) as sklearn's row_norms
    n_threads = _openmp_effective_n_threads()
    best_labels, best_inertia = None, None
    for _ in range(n_init):
        centers = _kmeans_plusplus(X, X64, norms64, n_clusters, weights, rng)
        labels, inertia, _, _ = _kmeans_single_lloyd(
            X, weights, centers, max_iter=_MAX_ITER, tol=tol, n_threads=n_threads)
        # KMeans.fit's rule: a restart replaces the best only with a lower inertia and a
        # different partition (equal partitions can differ in inertia by rounding).
        if best_inertia is None or (inertia < best_inertia
                                    and not _is_same_clustering(labels, best_labels, n_clusters)):
            best_labels, best_inertia = labels, inertia
    return best_labels


def _sq_distances(ids, X64: np.ndarray, norms64: np.ndarray, dtype) -> np.ndarray:
    """Squared distances (len(ids), N) from rows ``ids`` to every row as scikit-learn's
    ``_euclidean_distances`` computes them here: float64 ``-2 a.b + |a|² + |b|²`` in that
    order, cast to the input's float type. (For float32 input it splits the columns into
    chunks; every element is the same dot product either way.)"""
    A = X64[ids]                                                    # (m, d)
    d = A @ X64.T                                                   # (m, N)
    d *= -2
    d += np.einsum("ij,ij->i", A, A)[:, None]
    d += norms64
    d = d.astype(dtype, copy=False)
    np.maximum(d, 0, out=d)
    return d


def _kmeans_plusplus(X, X64, norms64, n_clusters, weights, rng) -> np.ndarray:
    """scikit-learn's greedy k-means++ (``sklearn.cluster._kmeans._kmeans_plusplus``), step for step."""
    n = X.shape[0]
    n_local_trials = 2 + int(np.log(n_clusters))
    centers = np.empty((n_clusters, X.shape[1]), dtype=X.dtype)
    center_id = rng.choice(n, p=weights / weights.sum())
    centers[0] = X[center_id]
    closest_dist_sq = _sq_distances([center_id], X64, norms64, X.dtype)     # (1, N)
    current_pot = closest_dist_sq @ weights
    for c in range(1, n_clusters):
        rand_vals = rng.uniform(size=n_local_trials) * current_pot
        candidate_ids = np.searchsorted(np.cumsum(weights * closest_dist_sq), rand_vals)
        np.clip(candidate_ids, None, closest_dist_sq.size - 1, out=candidate_ids)
        distance_to_candidates = _sq_distances(candidate_ids, X64, norms64, X.dtype)
        np.minimum(closest_dist_sq, distance_to_candidates, out=distance_to_candidates)
        candidates_pot = distance_to_candidates @ weights.reshape(-1, 1)
        best = np.argmin(candidates_pot)
        current_pot = candidates_pot[best]
        closest_dist_sq = distance_to_candidates[best]
        centers[c] = X[candidate_ids[best]]
    return centers
