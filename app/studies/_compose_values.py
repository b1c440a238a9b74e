"""What the study composer reads from its text inputs: an axis's values, the seeds, and where a spec is saved.

Values are typed as in a spec's flow list, without the brackets: ``0.0, 0.2, 0.5``, ``full, linear``,
``{strategy: layer, block: fc4}``. Each item is read with ``yaml.safe_load``. A comma inside brackets, braces
or quotes does not split, and neither does one before an ``option=value`` piece, so that
``mlp:depth=2,width=16, resnet18`` is two backbones, as the shipped specs write them.
"""
from __future__ import annotations

import re
from typing import Any

from lab.config import RunConfig
from lab.study import REPEAT_AXES

__all__ = ["AXIS_FIELDS", "BLANK", "parse_values", "parse_seeds", "seeds_text", "value_text", "blank_base"]

BLANK = "(blank study)"
"""The composer's first choice: a study with no axes on the sidebar's (or the tiny demo's) settings."""

_FIRST = ("backbone", "strategy", "epochs", "lr", "img_size", "label_noise", "n_unseen", "split_seed", "layers",
          "dataset", "pretrained", "block", "seen_per_class", "unseen_per_class")
AXIS_FIELDS = tuple(f for f in dict.fromkeys([*_FIRST, *RunConfig.field_names()])
                    if f in RunConfig.field_names() and f not in ("name", *REPEAT_AXES))
"""The run settings offered as axes, the usual ones first; ``seeds`` is the replicate axis, set on its own."""

_OPTION = re.compile(r"^\w+=")


def _pieces(text: str) -> list[str]:
    """``text`` split at the commas outside brackets, braces and quotes."""
    pieces, depth, quote, current = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth <= 0:
            pieces.append("".join(current))
            current = []
            continue
        current.append(ch)
    pieces.append("".join(current))
    return pieces


def parse_values(text: str, *, axis: str = "value") -> list:
    """The values typed for ``axis`` (see the module's docstring); ValueError naming the piece that is no YAML.

    >>> parse_values("mlp:depth=2,width=16, resnet18", axis="backbone")
    ['mlp:depth=2,width=16', 'resnet18']
    >>> parse_values("0.0, 0.2, {strategy: layer, block: fc4}")
    [0.0, 0.2, {'strategy': 'layer', 'block': 'fc4'}]
    """
    import yaml

    items: list[str] = []
    for piece in _pieces(text or ""):
        if items and piece[:1] != " " and _OPTION.match(piece) and ":" in items[-1]:
            items[-1] += "," + piece               # width=16 of mlp:depth=2,width=16
        else:
            items.append(piece)
    values = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        try:
            values.append(yaml.safe_load(item))
        except yaml.YAMLError as exc:
            raise ValueError(f"{axis} value {item!r} is not a YAML value ({' '.join(str(exc).split())}); "
                             f"quote it, e.g. '{item}'") from None
    return values


def parse_seeds(text: str) -> list[list[int]]:
    """The seeds axis typed as ``0, 1, 2`` (one seed per cell: ``[[0], [1], [2]]``) or ``[0, 1], [2, 3]``
    (several seeds per cell); [] for an empty text (the cells run the base's seeds)."""
    out = []
    for value in parse_values(text, axis="seeds"):
        seeds = value if isinstance(value, list) else [value]
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
            raise ValueError(f"seeds must be whole numbers >= 0 separated by commas (e.g. 0, 1, 2), or lists of "
                             f"them for several seeds per cell (e.g. [0, 1], [2, 3]). Got {value!r} instead.")
        out.append(list(seeds))
    return out


def value_text(value: Any) -> str:
    """``value`` as :func:`parse_values` reads it back (quoted where a comma or colon needs it)."""
    import yaml

    return yaml.safe_dump([value], default_flow_style=True, sort_keys=False, width=10_000).strip()[1:-1]


def seeds_text(values: list) -> str:
    """The text of a seeds axis's values, as :func:`parse_seeds` reads it back."""
    return ", ".join(str(v[0]) if isinstance(v, list) and len(v) == 1 else value_text(v) for v in values)


def blank_base(config: RunConfig | None) -> dict:
    """A blank study's base: ``config``'s fields (else the sidebar's tiny demo preset) that differ from
    RunConfig's defaults, without the run's name and seeds (each cell's, and the replicate axis)."""
    if config is None:
        from app.choose.presets import PRESETS, TINY_PRESET

        config = RunConfig.from_dict(dict(PRESETS[TINY_PRESET]["config"]))
    defaults = RunConfig.defaults()
    fields = config.to_dict()
    return {k: v for k, v in fields.items()
            if k not in ("name", "seeds") and _plain(v) != _plain(defaults.get(k))}


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value
