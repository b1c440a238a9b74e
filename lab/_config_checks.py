"""The checks :class:`lab.config.RunConfig` runs on its fields: each raises one ValueError line that
names the field, what it takes and what came."""
from __future__ import annotations

import re
from typing import Any

__all__ = ["fmt_choices", "either", "is_int", "is_number", "choice", "opt_str", "int_at_least", "boolean", "str_list",
           "keep_embeddings"]

KEEP_WORDS = ("last", "all")
"""The words ``keep_embeddings`` takes besides a list of epochs."""


def fmt_choices(choices) -> str:
    return ", ".join(repr(c) for c in choices)


def either(choices) -> str:
    """``choices`` as ``'a', 'b' or 'c'``."""
    names = [repr(c) for c in choices]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def choice(name: str, value: Any, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {fmt_choices(choices)}. Got {value!r} instead.")


def opt_str(name: str, value: Any) -> None:
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise ValueError(f"{name} must be a non-empty string or None. Got {value!r} instead.")


def int_at_least(name: str, value: Any, low: int, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not is_int(value) or value < low:
        extra = " or None" if optional else ""
        raise ValueError(f"{name} must be an integer >= {low}{extra}. Got {value!r} instead.")


def boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false. Got {value!r} instead.")


def str_list(name: str, value: Any, allow_empty: bool = False) -> None:
    if value is None:
        return
    if not allow_empty and len(value) == 0:
        raise ValueError(f"{name} must not be an empty list; use None for the default.")
    bad = [v for v in value if not isinstance(v, str) or not v]
    if bad:
        raise ValueError(f"{name} must contain non-empty strings. Got {bad[0]!r} instead.")
    dups = sorted({v for v in value if value.count(v) > 1})
    if dups:
        raise ValueError(f"{name} lists {', '.join(map(repr, dups))} more than once.")


def keep_embeddings(value: Any) -> str | tuple[int, ...]:
    """``keep_embeddings`` normalised: "last", "all", or a sorted tuple of epochs (a string of epochs such as
    ``"0, 5"``, as the command line and the app's form send it, is read as that list)."""
    expected = "keep_embeddings must be 'last', 'all' or a list of epochs >= 0 such as [0, 5]"
    if isinstance(value, str):
        word = value.strip().lower()
        if word in KEEP_WORDS:
            return word
        parts = [p for p in re.split(r"[\s,;]+", word.strip("[]() ")) if p]
        if not parts or not all(re.fullmatch(r"\d+", p) for p in parts):
            raise ValueError(f"{expected}. Got {value!r} instead.")
        value = [int(p) for p in parts]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{expected}. Got {value!r} instead.")
    bad = [e for e in value if not is_int(e) or e < 0]
    if bad:
        raise ValueError(f"{expected}. Got {list(value)!r} instead.")
    if len(set(value)) != len(value):
        raise ValueError(f"keep_embeddings lists an epoch more than once. Got {list(value)!r} instead.")
    return tuple(sorted(value))
