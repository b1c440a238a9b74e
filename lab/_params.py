"""Declared constraints on a config's fields and the one validator that walks them (after scikit-learn's
``sklearn/utils/_param_validation.py``: ``_parameter_constraints``, ``Interval``, ``StrOptions``).

A table maps each field to a list: the kinds of value it accepts (any one of them; ``None`` where None is
allowed and said, :class:`Hidden` where it is allowed but a rule says when), optionally a :class:`Convert` that
normalises the value first, and rules (:class:`Rule`: a check with its message) that must all hold. Rules listed
after the kinds run once the value is of one of them; rules listed before run first. A rule may read the fields
above its own in the table, which are checked first. :func:`normalised` converts; :func:`validate` checks in
table order and raises one ValueError line that names the field, what it takes and what came.

>>> table = {"epochs": [Interval(int, 0, None), None], "lr": [Interval(float, 0, None, closed="neither")]}
>>> validate({"epochs": 3, "lr": 0.0}, table)
Traceback (most recent call last):
...
ValueError: lr must be a number > 0. Got 0.0 instead.
"""
from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from typing import Any

from lab.text import join_words

__all__ = ["Interval", "Options", "Text", "Boolean", "Pattern", "ListOf", "Hidden", "Convert", "Rule", "normalised",
           "validate", "either", "listed", "is_int", "is_number"]

_CLOSED = ("left", "right", "both", "neither")


def is_int(value) -> bool:
    """An int that is not a bool (``True`` is not an epoch count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    """An int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def listed(choices) -> str:
    """``choices`` as ``'a', 'b', 'c'``."""
    return ", ".join(repr(c) for c in choices)


def either(choices) -> str:
    """``choices`` as ``'a', 'b' or 'c'``."""
    return join_words(map(repr, choices), "or")


def _shown(value) -> str:
    # the config holds tuples where the user wrote lists (JSON, YAML): show what they wrote
    return repr(list(value) if isinstance(value, tuple) else value)


class _Constraint(ABC):
    """One kind of value a field accepts: ``holds`` says whether a value is of it, ``desc`` completes
    "NAME must be ...", ``complaint`` says what is wrong with a value this constraint alone judges."""

    desc = ""

    def convert(self, value):
        return value

    @abstractmethod
    def holds(self, value) -> bool:
        """Whether ``value`` is of this kind."""

    def claims(self, value) -> bool:
        """Whether ``value`` is of this constraint's kind, so that its own complaint is the useful one."""
        return False

    def complaint(self, name: str, value, or_none: bool, expected: str = "") -> str:
        """The message for ``value``; ``expected`` is the field's whole description (all its kinds)."""
        return f"{name} must be {self.desc}{' or None' if or_none else ''}. Got {_shown(value)} instead."

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.desc!r})"


class Interval(_Constraint):
    """An int (``kind=int``) or a finite number (``kind=float``, ints included) between ``left`` and
    ``right`` (None: unbounded); ``closed`` says which ends belong to it: "left", "right", "both" or
    "neither". Booleans are never numbers here."""

    def __init__(self, kind: type, left: float | None, right: float | None, *, closed: str = "left",
                 desc: str | None = None):
        if kind not in (int, float):
            raise ValueError(f"Interval kind must be int or float. Got {kind!r} instead.")
        if closed not in _CLOSED:
            raise ValueError(f"Interval closed must be one of {listed(_CLOSED)}. Got {closed!r} instead.")
        if left is not None and right is not None and right < left:
            raise ValueError(f"Interval right end {right} is below its left end {left}; swap them.")
        self.kind, self.left, self.right, self.closed = kind, left, right, closed
        self.desc = desc or self._describe()

    def _describe(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        left_in, right_in = self.closed in ("left", "both"), self.closed in ("right", "both")
        if self.left is not None and self.right is not None:
            return f"{what} in {'[' if left_in else '('}{self.left}, {self.right}{']' if right_in else ')'}"
        if self.left is not None:
            return f"{what} {'>=' if left_in else '>'} {self.left}"
        if self.right is not None:
            return f"{what} {'<=' if right_in else '<'} {self.right}"
        return what

    def holds(self, value) -> bool:
        if not (is_int(value) if self.kind is int else is_number(value) and math.isfinite(value)):
            return False
        left_out = self.closed in ("right", "neither")
        right_out = self.closed in ("left", "neither")
        if self.left is not None and (value < self.left or (value == self.left and left_out)):
            return False
        return self.right is None or not (value > self.right or (value == self.right and right_out))


class Options(_Constraint):
    """One of ``choices``: a collection, or a function returning one, called at each check so that a live
    registry (``lab.catalogue.METRICS``) is read as it is then, not as it was at import."""

    def __init__(self, choices: Collection | Callable[[], Collection], *, desc: str | None = None):
        self._choices, self._desc = choices, desc

    @property
    def choices(self) -> tuple:
        return tuple(self._choices() if callable(self._choices) else self._choices)

    @property
    def listed(self) -> str:
        """The choices as ``'a', 'b', 'c'``."""
        return listed(self.choices)

    @property
    def desc(self) -> str:
        return self._desc or f"one of {self.listed}"

    def holds(self, value) -> bool:
        try:
            return value in self.choices
        except TypeError:                                 # an unhashable value is no choice
            return False


class Text(_Constraint):
    """A non-empty string (``strip``: not only blanks either)."""

    def __init__(self, *, desc: str = "a non-empty string", strip: bool = True):
        self.desc, self.strip = desc, strip

    def holds(self, value) -> bool:
        return isinstance(value, str) and bool(value.strip() if self.strip else value)


class Boolean(_Constraint):
    """True or False (not 0, 1 or "yes")."""

    desc = "true or false"

    def holds(self, value) -> bool:
        return isinstance(value, bool)


class Pattern(_Constraint):
    """A string matching ``pattern`` once stripped and lower-cased; ``desc`` lists what it takes."""

    def __init__(self, pattern: str | re.Pattern, *, desc: str):
        self.pattern, self.desc = re.compile(pattern), desc

    def holds(self, value) -> bool:
        return isinstance(value, str) and bool(self.pattern.fullmatch(value.strip().lower()))


class ListOf(_Constraint):
    """A list (held as a tuple) whose entries each satisfy ``item``, without repeats.

    ``one``: a single int stands for a list of it. ``empty``, ``bad`` and ``repeat`` are the messages for an
    empty list, a wrong entry and a repeated one, formatted with ``name``, ``value`` (the list), ``bad`` (the
    first wrong entry), ``repeats`` (the repeated entries), ``item`` (the item constraint) and ``expected``
    (the field's whole description); ``empty=None`` allows an empty list.
    """

    def __init__(self, item: _Constraint, *, desc: str | None = None, one: bool = False,
                 empty: str | None = "{name} must not be an empty list; use None for the default.",
                 bad: str = "{name} must contain non-empty strings. Got {bad} instead.",
                 repeat: str = "{name} lists {repeats} more than once."):
        self.item, self.one, self.empty, self.bad, self.repeat = item, one, empty, bad, repeat
        self.desc = desc or f"a list of {item.desc}"

    def convert(self, value):
        if self.one and is_int(value):
            return (value,)
        return tuple(value) if isinstance(value, list) else value

    def holds(self, value) -> bool:
        return isinstance(value, tuple) and self._problem(value) is None

    def claims(self, value) -> bool:
        return isinstance(value, tuple)

    def _problem(self, value: tuple) -> str | None:
        if not value:
            return self.empty
        if any(not self.item.holds(v) for v in value):
            return self.bad
        if len(set(value)) != len(value):
            return self.repeat
        return None

    def complaint(self, name: str, value, or_none: bool, expected: str = "") -> str:
        if isinstance(value, str):
            return f"{name} must be a list, got the string {value!r}; write [{value!r}] for one entry."
        if not isinstance(value, tuple):
            return (f"{name} must be a list{' or None' if or_none else ''}. "
                    f"Got {type(value).__name__} {value!r} instead.")
        bad = next((v for v in value if not self.item.holds(v)), None)
        repeats = sorted({v for v in value if value.count(v) > 1})       # entries of one kind by now
        return self._problem(value).format(name=name, value=_shown(value), bad=repr(bad), item=self.item,
                                           repeats=listed(repeats), expected=expected or self.desc)


class Convert:
    """Normalise a field's value before it is checked (e.g. text the command line sends -> a list)."""

    def __init__(self, function: Callable[[Any], Any]):
        self.function = function

    def convert(self, value):
        return self.function(value)


class Hidden(_Constraint):
    """A kind of value accepted but left out of the message: the field's rules say when it is right (block's
    None: allowed only for a strategy that needs no block, which a rule says)."""

    def __init__(self, constraint: _Constraint | None):
        self.constraint = constraint

    def holds(self, value) -> bool:
        return value is None if self.constraint is None else self.constraint.holds(value)


class Rule:
    """A check on the whole config once the field is accepted: ``holds(config)`` is True when fine;
    ``message`` is the error (or a function of the config returning it)."""

    def __init__(self, holds: Callable[[Any], bool], message: str | Callable[[Any], str]):
        self.holds, self.message = holds, message

    def explain(self, config) -> str:
        return self.message(config) if callable(self.message) else self.message


def _kinds(constraints) -> list:
    return [c for c in constraints if c is None or isinstance(c, _Constraint)]


def _get(values, name: str):
    return values[name] if isinstance(values, Mapping) else getattr(values, name)


def normalised(values, table: Mapping[str, list]) -> dict[str, Any]:
    """The fields whose value a :class:`Convert` or an accepted kind normalises, with the new values."""
    out = {}
    for name, constraints in table.items():
        value = new = _get(values, name)
        for c in constraints:
            if c is not None and not isinstance(c, Rule):
                new = c.convert(new)
        if new is not value:
            out[name] = new
    return out


def validate(values, table: Mapping[str, list]) -> None:
    """Check ``values`` (a mapping or an object with the fields as attributes) field by field, in
    ``table`` order; raise ValueError with the first problem found. A field's rules listed before its kinds
    run before them (a message that explains more than the kind would), the others after."""
    for name, constraints in table.items():
        value = _get(values, name)
        kinds = _kinds(constraints)
        kinds_checked = not kinds
        for c in constraints:
            if isinstance(c, Rule):
                if not c.holds(values):
                    raise ValueError(c.explain(values))
            elif not kinds_checked and (c is None or isinstance(c, _Constraint)):
                kinds_checked = True
                _check_kinds(name, value, kinds)


def _check_kinds(name: str, value, kinds: list) -> None:
    or_none = None in kinds
    if value is None and or_none:
        return
    accepted = [c for c in kinds if c is not None]
    if any(c.holds(value) for c in accepted):
        return
    shown = [c for c in accepted if not isinstance(c, Hidden)]
    expected = " or ".join(c.desc for c in shown) + (" or None" if or_none else "")
    for c in shown:
        if c.claims(value):                               # a list judged by its entries: say which entry
            raise ValueError(c.complaint(name, value, or_none, expected))
    if len(shown) == 1:
        raise ValueError(shown[0].complaint(name, value, or_none, expected))
    raise ValueError(f"{name} must be {expected}. Got {_shown(value)} instead.")
