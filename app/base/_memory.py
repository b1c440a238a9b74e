"""Hand the memory a replaced run's views freed back to the system.

Opening another run replaces the plots, streams and frames of the last one. What they held is freed, but a
served process kept about 9 MiB of resident memory per run opened (``benchmarks/results/page_growth.txt``):
reference cycles among the dropped HoloViews/Bokeh objects wait for the collector's next full pass, and glibc
keeps the small blocks freed in its heap instead of returning the pages (shown by ``malloc_trim(0)`` after an
opening taking most of the growth back). :func:`release_memory` does both, once per run opened.

A full collection walks every tracked object, and a served process holds about half a million from its imports
alone (torch, timm, HoloViews, Bokeh): 0.27-0.64 s per collection, paid at every opening and at every automatic
full collection. :func:`freeze_imports` moves what the server's start-up imported out of the collector's sight
(:func:`gc.freeze`, the reason it exists), once the imports are done.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

__all__ = ["release_memory", "freeze_imports"]


def _malloc_trim():
    """glibc's ``malloc_trim``, or None where there is none (macOS, Windows, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def release_memory() -> bool:
    """Collect reference cycles, then return free heap pages to the system; whether the pages were returned."""
    gc.collect()
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def freeze_imports() -> int:
    """Move every object alive now into the collector's permanent generation; the number moved.

    Call once, after a long-lived process has imported its libraries and before it serves: those objects live
    as long as the process, so no later collection needs to walk them. Objects made later are collected as
    usual (a frozen object that becomes garbage is only returned at exit, so nothing per session is frozen)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
