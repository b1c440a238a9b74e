"""What the parts of one run share: the config, the resolved data and layers, the recorder,
the worker thread, the run's results, and the per-seed model state."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generator

import numpy as np

from lab.config import RunConfig
from lab.events import Event
from lab.runs.data import RunData
from lab.runs.recorder import Recorder
from lab.runs.results import Results
from lab.runs.worker import CancelToken, Worker

__all__ = ["RunContext", "SeedState"]


@dataclass
class SeedState:
    """Per-seed objects of the engine."""

    seed: int
    bb: Any                      # lab.backbones.Backbone
    ft: Any                      # lab.finetune.FineTuner
    weighted: list               # chosen taps whose weights a module holds (utilization, contribution)
    initial_modules: dict        # tap -> module.state_dict() at epoch 0 (CPU copies) where it can change
    train_labels: np.ndarray | None = None      # labels used for training (noisy when label_noise > 0)
    corrupted: np.ndarray | None = None         # indices (into data.train) of corrupted labels


@dataclass
class RunContext:
    """One run's shared state (filled in as the run resolves: :meth:`use_device`, :meth:`use_data`,
    :meth:`use_layers`).

    Attributes
    ----------
    data : RunData without the full dataset (and without training images when nothing trains)
    layers : chosen taps, input -> output
    proj_layers : the taps whose unseen features are projected and stored
    unseen_labels, heldout_labels : LongTensor (N,) on the CPU
    unseen_indices : ndarray (N,) int64, image index into ``data.unseen``
    """

    cfg: RunConfig
    recorder: Recorder
    cancel: CancelToken
    worker: Worker
    results: Results
    device: Any = None
    data: RunData | None = None
    layers: list[str] = field(default_factory=list)
    proj_layers: list[str] = field(default_factory=list)
    unseen_labels: Any = None
    heldout_labels: Any = None
    unseen_indices: np.ndarray | None = None

    @property
    def run_id(self) -> str:
        return self.recorder.run_id

    # -- filled in as the run resolves (by the engine, and by lab.Monitor around a user's model) --------------
    def use_device(self, device) -> None:
        """Evaluate (and extract in the worker thread) on ``device``."""
        self.device = self.worker.device = device

    def use_data(self, data: RunData, *, unseen_labels=None, heldout_labels=None) -> None:
        """Evaluate on ``data``. The labels (LongTensor (N,) on the CPU) default to the parts' ``targets``;
        without held-out images, the seen split is not measured."""
        import torch

        def labels(part):
            if part is None:
                return torch.zeros(0, dtype=torch.long)
            return torch.as_tensor(np.asarray(part.targets), dtype=torch.long)

        self.data = data
        self.unseen_labels = unseen_labels if unseen_labels is not None else labels(data.unseen)
        self.heldout_labels = heldout_labels if heldout_labels is not None else labels(data.heldout)
        self.unseen_indices = np.arange(len(self.unseen_labels), dtype=np.int64)

    def use_layers(self, layers: list[str]) -> None:
        """Measure ``layers`` (input -> output) and project those of them the config asks for."""
        cfg = self.cfg
        self.layers = list(layers)
        self.proj_layers = [] if cfg.projection == "none" else [
            name for name in self.layers if cfg.projection_layers is None or name in cfg.projection_layers]
        self.results.layers = list(self.layers)

    def check(self) -> None:
        """Raise :class:`lab.Cancelled` when the run was cancelled."""
        self.cancel.check()

    def record_metrics(self, seed: int, epoch: int, layer: str, split: str, values: dict) -> None:
        """One layer's metric values: kept for the run's analysis and buffered for the store."""
        rows = [{"seed": seed, "epoch": epoch, "layer": layer, "split": split, "metric": m, "value": float(v)}
                for m, v in values.items()]
        self.results.add_metrics(rows)
        self.recorder.metrics(rows)

    def extract(self, state: SeedState, data, layers: list[str], *, stage: str, epoch: int | None,
                pooling: str | None = None, timing: str = "extract") -> Generator[Event, None, Any]:
        """``lab.features.extract`` in the worker thread, streaming its progress; returns the FeatureSet.

        ``timing`` is the key of the run's timings the seconds count under (``lab.runs.timings.TIMED``)."""
        import lab.features

        bb, batch_size = state.bb, self.cfg.eval_batch_size
        pooling = pooling or self.cfg.pooling

        def fn(progress, should_stop):
            return lab.features.extract(bb, data, layers=layers, pooling=pooling, batch_size=batch_size,
                                        progress=progress, should_stop=should_stop, precision=self.cfg.precision)

        with self.recorder.timed(timing):
            return (yield from self.worker.stream(fn, stage=stage, seed=state.seed, epoch=epoch))
