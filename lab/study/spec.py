"""Studies: a grid of runs (a base RunConfig and axes over its fields) run on Dask distributed.

A study is the Cartesian product of its axes::

    name: utilization-vs-noise
    base: {dataset: digits, strategy: full, epochs: 20, contribution: true}
    axes:
      backbone: ["mlp:depth=5,width=16", "mlp:depth=5,width=64"]
      label_noise: [0.0, 0.2, 0.5]
      seeds: [[0], [1], [2]]

Every cell is validated before anything runs. Each cell runs as ``lab.run`` on a Dask worker
(a ``LocalCluster`` of processes by default, or any scheduler address): the worker is sent the
config as a plain dict (never a generator), writes the run into a private temporary store,
tags its meta with ``study`` and ``cell``, and sends the finished run folder back as one
archive (:mod:`lab.archive`) that the client imports atomically into its store. So the
workers need not share the client's filesystem, and a worker that dies mid-run leaves
nothing half-written in the store; Dask reschedules its cell (bounded by ``retries``).
Re-running a study skips the cells whose run finished.

Progress travels from the workers as Dask events on the topic ``lab-study-<name>``.

On a machine with GPUs, cells on "cuda" or "auto" run one per GPU (``cells_per_gpu`` to share one),
each worker pinned to its own GPU; a cell asking for "cuda" where there is none is refused before
anything starts (see :func:`lab.study.runner.run_study`).
"""
from __future__ import annotations

import itertools
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from lab.config import RunConfig
from lab.events import StudyEvent
from lab.status import RunStatus
from lab.study._keys import axis_fields, cell_key, group_label, short_value
from lab.store.lookup import open_store
from lab.study._yaml import leading_comments, save_text, spec_yaml
from lab.study.grow import extended_axes, reduced_axes
from lab.study.order import check_order, run_order
from lab.study.records import StudyResult, runs_by_cell, study_status

__all__ = ["Study", "Cell", "load_study"]


@dataclass(frozen=True)
class Cell:
    """One point of the grid: its position, its axis values and the validated config."""

    index: int
    values: dict
    config: RunConfig

    @property
    def key(self) -> str:
        """Canonical text of the axis values (how stored runs are matched to cells)."""
        return cell_key(self.values)

    def label(self) -> str:
        return group_label(self.values, list(self.values)) if self.values else "(base)"


class Study:
    """A named grid of runs: ``base`` RunConfig fields and ``axes`` {field: [values]}.

    Parameters
    ----------
    name : str
        Identifies the study in the run store (each run's meta carries it).
    base : dict or RunConfig
        Fields shared by every cell.
    axes : dict of field -> list
        The grid; its Cartesian product, in the order given (the last axis varies fastest). A value
        that is a mapping sets several fields at once (``strategy: [{strategy: full},
        {strategy: layer, block: fc4}]``).
    retries : int
        How many times a cell whose worker died is run again before it counts as failed.
    order : {"grid", "shuffled"}
        The order the cells run in (:meth:`run_order`): the grid's, or a seeded order whose first cells
        cover every value of every axis (:func:`lab.study.order.run_order`). A cell's index stays its grid
        position whatever the order.
    order_seed : int
        Seeds the "shuffled" order.
    """

    def __init__(self, name: str, base: Mapping | RunConfig | None = None,
                 axes: Mapping[str, list] | None = None, *, retries: int = 2, description: str = "",
                 order: str = "grid", order_seed: int = 0):
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a study needs a non-empty name. Got {name!r} instead.")
        self.name = name.strip()
        self.base = base.to_dict() if isinstance(base, RunConfig) else dict(base or {})
        self.axes = {str(k): list(v) if isinstance(v, (list, tuple)) else v for k, v in (axes or {}).items()}
        self.retries = int(retries)
        self.description = description
        self.order, self.order_seed = check_order(order, order_seed)
        self._cells: list[Cell] | None = None
        self.cells()                               # validate now

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping, *, where: str = "the study spec") -> "Study":
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be a mapping with name, base and axes. Got {type(data).__name__}.")
        unknown = set(data) - {"name", "base", "axes", "retries", "description", "order", "order_seed"}
        if unknown:
            raise ValueError(f"{where} has unknown keys {sorted(unknown)}; a study has name, base, axes "
                             f"(and optionally retries, description, order, order_seed)")
        if "name" not in data:
            raise ValueError(f"{where} has no name; add `name: my-study`")
        return cls(data["name"], data.get("base") or {}, data.get("axes") or {},
                   retries=data.get("retries", 2), description=data.get("description", ""),
                   order=data.get("order", "grid"), order_seed=data.get("order_seed", 0))

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "Study":
        """Read a study from YAML (``.yaml``/``.yml``) or JSON."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            # the path the user typed is input: a usage error (exit 2), not a failing disk
            raise ValueError(f"no study spec at {path}; the shipped specs are in studies/") from None
        try:
            if path.suffix.lower() in (".yaml", ".yml"):
                import yaml
                data = yaml.safe_load(text)
            else:
                data = json.loads(text)
        except Exception as exc:                   # noqa: BLE001 - yaml and json errors differ in type
            raise ValueError(f"{path} is not valid {'YAML' if path.suffix.lower() in ('.yaml', '.yml') else 'JSON'}: "
                             f"{' '.join(str(exc).split())}") from exc
        return cls.from_dict(data, where=str(path))

    def to_dict(self) -> dict:
        """The spec as plain data (``order`` and ``order_seed`` only where they are not the defaults, so the
        specs written before them read the same)."""
        out = {"name": self.name, "description": self.description, "base": self.base, "axes": self.axes,
               "retries": self.retries}
        if self.order != "grid":
            out["order"] = self.order
        if self.order_seed != 0:
            out["order_seed"] = self.order_seed
        return out

    def to_yaml(self) -> str:
        """The spec as YAML text that :meth:`from_file` reads back to the same cells and keys."""
        return spec_yaml(self.to_dict())

    def save(self, path: str | os.PathLike) -> Path:
        """Write the spec to ``path`` as YAML (``.json``: JSON) in one rename; the comment lines that open an
        existing file there are kept. Returns the path."""
        path = Path(path)
        if path.suffix.lower() == ".json":
            text = json.dumps(self.to_dict(), indent=2) + "\n"
        else:
            text = leading_comments(path) + self.to_yaml()
        return save_text(path, text)

    # -- growing ------------------------------------------------------------------------------------
    def _with_axes(self, axes: Mapping[str, list]) -> "Study":
        return Study(self.name, self.base, axes, retries=self.retries, description=self.description,
                     order=self.order, order_seed=self.order_seed)

    def extend(self, **axes) -> "Study":
        """A new study of the same name whose axes gain the given values (``extend(epochs=[3], seeds=[2])``).

        Values an axis already has are left out; a bare seed on a ``seeds`` axis of lists is ``[seed]``.
        Every existing cell keeps its key, so its stored run is still found and is not run again. Only
        existing axes grow, except the repeat axis ``seeds``, which a study may gain (its first value is
        then the seeds the cells ran with). ValueError for an unknown axis, naming the study's axes.
        """
        repeats = {"seeds": list(self.cells()[0].config.seeds)}
        return self._with_axes(extended_axes(self.name, self.axes, axes, repeats=repeats))

    def without(self, **axes) -> "Study":
        """A new study of the same name without the given axis values (``without(backbone=["resnet18"])``).

        ValueError for an unknown axis, a value the axis does not have, or an axis it would leave empty.
        The remaining cells keep their keys.
        """
        return self._with_axes(reduced_axes(self.name, self.axes, axes))

    def cells(self) -> list[Cell]:
        """Every cell, validated (ValueError naming the axis, the value's position and the problem)."""
        if self._cells is not None:
            return self._cells
        names = set(RunConfig.field_names())
        for field in self.base:
            if field not in names:
                raise ValueError(f"study {self.name!r}: {field!r} is not a RunConfig field; "
                                 f"{RunConfig._unknown_message([field])}")
        for axis, values in self.axes.items():
            if not isinstance(values, list) or not values:
                raise ValueError(f"study {self.name!r}: axis {axis!r} must be a non-empty list of values. "
                                 f"Got {values!r} instead.")
            for i, value in enumerate(values):
                fields = axis_fields(axis, value)
                bad = [f for f in fields if f not in names]
                if bad:
                    raise ValueError(f"study {self.name!r}: axis {axis!r} value #{i + 1} sets {bad[0]!r}, which is "
                                     f"not a RunConfig field; {RunConfig._unknown_message(bad)}")
        if not self.axes:
            try:
                RunConfig.from_dict(self.base)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"study {self.name!r}: base config is not valid: {exc}") from None
        first = {k: v for axis, values in self.axes.items() for k, v in axis_fields(axis, values[0]).items()}
        for axis, values in self.axes.items():
            for i, value in enumerate(values):
                try:
                    RunConfig.from_dict({**self.base, **first, **axis_fields(axis, value)})
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"study {self.name!r}: axis {axis!r} value #{i + 1} ({short_value(value)}) is not "
                                     f"valid: {exc}") from None
        cells = []
        for index, combo in enumerate(itertools.product(*self.axes.values())):
            values = dict(zip(self.axes, combo))
            fields = {k: v for axis, value in values.items() for k, v in axis_fields(axis, value).items()}
            try:
                config = RunConfig.from_dict({**self.base, **fields})
            except (ValueError, TypeError) as exc:
                label = ", ".join(f"{k}={short_value(v)}" for k, v in values.items())
                raise ValueError(f"study {self.name!r}: cell {index + 1} ({label}) is not valid: {exc}") from None
            cells.append(Cell(index, values, config))
        self._cells = cells
        return cells

    def run_order(self) -> list[Cell]:
        """The cells in the order :meth:`run` submits them (``order``); each keeps its grid ``index``."""
        return run_order(self.cells(), self.order, self.order_seed)

    def check_names(self, *, store=None) -> None:
        """Resolve every cell's dataset, backbone and checkpoint here, without building anything.

        A name is otherwise only resolved when a worker loads it: a typo in one cell of a large study
        would start the cluster and fail that cell an hour later. Raises ValueError naming the first
        bad cell, the value and the closest valid names (see :func:`lab.runs.check_names`).
        """
        from lab.runs.names import check_names

        verdicts: dict[tuple, str | None] = {}
        bad: list[tuple[Cell, str]] = []
        for cell in self.cells():
            cfg = cell.config
            names = (cfg.dataset, cfg.backbone, cfg.checkpoint)
            if names not in verdicts:
                try:
                    check_names(cfg, store=store)
                    verdicts[names] = None
                except ValueError as exc:
                    verdicts[names] = str(exc)
            if verdicts[names] is not None:
                bad.append((cell, verdicts[names]))
        if bad:
            cell, message = bad[0]
            more = f" ({len(bad) - 1} more cell(s) fail the same way or another)" if len(bad) > 1 else ""
            raise ValueError(f"study {self.name!r}: cell {cell.index + 1} ({cell.label()}): {message}{more}")

    def check_devices(self) -> None:
        """Refuse (ValueError naming the cell, the device and the machine's GPUs) a cell asking for a
        CUDA device this machine does not have, as a local cluster would run it.

        A remote scheduler's workers are checked when :meth:`run` connects to it.
        """
        from lab.study.runner import _check_cuda, gpu_count

        _check_cuda(self, self.cells(), gpu_count())

    # -- the store ----------------------------------------------------------------------------------
    def status(self, *, store=None) -> pd.DataFrame:
        """One row per cell: index, its axis values, status ("pending" when never run), run_id, and
        the run's g, best layer and seen accuracy (from the store's summary, i.e. lab.analysis)."""
        return study_status(self, store=store)

    def records(self, *, store=None, finished_only: bool = True) -> list:
        """The stored runs of this study (the newest per cell), in cell order."""
        by_cell = runs_by_cell(self.name, store=store, axes=self.axes)
        out = []
        for cell in self.cells():
            rec = by_cell.get(cell.key)
            if rec is not None and (not finished_only or rec.status == RunStatus.FINISHED):
                out.append(rec)
        return out

    def estimate(self, *, store=None) -> pd.DataFrame:
        """Which cells are stored and how long the others would take; see :func:`lab.study.estimate`."""
        from lab.study.estimates import estimate

        return estimate(self, store=store)

    # -- running ------------------------------------------------------------------------------------
    def run(self, scheduler: str | None = None, *, store=None, workers: int | None = None,
            threads_per_worker: int | None = None, on_event: Callable[[StudyEvent], None] | None = None,
            cancel: threading.Event | None = None, on_dashboard: Callable[[str], None] | None = None,
            cells_per_gpu: int = 1, control=None) -> StudyResult:
        """Run every cell that has no finished run yet, in :meth:`run_order`; see :func:`lab.study.runner.run_study`
        (``control``: a :class:`lab.study.StudyController` that grows or shrinks the study while it runs)."""
        from lab.study.runner import run_study

        store = open_store(store)
        self.check_names(store=store)              # before any cluster starts
        return run_study(self, scheduler=scheduler, store=store, workers=workers,
                         threads_per_worker=threads_per_worker, on_event=on_event, cancel=cancel,
                         on_dashboard=on_dashboard, cells_per_gpu=cells_per_gpu, control=control)

    def __repr__(self) -> str:
        shape = " x ".join(f"{k}[{len(v)}]" for k, v in self.axes.items()) or "1 cell"
        return f"Study({self.name!r}, {shape} = {len(self.cells())} runs)"


def load_study(spec: str | os.PathLike | Mapping | Study) -> Study:
    """A Study from a file path, a mapping or a Study."""
    if isinstance(spec, Study):
        return spec
    if isinstance(spec, Mapping):
        return Study.from_dict(spec)
    return Study.from_file(spec)


