"""The one catalogue of metric, strategy and split names (torch-free).

Config validation, ``lab.metrics.compute_layer``, the app's plots and form, the CLI and exported
notebooks all read names, labels and display hints from here; ``compute_layer`` also reads how to
compute each metric (its function, options and needs), so that a new metric is one entry here plus
one function in ``lab.metrics`` (docs/development.md, "Adding a metric"). Where a metric shows (a live
curve, the agreement table, the default report, exports, the images a run needs) is its entry's to say,
and :func:`register_metric` adds an entry from outside this file (a plugin, a test's toy).

Ask it, never copy it: :func:`metric_names` answers which metrics belong to a family or a split, get a curve,
are compared, exported or measured by default, from the live registry (as timm's ``list_models(filter=...)``),
so a metric registered later is in every answer. The evaluation splits' names, labels and order are one table,
:data:`SPLIT_TABLE` (:func:`split_label`, :func:`split_order`).

Examples
--------
>>> METRICS["nc1"].label, METRICS["nc1"].log_scale, METRICS["nc1"].higher_is_better
('NC1', True, False)
>>> [m.name for m in metrics_for("unseen")][:3]
['nmi', 'knn_accuracy', 'knn_purity']
>>> metric_names(family="transferability"), split_label("seen")
(('logme', 'sfda'), 'held-out (seen)')
>>> dict(METRICS["knn_accuracy"].options), METRICS["knn_accuracy"].function
({'k': 1, 'metric': 'euclidean'}, 'lab.metrics.separability:knn_accuracy_of_layer')
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from lab._split_table import (SPLIT_TABLE, SPLITS, SplitInfo, class_mean_splits, held_out_splits, split_info, split_label,
                              split_order)

__all__ = [
    "MetricInfo", "Strategy", "SplitInfo", "METRICS", "STRATEGIES", "register_strategy", "unregister_strategy",
    "TRANSFER_BASELINE", "HEAD_LAYER", "SPLIT_TABLE", "SPLITS", "split_info", "split_label", "split_order",
    "class_mean_splits", "held_out_splits", "metric_names", "metric_label", "metrics_for", "g_metric", "law_metric", "per_image_metric", "curve_specs",
    "register_metric", "unregister_metric",
]


_FAMILY_SPLITS = {"separability": ("unseen",), "collapse": SPLITS,
                  "classifier_collapse": ("train", "seen"), "transferability": ("seen",),
                  "label_free": ("seen", "unseen")}
"""The evaluation splits a family is measured on unless its entry says otherwise."""
_REPORT_FAMILIES = ("separability", "collapse")
"""The families :func:`lab.metrics.compute_layer` measures when it is not told which (unless an entry says)."""
PER_IMAGE = ("cluster", "right")
"""What a metric can keep per image (:attr:`MetricInfo.per_image`)."""
HEAD_LAYER = "pre_logits"
"""The layer the classifier-side measures are recorded at: the input of the trained head (for SCL FT, the
pre-logits plus the skip connection, which is what that head sees)."""


@dataclass(frozen=True)
class MetricInfo:
    """How one per-layer metric is named, drawn, and computed.

    Attributes
    ----------
    name : the column name in the store's metrics table
    label : short human label for plots and tables
    family : "separability" (unseen images only), "collapse" (the seen training sample, seen held-out and
        unseen), "classifier_collapse" (the trained head against the class means at its input: the seen
        training sample and the seen held-out images; needs a trained head) or "transferability" (seen
        held-out images, before fine-tuning: epoch 0 only) or "label_free" (no label read: the unseen images
        and the seen held-out images; LiDAR the unseen images' augmented views)
    higher_is_better : True when a larger value means better separated / more collapsed classes (for the
        label-free family: the direction its literature reads as the better representation)
    log_scale : drawn on a log axis (spans orders of magnitude across layers)
    default : measured by a run unless its config lists metrics explicitly
    doc : one line on what it measures (docs/METRICS.md has the exact definition)
    function : ``"module:function"`` that computes it: ``f(layer, **options) -> float``, ``layer`` a
        ``lab.metrics.LayerContext`` that holds the checked inputs and the work metrics share. Resolved
        only when a metric is computed, so this module never imports torch.
    options : the options ``params`` may set and their defaults (the one place they are written; the
        public functions of ``lab.metrics`` take their defaults from here)
    check : ``"module:function"`` run with the same arguments for every requested metric before any is
        computed: validates the options against the inputs and asks the layer for shared work
        (``layer.want_neighbors``); None when there is nothing to check
    needs : what the metric reads besides the features: ``"labels"`` (y); ``"head"`` (a trained head's
        weight matrix and logits on the same images, :class:`lab.metrics.Head`); an entry needing other
        inputs (augmented views) names them, and ``compute_layer`` passes them on
    per_class : samples every class needs (2 for within-class spread)
    repeatable : the function takes ``repeat`` (0, 1, ...) and varies its seed with it; ``compute_layer``
        reports the mean over ``repeats`` and, with more than one, ``<name>_std``
    splits : the evaluation splits it is computed on (default: by family)
    best_at : the value at which a layer is best, for a measure whose literature reads neither extreme as
        best (alpha_req: 1, Agrawal et al. 2022); the best layer is then the closest one
        (:func:`lab.analysis.measure_agreement`). None: the extreme ``higher_is_better`` names
    images_per_class : the images of every class a run's evaluation set must hold for a sound value (the
        run refuses fewer before it starts): a count, or the name of the option that gives it (the probe's
        ``"folds"``); 0: ``per_class``. More than ``per_class`` where the value is defined with fewer but
        means little (leave-one-out kNN: another image of the class)
    images_why : why it needs them, in a few words (``{n}``: the count), for that message
    curve : the splits of its metric-vs-layer curve in the live view, in order; () for none
    compared : compared in the agreement table (:func:`lab.analysis.measure_agreement`)
    report : measured by :func:`lab.metrics.compute_layer` and ``layer_report`` when no metrics are named
        (None: by family, separability and collapse)
    export : drawn by an exported notebook's layer curves when the runs have it
    g : the metric whose best layer is g, the generalization index (one entry)
    law : the metric whose log10 the law of equi-separation fits against depth (He & Su 2023; one entry:
        NC1, :func:`lab.analysis.separation_law`)
    per_image : what it keeps per unseen image for the bootstrap and the per-image record: ``"cluster"``
        (each image's k-means cluster) or ``"right"`` (whether its leave-one-out vote is right); None: nothing
        (no bootstrap interval)
    """

    name: str
    label: str
    family: str
    higher_is_better: bool
    log_scale: bool = False
    default: bool = True
    doc: str = ""
    function: str = ""
    options: Mapping[str, object] = field(default_factory=dict, hash=False)
    check: str | None = None
    needs: tuple[str, ...] = ("labels",)
    per_class: int = 1
    repeatable: bool = False
    splits: tuple[str, ...] = ()
    best_at: float | None = None
    images_per_class: int | str = 0
    images_why: str = ""
    curve: tuple[str, ...] = ()
    compared: bool = False
    report: bool | None = None
    export: bool = False
    g: bool = False
    law: bool = False
    per_image: str | None = None

    def __post_init__(self):
        # frozen: the defaults are filled in once, here
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        if self.family not in _FAMILY_SPLITS:
            raise ValueError(f"family must be one of {', '.join(map(repr, _FAMILY_SPLITS))}. "
                             f"Got {self.family!r} instead.")
        if not self.splits:
            object.__setattr__(self, "splits", _FAMILY_SPLITS[self.family])
        if self.report is None:
            object.__setattr__(self, "report", self.family in _REPORT_FAMILIES)
        if not self.images_per_class:
            object.__setattr__(self, "images_per_class", self.per_class)
        if self.per_image is not None and self.per_image not in PER_IMAGE:
            raise ValueError(f"per_image must be None or one of {', '.join(map(repr, PER_IMAGE))}. "
                             f"Got {self.per_image!r} instead.")

    def images_needed(self) -> tuple[int, str]:
        """The images every class needs (:attr:`images_per_class`) and why, e.g. ``(2, "nc1 (within-class
        spread)")``."""
        n = self.images_per_class
        n = int(self.options[n]) if isinstance(n, str) else int(n)
        why = self.images_why.format(n=n)
        return n, f"{self.name} ({why})" if why else self.name


def _nothing(bb, block):
    return ()


def _whole_backbone(bb, block):
    return (bb.model,)


def _the_block(bb, block):
    return (block,)


@dataclass(frozen=True)
class Strategy:
    """A fine-tuning strategy: what it trains, how the app names it, and the defaults a run takes for it.

    The one table of strategies (:data:`STRATEGIES`): ``RunConfig`` validates and resolves its defaults from
    it, :mod:`lab.finetune` trains by it and the app's form reads it. Add one with :func:`register_strategy`.

    Attributes
    ----------
    name : the ``RunConfig.strategy`` value
    trains : False for "none": no head, no optimizer, no epochs
    needs_block : trains one chosen block (``RunConfig.block``), as Layer FT and SCL FT do
    skip : SCL FT: the chosen block's pooled output is added to the pre-logits features the head sees
    select : ``select(backbone, block_module) -> iterable of nn.Module`` whose parameters train (besides the
        head); it only reads attributes, so this module stays torch-free
    description : one line on what it trains
    label : short label for the app and plots (default: the name)
    lr : the default learning rate per optimizer (``RunConfig.learning_rate`` when ``lr`` is None); the seed
        papers fine-tune with AdamW at 2e-4, a linear head alone tolerates (and needs) more
    """

    name: str
    trains: bool
    needs_block: bool
    skip: bool
    select: Callable = field(compare=False)
    description: str = ""
    label: str = ""
    lr: Mapping[str, float] = field(default_factory=lambda: {"adamw": 2e-4, "sgd": 0.01}, hash=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a strategy's name must be a non-empty string. Got {self.name!r} instead.")
        if not callable(self.select):
            raise ValueError(f"strategy {self.name!r}: select must be a function (backbone, block module) -> "
                             f"modules. Got {type(self.select).__name__} instead.")
        object.__setattr__(self, "label", self.label or self.name)
        object.__setattr__(self, "lr", MappingProxyType(dict(self.lr)))


_SEP, _COL, _TRA = "lab.metrics.separability:", "lab.metrics.collapse:", "lab.metrics.transfer:"
_CC, _LF = "lab.metrics.classifier_layer:", "lab.metrics.label_free:"
_HEAD = ("labels", "head")

_METRIC_LIST = (
    MetricInfo("nmi", "NMI", "separability", True,
               function=_SEP + "nmi_of_layer", check=_SEP + "check_nmi", options={"n_init": None, "seed": None},
               repeatable=True, curve=("unseen",), compared=True, export=True, g=True, per_image="cluster",
               doc="normalized mutual information of a k-means clustering of the unseen classes"),
    MetricInfo("knn_accuracy", "kNN accuracy", "separability", True,
               function=_SEP + "knn_accuracy_of_layer", check=_SEP + "check_knn_accuracy",
               options={"k": 1, "metric": "euclidean"}, images_per_class=2, images_why="leave-one-out",
               curve=("unseen",), compared=True, export=True, per_image="right",
               doc="leave-one-out k-nearest-neighbour accuracy (k=1: the papers' NNk1)"),
    MetricInfo("knn_purity", "kNN purity", "separability", True,
               function=_SEP + "knn_purity_of_layer", check=_SEP + "check_knn_purity",
               options={"k": None, "metric": "euclidean"}, images_per_class=2, images_why="leave-one-out",
               doc="mean fraction of same-class neighbours (the papers' NNk500)"),
    MetricInfo("weighted_knn_accuracy", "weighted kNN", "separability", True, default=False, report=False,
               function=_SEP + "weighted_knn_accuracy_of_layer", check=_SEP + "check_weighted_knn_accuracy",
               options={"k": 20, "temperature": 0.07},
               doc="cosine, temperature-weighted 20-NN accuracy (DINOv2 protocol)"),
    MetricInfo("linear_probe_accuracy", "linear probe", "separability", True, default=False,
               function=_SEP + "linear_probe_accuracy_of_layer", check=_SEP + "check_linear_probe_accuracy",
               options={"folds": 5, "C": 1.0, "seed": 0, "max_iter": 1000},
               images_per_class="folds", images_why="{n}-fold cross-validation",
               curve=("unseen",), compared=True, export=True,
               doc="cross-validated multinomial logistic-regression accuracy"),
    MetricInfo("nc1", "NC1", "collapse", False, log_scale=True, function=_COL + "nc1_of_layer", per_class=2,
               images_why="within-class spread", curve=("unseen", "seen"), export=True, law=True,
               doc="tr(Σ_W Σ_B⁺)/K: within-class variability against between-class spread"),
    MetricInfo("cdnv", "CDNV", "collapse", False, log_scale=True, function=_COL + "cdnv_of_layer", per_class=2,
               images_why="within-class spread", curve=("unseen", "seen"),
               doc="class-distance normalized variance, mean over class pairs"),
    MetricInfo("numerical_rank", "numerical rank", "collapse", False, function=_COL + "numerical_rank_of_layer",
               doc="mean over classes of ‖H_k‖_F² / ‖H_k‖_2²"),
    MetricInfo("nc2_equinorm", "NC2 equinorm", "collapse", False, function=_COL + "nc2_equinorm_of_layer",
               doc="std/mean of the centred class-mean norms"),
    MetricInfo("nc2_equiangularity", "NC2 equiangularity", "collapse", False,
               function=_COL + "nc2_equiangularity_of_layer",
               doc="mean |cos + 1/(K-1)| between centred class means"),
    MetricInfo("nc2_cosine_std", "NC2 cosine spread", "collapse", False, function=_CC + "nc2_cosine_std_of_layer",
               doc="std of the cosines between centred class means (Papyan et al. Fig. 3)"),
    MetricInfo("ncc_accuracy", "NCC accuracy", "collapse", True, function=_COL + "ncc_accuracy_of_layer",
               compared=True,
               doc="nearest-class-centre accuracy (NC4)"),
    MetricInfo("nc2_classifier_equinorm", "NC2 classifier equinorm", "classifier_collapse", False, needs=_HEAD,
               function=_CC + "nc2_classifier_equinorm_of_layer", check=_CC + "check_head",
               doc="std/mean of the norms of the head's class rows (Papyan et al. Fig. 2)"),
    MetricInfo("nc2_classifier_equiangularity", "NC2 classifier equiangularity", "classifier_collapse", False,
               needs=_HEAD, function=_CC + "nc2_classifier_equiangularity_of_layer", check=_CC + "check_head",
               doc="mean |cos + 1/(K-1)| between the head's class rows (Papyan et al. Fig. 4)"),
    MetricInfo("nc3_self_duality", "NC3 self-duality", "classifier_collapse", False, log_scale=True, needs=_HEAD,
               function=_CC + "nc3_self_duality_of_layer", check=_CC + "check_head",
               doc="‖W/‖W‖ − Mᵀ/‖M‖‖²: the head's rows against the centred class means (Papyan et al. Fig. 5)"),
    MetricInfo("nc4_ncc_disagreement", "NC4 NCC disagreement", "classifier_collapse", False, needs=_HEAD,
               function=_CC + "nc4_ncc_disagreement_of_layer", check=_CC + "check_head",
               doc="share of images the head and the nearest class centre classify differently (Papyan et al. "
                   "Fig. 7)"),
    MetricInfo("head_accuracy", "head accuracy", "classifier_collapse", True, needs=_HEAD,
               function=_CC + "head_accuracy_of_layer", check=_CC + "check_head",
               doc="accuracy of the head's argmax (on the training sample: 1 from the terminal phase on)"),
    MetricInfo("logme", "LogME", "transferability", True, function=_TRA + "logme_of_layer", compared=True,
               doc="log evidence of a Bayesian linear model from the seen classes' features to their labels, "
                   "before fine-tuning (You et al. 2021)"),
    MetricInfo("sfda", "SFDA", "transferability", True, function=_TRA + "sfda_of_layer",
               doc="true-class probability in a self-challenging Fisher space of the seen classes, before "
                   "fine-tuning (Shao et al. 2022)"),
    MetricInfo("rankme", "RankMe", "label_free", True, needs=(), function=_LF + "rankme_of_layer",
               curve=("unseen", "seen"), compared=True,
               doc="effective rank of the features' singular values, no label read (Garrido et al. 2023)"),
    MetricInfo("alpha_req", "α-ReQ", "label_free", False, needs=(), function=_LF + "alpha_req_of_layer", best_at=1.0,
               curve=("unseen", "seen"), compared=True,
               doc="power-law decay exponent of the covariance spectrum, no label read; α near 1 reads as best, "
                   "a faster decay (larger α) as fewer dimensions used (Agrawal et al. 2022)"),
    MetricInfo("twonn_id", "TwoNN ID", "label_free", False, needs=(), function=_LF + "twonn_id_of_layer",
               curve=("unseen", "seen"), compared=True,
               doc="intrinsic dimension from nearest-neighbour distance ratios, no label read; lower reads as "
                   "better (Facco et al. 2017; Ansuini et al. 2019)"),
    MetricInfo("lidar", "LiDAR", "label_free", True, default=False, needs=("views",), splits=("unseen",),
               function=_LF + "lidar_of_layer", curve=("unseen",), compared=True,
               doc="effective rank of the between-image covariance whitened by the augmentation covariance "
                   "(RunConfig.lidar_views views of each unseen image; Thilak et al. 2024)"),
)
_METRICS: dict[str, MetricInfo] = {m.name: m for m in _METRIC_LIST}
METRICS = MappingProxyType(_METRICS)
"""Every per-layer metric by name, in display order (a live view: :func:`register_metric` adds to it)."""
TRANSFER_BASELINE = "knn_accuracy"
"""Measured on the seen held-out images at epoch 0 too whenever a transferability estimator is: plain kNN
accuracy, which a 2025 comparison of 23 estimators found as good a predictor as any."""
_DERIVED_LABELS = {"cka_initial": "CKA to epoch 0"}
_FIRST_EVALUATION_LABELS = {"cka_initial": "CKA to the first evaluation"}
# rows the engine records besides the catalogue's metrics (lab.runs.similarity.CKA_INITIAL)

_REMOVED = {
    "METRIC_NAMES": "metric_names()", "SEPARABILITY_METRICS": 'metric_names(family="separability")',
    "COLLAPSE_METRICS": 'metric_names(family="collapse")',
    "CLASSIFIER_METRICS": 'metric_names(family="classifier_collapse")',
    "TRANSFER_METRICS": 'metric_names(family="transferability")',
    "LABEL_FREE_METRICS": 'metric_names(family="label_free")', "CONFIDENCE_METRICS": "metric_names(per_image=True)",
    "DEFAULT_METRICS": "metric_names(default=True)", "REPORT_METRICS": "metric_names(report=True)",
    "AGREEMENT_METRICS": "metric_names(compared=True)", "EXPORT_METRICS": "metric_names(export=True)",
}
# the name lists this module kept until the catalogue was asked instead: a copy missed later registrations


def __getattr__(name: str):
    if name in _REMOVED:
        raise AttributeError(f"lab.catalogue.{name} was removed: a list copied at import missed metrics registered "
                             f"later. Ask the live catalogue instead: lab.catalogue.{_REMOVED[name]}.")
    raise AttributeError(f"module 'lab.catalogue' has no attribute {name!r}")


_STRATEGIES: dict[str, Strategy] = {}
STRATEGIES: Mapping[str, Strategy] = MappingProxyType(_STRATEGIES)
"""Every fine-tuning strategy by name, in display order (a read-only view: :func:`register_strategy` adds)."""


def register_strategy(strategy: Strategy) -> None:
    """Add (or replace) a strategy: ``RunConfig(strategy=...)`` accepts it and a run trains by it from now on."""
    if not isinstance(strategy, Strategy):
        raise ValueError(f"register_strategy takes a lab.catalogue.Strategy. Got {type(strategy).__name__} instead.")
    _STRATEGIES[strategy.name] = strategy


def unregister_strategy(name: str) -> None:
    """Remove the strategy ``name`` added by :func:`register_strategy`."""
    if name not in _STRATEGIES:
        raise ValueError(f"strategy {name!r} is not registered; registered: {', '.join(map(repr, _STRATEGIES))}.")
    del _STRATEGIES[name]


for _strategy in (
    Strategy("none", False, False, False, _nothing, "measure the backbone as it is; no training",
             label="none (evaluate as loaded)"),
    Strategy("linear", True, False, False, _nothing, "train a linear head on frozen features",
             label="linear probe", lr={"adamw": 1e-3, "sgd": 0.1}),
    Strategy("full", True, False, False, _whole_backbone, "train every weight and the head",
             label="full fine-tuning"),
    Strategy("layer", True, True, False, _the_block, "train one block and the head (Li, Liu et al.)",
             label="Layer FT"),
    Strategy("scl", True, True, True, _the_block, "train one block, a skip connection to the penultimate "
             "features and the head (Li, Liu et al.)", label="SCL FT"),
):
    register_strategy(_strategy)


def metric_label(name: str, axis: str = "epoch") -> str:
    """The short label of a metric name; unknown names are returned unchanged. ``axis``: what the run's evaluation
    numbers count ("epoch", or "step" for a loop counted in optimizer steps, whose first evaluation need not be at
    step 0: CKA to epoch 0 reads "CKA to the first evaluation" there)."""
    info = METRICS.get(name)
    if info is not None:
        return info.label
    if axis != "epoch" and name in _FIRST_EVALUATION_LABELS:
        return _FIRST_EVALUATION_LABELS[name]
    return _DERIVED_LABELS.get(name, name)


def metrics_for(split: str) -> list[MetricInfo]:
    """The metrics measured on ``split`` (one of :data:`SPLITS`), in display order."""
    split_info(split)                   # refuses a name that is no split, with the choices
    return [m for m in _METRICS.values() if split in m.splits]


def g_metric() -> str:
    """The metric whose best layer is g, the generalization index (the entry with ``g=True``: NMI)."""
    return next(m.name for m in _METRICS.values() if m.g)


def law_metric() -> str:
    """The metric the law of equi-separation fits (the entry with ``law=True``: NC1)."""
    return next(m.name for m in _METRICS.values() if m.law)


def per_image_metric(kind: str) -> str | None:
    """The metric that keeps ``kind`` (one of :data:`PER_IMAGE`) per unseen image, or None: the per-image
    record's ``"cluster"`` (NMI's k-means clusters) and ``"right"`` (kNN accuracy's votes) come from it."""
    if kind not in PER_IMAGE:
        raise ValueError(f"kind must be one of {', '.join(map(repr, PER_IMAGE))}. Got {kind!r} instead.")
    return next((m.name for m in _METRICS.values() if m.per_image == kind), None)


def metric_names(*, family: str | Iterable[str] | None = None, split: str | None = None,
                 default: bool | None = None, report: bool | None = None, compared: bool | None = None,
                 export: bool | None = None, curve: bool | None = None, per_image: bool | None = None,
                 where: Callable[[MetricInfo], bool] | None = None) -> tuple[str, ...]:
    """The names of the metrics that answer every question asked, in display order, read from the live
    registry (as timm's ``list_models(filter=...)``): a metric added by :func:`register_metric` is in the answer
    from then on. Ask instead of keeping a copy.

    Parameters
    ----------
    family : a family name, or several ("separability", "collapse", "classifier_collapse", "transferability",
        "label_free"). Classifier-side collapse (Papyan, Han & Donoho 2020) is measured at :data:`HEAD_LAYER`;
        transferability estimators on the seen held-out images at epoch 0; the label-free family without labels
    split : measured on that split (one of :data:`SPLITS`)
    default : measured by a run unless its config lists metrics (``True``). The linear probe is left out (its
        cross-validated regression costs seconds to a minute per layer on a CPU), the weighted kNN (it repeats kNN
        accuracy) and LiDAR (its views cost extra forward passes; ``RunConfig.lidar_views`` turns it on)
    report : measured by :func:`lab.metrics.compute_layer` and ``layer_report`` when no metrics are named
    compared : compared in the agreement table (:func:`lab.analysis.measure_agreement`), in this order
    export : drawn by an exported notebook's layer curves when the runs have them
    curve : has a live metric-vs-layer curve (:func:`curve_specs` gives its splits)
    per_image : keeps a value per unseen image, so has a bootstrap interval (:func:`lab.analysis.bootstrap`)
    where : any other question: ``where(info) -> bool``

    None leaves a question unasked; ``False`` asks for the metrics that answer no.

    Examples
    --------
    >>> metric_names(family="transferability")
    ('logme', 'sfda')
    >>> metric_names(compared=True, family="separability")
    ('nmi', 'knn_accuracy', 'linear_probe_accuracy')
    """
    families = (family,) if isinstance(family, str) else None if family is None else tuple(family)
    for name in families or ():
        if name not in _FAMILY_SPLITS:
            raise ValueError(f"family must be one of {', '.join(map(repr, _FAMILY_SPLITS))}. Got {name!r} instead.")
    if split is not None:
        split_info(split)
    flags = {"default": default, "report": report, "compared": compared, "export": export}
    keep = []
    for m in _METRICS.values():
        if (families is not None and m.family not in families) or (split is not None and split not in m.splits):
            continue
        if any(asked is not None and bool(getattr(m, name)) != asked for name, asked in flags.items()):
            continue
        if (curve is not None and bool(m.curve) != curve) or \
                (per_image is not None and (m.per_image is not None) != per_image):
            continue
        if where is None or where(m):
            keep.append(m.name)
    return tuple(keep)


def curve_specs() -> list[tuple[str, tuple[str, ...]]]:
    """(metric, splits) of every metric with a live metric-vs-layer curve (:attr:`MetricInfo.curve`), in
    display order."""
    return [(m.name, m.curve) for m in _METRICS.values() if m.curve]


def register_metric(info: MetricInfo) -> MetricInfo:
    """Add a metric to the catalogue: a run, ``compute_layer``, the app, the CLI and exports read it from here.

    The entry's ``function`` is imported when the metric is first computed. Returns ``info``.

    Raises
    ------
    ValueError
        The name is taken (unregister the old entry first), or the entry claims a role one metric holds
        (``g``, ``law``, or a ``per_image`` kind another entry keeps).
    """
    if not isinstance(info, MetricInfo):
        raise TypeError(f"register_metric takes a MetricInfo. Got {type(info).__name__} instead.")
    if info.name in _METRICS:
        raise ValueError(f"metric {info.name!r} is already in the catalogue; unregister_metric({info.name!r}) "
                         "first to replace it, or choose another name.")
    if info.g and any(m.g for m in _METRICS.values()):
        raise ValueError(f"metric {info.name!r} says g=True, but g is {g_metric()!r}; one metric is g.")
    if info.law and any(m.law for m in _METRICS.values()):
        raise ValueError(f"metric {info.name!r} says law=True, but the law's metric is {law_metric()!r}; one "
                         "metric is.")
    if info.per_image is not None and per_image_metric(info.per_image) is not None:
        raise ValueError(f"metric {info.name!r} keeps per_image={info.per_image!r}, which "
                         f"{per_image_metric(info.per_image)!r} already keeps; leave per_image None.")
    _METRICS[info.name] = info
    return info


def unregister_metric(name: str) -> MetricInfo:
    """Take a metric out of the catalogue (one :func:`register_metric` added); returns its entry."""
    if name not in _METRICS:
        raise KeyError(f"no metric {name!r} in the catalogue; it has {', '.join(_METRICS)}.")
    if name in {m.name for m in _METRIC_LIST}:
        raise ValueError(f"metric {name!r} is one of layerscope's own; only a registered metric can be removed.")
    info = _METRICS.pop(name)
    return info
