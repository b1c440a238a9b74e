"""The call forms that functions on stored runs had before they all took the run first and ``store=``
as a keyword: still accepted for one release, with a :class:`DeprecationWarning` that names the new call.

Kept apart so that the next release deletes this module and its decorators, nothing else. It and
:mod:`lab.store.lookup` read lab.store's names only inside functions: :mod:`lab.analysis` uses them at
import, and :mod:`lab.store` imports :mod:`lab.analysis`.
"""
from __future__ import annotations

import functools
import inspect
import warnings
from typing import Callable

from lab.store.lookup import is_store

__all__ = ["store_was_first", "store_was_positional"]


def _new_call(fn: Callable) -> str:
    """``lab.mod.name(run, epoch=None, *, seed=None, store=None)``: the call to use instead."""
    sig = inspect.signature(fn)
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()
              if p.name != "self"]
    owner = fn.__qualname__
    return f"{fn.__module__}.{owner}{sig.replace(parameters=params, return_annotation=inspect.Signature.empty)}"


def _n_positional(fn: Callable) -> int:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds for p in inspect.signature(fn).parameters.values())


def _warn(old: str, fn: Callable) -> None:
    warnings.warn(f"{old} is deprecated and stops working in the next release; call {_new_call(fn)} instead "
                  f"(the run first, store= as a keyword)", DeprecationWarning, stacklevel=3)


def store_was_first(fn: Callable) -> Callable:
    """Accept ``fn(store, *rest, **kw)``, the old order, as ``fn(*rest, store=store, **kw)``, with a warning.

    The old form is recognised by a run store as the first argument, or by None first (the default
    store, as the old form allowed) with more positional arguments than the new form takes.
    """
    n = _n_positional(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if args and "store" not in kwargs and (is_store(args[0]) or (args[0] is None and len(args) > n)):
            _warn(f"{fn.__name__}(store, ...) with the store first", fn)
            return fn(*args[1:], store=args[0], **kwargs)
        return fn(*args, **kwargs)

    return wrapper


def store_was_positional(*names: str) -> Callable[[Callable], Callable]:
    """Accept the old positional parameters ``names`` (``"store"`` among them), which now are keywords:
    positional arguments past the new form's fill them in order, with a warning."""
    def decorate(fn: Callable) -> Callable:
        n = _n_positional(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            extra = args[n:]
            if not extra or len(extra) > len(names):
                return fn(*args, **kwargs)       # the new form, or too many: Python's own TypeError
            moved = dict(zip(names, extra))
            twice = sorted(set(moved) & set(kwargs))
            if twice:
                raise TypeError(f"{fn.__name__}() got {', '.join(twice)} both by position and by keyword; "
                                f"pass it once, as a keyword")
            _warn(f"{fn.__name__}() with {', '.join(moved)} given by position", fn)
            return fn(*args[:n], **moved, **kwargs)

        return wrapper

    return decorate
