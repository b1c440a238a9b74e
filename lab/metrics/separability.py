"""Separability of (unseen) classes in one layer's features.

Definitions: ``docs/METRICS.md`` ("Separability of unseen classes"), after
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
# Imported with the module, not lazily: threadpoolctl limits (which callers use on
# small problems, e.g. lab.runs) only limits BLAS/OpenMP libraries that are already loaded.
from sklearn.metrics import normalized_mutual_info_score
from sklearn.model_selection import StratifiedKFold

from ._checks import BACKENDS, _as_features, _check_k, _Checked, _on_device
from ._context import LayerContext, measure, option_default
from ._docs import metric_doc
from ._kmeans import kmeans_labels
from ._kmeans_torch import kmeans_labels_torch
from ._neighbors import _neighbor_graphs, _vote
from ._probe import probe_accuracy
from ._probe_torch import probe_accuracy_torch

__all__ = [
    "Neighbors", "knn_indices", "nmi", "knn_accuracy", "knn_purity",
    "weighted_knn_accuracy", "linear_probe_accuracy", "BACKENDS",
]

_METRICS = ("euclidean", "cosine")
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


@metric_doc
def nmi(X, y, *, n_init: int | None = option_default("nmi", "n_init"),
        seed: int | None = option_default("nmi", "seed"), protocol: str = "default", backend: str = "auto") -> float:
    """Normalized mutual information between k-means clusters and the classes.

    k-means (scikit-learn ``KMeans``, k-means++ init, ``n_init`` restarts keeping the
    lowest inertia, ``random_state=seed``; the same labels, with less overhead, from
    ``lab.metrics._kmeans``) into K = number of classes clusters, then
    ``normalized_mutual_info_score`` (arithmetic-mean normalization).

    {X_y}
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

    {raises_degenerate}
        When all samples are identical (the partition would be arbitrary).

    References
    ----------
    Dyballa, Gerritz & Zucker (2024), arXiv 2405.01524.
    """
    return measure("nmi", X, y, protocol=protocol, backend=backend, n_init=n_init, seed=seed)


def check_nmi(layer: LayerContext, *, n_init, seed) -> None:
    _check_n_init(_nmi_params(n_init, seed, layer.protocol)[0])


def nmi_of_layer(layer: LayerContext, *, n_init, seed, repeat: int = 0) -> float:
    """:func:`nmi` of a prepared layer, k-means seeded ``seed + repeat`` (catalogue function)."""
    layer.reject_constant("nmi")
    n_init, seed = _nmi_params(n_init, seed, layer.protocol)
    X_np = None if layer.on_device else layer.X_numpy()
    value, clusters = _nmi_and_clusters(layer.checked, n_init=n_init, seed=seed + repeat, X_np=X_np,
                                        backend=layer.backend)
    if repeat == 0:
        layer.keep_sample("nmi", clusters)
    return value


# ---------------------------------------------------------------------------------- kNN

def _knn_correct(c: _Checked, g, k: int) -> torch.Tensor:
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


@metric_doc
def knn_accuracy(X, y, *, k: int = option_default("knn_accuracy", "k"),
                 metric: str = option_default("knn_accuracy", "metric")) -> float:
    """Leave-one-out k-nearest-neighbour classification accuracy.

    Each sample is classified by the majority vote of its k nearest *other* samples
    (exact search); ties go to the class of the nearest neighbour among the tied classes.
    k=1 Euclidean is the papers' NNk1 (the same under ``protocol="paper"``).

    {X_y}
    k : int
        ``1 <= k <= N - 1``.
    metric : {"euclidean", "cosine"}

    Returns
    -------
    float
        In [0, 1]; 1 when every sample's neighbourhood is its own class, ≈ 1/K for
        identically distributed classes of equal size.

    {raises_degenerate}
        When all samples are identical (every neighbour ties).

    References
    ----------
    Dyballa, Gerritz & Zucker (2024), arXiv 2405.01524 (NNk1).
    """
    return measure("knn_accuracy", X, y, k=k, metric=metric)


def check_knn_accuracy(layer: LayerContext, *, k, metric) -> None:
    _check_metric(metric)
    _check_k(k, layer.n)
    # the tie rule (nearest among the tied classes) needs the neighbours nearest first
    layer.want_neighbors("knn_accuracy", (metric, k, "ordered"))


def knn_accuracy_of_layer(layer: LayerContext, *, k, metric) -> float:
    """:func:`knn_accuracy` of a prepared layer (catalogue function)."""
    layer.reject_constant("knn_accuracy")
    correct = _knn_correct(layer.checked, layer.neighbors("knn_accuracy"), k)
    layer.keep_sample("knn_accuracy", correct)
    return float(correct.double().mean())


@metric_doc
def knn_purity(X, y, *, k: int | None = option_default("knn_purity", "k"),
               metric: str = option_default("knn_purity", "metric"), protocol: str = "default") -> float:
    """Mean fraction of each sample's k nearest other samples that share its class.

    {X_y}
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

    {raises_identical}

    References
    ----------
    Dyballa, Gerritz & Zucker (2024), arXiv 2405.01524 (NNk500).
    """
    return measure("knn_purity", X, y, protocol=protocol, k=k, metric=metric)


def check_knn_purity(layer: LayerContext, *, k, metric) -> None:
    _check_metric(metric)
    if k is None:
        if layer.protocol == "default":
            layer.require_per_class(2, "knn_purity with the default k")
        k = _default_purity_k(layer.checked, layer.protocol)
    _check_k(k, layer.n)
    layer.want_neighbors("knn_purity", (metric, k, "same_class"))     # a count of same-class neighbours


def knn_purity_of_layer(layer: LayerContext, *, k, metric) -> float:
    """:func:`knn_purity` of a prepared layer (catalogue function)."""
    layer.reject_constant("knn_purity")
    k = layer.neighbor_request("knn_purity")[1]                         # k=None resolved by the check
    return _knn_purity_from_counts(layer.neighbors("knn_purity"), k)


def _check_temperature(temperature) -> float:
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not temperature > 0:
        raise ValueError(f"temperature must be a positive number; got {temperature!r}.")
    return float(temperature)


@metric_doc
def weighted_knn_accuracy(X, y, *, k: int = option_default("weighted_knn_accuracy", "k"),
                          temperature: float = option_default("weighted_knn_accuracy", "temperature")) -> float:
    """Leave-one-out weighted k-NN accuracy, the DINO/DINOv2 (and solo-learn) protocol.

    Features are L2-normalised (a zero vector stays zero); each sample's k most
    cosine-similar other samples vote for their class with weight ``exp(sim / T)``; the
    class with the largest total weight wins (exact ties: lowest class).

    {X_y}
    k : int
        ``1 <= k <= N - 1``; DINO uses 20.
    temperature : float
        T > 0; DINO uses 0.07.

    Returns
    -------
    float
        In [0, 1].

    {raises_identical}

    References
    ----------
    Caron et al. (2021), DINO, ``eval_knn.py``; Oquab et al. (2023), DINOv2,
    ``dinov2/eval/knn.py``; Wu et al. (2018), instance discrimination.
    """
    return measure("weighted_knn_accuracy", X, y, k=k, temperature=temperature)


def check_weighted_knn_accuracy(layer: LayerContext, *, k, temperature) -> None:
    temperature = _check_temperature(temperature)
    _check_k(k, layer.n)
    layer.want_neighbors("weighted_knn_accuracy", ("cosine", k, "weighted", temperature))   # the vote


def weighted_knn_accuracy_of_layer(layer: LayerContext, *, k, temperature) -> float:
    """:func:`weighted_knn_accuracy` of a prepared layer (catalogue function)."""
    layer.reject_constant("weighted_knn_accuracy")
    return _accuracy_from_predictions(layer.checked, layer.neighbors("weighted_knn_accuracy"))


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


@metric_doc
def linear_probe_accuracy(X, y, *, folds: int = option_default("linear_probe_accuracy", "folds"),
                          C: float = option_default("linear_probe_accuracy", "C"),
                          seed: int = option_default("linear_probe_accuracy", "seed"),
                          max_iter: int = option_default("linear_probe_accuracy", "max_iter"),
                          backend: str = "auto") -> float:
    """Cross-validated accuracy of a multinomial logistic-regression probe.

    Stratified ``folds``-fold split (``StratifiedKFold(shuffle=True, random_state=seed)``);
    per fold, ``StandardScaler`` fitted on the training part, then L2-regularised
    multinomial ``LogisticRegression(C=C)`` (lbfgs). The result is the mean of the
    per-fold accuracies, as ``sklearn.model_selection.cross_val_score`` reports
    (``lab.metrics._probe`` makes scikit-learn's own calls with less overhead; the fitted
    coefficients are bit-identical).

    {X_y}
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
    return measure("linear_probe_accuracy", X, y, backend=backend, folds=folds, C=C, seed=seed, max_iter=max_iter)


def check_linear_probe_accuracy(layer: LayerContext, *, folds, C, seed, max_iter) -> None:
    layer.require_folds(folds)
    _check_C(C)


def linear_probe_accuracy_of_layer(layer: LayerContext, *, folds, C, seed, max_iter) -> float:
    """:func:`linear_probe_accuracy` of a prepared layer (catalogue function)."""
    X_np = None if layer.on_device else layer.X_numpy()
    return _probe_from_checked(layer.checked, folds=folds, C=C, seed=seed, max_iter=max_iter, X_np=X_np,
                               backend=layer.backend)
