"""A pytest plugin that prints how much of the session went to Python's garbage collector (``benchmarks/gc_time.py``
loads it: ``-p _gc_plugin`` with ``benchmarks`` on the path)."""
from __future__ import annotations

import atexit
import gc
import os
import time

_SEEN = {"start": 0.0, "total": 0.0, "full": 0.0, "counts": [0, 0, 0]}
_T0 = time.perf_counter()


def _on_gc(phase, info):
    if phase == "start":
        _SEEN["start"] = time.perf_counter()
        return
    spent = time.perf_counter() - _SEEN["start"]
    _SEEN["total"] += spent
    _SEEN["counts"][info["generation"]] += 1
    if info["generation"] == 2:
        _SEEN["full"] += spent


gc.callbacks.append(_on_gc)


def _report():
    print(f"\ngc: {_SEEN['total']:.2f} s of {time.perf_counter() - _T0:.1f} s; full collections "
          f"{_SEEN['counts'][2]} taking {_SEEN['full']:.2f} s; collections by generation {_SEEN['counts']}; "
          f"threshold {gc.get_threshold()}; frozen {gc.get_freeze_count()}")


atexit.register(_report)

