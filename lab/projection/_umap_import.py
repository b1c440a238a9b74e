"""``import umap`` with umap's numba kernels cached on disk.

umap-learn compiles about 130 numba functions on the first fit in every process (7 s on an idle
2-core machine, 11-15 s on a busy one), and only one of them asks numba to cache its machine code.
Every served app, notebook kernel, CLI run and Dask worker paid that again. Here each compiled-on-first-use
function of umap (and the few of pynndescent that lack it) gets numba's own on-disk cache, the one
``@njit(cache=True)`` gives: the second process loads the code in a fraction of a second. numba keys the
cache by the source file, so upgrading umap recompiles; it writes beside the package or, where that is
read-only, in ``NUMBA_CACHE_DIR`` or the user's cache folder. ``LAB_NUMBA_CACHE=0`` turns this off.
"""
from __future__ import annotations

import os
import sys
import threading
from types import ModuleType

__all__ = ["import_umap"]

_LOCK = threading.Lock()
_DONE = False
_PACKAGES = ("umap", "pynndescent")


def import_umap() -> ModuleType:
    """``umap``, imported once, with its numba functions cached on disk (unless ``LAB_NUMBA_CACHE=0``)."""
    global _DONE
    import umap

    with _LOCK:
        if not _DONE:
            _DONE = True
            if os.environ.get("LAB_NUMBA_CACHE", "1") != "0":
                enable_disk_cache(_PACKAGES)
    return umap


def enable_disk_cache(packages: tuple[str, ...]) -> int:
    """Give the not-yet-cached numba CPU functions of the imported modules of ``packages`` an on-disk cache.

    Returns how many functions got one. numba's cache key is the function's code and argument types, not
    its options, so a function wrapped twice (umap compiles one layout step with ``parallel=False`` and
    again with ``parallel=True``) would share one cache entry. Of such a pair only the serial wrapper is
    cached; the parallel one never reads or writes the entry (seeded umap runs the serial code and must
    get it back). A function compiled already in this process is left as it is.
    """
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher

    wrappers: dict[int, list[CPUDispatcher]] = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in packages:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, CPUDispatcher):
                same = wrappers.setdefault(id(value.py_func), [])
                if all(value is not other for other in same):
                    same.append(value)
    count = 0
    for same in wrappers.values():
        chosen = same if len(same) == 1 else [fn for fn in same if not fn.targetoptions.get("parallel")]
        if len(chosen) != 1 or not all(isinstance(fn._cache, NullCache) for fn in same) or chosen[0].overloads:
            continue
        fn = chosen[0]
        try:
            fn.enable_caching()
        except Exception:       # a function numba cannot cache stays compiled per process, as before
            continue
        count += 1
    return count
