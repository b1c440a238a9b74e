"""How much of a test file's time goes to Python's garbage collector: a pytest plugin.

Run: ``PYTHONPATH=benchmarks .venv/bin/python -m pytest -q -n 0 -p gc_time -p no:cacheprovider FILE`` with
``LAB_TEST_GC_DEFAULTS=1`` for CPython's own thresholds and no freeze (what the suite did before
``tests/conftest.py`` set them); without it the suite's settings apply. It prints the collector's seconds, the full collections' share
and how many there were. Figures: ``benchmarks/results/gc_time.txt``.
"""
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

