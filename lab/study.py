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
"""
from __future__ import annotations

import itertools
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from lab.config import RunConfig

__all__ = ["Study", "Cell", "StudyResult", "load_study", "study_status"]

_TERMINAL = ("run_finished", "run_failed", "run_cancelled")


@dataclass(frozen=True)
class Cell:
    """One point of the grid: its position, its axis values and the validated config."""

    index: int
    values: dict
    config: RunConfig

    @property
    def key(self) -> str:
        """Canonical text of the axis values (how stored runs are matched to cells)."""
        return _cell_key(self.values)

    def label(self) -> str:
        return group_label(self.values, list(self.values)) if self.values else "(base)"


@dataclass
class StudyResult:
    """What :meth:`Study.run` did: run ids per cell index, and the cells skipped or failed."""

    name: str
    run_ids: dict[int, str]
    skipped: list[int]
    failed: dict[int, str]
    cancelled: bool = False
    seconds: float = 0.0


def _cell_key(values: Mapping) -> str:
    return json.dumps(values, sort_keys=True, default=list)


def _fields(axis: str, value: Any) -> dict:
    """The RunConfig fields one axis value sets: ``{axis: value}``, or the value itself when it is a
    mapping (a variant that sets several fields together, e.g. ``{strategy: layer, block: fc4}``)."""
    return dict(value) if isinstance(value, Mapping) else {axis: value}


def _short(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_short(v)}" for k, v in value.items())
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:39] + "…"


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
    """

    def __init__(self, name: str, base: Mapping | RunConfig | None = None,
                 axes: Mapping[str, list] | None = None, *, retries: int = 2, description: str = ""):
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a study needs a non-empty name. Got {name!r} instead.")
        self.name = name.strip()
        self.base = base.to_dict() if isinstance(base, RunConfig) else dict(base or {})
        self.axes = {str(k): list(v) if isinstance(v, (list, tuple)) else v for k, v in (axes or {}).items()}
        self.retries = int(retries)
        self.description = description
        self._cells: list[Cell] | None = None
        self.cells()                               # validate now

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping, *, where: str = "the study spec") -> "Study":
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be a mapping with name, base and axes. Got {type(data).__name__}.")
        unknown = set(data) - {"name", "base", "axes", "retries", "description"}
        if unknown:
            raise ValueError(f"{where} has unknown keys {sorted(unknown)}; a study has name, base, axes "
                             f"(and optionally retries, description)")
        if "name" not in data:
            raise ValueError(f"{where} has no name; add `name: my-study`")
        return cls(data["name"], data.get("base") or {}, data.get("axes") or {},
                   retries=data.get("retries", 2), description=data.get("description", ""))

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
        return {"name": self.name, "description": self.description, "base": self.base, "axes": self.axes,
                "retries": self.retries}

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
                fields = _fields(axis, value)
                bad = [f for f in fields if f not in names]
                if bad:
                    raise ValueError(f"study {self.name!r}: axis {axis!r} value #{i + 1} sets {bad[0]!r}, which is "
                                     f"not a RunConfig field; {RunConfig._unknown_message(bad)}")
        if not self.axes:
            try:
                RunConfig.from_dict(self.base)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"study {self.name!r}: base config is not valid: {exc}") from None
        first = {k: v for axis, values in self.axes.items() for k, v in _fields(axis, values[0]).items()}
        for axis, values in self.axes.items():
            for i, value in enumerate(values):
                try:
                    RunConfig.from_dict({**self.base, **first, **_fields(axis, value)})
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"study {self.name!r}: axis {axis!r} value #{i + 1} ({_short(value)}) is not "
                                     f"valid: {exc}") from None
        cells = []
        for index, combo in enumerate(itertools.product(*self.axes.values())):
            values = dict(zip(self.axes, combo))
            fields = {k: v for axis, value in values.items() for k, v in _fields(axis, value).items()}
            try:
                config = RunConfig.from_dict({**self.base, **fields})
            except (ValueError, TypeError) as exc:
                label = ", ".join(f"{k}={_short(v)}" for k, v in values.items())
                raise ValueError(f"study {self.name!r}: cell {index + 1} ({label}) is not valid: {exc}") from None
            cells.append(Cell(index, values, config))
        self._cells = cells
        return cells

    # -- the store ----------------------------------------------------------------------------------
    def status(self, store=None) -> pd.DataFrame:
        """One row per cell: index, its axis values, status ("pending" when never run), run_id, and
        the run's g, best layer and seen accuracy (from the store's summary, i.e. lab.analysis)."""
        return study_status(self, store)

    def records(self, store=None, *, finished_only: bool = True) -> list:
        """The stored runs of this study (the newest per cell), in cell order."""
        store = _store(store)
        by_cell = _runs_by_cell(store, self.name)
        out = []
        for cell in self.cells():
            rec = by_cell.get(cell.key)
            if rec is not None and (not finished_only or rec.status == "finished"):
                out.append(rec)
        return out

    # -- running ------------------------------------------------------------------------------------
    def run(self, scheduler: str | None = None, *, store=None, workers: int | None = None,
            threads_per_worker: int | None = None, on_event: Callable[[dict], None] | None = None,
            cancel: threading.Event | None = None, on_dashboard: Callable[[str], None] | None = None
            ) -> StudyResult:
        """Run every cell that has no finished run yet; see :func:`lab.study_runner.run_study`."""
        from lab.study_runner import run_study

        return run_study(self, scheduler=scheduler, store=_store(store), workers=workers,
                         threads_per_worker=threads_per_worker, on_event=on_event, cancel=cancel,
                         on_dashboard=on_dashboard)

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


def _store(store):
    from lab.store import RunStore

    return store if store is not None else RunStore()


def _runs_by_cell(store, name: str) -> dict[str, Any]:
    """The stored runs tagged with study ``name``, newest finished first per cell key."""
    import warnings

    best: dict[str, Any] = {}
    rank = {"finished": 3, "running": 2, "cancelled": 1, "interrupted": 1, "failed": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ids = store.ids()
    for run_id in ids:
        try:
            rec = store.load(run_id)
        except Exception:                          # noqa: BLE001 - damaged folders are listed elsewhere
            continue
        if rec.meta.get("study") != name or not isinstance(rec.meta.get("cell"), dict):
            continue
        key = _cell_key(rec.meta["cell"])
        old = best.get(key)
        score = (rank.get(rec.status, 0), str(rec.meta.get("started") or ""))
        if old is None or score > (rank.get(old.status, 0), str(old.meta.get("started") or "")):
            best[key] = rec
    return best


def study_status(study: Study, store=None) -> pd.DataFrame:
    store = _store(store)
    by_cell = _runs_by_cell(store, study.name)
    rows = []
    for cell in study.cells():
        rec = by_cell.get(cell.key)
        summary = rec.summary() if rec is not None else {}
        rows.append({"cell": cell.index + 1, **{k: _short(v) for k, v in cell.values.items()},
                     "status": rec.status if rec is not None else "pending",
                     "run_id": rec.run_id if rec is not None else None,
                     "best_layer": summary.get("best_layer"), "g": summary.get("g"),
                     "g_std": summary.get("g_std"), "heldout_accuracy": summary.get("heldout_accuracy")})
    return pd.DataFrame(rows)


def _tag_run(store, run_id: str, study: str, cell: Mapping) -> None:
    """Record the study and the cell in a finished run's meta (atomic rewrite of meta.json)."""
    from lab.store import _read_json, _write_json

    path = store.path(run_id) / "meta.json"
    meta = _read_json(path)
    meta.update(study=study, cell=dict(cell))
    if isinstance(meta.get("summary"), dict):
        meta["summary"] = {**meta["summary"]}
    _write_json(path, meta)



# ---------------------------------------------------------------------------------------------- figures

REPEAT_AXES = ("seeds",)
"""Axes whose values are repeats of one condition: pooled as seeds, never a group of their own."""


def group_label(values: Mapping, axes: list[str]) -> str:
    """The label of a cell's condition: its axis values except the repeat axes."""
    parts = [_short(values[k]) if isinstance(values[k], Mapping) else f"{k}={_short(values[k])}"
             for k in axes if k in values]
    return ", ".join(parts) or "all runs"


def figures(study: Study, store=None) -> dict:
    """The papers' figures for a study's finished runs, every number from :mod:`lab.analysis`.

    Returns
    -------
    dict of
      - ``layers``: g curve per layer against relative depth, one group per condition, seed spread,
        best layer marked (Dyballa et al.) — :func:`lab.analysis.group_curves`
      - ``generalization``: per condition g, its layer, seen accuracy (Gerritz et al.)
      - ``ranks``: Spearman / Kendall between seen accuracy and g across conditions, bootstrap CIs
      - ``grid``: per condition, layer and quantity the mean/std over repeats of utilization,
        contribution, generalization gap and resilience (Wang & Yang) — long, pivot to heatmaps
      - ``nc1``: NC1 per layer per condition on the seen held-out images (Li, Liu et al. fig. 10)
      - ``axes``: the condition axes (non-repeat axes)
    """
    from lab import analysis

    records = study.records(store)
    axes = [a for a in study.axes if a not in REPEAT_AXES]
    groups, trainings, layers, aliases, scalars = {}, {}, {}, {}, []
    by_key = {c.key: c for c in study.cells()}
    for rec in records:
        cell = by_key.get(_cell_key(rec.meta.get("cell") or {}))
        if cell is None:
            continue
        label = group_label(cell.values, axes)
        groups.setdefault(label, []).append(rec.metrics)
        trainings.setdefault(label, []).append(rec.training)
        layers.setdefault(label, rec.meta.get("layers"))
        aliases.setdefault(label, rec.meta.get("layer_aliases") or {})
        values = analysis.run_scalars(rec.training, rec.utilization, rec.contribution)
        for axis in axes:
            values[axis] = _short(cell.values[axis])
        values["group"] = label
        scalars.append(values)
    gen = analysis.group_generalization(groups, trainings, layers, aliases=aliases)
    grid = pd.concat(scalars, ignore_index=True) if scalars else pd.DataFrame(columns=["quantity", "layer", "value"])
    return {
        "axes": axes,
        "layers": analysis.group_curves(groups, layers, aliases=aliases),
        "generalization": gen,
        "ranks": analysis.accuracy_vs_g(gen),
        "grid": analysis.grid_summary(grid, axes) if len(grid) else grid,
        "nc1": analysis.group_curves(groups, layers, metric="nc1", split="seen"),
    }
