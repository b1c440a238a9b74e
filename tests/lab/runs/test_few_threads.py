"""lab.runs.compute.few_threads: small metric problems run on one thread in torch and in every BLAS/OpenMP pool,
and the pools are found once, not on every call (the search cost a served app's runs seconds per evaluation)."""
from __future__ import annotations

import sys
import types

import torch
from threadpoolctl import threadpool_info

from lab.runs import compute


def _pool_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info()]


def test_a_small_problem_runs_on_one_thread_and_the_limits_come_back():
    before_torch, before_pools = torch.get_num_threads(), _pool_threads()
    with compute.few_threads(torch.zeros(100, 8)):
        assert torch.get_num_threads() == 1
        assert _pool_threads() and set(_pool_threads()) == {1}
    assert torch.get_num_threads() == before_torch
    assert _pool_threads() == before_pools


def test_a_large_problem_keeps_its_threads():
    before = _pool_threads()
    big = torch.empty(compute._SMALL_PROBLEM + 1, dtype=torch.uint8)
    with compute.few_threads(big):
        assert _pool_threads() == before


def test_the_pools_are_found_again_only_after_an_import():
    first = compute._thread_pools()
    assert compute._thread_pools() is first
    sys.modules["_layerscope_probe_module"] = types.ModuleType("_layerscope_probe_module")
    try:
        assert compute._thread_pools() is not first
    finally:
        del sys.modules["_layerscope_probe_module"]
