"""Per-layer metrics: separability of unseen classes, neural collapse, weight utilization.

The contract: every per-layer metric is a plain function ``f(X, y, *, options) -> float`` on one layer's pooled
features ``X`` (torch tensor on any device, or numpy, shape (N, d)) and integer labels ``y`` (N,),
with keyword-only options whose defaults come from :data:`lab.catalogue.METRICS` (the one place they
are written). It computes on X's device and returns a Python float: :func:`nmi`, :func:`knn_accuracy`,
:func:`knn_purity`, :func:`weighted_knn_accuracy`, :func:`linear_probe_accuracy`, :func:`nc1`,
:func:`cdnv`, :func:`numerical_rank`, :func:`ncc_accuracy`, :func:`logme`, :func:`sfda`. The others
return, exactly:

- :func:`nc2` -> dict ``{"equinorm": float, "equiangularity": float}`` (the catalogue's columns
  ``nc2_equinorm`` and ``nc2_equiangularity``);
- the classifier side of neural collapse (Papyan, Han & Donoho 2020), the head's weights W (K, d) against
  the class means at its input: :func:`nc2_classifier` ``(W)`` -> dict ``{"nc2_classifier_equinorm",
  "nc2_classifier_equiangularity"}``; :func:`nc2_cosine_std` ``(X, y)``, :func:`nc3_self_duality`
  ``(X, y, W)`` and :func:`nc4_ncc_disagreement` ``(X, y, predicted)`` -> float;
  :func:`terminal_phase_epoch` ``(accuracies)`` -> int or None; :class:`Head` ``(W, logits)`` is what
  :func:`compute_layer` takes as ``head=`` for these entries; :func:`class_gram` ``(X, y)`` -> (K, K)
  Gram of the centred class means;
- label-free layer quality, no label read: :func:`rankme` ``(X)``, :func:`alpha_req` ``(X)``,
  :func:`twonn_id` ``(X)`` and :func:`lidar` ``(views)``, views (n images, q views, d) -> float
  (``compute_layer(X, None, metrics=("rankme", ...))``; ``views=`` for lidar);
- :func:`cka` ``(X, Y, *, unbiased)`` -> float, two feature sets of the same images;
  :class:`CKAAccumulator` accumulates it over minibatches;
- :func:`knn_indices` ``(X, k, ...)`` -> :class:`Neighbors`, the tuple ``(distances, indices)``, each (N, k);
- :func:`utilization` ``(model, initial_state, modules)`` -> DataFrame, one row per layer;
- :func:`compute_layer` -> dict of str to float, one entry per requested metric (``nmi_std`` too when
  repeated), or ``(values, samples)`` with ``return_samples``;
- :func:`layer_report` -> DataFrame, one row per layer, one column per metric;
- ``DEFAULT_SEPARABILITY``, ``DEFAULT_COLLAPSE`` (what a layer report measures unless told) and ``ALL_METRICS``
  (every metric computed from features and labels alone) -> tuple of str, asked of the live catalogue at each
  read: a metric registered after import is in them.

Inside, each catalogue entry's ``function`` computes its metric from a layer context
(``f(layer, **options) -> float``, ``lab.metrics._context``), which checks X and y once and keeps the
work metrics share: one neighbour pass for every kNN variant, one set of class statistics for nc1,
cdnv, nc2 and ncc, one host copy of X for scikit-learn. The public functions above build a context
for one metric; :func:`compute_layer` builds one per layer for all of them and loops over the
catalogue. Exact definitions: ``docs/METRICS.md``. :func:`layer_report` tabulates every layer::

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
from .classifier_collapse import (
    nc2_classifier, nc2_cosine_std, nc3_self_duality, nc4_ncc_disagreement, terminal_phase_epoch,
)
from .classifier_layer import Head, class_gram
from .collapse import cdnv, nc1, nc2, ncc_accuracy, numerical_rank
from .label_free import alpha_req, lidar, rankme, twonn_id
from . import report as _report
from .report import compute_layer, layer_report
from .separability import (
    BACKENDS, Neighbors, knn_accuracy, knn_indices, knn_purity, linear_probe_accuracy, nmi, weighted_knn_accuracy,
)
from .transfer import logme, sfda
from .weights import utilization

__all__ = [
    "nmi", "knn_accuracy", "knn_purity", "weighted_knn_accuracy", "linear_probe_accuracy",
    "nc1", "cdnv", "numerical_rank", "nc2", "ncc_accuracy",
    "nc2_cosine_std", "nc2_classifier", "nc3_self_duality", "nc4_ncc_disagreement", "terminal_phase_epoch",
    "Head", "class_gram",
    "cka", "CKAAccumulator", "logme", "sfda", "rankme", "alpha_req", "twonn_id", "lidar",
    "utilization", "compute_layer", "layer_report", "knn_indices", "Neighbors",
    "DEFAULT_SEPARABILITY", "DEFAULT_COLLAPSE", "ALL_METRICS", "BACKENDS",
    "DegenerateFeaturesError", "DegenerateLayerWarning",
]


def __getattr__(name: str):
    # DEFAULT_SEPARABILITY, DEFAULT_COLLAPSE and ALL_METRICS: report's questions to the live catalogue, asked at
    # each read (PEP 562), never a copy taken at import
    if name in _report.__all__:
        return getattr(_report, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
