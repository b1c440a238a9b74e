"""Separability of (unseen) classes in one layer's features.

Definitions: ``/work/shared/METRICS.md`` ("Separability of unseen classes"), after
Dyballa, Gerritz & Zucker 2024 (arXiv 2405.01524) and Gerritz, Dyballa & Zucker 2024
(arXiv 2402.14095). ``protocol="paper"`` reproduces their public code
(dyballa/generalization, ``compute_nmis``): one k-means++ run with ``random_state=42``,
Euclidean 1-NN accuracy and k-NN purity with k = images per class.

k-means (nmi) and the linear probe have two implementations (``backend``): scikit-learn's, on a CPU
copy of X (``lab.metrics._kmeans`` / ``_probe``: the exact numbers of ``KMeans`` and
``LogisticRegression``), and torch's, on X's own device (``_kmeans_torch`` / ``_probe_torch``: the
same algorithms, equal up to rounding). "auto" takes torch for features on a CUDA device, so that a
GPU run never copies a layer's features to the host, and scikit-learn otherwise, so that CPU
numbers stay what they were.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import sklearn
import torch
# Imported with the module, not lazily: threadpoolctl.threadpool_limits (which callers use on
# small problems, e.g. lab.runs) only limits BLAS/OpenMP libraries that are already loaded.
from sklearn.metrics import normalized_mutual_info_score
from sklearn.model_selection import StratifiedKFold

from ._checks import _check_inputs, _check_k, _check_protocol, _Checked, _as_features, _reject_constant
from ._kmeans import kmeans_labels
from ._kmeans_torch import kmeans_labels_torch
from ._neighbors import _Graph, _neighbor_graphs, _vote
from ._probe import probe_accuracy
from ._probe_torch import probe_accuracy_torch

__all__ = [
    "Neighbors", "knn_indices", "nmi", "knn_accuracy", "knn_purity",
    "weighted_knn_accuracy", "linear_probe_accuracy", "BACKENDS",
]

_METRICS = ("euclidean", "cosine")
BACKENDS = ("auto", "sklearn", "torch")
"""Implementations of k-means and the linear probe: "auto" (torch for features on a CUDA device,
scikit-learn otherwise), "sklearn" (a CPU copy, scikit-learn's exact numbers), "torch" (X's device)."""
PAPER_SEED = 42


class Neighbors(NamedTuple):
    """Result of :func:`knn_indices`: unpacks as ``dists, idx``."""

    distances: torch.Tensor   # (N, k) ascending
    indices: torch.Tensor     # (N, k) int64


def _check_metric(metric: str) -> str:
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {_METRICS}; got {metric!r} instead.")
    return metric


def knn_indices(X, k: int, *, metric: str = "euclidean", include_self: bool = False,
                block_rows: int | None = None) -> Neighbors:
    """Exact k nearest neighbours of every sample, computed blockwise on X's device.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
    k : int
        Neighbours per sample: ``1 <= k <= N - 1`` (``<= N`` with ``include_self``).
    metric : {"euclidean", "cosine"}
        Cosine distance is ``1 - cos``.
    include_self : bool
        False (default): leave-one-out, a sample is never its own neighbour.
        True: each sample is its own first neighbour at distance 0 — the layout UMAP's
        ``precomputed_knn`` expects: ``umap.UMAP(n_neighbors=k, precomputed_knn=(idx.cpu().numpy(),
        dists.cpu().numpy()))`` with ``dists, idx = knn_indices(X, k, include_self=True)``.
    block_rows : int, optional
        Rows per block; by default at most ~2**24 entries of the N × N matrix exist at once.

    Returns
    -------
    Neighbors
        ``(distances, indices)``, each (N, k), nearest first, on X's device; distances in
        X's floating dtype (float32 for float32 features), indices int64.
        Ranking uses float64 on CPU, float32 on accelerators; exact distance ties are
        ordered arbitrarily.
    """
    X = _as_features(X)
    _check_metric(metric)
    _check_k(k, X.shape[0], include_self=include_self)
    g = _neighbor_graphs(X, {"knn": (metric, k, "ordered")}, include_self=include_self,
                         block_rows=block_rows)["knn"]
    dists = g.values if metric == "euclidean" else (1.0 - g.values).clamp_min_(0.0)
    return Neighbors(dists.to(X.dtype), g.indices)


# ---------------------------------------------------------------------------------- nmi

def _nmi_params(n_init, seed, protocol):
    if protocol == "paper":
        # The seed code: KMeans(n_clusters=K, random_state=42, n_init="auto"), which is one
        # k-means++ run.
        return (1 if n_init is None else n_init), (PAPER_SEED if seed is None else seed)
    return (10 if n_init is None else n_init), (0 if seed is None else seed)


def _check_n_init(n_init) -> None:
    if isinstance(n_init, bool) or not isinstance(n_init, (int, np.integer)) or n_init < 1:
        raise ValueError(f"n_init must be a positive integer; got {n_init!r}.")


def _check_C(C) -> None:
    if not isinstance(C, (int, float)) or isinstance(C, bool) or not C > 0:
        raise ValueError(f"C must be a positive number; got {C!r}.")


def _check_backend(backend) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}; got {backend!r} instead.")
    return backend


def _on_device(c: _Checked, backend: str) -> bool:
    """Whether k-means and the probe run in torch on X's device (else scikit-learn on a CPU copy)."""
    return backend == "torch" or (backend == "auto" and c.X.device.type == "cuda")


def _nmi_from_checked(c: _Checked, *, n_init: int, seed: int, X_np: np.ndarray | None = None,
                      backend: str = "auto") -> float:
    return _nmi_and_clusters(c, n_init=n_init, seed=seed, X_np=X_np, backend=backend)[0]


def _nmi_and_clusters(c: _Checked, *, n_init: int, seed: int, X_np: np.ndarray | None = None,
                      backend: str = "auto") -> tuple[float, np.ndarray | torch.Tensor]:
    """NMI and the k-means cluster of every sample (N,) int64 it was computed from (the bootstrap reuses
    them): a numpy array from scikit-learn, a tensor on X's device from torch."""
    _check_n_init(n_init)
    if _on_device(c, backend):
        clusters = kmeans_labels_torch(c.X, c.n_classes, n_init=n_init, seed=seed)
        return _nmi_torch(c.codes, clusters, c.n_classes, c.n_classes), clusters
    X_np = c.X_numpy() if X_np is None else X_np
    labels = kmeans_labels(X_np, c.n_classes, n_init=n_init, seed=seed)
    return float(normalized_mutual_info_score(c.codes_numpy(), labels)), np.asarray(labels, dtype=np.int64)


def _nmi_torch(codes: torch.Tensor, clusters: torch.Tensor, n_classes: int, n_clusters: int) -> float:
    """``normalized_mutual_info_score(codes, clusters)`` (arithmetic mean) computed where the labels are,
    step for step as scikit-learn; one transfer of five numbers at the end."""
    table = torch.bincount(codes * n_clusters + clusters, minlength=n_classes * n_clusters)
    table = table.reshape(n_classes, n_clusters).double()                      # (K, K') contingency
    n = table.sum()
    pi, pj = table.sum(dim=1), table.sum(dim=0)                                # (K,), (K',)
    nz = table > 0
    logs = torch.log(torch.where(nz, table, 1.0))
    p = table / n
    outer = torch.log(pi[:, None] * pj[None, :]).where(nz, 0.0)
    mi = p * (logs - torch.log(n)) + p * (-outer + 2 * torch.log(n))
    mi = torch.where(nz & (mi.abs() >= torch.finfo(torch.float64).eps), mi, 0.0).sum().clamp_min(0.0)

    def entropy(counts):
        q = counts / n
        return -(q * (torch.log(torch.where(counts > 0, counts, 1.0)) - torch.log(n))).sum()

    mi, h_true, h_pred, k_true, k_pred = torch.stack(
        [mi, entropy(pi), entropy(pj), (pi > 0).sum().double(), (pj > 0).sum().double()]).tolist()
    if k_true == k_pred == 1:
        return 1.0
    if k_true == 1 or k_pred == 1 or mi == 0:       # one side unsplit: no information
        return 0.0
    return float(mi / ((h_true + h_pred) / 2))


def nmi(X, y, *, n_init: int | None = None, seed: int | None = None, protocol: str = "default",
        backend: str = "auto") -> float:
    """Normalized mutual information between k-means clusters and the classes.

    k-means (scikit-learn ``KMeans``, k-means++ init, ``n_init`` restarts keeping the
    lowest inertia, ``random_state=seed``; the same labels, with less overhead, from
    ``lab.metrics._kmeans``) into K = number of classes clusters, then
    ``normalized_mutual_info_score`` (arithmetic-mean normalization).

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
    y : array-like of int, shape (N,)
    n_init : int, optional
        k-means restarts; default 10 (``protocol="paper"``: 1).
    seed : int, optional
        ``random_state`` of k-means; default 0 (``protocol="paper"``: 42).
    protocol : {"default", "paper"}
        ``"paper"`` reproduces the seed code: ``KMeans(K, random_state=42, n_init="auto")``.
    backend : {"auto", "sklearn", "torch"}
        Where k-means runs (:data:`BACKENDS`): "auto" is torch on X's device for CUDA tensors (the same
        algorithm and random draws, labels equal up to rounding), scikit-learn on a CPU copy otherwise.

    Returns
    -------
    float
        In [0, 1]; 1 when the clusters are exactly the classes, ≈ 0 for features that
        carry no class information.

    Raises
    ------
    DegenerateFeaturesError
        When all samples are identical (the partition would be arbitrary).

    References
    ----------
    Dyballa, Gerritz & Zucker (2024), arXiv 2405.01524.
    """
    _check_protocol(protocol)
    _check_backend(backend)
    c = _check_inputs(X, y)
    _reject_constant(c.X, "nmi")
    n_init, seed = _nmi_params(n_init, seed, protocol)
    return _nmi_from_checked(c, n_init=n_init, seed=seed, backend=backend)


# ---------------------------------------------------------------------------------- kNN

def _knn_accuracy_from_graph(c: _Checked, g: _Graph, k: int) -> float:
    return float(_knn_correct(c, g, k).double().mean())


def _knn_correct(c: _Checked, g: _Graph, k: int) -> torch.Tensor:
    """Whether each sample's leave-one-out k-NN vote is its own class: bool (N,) (the bootstrap reuses it)."""
    neighbor_codes = c.codes[g.indices[:, :k]]                       # (N, k)
    pred = _vote(neighbor_codes, c.n_classes)                        # (N,)
    return pred == c.codes


def _knn_purity_from_counts(same: torch.Tensor, k: int) -> float:
    """Mean over samples of (same-class neighbours among the k nearest) / k; same: (N,)."""
    return float((same.double() / k).mean())


def _accuracy_from_predictions(c: _Checked, pred: torch.Tensor) -> float:
    """Fraction of samples whose predicted class code (N,) is their own."""
    return float((pred == c.codes).double().mean())


def _default_purity_k(c: _Checked, protocol: str) -> int:
    smallest = int(c.counts.min())
    # Ours: every other member of the smallest class. Paper: k = images per class (their
    # NNk500 with 500 per class), so the best possible purity is (n-1)/n.
    return smallest if protocol == "paper" else smallest - 1


def knn_accuracy(X, y, *, k: int = 1, metric: str = "euclidean") -> float:
    """Leave-one-out k-nearest-neighbour classification accuracy.

    Each sample is classified by the majority vote of its k nearest *other* samples
    (exact search); ties go to the class of the nearest neighbour among the tied classes.
    k=1 Euclidean is the papers' NNk1 (the same under ``protocol="paper"``).

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
    y : array-like of int, shape (N,)
    k : int
        ``1 <= k <= N - 1``.
    metric : {"euclidean", "cosine"}

    Returns
    -------
    float
        In [0, 1]; 1 when every sample's neighbourhood is its own class, ≈ 1/K for
        identically distributed classes of equal size.

    Raises
    ------
    DegenerateFeaturesError
        When all samples are identical (every neighbour ties).

    References
    ----------
    Dyballa, Gerritz & Zucker (2024), arXiv 2405.01524 (NNk1).
    """
    _check_metric(metric)
    c = _check_inputs(X, y, k=k)
    _reject_constant(c.X, "knn_accuracy")
    g = _neighbor_graphs(c.X, {"knn": (metric, k, "ordered")})["knn"]
    return _knn_accuracy_from_graph(c, g, k)


def knn_purity(X, y, *, k: int | None = None, metric: str = "euclidean", protocol: str = "default") -> float:
    """Mean fraction of each sample's k nearest other samples that share its class.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
    y : array-like of int, shape (N,)
    k : int, optional
        Default: smallest class size minus one (every other member of a class could be a
        neighbour). ``protocol="paper"``: smallest class size, as the seed code's NNk500
        with 500 images per class (so its maximum is (n-1)/n).
    metric : {"euclidean", "cosine"}
    protocol : {"default", "paper"}

    Returns
    -------
    float
        In [0, 1]; 1 for perfectly separated classes (default k), ≈ (n_k - 1)/(N - 1)
        for identically distributed classes.

    Raises
    ------
    DegenerateFeaturesError
        When all samples are identical.

    References
    ----------
    Dyballa, Gerritz & Zucker (2024), arXiv 2405.01524 (NNk500).
    """
    _check_metric(metric)
    _check_protocol(protocol)
    need = 2 if (k is None and protocol == "default") else 1
    c = _check_inputs(X, y, need_per_class=need, need_for="knn_purity with the default k")
    k = _default_purity_k(c, protocol) if k is None else k
    _check_k(k, c.n)
    _reject_constant(c.X, "knn_purity")
    same = _neighbor_graphs(c.X, {"knn": (metric, k, "same_class")}, codes=c.codes)["knn"]
    return _knn_purity_from_counts(same, k)


def _check_temperature(temperature) -> float:
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not temperature > 0:
        raise ValueError(f"temperature must be a positive number; got {temperature!r}.")
    return float(temperature)


def weighted_knn_accuracy(X, y, *, k: int = 20, temperature: float = 0.07) -> float:
    """Leave-one-out weighted k-NN accuracy, the DINO/DINOv2 (and solo-learn) protocol.

    Features are L2-normalised (a zero vector stays zero); each sample's k most
    cosine-similar other samples vote for their class with weight ``exp(sim / T)``; the
    class with the largest total weight wins (exact ties: lowest class).

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
    y : array-like of int, shape (N,)
    k : int
        ``1 <= k <= N - 1``; DINO uses 20.
    temperature : float
        T > 0; DINO uses 0.07.

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    DegenerateFeaturesError
        When all samples are identical.

    References
    ----------
    Caron et al. (2021), DINO, ``eval_knn.py``; Oquab et al. (2023), DINOv2,
    ``dinov2/eval/knn.py``; Wu et al. (2018), instance discrimination.
    """
    temperature = _check_temperature(temperature)
    c = _check_inputs(X, y, k=k)
    _reject_constant(c.X, "weighted_knn_accuracy")
    pred = _neighbor_graphs(c.X, {"knn": ("cosine", k, "weighted", temperature)}, codes=c.codes,
                            n_classes=c.n_classes)["knn"]
    return _accuracy_from_predictions(c, pred)


# ---------------------------------------------------------------------------------- probe

def _folds(y_np: np.ndarray, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The probe's (train, test) indices, from the labels alone: both backends use these."""
    return list(StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(y_np, y_np))


def _probe_from_checked(c: _Checked, *, folds: int, C: float, seed: int, max_iter: int,
                        X_np: np.ndarray | None = None, backend: str = "auto") -> float:
    _check_C(C)
    y_np = c.codes_numpy()
    splits = _folds(y_np, folds, seed)
    if _on_device(c, backend):
        return probe_accuracy_torch(c.X, c.codes, splits, n_classes=c.n_classes, C=C, max_iter=max_iter)
    X_np = c.X_numpy() if X_np is None else X_np
    # The inputs are checked finite already; scikit-learn's own re-checks are ~5 % of the time.
    with sklearn.config_context(assume_finite=True):
        scores = [probe_accuracy(X_np[train], y_np[train], X_np[test], y_np[test], n_classes=c.n_classes,
                                 C=C, max_iter=max_iter)
                  for train, test in splits]
    return float(np.mean(scores))


def linear_probe_accuracy(X, y, *, folds: int = 5, C: float = 1.0, seed: int = 0, max_iter: int = 1000,
                          backend: str = "auto") -> float:
    """Cross-validated accuracy of a multinomial logistic-regression probe.

    Stratified ``folds``-fold split (``StratifiedKFold(shuffle=True, random_state=seed)``);
    per fold, ``StandardScaler`` fitted on the training part, then L2-regularised
    multinomial ``LogisticRegression(C=C)`` (lbfgs). The result is the mean of the
    per-fold accuracies, as ``sklearn.model_selection.cross_val_score`` reports
    (``lab.metrics._probe`` makes scikit-learn's own calls with less overhead; the fitted
    coefficients are bit-identical).

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
    y : array-like of int, shape (N,)
    folds : int
        ``2 <= folds <=`` smallest class size.
    C : float
        Inverse L2 regularisation strength.
    seed : int
        Fold shuffling seed.
    max_iter : int
        lbfgs iterations (scikit-learn warns if it does not converge).
    backend : {"auto", "sklearn", "torch"}
        Where the probe is fitted (:data:`BACKENDS`): "auto" is torch on X's device for CUDA tensors (the
        same model, objective and folds, L-BFGS to the same tolerance), scikit-learn on a CPU copy otherwise.

    Returns
    -------
    float
        In [0, 1]. Constant features give the majority-class rate of each test fold.
    """
    _check_backend(backend)
    c = _check_inputs(X, y, folds=folds)
    return _probe_from_checked(c, folds=folds, C=C, seed=seed, max_iter=max_iter, backend=backend)
