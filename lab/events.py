"""Typed events streamed by :func:`lab.run`.

One generator feeds the app, the CLI, notebooks and sweeps, so every consumer
sees the same sequence::

    RunStarted
      (per seed)  Progress* LayerMetrics* ClassMeans* LayerConfidence* LayerUtilization* ProjectionReady*
                  EpochFinished
                  Generalization(seed)   ... for epoch 0 (before training), 1, ..., E
      Aggregate* Generalization(seed=None)   (per epoch, once every seed has reported it)
      LayerContribution*                (when the config asks for it)
    RunFinished | RunFailed | RunCancelled
    (a run read back by lab.runs.follow may end with RunInterrupted instead)

A study (:func:`lab.study.runner.run_study`) streams its own typed events, :class:`StudyEvent` objects::

    StudyStarted
      (per cell, from its worker)  CellStarted CellProgress* CellEpochFinished* CellRunEnded
      (per cell, on the client)    CellDone | CellFailed
    StudyUpdated CellQueued* CellDropped*   (when the running study grows or shrinks)
    StudyCancelled                 (when it is stopped)

Every event has a class-level ``kind`` string and ``to_dict()`` (JSON-safe:
arrays become lists) so consumers can log or forward it. The four events that end
a run also name the :class:`lab.RunStatus` it ends with (``RunCancelled.status``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from lab import catalogue
from lab.status import RunStatus

__all__ = [
    "Event", "RunStarted", "Progress", "EpochFinished", "LayerMetrics", "ClassMeans", "LayerConfidence",
    "LayerUtilization", "ProjectionReady", "Aggregate", "Generalization",
    "LayerContribution", "RunFinished", "RunFailed", "RunCancelled", "RunInterrupted", "TERMINAL_KINDS",
    "StudyEvent", "CellEvent", "StudyStarted", "CellStarted", "CellProgress", "CellEpochFinished", "CellRunEnded",
    "CellDone", "CellFailed", "StudyCancelled", "StudyUpdated", "CellQueued", "CellDropped", "study_event",
]


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


@dataclass
class Event:
    """Base class: every event belongs to one run."""

    kind: ClassVar[str] = "event"
    run_id: str

    def to_dict(self) -> dict:
        out = {"kind": self.kind}
        for f in dataclasses.fields(self):
            out[f.name] = _jsonable(getattr(self, f.name))
        return out


@dataclass
class RunStarted(Event):
    """The run is resolved: layers (name, kind, dim), classes, split, device, sizes."""

    kind: ClassVar[str] = "run_started"
    config: dict
    layers: list[dict]          # [{"name": str, "kind": "map"|"tokens"|"vector", "dim": int}, ...]
    classes: list[str]          # all class names of the dataset
    seen: list[str]
    unseen: list[str]
    device: str
    n_images: dict[str, int]    # {"train": n, "heldout": n, "unseen": n}
    seeds: list[int]
    trainable_fraction: float | None = None
    axis: str = "epoch"         # what the run's epoch numbers count: "epoch", or "step" (a monitored loop's steps)


@dataclass
class Progress(Event):
    """Coarse progress: stage in {"load", "train", "extract", "metrics", "project", "contribution"}."""

    kind: ClassVar[str] = "progress"
    stage: str
    done: int
    total: int
    seed: int | None = None
    epoch: int | None = None


@dataclass
class EpochFinished(Event):
    """One epoch of fine-tuning on the seen classes is done and evaluated.

    Epoch 0 is the backbone before any training (train_loss is None there).
    """

    kind: ClassVar[str] = "epoch_finished"
    seed: int
    epoch: int
    train_loss: float | None
    train_accuracy: float | None
    heldout_accuracy: float | None
    seconds: float
    heldout_loss: float | None = None
    resilience: float | None = None   # accuracy on label-shuffled training images vs their true labels
    timings: dict | None = None       # seconds per stage of this epoch (lab.runs.timings.STAGES) and total


@dataclass
class _LayerEvent(Event):
    """An event about one layer at one evaluation (``epoch``) of one seed; its own fields follow these."""

    seed: int
    epoch: int
    layer: str


@dataclass
class LayerMetrics(_LayerEvent):
    """Metric values of one layer at one epoch for one seed, on split "unseen", "seen" (held-out) or "train"
    (the fixed sample of the seen classes' training images; the classifier-side measures at ``pre_logits``)."""

    kind: ClassVar[str] = "layer_metrics"
    split: str
    values: dict[str, float]


@dataclass
class ClassMeans(_LayerEvent):
    """The geometry of one layer's class means at one evaluation, on split "train" or "unseen".

    ``gram`` = MᵀM (K × K float64), M = [μ_1 − μ_G, …, μ_K − μ_G] the centred class means, classes in
    sorted-label order, named by ``classes``; :func:`lab.analysis.simplex` turns it into their cosines,
    the simplex ETF's and a plane of the means.
    """

    kind: ClassVar[str] = "class_means"
    split: str
    classes: list[str]
    gram: np.ndarray            # (K, K) float64


@dataclass
class LayerConfidence(_LayerEvent):
    """Bootstrap over the unseen images of one evaluation, for one layer (:func:`lab.analysis.bootstrap`).

    ``values``: ``{"nmi_low", "nmi_high", "nmi_best_share", "knn_accuracy_low", ...}``, stored as
    metric rows of the unseen split. Sent once every layer of the evaluation is measured.
    """

    kind: ClassVar[str] = "layer_confidence"
    values: dict[str, float]


@dataclass
class LayerUtilization(_LayerEvent):
    """Distance of a layer's weights from their values at epoch 0 (Wang & Yang)."""

    kind: ClassVar[str] = "layer_utilization"
    absolute: float
    relative: float


@dataclass
class ProjectionReady(_LayerEvent):
    """2-D layout of unseen-class embeddings at one layer; method "pca" first, then "umap"."""

    kind: ClassVar[str] = "projection_ready"
    method: str
    coords: np.ndarray          # (n, 2) float32
    labels: np.ndarray          # (n,) int, index into class_names
    indices: np.ndarray         # (n,) int, image index in the evaluation dataset
    class_names: list[str] = field(default_factory=list)


@dataclass
class Aggregate(Event):
    """Mean and std across seeds of one layer's metrics at one epoch."""

    kind: ClassVar[str] = "aggregate"
    epoch: int
    layer: str
    split: str
    mean: dict[str, float]
    std: dict[str, float]
    n_seeds: int


@dataclass
class Generalization(Event):
    """Generalization index g = max over layers of unseen NMI at one epoch, and its layer.

    ``seed`` is None for the across-seed value (max of the mean curve, with its std).
    ``g_low``/``g_high``: the best layer's bootstrap interval over the unseen images; ``best_share``:
    the fraction of resamples in which it is the best layer (pooled over seeds for the across-seed
    value; None where not measured; :func:`lab.analysis.bootstrap`).
    Computed by :func:`lab.analysis.generalization`: exact ties go to the deeper layer, and a
    tap listed in ``aliases`` (``{tap: deeper tap}``, taps whose pooled features equal a deeper
    tap's, e.g. ResNet's ``layer4.1`` and ``pre_logits``) is reported as that deeper tap.
    """

    kind: ClassVar[str] = "generalization"
    epoch: int
    g: float
    layer: str
    g_std: float | None = None
    seed: int | None = None
    metric: str | None = None       # None: the g metric (lab.catalogue.g_metric), resolved on construction
    g_low: float | None = None
    g_high: float | None = None
    best_share: float | None = None
    aliases: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if self.metric is None:
            self.metric = catalogue.g_metric()


@dataclass
class LayerContribution(Event):
    """Effect of re-initialising one layer to its epoch-0 weights (Wang & Yang)."""

    kind: ClassVar[str] = "layer_contribution"
    seed: int
    layer: str
    values: dict[str, float]    # e.g. heldout_loss, heldout_accuracy, unseen_nmi and their deltas


@dataclass
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    status: ClassVar[RunStatus] = RunStatus.FINISHED
    seconds: float
    summary: dict = field(default_factory=dict)


@dataclass
class RunFailed(Event):
    kind: ClassVar[str] = "run_failed"
    status: ClassVar[RunStatus] = RunStatus.FAILED
    message: str
    seconds: float = 0.0


@dataclass
class RunCancelled(Event):
    kind: ClassVar[str] = "run_cancelled"
    status: ClassVar[RunStatus] = RunStatus.CANCELLED
    seconds: float = 0.0
    message: str = "cancelled by the user"


@dataclass
class RunInterrupted(Event):
    """A followed run (:mod:`lab.runs.follow`) stopped without closing: its process is gone, or another host's
    run sent no heartbeat for :data:`lab.store.STALE_AFTER` seconds. :func:`lab.run` never sends it (its own
    run always ends with one of the three above)."""

    kind: ClassVar[str] = "run_interrupted"
    status: ClassVar[RunStatus] = RunStatus.INTERRUPTED
    seconds: float = 0.0
    message: str = "the process writing the run stopped without closing it"


TERMINAL_KINDS = frozenset({RunFinished.kind, RunFailed.kind, RunCancelled.kind, RunInterrupted.kind})


# ---------------------------------------------------------------------------------------------- studies

@dataclass(frozen=True)
class StudyEvent:
    """Base class of a study's events (:func:`lab.study.runner.run_study`'s ``on_event``): the study's own, and
    its cells' (:class:`CellEvent`). A worker sends its cell's events as ``to_dict()``; :func:`study_event`
    reads them back."""

    kind: ClassVar[str] = "study_event"

    def to_dict(self) -> dict:
        out = {"kind": self.kind}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.value if isinstance(value, RunStatus) else _jsonable(value)
        return out


@dataclass(frozen=True)
class StudyStarted(StudyEvent):
    """The study's cells are submitted (or none is left to run: then ``workers`` is None): how many there are,
    how many run now and how many finished before; the cluster's workers, their threads and devices."""

    kind: ClassVar[str] = "study_started"
    total: int
    todo: int
    skipped: int
    workers: int | None = None
    threads: int | None = None
    devices: tuple[str, ...] = ()         # each worker's device: "GPU 0", "cpu"
    dashboard: str | None = None          # the Dask dashboard's address


@dataclass(frozen=True)
class StudyCancelled(StudyEvent):
    """The study was stopped (Ctrl-C, the app's Stop): running cells are told to stop."""

    kind: ClassVar[str] = "study_cancelled"


@dataclass(frozen=True)
class CellEvent(StudyEvent):
    """Base class of the events of one cell (``cell``: its index in :meth:`lab.Study.cells`)."""

    kind: ClassVar[str] = "cell_event"
    cell: int


@dataclass(frozen=True)
class CellStarted(CellEvent):
    """The cell's run started on a worker (process ``pid``), resolving ``layers`` layers."""

    kind: ClassVar[str] = "cell_started"
    run_id: str
    layers: int
    pid: int


@dataclass(frozen=True)
class CellProgress(CellEvent):
    """The cell's run is at ``done`` of ``total`` steps of ``stage`` (a worker sends one every few seconds)."""

    kind: ClassVar[str] = "cell_progress"
    stage: str
    done: int
    total: int
    epoch: int | None = None
    seed: int | None = None


@dataclass(frozen=True)
class CellEpochFinished(CellEvent):
    """The cell's run finished an epoch (its held-out seen accuracy, None when not measured)."""

    kind: ClassVar[str] = "cell_epoch_finished"
    epoch: int
    seed: int
    heldout_accuracy: float | None = None


@dataclass(frozen=True)
class _CellRunStatus(CellEvent):
    """The cell's run with the status it ended with (``message``: why, for a run that did not finish)."""

    run_id: str
    status: RunStatus
    message: str | None = None


@dataclass(frozen=True)
class CellRunEnded(_CellRunStatus):
    """The cell's run ended on its worker with ``status`` (its archive is on its way to the client)."""

    kind: ClassVar[str] = "cell_run_ended"


@dataclass(frozen=True)
class CellDone(_CellRunStatus):
    """The cell's run is imported into the client's store, with the status it ended with (``message``: why, for a
    run that did not finish)."""

    kind: ClassVar[str] = "cell_done"


@dataclass(frozen=True)
class CellFailed(CellEvent):
    """The cell could not be run on the cluster (its worker died after the retries, or raised): no run."""

    kind: ClassVar[str] = "cell_failed"
    message: str


@dataclass(frozen=True)
class StudyUpdated(StudyEvent):
    """The running study was replaced by a grown or shrunk version of itself (:class:`lab.study.StudyController`):
    it has ``total`` cells now, ``queued`` of them new to run, ``skipped`` new but already stored, and ``dropped``
    cells that had not started are not run. From this event on a cell's index is its place in the new grid."""

    kind: ClassVar[str] = "study_updated"
    total: int
    queued: int
    dropped: int
    skipped: int = 0


@dataclass(frozen=True)
class CellQueued(CellEvent):
    """A cell added to the running study is submitted to the cluster (``key``: its :attr:`lab.study.Cell.key`, the
    JSON text of its axis values)."""

    kind: ClassVar[str] = "cell_queued"
    key: str


@dataclass(frozen=True)
class CellDropped(CellEvent):
    """A cell that had not started is taken off the cluster (its values were removed from the running study, or it
    was dropped by key); ``cell`` is the index it had (no longer one of the study's when its values were removed),
    ``key`` its :attr:`lab.study.Cell.key`."""

    kind: ClassVar[str] = "cell_dropped"
    key: str


_STUDY_EVENTS = {cls.kind: cls for cls in (StudyStarted, StudyCancelled, CellStarted, CellProgress,
                                           CellEpochFinished, CellRunEnded, CellDone, CellFailed, StudyUpdated,
                                           CellQueued, CellDropped)}


def study_event(data: dict) -> StudyEvent:
    """The :class:`StudyEvent` that ``data`` (its ``to_dict()``, as a worker sends it) describes; keys that are
    none of its fields are left out (Dask's event log adds the sending ``worker``'s address)."""
    cls = _STUDY_EVENTS.get(data.get("kind"))
    if cls is None:
        raise ValueError(f"a study event's kind must be one of {sorted(_STUDY_EVENTS)}; got {data.get('kind')!r}; "
                         f"pass a StudyEvent's to_dict()")
    names = {f.name for f in dataclasses.fields(cls)}
    fields = {k: v for k, v in data.items() if k in names}
    if "status" in fields:
        fields["status"] = RunStatus(fields["status"])
    if "devices" in fields:
        fields["devices"] = tuple(fields["devices"])
    return cls(**fields)
