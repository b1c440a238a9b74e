"""Per-layer metrics: separability of unseen classes, neural collapse, weight utilization.

Plain functions ``f(X, y, *, option) -> float`` on one layer's pooled features ``X``
(torch tensor on any device, or numpy, shape (N, d)) and integer labels ``y`` (N,).
They compute on X's device and return Python floats (``nc2`` returns a dict). Exact
definitions: ``METRICS.md``. :func:`layer_report` tabulates every layer::

    from lab import metrics
    metrics.nmi(X, y)                       # k-means + NMI (scikit-learn; torch on X's GPU)
    metrics.nc1(X, y)                       # exact low-rank tr(Σ_W Σ_B⁺)/K
    metrics.layer_report(feats, feats.labels, repeats=3)   # DataFrame, one row per layer
    metrics.cka(feats["layer3"], feats["layer4"])           # linear CKA, unbiased HSIC
    metrics.logme(X_seen, y_seen); metrics.sfda(X_seen, y_seen)   # transferability before fine-tuning

Bad input raises ``ValueError`` naming the problem; features for which a metric is
mathematically undefined (a constant layer, coinciding class means) raise
:class:`DegenerateFeaturesError`, which :func:`compute_layer` / :func:`layer_report` turn
into NaN with a :class:`DegenerateLayerWarning` naming the layer and metric.
"""
from ._checks import DegenerateFeaturesError, DegenerateLayerWarning
from .cka import CKAAccumulator, cka
from .collapse import cdnv, nc1, nc2, ncc_accuracy, numerical_rank
from .report import ALL_METRICS, DEFAULT_COLLAPSE, DEFAULT_SEPARABILITY, compute_layer, layer_report
from .separability import (
    BACKENDS, Neighbors, knn_accuracy, knn_indices, knn_purity, linear_probe_accuracy, nmi, weighted_knn_accuracy,
)
from .transfer import logme, sfda
from .weights import utilization

__all__ = [
    "nmi", "knn_accuracy", "knn_purity", "weighted_knn_accuracy", "linear_probe_accuracy",
    "nc1", "cdnv", "numerical_rank", "nc2", "ncc_accuracy",
    "cka", "CKAAccumulator", "logme", "sfda",
    "utilization", "compute_layer", "layer_report", "knn_indices", "Neighbors",
    "DEFAULT_SEPARABILITY", "DEFAULT_COLLAPSE", "ALL_METRICS", "BACKENDS",
    "DegenerateFeaturesError", "DegenerateLayerWarning",
]
