"""The layouts behind :mod:`lab.projection`: PCA, the exact kNN graph, seeded UMAP, and umap's warm-up.

Import these names from :mod:`lab.projection`, which re-exports them.
"""
from __future__ import annotations

import threading
import warnings

import numpy as np
import torch

__all__ = ["pca_layout", "knn_graph", "umap_layout", "warm_up", "is_warm"]

_WARM_LOCK = threading.Lock()
_WARM_THREAD: threading.Thread | None = None
_WARM_DONE = threading.Event()


def _as_tensor(X) -> torch.Tensor:
    """X (N, d) as a float32 tensor on its own device, detached (a layout is a picture, not a graph)."""
    if isinstance(X, np.ndarray):
        X = torch.from_numpy(X)
    if not isinstance(X, torch.Tensor):
        raise ValueError(f"X must be a torch.Tensor or numpy array (N, d). Got {type(X).__name__} instead.")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (N, d). Got shape {tuple(X.shape)} instead.")
    return X.detach().float()


def pca_layout(X, *, reference: np.ndarray | None = None) -> np.ndarray:
    """First two principal components of ``X`` (N, d), as float32 (N, 2).

    Deterministic: each axis's sign is chosen so that it correlates positively
    with ``reference`` (N, 2) when given (keeps consecutive layouts from
    flipping), else so that its largest-magnitude score is positive.
    """
    from lab.features import to_numpy
    from lab.device import float64_device

    X = _as_tensor(X)
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"pca_layout needs at least 2 points. Got {n}.")
    Xc = X - X.mean(0, keepdim=True)                                  # (N, d)
    # Eigen-decompose the smaller of the (d, d) scatter and the (N, N) Gram matrix. The product
    # stays in the features' precision (the costly part, a picture needs no more); the small
    # symmetric eigenproblem runs in float64, on the CPU where the device has none (MPS).
    where = float64_device(X.device)
    if Xc.shape[1] <= Xc.shape[0]:
        evals, evecs = torch.linalg.eigh((Xc.T @ Xc).to(where).double())   # (d,), (d, d) ascending
        order = torch.argsort(evals, descending=True)[:2]
        if where == X.device:
            scores = Xc.double() @ evecs[:, order]                    # (N, 2)
        else:                                                         # float32 projection on the device
            scores = Xc @ evecs[:, order].to(Xc)                      # (N, 2)
    else:
        evals, evecs = torch.linalg.eigh((Xc @ Xc.T).to(where).double())   # (N,), (N, N) ascending
        order = torch.argsort(evals, descending=True)[:2]
        scores = evecs[:, order] * evals[order].clamp_min(0).sqrt()   # (N, 2)
    coords = to_numpy(scores, np.float64)
    if coords.shape[1] < 2:                                           # d == 1
        coords = np.concatenate([coords, np.zeros((n, 2 - coords.shape[1]))], axis=1)
    coords = _fix_signs(coords, None if reference is None else to_numpy(reference))
    return np.ascontiguousarray(coords, dtype=np.float32)


def _fix_signs(coords: np.ndarray, reference: np.ndarray | None) -> np.ndarray:
    coords = coords.copy()
    for j in range(coords.shape[1]):
        if reference is not None and reference.shape == coords.shape:
            s = np.sign(np.dot(coords[:, j] - coords[:, j].mean(), reference[:, j] - reference[:, j].mean()))
        else:
            s = np.sign(coords[np.argmax(np.abs(coords[:, j])), j])
        if s < 0:
            coords[:, j] = -coords[:, j]
    return coords


def knn_graph(X, k: int = 15) -> tuple[np.ndarray, np.ndarray]:
    """Exact k-nearest-neighbour graph *including each point itself*, for umap.

    Computed on the tensor's device by :func:`lab.metrics.knn_indices` with
    ``include_self=True`` (each point is its own first neighbour at distance 0),
    the layout umap's ``precomputed_knn`` expects.

    Returns
    -------
    indices : ndarray (N, k) int64
    dists : ndarray (N, k) float32, Euclidean, ascending per row
    """
    X = _as_tensor(X)
    n = X.shape[0]
    if not 2 <= k <= n:
        raise ValueError(f"k must be between 2 and the number of points ({n}). Got {k}.")
    from lab.metrics import knn_indices

    from lab.features import to_numpy

    dists, idx = knn_indices(X, k, include_self=True)                # (N, k) each
    return to_numpy(idx, np.int64), to_numpy(dists, np.float32)


def umap_layout(
    X,
    *,
    knn: tuple[np.ndarray, np.ndarray] | None = None,
    init: np.ndarray | None = None,
    seed: int = 0,
    n_neighbors: int = 15,
    min_dist: float = 0.1,
    n_epochs: int | None = None,
    labels=None,
    fit_points: int | None = None,
    backend: str = "umap-learn",
    _join: bool = True,
) -> np.ndarray:
    """Seeded UMAP of ``X`` (N, d) into (N, 2) float32, fitted on at most ``fit_points`` points.

    Parameters
    ----------
    knn : (indices, dists) or None
        A precomputed exact kNN graph of the *fitted* points that includes each point itself
        (:func:`knn_graph`); computed here when None. Must have ``min(n_neighbors, n_fit - 1)`` columns.
    init : ndarray (N, 2) or None
        Initial layout of every point (e.g. the previous epoch's UMAP of the same layer); None
        uses :func:`pca_layout`. The fit starts from its rows of the fitted points.
    seed : int
        ``random_state`` of umap (which makes it single-threaded and deterministic).
    labels, fit_points : array (N,), int or None
        With ``fit_points`` < N, UMAP is fitted on :func:`lab.projection.budget.fit_subset` of
        ``labels`` (class-stratified; all one class when None) and every other point is placed by
        the fitted model's ``transform`` (its neighbours found exactly among the fitted points).
    backend : "umap-learn" or "cuml" (:func:`lab.projection.budget.umap_backend`)
    """
    from lab.features import to_numpy
    from lab.projection.budget import BACKENDS, fit_subset

    X = _as_tensor(X)
    n = X.shape[0]
    if n < 4:
        raise ValueError(f"umap_layout needs at least 4 points. Got {n}.")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}. Got {backend!r} instead.")
    if fit_points is not None and fit_points < 4:
        raise ValueError(f"fit_points must be at least 4 or None. Got {fit_points!r} instead.")
    labels = None if labels is None else to_numpy(labels)          # (N,) e.g. a FeatureSet's labels on the GPU
    if labels is not None and labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},). Got {labels.shape} instead.")
    fit = None
    if fit_points is not None and n > fit_points:
        fit = fit_subset(np.zeros(n, np.int64) if labels is None else labels, fit_points, seed=seed)
    X_fit = X if fit is None else X[torch.from_numpy(fit).to(X.device)]                  # (n_fit, d)
    k = min(n_neighbors, X_fit.shape[0] - 1)
    if init is None:
        init = pca_layout(X)
    init = to_numpy(init, np.float32)
    if init.shape != (n, 2):
        raise ValueError(f"init must have shape ({n}, 2). Got {init.shape} instead.")
    rest = None if fit is None else np.setdiff1d(np.arange(n), fit)
    coords = np.empty((n, 2), dtype=np.float32)
    if backend == "cuml":
        from lab.projection.budget import cuml_fit_transform

        X_rest = None if rest is None else to_numpy(X[torch.from_numpy(rest).to(X.device)])
        fitted, placed = cuml_fit_transform(to_numpy(X_fit), X_rest, n_neighbors=k, min_dist=min_dist,
                                            seed=seed, n_epochs=n_epochs)
    else:
        if knn is None:
            knn = knn_graph(X_fit, k)
        if knn[0].shape != (X_fit.shape[0], k):
            raise ValueError(f"knn must have shape ({X_fit.shape[0]}, {k}) (self included). "
                             f"Got {knn[0].shape} instead.")
        if _join:
            _join_warm_up()
        fitted, placed = _umap_learn(X_fit, X if rest is None else X[torch.from_numpy(rest).to(X.device)],
                                     rest is not None, knn=knn, init=init if fit is None else init[fit], k=k,
                                     min_dist=min_dist, seed=seed, n_epochs=n_epochs)
    if fit is None:
        coords[:] = fitted
    else:
        coords[fit], coords[rest] = fitted, placed
    return coords


def _umap_learn(X_fit: torch.Tensor, X_rest: torch.Tensor, transform: bool, *, knn, init, k, min_dist, seed,
                n_epochs) -> tuple[np.ndarray, np.ndarray | None]:
    """umap-learn fitted on ``X_fit`` with the precomputed graph ``knn``; ``X_rest`` placed when ``transform``."""
    from lab.projection._umap_import import import_umap
    from lab.projection.budget import ExactIndex

    umap = import_umap()

    with warnings.catch_warnings():
        # n_jobs overridden by random_state; the search index is ours, not an NNDescent
        warnings.simplefilter("ignore")
        reducer = umap.UMAP(
            n_neighbors=k, n_components=2, min_dist=min_dist, metric="euclidean",
            random_state=seed, init=init, n_epochs=n_epochs,
            precomputed_knn=(knn[0], knn[1], ExactIndex(X_fit.detach())), verbose=False,
        )
        fitted = reducer.fit_transform(X_fit.detach().cpu().numpy())
        placed = reducer.transform(X_rest.detach().cpu().numpy()) if transform else None
    fitted = np.ascontiguousarray(fitted, dtype=np.float32)
    return fitted, None if placed is None else np.ascontiguousarray(placed, dtype=np.float32)


def _warm_up_body() -> None:
    try:
        rng = np.random.default_rng(0)
        X = torch.from_numpy(rng.normal(size=(64, 8)).astype(np.float32))
        X[:32] += 4.0
        labels = np.repeat([0, 1], 32)
        # a fit on 48 of the points and the transform of the other 16: the code paths of a budgeted fit
        from lab.projection.budget import fit_subset

        fit = torch.from_numpy(fit_subset(labels, 48))
        idx, dst = _torch_knn(X[fit], 15)
        umap_layout(X, knn=(idx, dst), init=pca_layout(X), seed=0, n_epochs=20, labels=labels, fit_points=48,
                    _join=False)
    except Exception:   # warming is an optimisation only; a real fit reports real errors
        pass
    finally:
        _WARM_DONE.set()


def _torch_knn(X: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    d = torch.cdist(X, X)                                             # (N, N)
    dists, idx = d.topk(k, largest=False)                             # self first (distance 0)
    return idx.numpy().astype(np.int64), dists.numpy().astype(np.float32)


def warm_up(*, wait: bool = False) -> threading.Thread:
    """Compile umap's numba code once per process, in a background daemon thread.

    Safe to call many times: only the first call starts a thread; later calls
    return it. Real fits wait for the warm-up to finish instead of compiling twice.
    """
    global _WARM_THREAD
    with _WARM_LOCK:
        if _WARM_THREAD is None:
            _WARM_THREAD = threading.Thread(target=_warm_up_body, name="lab-umap-warm-up", daemon=True)
            _WARM_THREAD.start()
        thread = _WARM_THREAD
    if wait:
        thread.join()
    return thread


def is_warm() -> bool:
    """True once :func:`warm_up` has finished in this process."""
    return _WARM_DONE.is_set()


def _join_warm_up() -> None:
    thread = _WARM_THREAD
    if thread is not None and thread is not threading.current_thread():
        thread.join()

