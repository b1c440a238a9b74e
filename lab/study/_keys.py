"""How a study names its cells: the canonical key of a cell's axis values, the RunConfig fields an
axis value sets, short labels of values and of conditions."""
from __future__ import annotations

import json
from typing import Any, Mapping

__all__ = ["cell_key", "axis_fields", "short_value", "group_label", "REPEAT_AXES"]


def cell_key(values: Mapping) -> str:
    return json.dumps(values, sort_keys=True, default=list)


def axis_fields(axis: str, value: Any) -> dict:
    """The RunConfig fields one axis value sets: ``{axis: value}``, or the value itself when it is a
    mapping (a variant that sets several fields together, e.g. ``{strategy: layer, block: fc4}``)."""
    return dict(value) if isinstance(value, Mapping) else {axis: value}


def short_value(value: Any) -> str:
    """An axis value as the study's table shows it: a mapping as ``k=v`` pairs, JSON text cut at 40 characters."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={short_value(v)}" for k, v in value.items())
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:39] + "…"


REPEAT_AXES = ("seeds",)
"""Axes whose values are repeats of one condition: pooled as seeds, never a group of their own."""


def group_label(values: Mapping, axes: list[str]) -> str:
    """The label of a cell's condition: its axis values except the repeat axes."""
    parts = [short_value(values[k]) if isinstance(values[k], Mapping) else f"{k}={short_value(values[k])}"
             for k in axes if k in values]
    return ", ".join(parts) or "all runs"
