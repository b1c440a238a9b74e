"""Names of a package that load on first use (PEP 562), so that importing the package stays cheap.

Every package of lab and app that defers a heavy import (torch, Dask, Panel) declares its lazy names
with :func:`lazy_exports`; this module imports nothing but :mod:`importlib`.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` whose ``exports`` load on first use.

    Parameters
    ----------
    package : the package's ``__name__``
    exports : ``{name: "module:attr"}`` for an attribute of a module, or ``{name: "module"}`` for the
        module itself; a module starting with ``.`` is relative to ``package`` (``".view:LiveView"``)

    Returns
    -------
    (__getattr__, __dir__) : assign both at the package's module level. A name, once loaded, is kept
        in the package's namespace, so later lookups are plain attribute reads.

    Examples
    --------
    >>> __getattr__, __dir__ = lazy_exports(__name__, {"run": ".engine:run", "timings": ".timings"})
    ... # doctest: +SKIP
    """
    targets = {name: target.partition(":")[::2] for name, target in exports.items()}

    def __getattr__(name: str):
        if name not in targets:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attr = targets[name]
        module = importlib.import_module(module_name, package)
        value = getattr(module, attr) if attr else module
        if package in sys.modules:
            vars(sys.modules[package])[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package]) if package in sys.modules else ()) | set(targets))

    return __getattr__, __dir__
