"""The one catalogue of metric and strategy names (torch-free).

Config validation, ``lab.metrics.compute_layer``, the app's plots and form, the CLI and
exported notebooks all read names, labels and display hints from here, so that a new
metric or strategy is added in one place.

Examples
--------
>>> METRICS["nc1"].label, METRICS["nc1"].log_scale, METRICS["nc1"].higher_is_better
('NC1', True, False)
>>> [m.name for m in metrics_for("unseen")][:3]
['nmi', 'knn_accuracy', 'knn_purity']
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "MetricInfo", "StrategyInfo", "METRICS", "STRATEGIES", "METRIC_NAMES", "STRATEGY_NAMES",
    "SEPARABILITY_METRICS", "COLLAPSE_METRICS", "TRANSFER_METRICS", "TRANSFER_BASELINE", "DEFAULT_METRICS",
    "CONFIDENCE_METRICS", "metric_label", "metrics_for",
]


@dataclass(frozen=True)
class MetricInfo:
    """How one per-layer metric is named, where it is measured and how it is drawn.

    Attributes
    ----------
    name : the column name in the store's metrics table
    label : short human label for plots and tables
    family : "separability" (unseen images only), "collapse" (seen held-out and unseen) or
        "transferability" (seen held-out images, before fine-tuning: epoch 0 only)
    higher_is_better : True when a larger value means better separated / more collapsed classes
    log_scale : drawn on a log axis (spans orders of magnitude across layers)
    default : measured by a run unless its config lists metrics explicitly
    doc : one line on what it measures (METRICS.md has the exact definition)
    """

    name: str
    label: str
    family: str
    higher_is_better: bool
    log_scale: bool = False
    default: bool = True
    doc: str = ""

    @property
    def splits(self) -> tuple[str, ...]:
        """The evaluation splits this metric is computed on."""
        return {"separability": ("unseen",), "transferability": ("seen",)}.get(self.family, ("seen", "unseen"))


@dataclass(frozen=True)
class StrategyInfo:
    """A fine-tuning strategy as the user sees it (the mechanics live in :mod:`lab.finetune`)."""

    name: str
    label: str
    doc: str
    needs_block: bool = False


_METRIC_LIST = (
    MetricInfo("nmi", "NMI", "separability", True,
               doc="normalized mutual information of a k-means clustering of the unseen classes"),
    MetricInfo("knn_accuracy", "kNN accuracy", "separability", True,
               doc="leave-one-out k-nearest-neighbour accuracy (k=1: the papers' NNk1)"),
    MetricInfo("knn_purity", "kNN purity", "separability", True,
               doc="mean fraction of same-class neighbours (the papers' NNk500)"),
    MetricInfo("weighted_knn_accuracy", "weighted kNN", "separability", True, default=False,
               doc="cosine, temperature-weighted 20-NN accuracy (DINOv2 protocol)"),
    MetricInfo("linear_probe_accuracy", "linear probe", "separability", True, default=False,
               doc="cross-validated multinomial logistic-regression accuracy"),
    MetricInfo("nc1", "NC1", "collapse", False, log_scale=True,
               doc="tr(Σ_W Σ_B⁺)/K: within-class variability against between-class spread"),
    MetricInfo("cdnv", "CDNV", "collapse", False, log_scale=True,
               doc="class-distance normalized variance, mean over class pairs"),
    MetricInfo("numerical_rank", "numerical rank", "collapse", False,
               doc="mean over classes of ‖H_k‖_F² / ‖H_k‖_2²"),
    MetricInfo("nc2_equinorm", "NC2 equinorm", "collapse", False,
               doc="std/mean of the centred class-mean norms"),
    MetricInfo("nc2_equiangularity", "NC2 equiangularity", "collapse", False,
               doc="mean |cos + 1/(K-1)| between centred class means"),
    MetricInfo("ncc_accuracy", "NCC accuracy", "collapse", True,
               doc="nearest-class-centre accuracy (NC4)"),
    MetricInfo("logme", "LogME", "transferability", True,
               doc="log evidence of a Bayesian linear model from the seen classes' features to their labels, "
                   "before fine-tuning (You et al. 2021)"),
    MetricInfo("sfda", "SFDA", "transferability", True,
               doc="true-class probability in a self-challenging Fisher space of the seen classes, before "
                   "fine-tuning (Shao et al. 2022)"),
)
METRICS = MappingProxyType({m.name: m for m in _METRIC_LIST})
"""Every per-layer metric by name, in display order."""
METRIC_NAMES = tuple(METRICS)
SEPARABILITY_METRICS = tuple(m.name for m in _METRIC_LIST if m.family == "separability")
COLLAPSE_METRICS = tuple(m.name for m in _METRIC_LIST if m.family == "collapse")
TRANSFER_METRICS = tuple(m.name for m in _METRIC_LIST if m.family == "transferability")
"""Transferability estimators: measured on the seen held-out images at epoch 0 (before fine-tuning)."""
TRANSFER_BASELINE = "knn_accuracy"
"""Measured on the seen held-out images at epoch 0 too whenever a transferability estimator is: plain kNN
accuracy, which a 2025 comparison of 23 estimators found as good a predictor as any."""
CONFIDENCE_METRICS = ("nmi", "knn_accuracy")
"""Separability metrics that get a bootstrap interval over the unseen images (:func:`lab.analysis.bootstrap`)."""
_DERIVED_LABELS = {"cka_initial": "CKA to epoch 0"}
# rows the engine records besides the catalogue's metrics (lab.runs.similarity.CKA_INITIAL)
DEFAULT_METRICS = tuple(m.name for m in _METRIC_LIST if m.default)
"""What a run measures by default. ``linear_probe_accuracy`` is left out because its
cross-validated logistic regression costs seconds to a minute per layer and epoch on a CPU;
``weighted_knn_accuracy`` because it repeats what kNN accuracy shows."""

_STRATEGY_LIST = (
    StrategyInfo("none", "none (evaluate as loaded)", "measure the backbone as it is; no training"),
    StrategyInfo("linear", "linear probe", "train a linear head on frozen features"),
    StrategyInfo("full", "full fine-tuning", "train every weight and the head"),
    StrategyInfo("layer", "Layer FT", "train one block and the head (Li, Liu et al.)", needs_block=True),
    StrategyInfo("scl", "SCL FT", "train one block, a skip connection to the penultimate features and "
                                  "the head (Li, Liu et al.)", needs_block=True),
)
STRATEGIES = MappingProxyType({s.name: s for s in _STRATEGY_LIST})
STRATEGY_NAMES = tuple(STRATEGIES)


def metric_label(name: str) -> str:
    """The short label of a metric name; unknown names are returned unchanged."""
    info = METRICS.get(name)
    return info.label if info is not None else _DERIVED_LABELS.get(name, name)


def metrics_for(split: str) -> list[MetricInfo]:
    """The metrics measured on ``split`` ("unseen" or "seen"), in display order."""
    if split not in ("unseen", "seen"):
        raise ValueError(f"split must be 'unseen' or 'seen'. Got {split!r} instead.")
    return [m for m in _METRIC_LIST if split in m.splits]
