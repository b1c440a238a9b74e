"""Kept for the view packages that still import ``lazy_exports`` from here, in its old form (``{name:
".submodule"}``, the name read from that submodule); new code imports :func:`lab._lazy.lazy_exports` from
:mod:`app.base` (``{name: ".submodule:attr"}``)."""
from __future__ import annotations

from lab._lazy import lazy_exports as _lazy_exports

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: dict[str, str]):
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps a name to the submodule that defines it."""
    return _lazy_exports(package, {name: f"{module}:{name}" for name, module in exports.items()})
