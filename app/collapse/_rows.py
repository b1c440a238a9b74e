"""What the neural-collapse view shows, from a run's metrics and class means (no Panel here).

The panels follow Papyan, Han & Donoho 2020 (docs/METRICS.md, "Neural collapse on the training set"); every number
comes from the run: the metric rows (mean over seeds by :func:`lab.analysis.aggregate_seeds`), the terminal-phase
epoch (the run summary's, else :func:`lab.analysis.terminal_phase` of the same rows) and the geometry of the class
means (:func:`lab.analysis.simplex` of each :class:`lab.events.ClassMeans` gram).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lab import analysis, catalogue
from lab.errors import not_recorded
from lab.text import join_words

__all__ = ["PANELS", "Panel", "classifier_metrics", "HEAD_LAYER", "SPLITS", "Source", "ClassMeansTable",
           "collapse_frame", "head_layer", "problems", "terminal_epochs", "NO_HEAD", "NO_TRAIN", "TRAIN_OFF",
           "NO_CLASSIFIER_ROWS", "NO_CLASS_MEANS", "classifier_not_asked", "MONITORED_NO_HEAD", "MONITORED_NO_TRAIN",
           "measured_or_asked", "split_names"]

SPLITS = catalogue.SPLITS
"""The splits of the collapse panels, in the catalogue's order: the training sample, the held-out seen images, the
unseen classes."""
HEAD_LAYER = catalogue.HEAD_LAYER
"""The layer the engine records the classifier-side measures at: the head's input (:mod:`lab.catalogue`)."""


def classifier_metrics() -> frozenset[str]:
    """The classifier-side measures (the family "classifier_collapse"), asked of the catalogue: recorded at the
    head input on train and seen."""
    return frozenset(catalogue.metric_names(family="classifier_collapse"))



@dataclass(frozen=True)
class Panel:
    """One panel of the view: its key, title and the metrics it draws (class means first); its y axis is a log
    axis where :mod:`lab.catalogue` draws the first metric on one."""

    key: str
    title: str
    metrics: tuple[str, ...]

    @property
    def log(self) -> bool:
        info = catalogue.METRICS.get(self.metrics[0])
        return bool(info is not None and info.log_scale)


PANELS = (
    Panel("nc1", "NC1 = tr(Σ_W Σ_B⁺)/K\nwithin-class variability", ("nc1",)),
    Panel("equinorm", "Equinorm: std/mean of the norms\nclass means; classifier rows black",
          ("nc2_equinorm", "nc2_classifier_equinorm")),
    Panel("equiangularity", "Equiangularity: mean |cos + 1/(K−1)|\nclass means; classifier rows black",
          ("nc2_equiangularity", "nc2_classifier_equiangularity")),
    Panel("cosine_std", "Cosine std\nstd of the cosines of the centred means", ("nc2_cosine_std",)),
    Panel("self_duality", "NC3 self-duality ‖W/‖W‖ − Mᵀ/‖M‖‖²\nclassifier rows against the means", ("nc3_self_duality",)),
    Panel("ncc", "NC4 disagreement\nhead's answer ≠ nearest class centre", ("nc4_ncc_disagreement",)),
)
"""The panels in display order (Papyan et al. figures 6, 2, 4, 3, 5 and 7)."""

NO_HEAD = "no trained head (strategy none): classifier-side measures are not defined"
NO_TRAIN = f"{not_recorded(None, 'training-set sample')}; held-out and unseen only"
TRAIN_OFF = "the training-set sample was turned off for this run (train_sample_per_class = 0)"
NO_CLASS_MEANS = f"{not_recorded(None, 'class means')}; no simplex to show"
NO_CLASSIFIER_ROWS = f"{not_recorded(None, 'classifier-side measures')}; class-means measures only"

MONITORED_NO_HEAD = ("a training loop watched by lab.Monitor: lab does not read the loop's classifier, so there are no "
                     "classifier-side measures")
MONITORED_NO_TRAIN = ("a training loop watched by lab.Monitor is measured on the images given to it, not on a sample "
                      "of its training set")


def classifier_not_asked() -> str:
    """Why a run has no classifier-side panel rows when it asked for none: names the family's metrics as the
    catalogue has them now (a metric registered after import among them)."""
    names = ", ".join(catalogue.metric_names(family="classifier_collapse"))
    return f"no classifier-side measure ({names}) is among this run's metrics: class-means measures only"


@dataclass
class Source:
    """What the view reads of one run, live or stored: its metric rows, layers, config, summary and seeds."""

    metrics: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["seed", "epoch", "layer", "split", "metric", "value"]))
    layers: list = field(default_factory=list)
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    seeds: list = field(default_factory=list)
    run_id: str | None = None
    aliases: dict = field(default_factory=dict)     # {tap: deeper tap with identical features}: counted once
    axis: str = "epoch"                             # what its epoch numbers count ("step": a loop's steps)
    status: str | None = None                       # running, finished, failed, cancelled, interrupted


def collapse_frame(metrics: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds of the panels' metrics per (metric, split, epoch, layer), from
    :func:`lab.analysis.aggregate_seeds` (columns metric, split, epoch, layer, mean, std, n)."""
    wanted = {m for panel in PANELS for m in panel.metrics}
    rows = metrics[metrics["metric"].isin(wanted)] if len(metrics) else metrics
    return analysis.aggregate_seeds(rows, by=("metric", "split", "epoch", "layer"))


def head_layer(metrics: pd.DataFrame, layers) -> str | None:
    """The layer the classifier-side rows are recorded at (:data:`HEAD_LAYER` when the run has it), or None."""
    rows = metrics[metrics["metric"].isin(classifier_metrics())] if len(metrics) else metrics
    recorded = list(dict.fromkeys(rows["layer"])) if len(rows) else []
    if HEAD_LAYER in recorded or (not recorded and HEAD_LAYER in list(layers)):
        return HEAD_LAYER
    return recorded[0] if recorded else None


def measured_or_asked(source: Source) -> set[str]:
    """The metrics the run measures: those its config asks for (a live run's rows come later) and those it has rows
    of (a run recorded before its config listed them)."""
    asked = source.config.get("metrics") if source.config else None
    present = set(source.metrics["metric"]) if len(source.metrics) else set()
    return set(asked or ()) | present


def split_names(splits) -> str:
    """"held-out and unseen", "unseen": the splits named as the panels' key names them."""
    return join_words(catalogue.split_label(s, "phrase") for s in splits)


def problems(source: Source, *, finished: bool) -> dict[str, str | None]:
    """One-line reasons why a part of the view is empty: {"train": …, "classifier": …}, None where it is not.

    ``finished``: the run has ended (a live run that has not measured yet is not told it lacks anything). Each says
    what is true of the run: a loop watched by lab.Monitor has no training sample nor classifier of lab's, a run
    whose metrics leave the classifier side out was not asked for it; only a run that lacks what its settings
    measure was recorded by an older version (:func:`lab.errors.not_recorded`).
    """
    from lab.monitor import is_monitored

    config, metrics = source.config or {}, source.metrics
    measured = bool(len(metrics))
    others = [s for s in SPLITS[1:] if measured and (metrics["split"] == s).any()]
    only = f": {split_names(others)} only" if others else ""
    out: dict[str, str | None] = {"train": None, "classifier": None}
    monitored = is_monitored(config)
    if monitored:
        out["train"] = MONITORED_NO_TRAIN + only
    elif int(config.get("train_sample_per_class", 1) or 0) == 0 and "train_sample_per_class" in config:
        out["train"] = TRAIN_OFF + only
    elif (measured or finished) and not (len(metrics) and (metrics["split"] == "train").any()):
        out["train"] = NO_TRAIN
    if monitored:
        out["classifier"] = MONITORED_NO_HEAD
    elif config.get("strategy") == "none":
        out["classifier"] = NO_HEAD
    elif not classifier_metrics() & measured_or_asked(source):
        out["classifier"] = classifier_not_asked()
    elif (measured or finished) and not (len(metrics) and metrics["metric"].isin(classifier_metrics()).any()):
        out["classifier"] = NO_CLASSIFIER_ROWS
    return out


def terminal_epochs(source: Source) -> dict[int, int | None]:
    """{seed: first epoch of 100 % training-sample accuracy, or None}: the run summary's ``terminal_phase`` (the
    engine's), else :func:`lab.analysis.terminal_phase` of the rows measured so far (a live run)."""
    stored = (source.summary or {}).get("terminal_phase")
    if isinstance(stored, dict) and stored:
        return {int(seed): (None if epoch is None else int(epoch)) for seed, epoch in stored.items()}
    if not len(source.metrics) or not (source.metrics["split"] == "train").any():
        return {}
    return {int(seed): (None if epoch is None else int(epoch))
            for seed, epoch in analysis.terminal_phase(source.metrics).items()}


class ClassMeansTable:
    """The grams of the centred class means of one run, by (seed, epoch, layer, split).

    Fed by :class:`lab.events.ClassMeans` events (:meth:`add`) or by a stored run's ``class_means``
    (:meth:`from_record`); :meth:`simplex` gives :func:`lab.analysis.simplex` of one of them.
    """

    def __init__(self):
        self._grams: dict[tuple[int, int, str, str], tuple[list[str], np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self._grams)

    def add(self, event) -> None:
        """Keep one :class:`lab.events.ClassMeans` event's gram."""
        key = (int(event.seed), int(event.epoch), str(event.layer), str(event.split))
        self._grams[key] = (list(event.classes), np.asarray(event.gram, dtype=np.float64))

    @classmethod
    def from_record(cls, record) -> tuple["ClassMeansTable", str | None]:
        """The stored class means of ``record`` and, when it has none, the record's one-line reason."""
        table = cls()
        stored = getattr(record, "class_means", None)
        if isinstance(stored, pd.DataFrame):
            for row in stored.itertuples(index=False):
                table._grams[(int(row.seed), int(row.epoch), str(row.layer), str(row.split))] = (
                    list(row.classes), np.asarray(row.gram, dtype=np.float64))
        elif isinstance(stored, dict):
            for (seed, epoch, layer, split), value in stored.items():
                classes, gram = (value["classes"], value["gram"]) if isinstance(value, dict) else value
                table._grams[(int(seed), int(epoch), str(layer), str(split))] = (
                    list(classes), np.asarray(gram, dtype=np.float64))
        reason = None if len(table) else (getattr(record, "class_means_problem", None)
                                          or NO_CLASS_MEANS)
        return table, reason

    def layers(self, layer_order=()) -> list[str]:
        """The layers with class means, in ``layer_order`` first."""
        present = {key[2] for key in self._grams}
        return [name for name in layer_order if name in present] + sorted(present - set(layer_order))

    def splits(self, layer: str | None = None) -> list[str]:
        present = {key[3] for key in self._grams if layer is None or key[2] == layer}
        return [s for s in SPLITS if s in present] + sorted(present - set(SPLITS))

    def epochs(self, layer: str | None, split: str | None) -> list[int]:
        """The epochs with class means at ``layer`` on ``split``, ascending."""
        return sorted({key[1] for key in self._grams if key[2] == layer and key[3] == split})

    def simplex(self, layer: str, epoch: int, split: str, seed: int | None = None) -> dict | None:
        """:func:`lab.analysis.simplex` of the gram at (layer, epoch, split) of ``seed`` (default: the lowest seed
        with one), with the ``classes`` and ``seed``; None when there is none."""
        seeds = sorted(key[0] for key in self._grams if key[1:] == (epoch, layer, split))
        if not seeds:
            return None
        seed = seed if seed in seeds else seeds[0]
        classes, gram = self._grams[(seed, epoch, layer, split)]
        return {**analysis.simplex(gram), "classes": classes, "seed": seed}
