"""Growing and shrinking a study's axes (:meth:`lab.Study.extend`, :meth:`lab.Study.without`).

A cell's key is the canonical text of its axis values (:func:`lab.study._keys.cell_key`), so adding
values to an axis leaves every existing cell's key, and the stored run found by it, as it was. A
new axis would change every key; the one axis a study may gain is the repeat axis ``seeds``, whose
first value is then the base's seeds: the runs stored before it are matched to that value by their
config's seeds (:func:`lab.study.records.runs_by_cell`).
"""
from __future__ import annotations

from typing import Any, Mapping

from lab.study._keys import REPEAT_AXES, cell_key, short_value

__all__ = ["extended_axes", "reduced_axes"]


def _as_values(axis: str, given: Any, existing: list) -> list:
    """The values ``given`` for ``axis`` as a list; a bare seed of a seeds axis whose values are lists of
    seeds becomes ``[seed]`` (``extend(seeds=[3])`` on ``seeds: [[0], [1]]`` adds ``[3]``)."""
    values = list(given) if isinstance(given, (list, tuple)) else [given]
    if axis in REPEAT_AXES and existing and all(isinstance(v, list) for v in existing):
        values = [list(v) if isinstance(v, (list, tuple)) else [v] for v in values]
    return values


def _unknown_axis(name: str, axis: str, axes: Mapping, verb: str) -> ValueError:
    known = ", ".join(repr(a) for a in axes) or "none"
    return ValueError(f"study {name!r} has no axis {axis!r} to {verb}; its axes are {known}. Adding an axis "
                      f"would change every cell's key (its stored runs would not be found): write a new study "
                      f"for it, or add values to an existing axis.")


def extended_axes(name: str, axes: Mapping[str, list], more: Mapping[str, Any], *,
                  repeats: Mapping[str, list]) -> dict:
    """``axes`` with the values of ``more`` appended (values already there are left out).

    An axis not in ``axes`` is refused (ValueError naming it and the study's axes), except a repeat
    axis (``seeds``): it is added with ``repeats[axis]`` (the seeds every cell runs now) as its first value.
    """
    out = {axis: list(values) for axis, values in axes.items()}
    for axis, given in more.items():
        if axis not in out:
            if axis not in REPEAT_AXES:
                raise _unknown_axis(name, axis, axes, "extend")
            out[axis] = [list(repeats[axis])]
        values = _as_values(axis, given, out[axis])
        keys = {cell_key({"v": v}) for v in out[axis]}
        for value in values:
            key = cell_key({"v": value})
            if key not in keys:
                out[axis].append(value)
                keys.add(key)
    return out


def reduced_axes(name: str, axes: Mapping[str, list], drop: Mapping[str, Any]) -> dict:
    """``axes`` without the values of ``drop``: ValueError for an unknown axis, a value the axis does not
    have, or an axis left empty."""
    out = {axis: list(values) for axis, values in axes.items()}
    for axis, given in drop.items():
        if axis not in out:
            raise _unknown_axis(name, axis, axes, "remove values from")
        for value in _as_values(axis, given, out[axis]):
            key = cell_key({"v": value})
            kept = [v for v in out[axis] if cell_key({"v": v}) != key]
            if len(kept) == len(out[axis]):
                have = ", ".join(short_value(v) for v in out[axis])
                raise ValueError(f"study {name!r}: axis {axis!r} has no value {short_value(value)}; its values "
                                 f"are {have}")
            out[axis] = kept
        if not out[axis]:
            raise ValueError(f"study {name!r}: removing those values would leave axis {axis!r} empty; keep at "
                             f"least one value (a study's axis needs one)")
    return out
