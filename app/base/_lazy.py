"""Names of a package that load on first use, so that importing a light module of a view (its presets,
its event model) does not load Panel and HoloViews with the view."""
from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, str]):
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps a name to the submodule (relative,
    e.g. ``".view"``) that defines it."""
    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(exports[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(exports)

    return __getattr__, __dir__
