"""benchmarks/seen_accuracy.py: the style groups it reports come from the confusion matrix as documented."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(repo_root):
    spec = importlib.util.spec_from_file_location("_seen_accuracy_under_test",
                                                  repo_root / "benchmarks" / "seen_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_groups_join_styles_mistaken_for_each_other_transitively_and_in_either_direction(bench):
    cm = np.array([[90, 10, 0, 0, 0],      # 0 -> 1 at 10 %: joined
                   [0, 100, 0, 0, 0],
                   [0, 0, 80, 20, 0],      # 2 -> 3 at 20 %: joined
                   [0, 0, 0, 91, 9],       # 3 -> 4 at 9 % only, but 4 -> 3 at 15 %: joined, so 2/3/4
                   [0, 0, 0, 15, 85]])
    assert bench.groups_of(cm, at=0.1) == [[2, 3, 4], [0, 1]]
    assert bench.groups_of(cm, at=0.16) == [[2, 3], [0], [1], [4]]
    assert bench.groups_of(np.eye(3, dtype=int) * 5, at=0.1) == [[0], [1], [2]]
