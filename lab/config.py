"""The typed, validated configuration of one run (:class:`RunConfig`).

A run is fully described by a :class:`RunConfig`: the dataset and its class split,
the backbone, which layers to measure, the fine-tuning strategy and its settings,
the metrics and their protocol, evaluation sample caps, seeds, device and the
projection settings. The config is validated once, at construction, and written
next to the run's results (``config.json``); ``to_json``/``from_json`` round-trip
exactly.

Fields left at ``None`` resolve from the strategy and optimizer (see
:meth:`RunConfig.n_epochs`, :meth:`RunConfig.learning_rate`,
:meth:`RunConfig.decay`), so that changing the strategy with :meth:`replace` keeps
sensible settings.

Examples
--------
>>> cfg = RunConfig(dataset="glyphs", backbone="resnet18", strategy="full", epochs=3)
>>> RunConfig.from_json(cfg.to_json()) == cfg
True
"""
from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from lab import catalogue
from lab._config_rules import (DEVICE_RE, KEEP_EXPECTED, KEEP_WORDS, NAMES, lidar_disagreement, read_epochs,
                               shared_classes, strategies_that, strategy_of, unknown_projection_layers)
from lab._numpydoc import parameter_docs
from lab._params import (Boolean, Convert, Hidden, Interval, ListOf, Options, Pattern, Rule, Text, listed, normalised,
                         validate)

__all__ = [
    "RunConfig", "STRATEGIES", "OPTIMIZERS", "LR_SCHEDULES", "PROTOCOLS", "PROJECTIONS", "POOLINGS", "PRECISIONS",
    "FIELD_CHOICES",
]

STRATEGIES = catalogue.STRATEGIES
"""Fine-tuning strategies by name (:data:`lab.catalogue.STRATEGIES`, the one table): evaluate as loaded, linear
probe, full fine-tuning, one block + head (Layer FT) and one block + skip connection + head (SCL FT)."""
OPTIMIZERS = ("adamw", "sgd")
LR_SCHEDULES = ("cosine", "constant")
"""Learning-rate schedules over the whole training (all epochs of one seed)."""
PROTOCOLS = ("default", "paper")
PROJECTIONS = ("umap", "pca", "none")
POOLINGS = ("auto", "mean", "flatten")
PRECISIONS = ("auto", "float32", "bfloat16", "float16")
"""Autocast of training and extraction forwards (:func:`lab.device.autocast_dtype`, which reads them here:
this module stays torch-free)."""

FIELD_CHOICES = MappingProxyType({
    "pooling": POOLINGS, "strategy": STRATEGIES, "optimizer": OPTIMIZERS, "lr_schedule": LR_SCHEDULES,
    "protocol": PROTOCOLS, "precision": PRECISIONS,
    "projection": PROJECTIONS, "metrics": catalogue.METRICS,
})
"""The allowed values of the fields that take a fixed set (``metrics``: of each entry); the
validation below, the command line's help and the app's form read them here. ``strategy`` and ``metrics`` are
the catalogue's live tables (iterate them for the names): a strategy or metric registered later is a choice."""

_DEFAULT_EPOCHS = 3
_DEFAULT_WEIGHT_DECAY = {"adamw": 0.01, "sgd": 5e-4}
@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one run. Validated at construction (ValueError).

    Parameters
    ----------
    name : str or None
        Free-text label shown in run lists; the store generates the run id.
    dataset : str
        ``lab.data.load`` spec: "glyphs", "glyphs:character", "digits", "folder:PATH",
        "cifar10:PATH", "cifar100:PATH".
    seen, unseen : list of str or None
        Explicit class split. Give one or both; a missing side is "all other
        classes". When both are None, ``n_unseen`` classes are drawn with ``split_seed``.
    n_unseen : int
        Number of unseen classes for a random split (>= 2).
    split_seed : int
        Seed of the class split and of the per-class train/held-out partition and
        sample caps; the same for every entry of ``seeds``.
    heldout_fraction : float
        Fraction of each seen class held out from training (0 < f < 1).
    backbone : str
        ``lab.backbones.load`` name: a timm model ("resnet18"), the teaching MLP ("mlp",
        "mlp:depth=8,width=256"), an offline zoo model ("zoo:NAME" or its bare name) or a
        Hugging Face model ("hf:FAMILY" random init, "hf:ORG/NAME" from the local cache, "hf:DIR").
    pretrained : bool
        Load the hub's pretrained weights (needs network or a local cache).
    checkpoint : str or None
        Path to .safetensors / torch weights, or "run:ID[/seed]" (a stored run's
        fine-tuned weights). Excludes ``pretrained``.
    img_size : int or None
        Resize images to this size (and build the backbone for it). None: the
        dataset's native size (glyphs 64 px), which is what keeps CPU runs fast.
    layers : list of str or None
        Tap names to measure; None = all taps of the backbone.
    pooling : str
        Pooling of feature maps / tokens, one of ``POOLINGS`` ("auto": spatial mean
        for maps, class token (or token mean) for transformers).
    strategy : str
        One of ``STRATEGIES``: "none", "linear", "full", "layer", "scl".
    block : str, int or None
        For "layer" / "scl": the tap name or index (into the backbone's blocks) to train.
    epochs : int or None
        Training epochs; None = 0 for "none", 3 otherwise. Epoch 0 is always evaluated.
    lr : float or None
        Learning rate; None = 2e-4 (AdamW; 1e-3 for "linear") or 0.01 (SGD; 0.1 for "linear").
    batch_size : int
        Training batch size.
    weight_decay : float or None
        None = 0.01 (AdamW) or 5e-4 (SGD).
    optimizer : str
        "adamw" or "sgd" (momentum 0.9).
    lr_schedule : str
        "cosine": linear warm-up over the first 5 % of the steps, then cosine decay to 0
        at the last step of the last epoch (the final epoch's numbers are not a snapshot
        of a still-jumping model); "constant": ``lr`` throughout.
    augment : bool
        Mild random affine augmentation of the seen training images (only those).
    label_noise : float
        Fraction of seen training labels replaced by a different, random class
        (Wang & Yang); 0 disables. Held-out accuracy always uses clean labels.
    contribution : bool
        At the end of each seed, re-initialise each tap's module to its epoch-0
        weights and measure the effect (Wang & Yang).
    metrics : list of str
        Metric names (default: ``lab.catalogue.metric_names(default=True)``, asked as the config is made). The
        separability family is computed on unseen images, the collapse family on the seen training sample, seen
        held-out and unseen images, the classifier-side one at the trained head's input on the first two,
        transferability on seen held-out images at epoch 0, before fine-tuning, together with the seen kNN
        accuracy as their baseline; the label-free ones on unseen and seen held-out images, without their
        labels; ``lidar`` needs ``lidar_views``).
    protocol : str
        "default" (stable estimates) or "paper" (the seed papers' exact protocol).
    unseen_per_class : int or None
        Cap on unseen evaluation images per class (None = all).
    seen_per_class : int or None
        Cap on seen held-out images per class used for evaluation (None = all).
    train_per_class : int or None
        Training images per seen class (None = all of the training partition): the first ``train_per_class`` of
        each class's permutation drawn with ``split_seed`` (stratified; a smaller cap takes a subset of a larger
        one's images). The held-out partition is unchanged; the ``train_sample_per_class`` sample is drawn from
        the capped training set. A class with fewer training images is an error.
    train_sample_per_class : int
        Seen training images per class drawn once (with ``split_seed``) for the neural-collapse measures on
        the training set (split "train"): evaluation transform, no augmentation, the labels the network
        trains on (the corrupted ones under ``label_noise``). A class with fewer training images gives all
        of them. 0 turns the train split off.
    lidar_views, lidar_images : int
        LiDAR's augmented views of each of at most ``lidar_images`` unseen images (a class-stratified sample);
        0: off; 2 or more with ``"lidar"`` in ``metrics``: each view one more forward pass (stage "lidar").
    seeds : list of int
        One full run per seed (initialisation, data order, augmentation, label noise).
    device : str
        "auto", "cpu", "cuda", "cuda:N" or "mps".
    precision : str
        Autocast of fine-tuning and feature extraction, one of ``PRECISIONS``: "auto" (bfloat16 on CUDA where
        supported, else float16 with a loss scaler; float32 on CPU and MPS), "float32" (no autocast),
        "bfloat16" or "float16" (on any device; features are float32 in every case).
    projection : str
        "umap" (PCA first, UMAP when ready), "pca" or "none".
    projection_layers : list of str or None
        Layers to project; None = every measured layer.
    projection_fit_points : int
        UMAP is fitted on at most this many unseen images (a class-stratified sample, the same at every
        epoch and layer) and places every other image with umap's ``transform`` (>= 50).
    keep_embeddings : str or list of int
        Evaluations whose unseen embeddings of every projected layer stay on disk (float16, N x d x 2
        bytes per layer): "last" (the last evaluation of each seed), "all", or a list of epochs kept
        besides the last (e.g. [0]). The 2-D layouts of every epoch are always kept.
    save_weights : bool
        Save the fine-tuned backbone weights of each seed (safetensors) so that
        ``checkpoint="run:ID"`` can load them.
    eval_batch_size : int
        Batch size of feature extraction.

    Attributes
    ----------
    separability_metrics : tuple of str
        The requested metrics measured on unseen images only.
    collapse_metrics : tuple of str
        The requested metrics measured on the seen training sample, the seen held-out sample and unseen images.
    classifier_metrics : tuple of str
        The requested classifier-side measures (at the head input, when a head is trained).
    transfer_metrics : tuple of str
        The requested transferability estimators (seen held-out images, epoch 0 only).
    """

    name: str | None = None
    dataset: str = "glyphs"
    seen: tuple[str, ...] | None = None
    unseen: tuple[str, ...] | None = None
    n_unseen: int = 5
    split_seed: int = 0
    heldout_fraction: float = 0.2
    backbone: str = "resnet18"
    pretrained: bool = False
    checkpoint: str | None = None
    img_size: int | None = None
    layers: tuple[str, ...] | None = None
    pooling: str = "auto"
    strategy: str = "full"
    block: str | int | None = None
    epochs: int | None = None
    lr: float | None = None
    batch_size: int = 64
    weight_decay: float | None = None
    optimizer: str = "adamw"
    lr_schedule: str = "cosine"
    augment: bool = True
    label_noise: float = 0.0
    contribution: bool = False
    # asked of the catalogue at each construction: a metric registered later with default=True is measured
    metrics: tuple[str, ...] = field(default_factory=lambda: catalogue.metric_names(default=True))
    protocol: str = "default"
    unseen_per_class: int | None = 300
    seen_per_class: int | None = 100
    train_per_class: int | None = None
    train_sample_per_class: int = 20
    lidar_views: int = 0
    lidar_images: int = 500
    seeds: tuple[int, ...] = (0,)
    device: str = "auto"
    precision: str = "auto"
    projection: str = "umap"
    projection_layers: tuple[str, ...] | None = None
    projection_fit_points: int = 5000
    keep_embeddings: str | tuple[int, ...] = "last"
    save_weights: bool = True
    eval_batch_size: int = 128

    # ------------------------------------------------------------------ validation
    # Each field's constraint, checked in field order by lab._params.validate (a Rule may read the fields
    # above it); the command line, the app's form and a study's cells all get these messages.
    _constraints = MappingProxyType({
        "name": [Text(), None],
        "dataset": [Text(desc="a dataset spec such as 'glyphs' or 'digits'")],
        "seen": [ListOf(NAMES), None],
        "unseen": [ListOf(NAMES), None,
                   Rule(lambda c: not shared_classes(c), lambda c: (
                       f"seen and unseen must not share classes; both list {listed(shared_classes(c))}.")),
                   Rule(lambda c: c.unseen is None or len(c.unseen) >= 2, lambda c: (
                       f"unseen needs at least 2 classes to measure separability. Got {list(c.unseen)!r}."))],
        "n_unseen": [Interval(int, 2, None)],
        "split_seed": [Interval(int, 0, None)],
        "heldout_fraction": [Interval(float, 0, 1, closed="neither")],
        "backbone": [Text(desc="a model name such as 'resnet18' or 'mlp'")],
        "pretrained": [Boolean()],
        "checkpoint": [Text(), None,
                       Rule(lambda c: not (c.pretrained and c.checkpoint is not None),
                            "pretrained=True and checkpoint are exclusive: the checkpoint's weights would replace "
                            "the pretrained ones. Give one of them.")],
        "img_size": [Interval(int, 8, None), None],
        "layers": [ListOf(NAMES), None],
        "pooling": [Options(POOLINGS)],
        "strategy": [Options(lambda: catalogue.STRATEGIES)],
        "block": [Rule(lambda c: c.block is not None or not strategy_of(c).needs_block, lambda c: (
                      f"block is required for strategy={c.strategy!r}: give a tap name (e.g. 'layer3') "
                      "or an index into the backbone's blocks (e.g. 2 or -1).")),
                  Rule(lambda c: c.block is None or strategy_of(c).needs_block, lambda c: (
                      f"block is only used by strategy {strategies_that('needs_block')}, but "
                      f"strategy={c.strategy!r}; remove block or choose one of those strategies.")),
                  Text(desc="a tap name", strip=False), Interval(int, None, None, desc="an integer index"),
                  Hidden(None)],
        "epochs": [Interval(int, 0, None), None,
                   Rule(lambda c: strategy_of(c).trains or not c.epochs, lambda c: (
                       f"epochs={c.epochs} has no effect with strategy={c.strategy!r} (nothing is trained); "
                       f"set epochs=0 or choose strategy {strategies_that('trains')}."))],
        "lr": [Interval(float, 0, None, closed="neither", desc="a positive number"), None],
        "batch_size": [Interval(int, 1, None)],
        "weight_decay": [Interval(float, 0, None), None],
        "optimizer": [Options(OPTIMIZERS)],
        "lr_schedule": [Options(LR_SCHEDULES)],
        "augment": [Boolean()],
        "label_noise": [Interval(float, 0, 1, closed="both", desc="a fraction between 0.0 and 1.0"),
                        Rule(lambda c: strategy_of(c).trains or not c.label_noise, lambda c: (
                            f"label_noise only affects training, but strategy={c.strategy!r} trains nothing; "
                            f"choose strategy {strategies_that('trains')}, or set label_noise=0."))],
        "contribution": [Boolean(), Rule(lambda c: strategy_of(c).trains or not c.contribution, lambda c: (
            f"contribution re-initialises layers to their epoch-0 weights, which strategy={c.strategy!r} "
            "never changes; choose a training strategy or set contribution=False."))],
        "metrics": [ListOf(Options(lambda: catalogue.METRICS), empty="metrics must name at least one metric.",
                           bad="metrics: unknown metric {bad}. Allowed: {item.listed}.")],
        "protocol": [Options(PROTOCOLS)],
        "unseen_per_class": [Interval(int, 2, None), None],
        "seen_per_class": [Interval(int, 2, None), None],
        "train_per_class": [Interval(int, 1, None), None],
        "train_sample_per_class": [Interval(int, 0, None)],
        "lidar_views": [Interval(int, 0, 0, closed="both", desc="0 (LiDAR off)"),
                        Interval(int, 2, None, desc="an integer >= 2 (views per unseen image)")],
        "lidar_images": [Interval(int, 2, None), Rule(lambda c: ("lidar" in c.metrics) == (c.lidar_views != 0),
                                                      lidar_disagreement)],
        "seeds": [ListOf(Interval(int, 0, None), one=True, empty="seeds must list at least one seed, e.g. [0] or "
                         "[0, 1, 2].", bad="seeds must be integers >= 0. Got {bad} instead.",
                         repeat="seeds must not repeat. Got {value}.")],
        "device": [Pattern(DEVICE_RE, desc="'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'")],
        "precision": [Options(PRECISIONS)],
        "projection": [Options(PROJECTIONS)],
        "projection_layers": [ListOf(NAMES), None, Rule(lambda c: not unknown_projection_layers(c), lambda c: (
            f"projection_layers must be a subset of layers; {unknown_projection_layers(c)[0]!r} is not in "
            f"layers {list(c.layers)!r}."))],
        "projection_fit_points": [Interval(int, 50, None)],
        "keep_embeddings": [Convert(read_epochs), Options(KEEP_WORDS, desc=listed(KEEP_WORDS)),
                            ListOf(Interval(int, 0, None), desc="a list of epochs >= 0 such as [0, 5]",
                                   empty=KEEP_EXPECTED, bad=KEEP_EXPECTED,
                                   repeat="keep_embeddings lists an epoch more than once. Got {value} instead.")],
        "save_weights": [Boolean()],
        "eval_batch_size": [Interval(int, 1, None)],
    })
    """What each field takes (lab._params): the kinds of value it accepts, then the rules that must hold."""

    def __post_init__(self):
        # Lists become tuples first (so the frozen config is hashable and JSON lists compare equal to the
        # tuples they came from); keep_embeddings typed as text is read as the list it names.
        for name, value in normalised(self, self._constraints).items():
            object.__setattr__(self, name, value)
        validate(self, self._constraints)

    # ------------------------------------------------------------------ resolved settings
    @property
    def n_epochs(self) -> int:
        """Training epochs after defaults: ``epochs``, or 0 for a strategy that trains nothing and 3 otherwise."""
        if self.epochs is not None:
            return self.epochs
        return _DEFAULT_EPOCHS if STRATEGIES[self.strategy].trains else 0

    @property
    def learning_rate(self) -> float | None:
        """The learning rate used: ``lr``, or the strategy's default for the optimizer (None for "none")."""
        strategy = STRATEGIES[self.strategy]
        if not strategy.trains:
            return None
        return float(self.lr) if self.lr is not None else float(strategy.lr[self.optimizer])

    @property
    def decay(self) -> float:
        """The weight decay used."""
        return float(self.weight_decay) if self.weight_decay is not None else _DEFAULT_WEIGHT_DECAY[self.optimizer]

    def requested(self, **question) -> tuple[str, ...]:
        """The requested metrics that answer ``question`` (the keywords of :func:`lab.catalogue.metric_names`), in
        the order ``metrics`` gives them: ``cfg.requested(family="collapse")``."""
        names = catalogue.metric_names(**question)
        return tuple(m for m in self.metrics if m in names)

    # the requested metrics of each family, in the given order (the class docstring's "Attributes")
    separability_metrics = property(functools.partial(requested, family="separability"))
    collapse_metrics = property(functools.partial(requested, family="collapse"))
    classifier_metrics = property(functools.partial(requested, family="classifier_collapse"))
    transfer_metrics = property(functools.partial(requested, family="transferability"))

    @property
    def unseen_metrics(self) -> tuple[str, ...]:
        """Requested metrics measured on the unseen images' features (separability, collapse, label-free; not
        ``lidar``, which reads their augmented views), in the given order."""
        return self.requested(split="unseen", where=lambda info: "views" not in info.needs)

    def seen_metrics(self, epoch: int) -> tuple[str, ...]:
        """Metrics measured on the seen held-out images at ``epoch``: the collapse and label-free metrics, and
        at epoch 0 (before fine-tuning) the transferability estimators with kNN accuracy as their baseline."""
        names = self.collapse_metrics + self.requested(family="label_free", split="seen")
        if epoch == 0 and self.transfer_metrics:
            baseline = (catalogue.TRANSFER_BASELINE,) if catalogue.TRANSFER_BASELINE not in names else ()
            names = names + self.transfer_metrics + baseline
        return names

    def keeps_embeddings(self, epoch: int) -> bool:
        """Whether the embeddings of ``epoch`` stay once a later evaluation of the seed is stored
        (the last evaluation's always stay)."""
        keep = self.keep_embeddings
        return keep == "all" or (isinstance(keep, tuple) and epoch in keep)

    def describe(self) -> str:
        """One line, e.g. ``glyphs · resnet18 · full 3 ep · 5 unseen · seeds [0]``."""
        split = f"{len(self.unseen)} unseen" if self.unseen else f"{self.n_unseen} unseen"
        train = f"{self.strategy} {self.n_epochs} ep" if STRATEGIES[self.strategy].trains else self.strategy
        if self.block is not None:
            train += f" @{self.block}"
        if self.label_noise:
            train += f" noise {self.label_noise:g}"
        if self.train_per_class is not None:
            train += f" on {self.train_per_class}/class"
        return f"{self.dataset} · {self.backbone} · {train} · {split} · seeds {list(self.seeds)}"

    # ------------------------------------------------------------------ (de)serialisation
    def replace(self, **changes) -> "RunConfig":
        """A copy with ``changes`` applied (validated again)."""
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise ValueError(self._unknown_message(unknown))
        return dataclasses.replace(self, **changes)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """``{field: default}`` of every field, as ``RunConfig()`` would take it now (a field whose default is
        computed, such as ``metrics``, asks again at each call). The command line's help, the app's form and its
        presets read defaults here, never from ``dataclasses.fields``.

        Examples
        --------
        >>> RunConfig.defaults()["metrics"] == RunConfig().metrics == catalogue.metric_names(default=True)
        True
        """
        return {f.name: f.default_factory() if f.default is dataclasses.MISSING else f.default
                for f in dataclasses.fields(cls)}

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Each field's description from the class's numpydoc ``Parameters`` section, on one line.

        The command line's ``--help`` and the app's form both read their help text here.
        """
        return parameter_docs(cls)

    @classmethod
    def _unknown_message(cls, unknown) -> str:
        return (
            f"unknown RunConfig field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}. "
            f"Allowed fields: {', '.join(cls.field_names())}."
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe dict (tuples become lists)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        """Build from a dict; unknown keys raise ValueError naming them."""
        if not isinstance(data, dict):
            raise ValueError(f"a RunConfig dict is expected. Got {type(data).__name__} instead.")
        unknown = sorted(set(data) - set(cls.field_names()))
        if unknown:
            raise ValueError(cls._unknown_message(unknown))
        return cls(**data)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> "RunConfig":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the RunConfig JSON could not be parsed: {exc}.") from exc
        return cls.from_dict(data)
