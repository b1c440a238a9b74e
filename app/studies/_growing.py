"""Growing the study that runs in the Studies tab: which composed studies may replace it, and its cells' table
as the runner queues and drops cells (:class:`lab.events.StudyUpdated`, ``CellQueued``, ``CellDropped``).

The table is :meth:`lab.Study.status` (one row per cell, in cell order); here it is re-shaped on the session's
thread without reading the store: the rows of cells the grown study keeps are kept, new cells get a
"pending" row, and every row is numbered by its place in the new grid (as the events number cells from
``StudyUpdated`` on).
"""
from __future__ import annotations

import pandas as pd

from lab.study import REPEAT_AXES, short_value

__all__ = ["growth_problem", "regrid", "mark_cell"]

_SAME = ("base", "order", "retries", "order_seed")


def growth_problem(running, grown) -> str | None:
    """Why ``grown`` cannot replace the ``running`` study (None: it can): another name, other settings than
    axis values (base, order, retries), or an axis added (but the seeds) or removed."""
    if grown.name != running.name:
        return (f"the running study is {running.name!r}; only a version of it with other axis values can be "
                f"added to it. Got study {grown.name!r} instead: give it the name {running.name!r}, or launch "
                f"it once this study has finished.")
    axes = set(running.axes) | set(grown.axes)       # a field that became an axis (seeds) leaves the base
    for attr in _SAME:
        before, after = getattr(running, attr), getattr(grown, attr)
        if attr == "base":
            before, after = ({k: v for k, v in d.items() if k not in axes} for d in (before, after))
        if before != after:
            return (f"only axis values can change while study {running.name!r} runs; its {attr} changed "
                    f"({short_value(before)} -> {short_value(after)}). Change it back, or launch the study "
                    f"once this one has finished.")
    added = [a for a in grown.axes if a not in running.axes and a not in REPEAT_AXES]
    removed = [a for a in running.axes if a not in grown.axes]
    if added or removed:
        what = ", ".join([*(f"adds axis {a!r}" for a in added), *(f"removes axis {a!r}" for a in removed)])
        return (f"the grown study {what}; that changes every cell's key. While {running.name!r} runs, only "
                f"values of its axes ({', '.join(running.axes)}) and seeds can be added or removed.")
    return None


def regrid(frame: pd.DataFrame | None, old, new) -> pd.DataFrame:
    """``frame`` (``old.status()``'s rows, in ``old``'s cell order) as the table of ``new``: a kept cell keeps
    its row, a new cell gets a pending row, a removed cell's row goes; column "cell" is the place in ``new``."""
    rows = {}
    if frame is not None and len(frame) == len(old.cells()):
        rows = {cell.key: row for cell, row in zip(old.cells(), frame.to_dict("records"))}
    out = []
    for cell in new.cells():
        values = {k: short_value(v) for k, v in cell.values.items()}
        row = rows.get(cell.key) or {"status": "pending", "run_id": None}
        out.append({**row, "cell": cell.index + 1, **values})
    columns = ["cell", *new.axes, *(c for c in (frame.columns if frame is not None else ())
                                    if c != "cell" and c not in new.axes)]
    return pd.DataFrame(out).reindex(columns=[*dict.fromkeys(columns)] or None)


def mark_cell(frame: pd.DataFrame, study, key: str, status: str) -> pd.DataFrame:
    """``frame`` (``study``'s table) with the status of the cell of ``key`` set to ``status``; as it was for a
    key the study does not have (a cell dropped because its values were removed: its row is gone)."""
    place = next((c.index for c in study.cells() if c.key == key), None)
    if place is None or place >= len(frame) or "status" not in frame:
        return frame
    frame = frame.copy()
    frame.loc[frame.index[place], "status"] = status
    return frame
