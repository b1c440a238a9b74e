"""A study's runs in the run store: which stored run belongs to which cell, the status table, and
tagging a finished run with its study and cell."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import pandas as pd

from lab.status import RunStatus
from lab.store.lookup import is_record, open_store, run_id_of
from lab.study._keys import REPEAT_AXES, cell_key, short_value

__all__ = ["StudyResult", "runs_by_cell", "record_key", "study_status", "tag_run"]


@dataclass
class StudyResult:
    """What :meth:`Study.run` did: run ids per cell index, and the cells skipped or failed (indices of the study
    as it ended, when it grew or shrank while it ran), and the axis values of the cells dropped before they
    started (:class:`lab.study.StudyController`)."""

    name: str
    run_ids: dict[int, str]
    skipped: list[int]
    failed: dict[int, str]
    cancelled: bool = False
    seconds: float = 0.0
    dropped: list[dict] = field(default_factory=list)


def runs_by_cell(name: str, *, store=None, axes: Mapping | None = None) -> dict[str, Any]:
    """The runs of ``store`` (None: the default store, a RunStore or a folder path) tagged with study
    ``name``, newest finished first per cell key.

    ``axes``: the study's axes. A run whose cell lacks one of its repeat axes (``seeds``, added to the
    study after the run, :meth:`lab.Study.extend`) is keyed as if the cell had it, with the run's own seeds.
    """
    import warnings

    store = open_store(store)
    best: dict[str, Any] = {}
    rank = {RunStatus.FINISHED: 3, RunStatus.RUNNING: 2, RunStatus.CANCELLED: 1, RunStatus.INTERRUPTED: 1,
            RunStatus.FAILED: 0}
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
        key = record_key(rec, axes)
        old = best.get(key)
        score = (rank.get(rec.status, 0), str(rec.meta.get("started") or ""))
        if old is None or score > (rank.get(old.status, 0), str(old.meta.get("started") or "")):
            best[key] = rec
    return best


def record_key(rec, axes: Mapping | None = None) -> str:
    """The key of the cell a study's stored run ``rec`` belongs to (see :func:`runs_by_cell` for ``axes``)."""
    return cell_key(_with_repeats(rec.meta.get("cell") or {}, rec, axes or {}))


def _with_repeats(cell: dict, rec, axes: Mapping) -> dict:
    """``cell`` with the repeat axes of ``axes`` it lacks set from the run's config (as the axis writes
    them: a list of seeds where its first value is a list)."""
    missing = [axis for axis in REPEAT_AXES if axis in axes and axis not in cell]
    if not missing:
        return cell
    config = rec.config_dict or {}
    out = dict(cell)
    for axis in missing:
        value = config.get(axis)
        first = axes[axis][0] if axes[axis] else None
        if isinstance(value, (list, tuple)):
            value = list(value) if isinstance(first, list) or len(value) != 1 else value[0]
        out[axis] = value
    return out


def study_status(study, *, store=None) -> pd.DataFrame:
    """One row per cell: its axis values, status and run, and the run's :func:`lab.analysis.run_summary`
    (best layer, g with seed std, bootstrap interval g_low-g_high and best_share, seen accuracy; None
    where not measured, e.g. runs recorded before the bootstrap)."""
    by_cell = runs_by_cell(study.name, store=store, axes=study.axes)
    rows = []
    for cell in study.cells():
        rec = by_cell.get(cell.key)
        summary = rec.summary() if rec is not None else {}
        rows.append({"cell": cell.index + 1, **{k: short_value(v) for k, v in cell.values.items()},
                     "status": rec.status if rec is not None else "pending",
                     "run_id": rec.run_id if rec is not None else None,
                     "best_layer": summary.get("best_layer"), "g": summary.get("g"),
                     "g_std": summary.get("g_std"), "g_low": summary.get("g_low"), "g_high": summary.get("g_high"),
                     "best_share": summary.get("best_share"), "heldout_accuracy": summary.get("heldout_accuracy")})
    return pd.DataFrame(rows)


def tag_run(run, study: str, cell: Mapping, *, store=None) -> None:
    """Record the study and the cell in the meta of a finished ``run`` (an id in ``store``, or a record)
    (atomic rewrite of meta.json)."""
    from lab.store import read_json, write_json

    folder = run.path if is_record(run) else open_store(store).path(run_id_of(run))
    path = folder / "meta.json"
    meta = read_json(path)
    meta.update(study=study, cell=dict(cell))
    if isinstance(meta.get("summary"), dict):
        meta["summary"] = {**meta["summary"]}
    write_json(path, meta)
