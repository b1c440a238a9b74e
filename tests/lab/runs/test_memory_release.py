"""The first run of a process frees its model when it ends, with the cyclic garbage collector off.

Each scenario runs first in a fresh process: an earlier run in the same process (as in the other memory
tests) pays torch's one-off lazy imports and so hides a reference cycle that only the first run makes.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fixtures.paths import REPO

# The run is the first of the process; what it loads is watched through a weak reference to a weight.
_FIRST_RUN = """
import gc, sys, weakref
import lab, lab.backbones
from tests.fixtures.configs import TINY

refs = []
real = lab.backbones.load

def load(*args, **kwargs):
    bb = real(*args, **kwargs)
    refs.append(weakref.ref(next(bb.model.parameters())))
    return bb

lab.backbones.load = load
gc.collect()
gc.disable()
config = lab.RunConfig(**{**TINY, "epochs": 1, "projection": "none", **CHANGES})
last = None
for event in lab.run(config, store=False):
    last = event
    if event.kind in ("run_failed", "run_finished"):
        alive = [ref() is not None for ref in refs]
        print("END", event.kind, alive, getattr(event, "message", ""))
sys.exit(0 if refs and last.kind == EXPECT and not any(alive) else 1)
"""


@pytest.mark.parametrize("changes, expect", [
    ({"lr": 1e9, "optimizer": "sgd"}, "run_failed"),        # a diverging loss fails epoch 1
    ({}, "run_finished"),
], ids=["failed", "finished"])
def test_the_first_run_of_a_process_frees_its_model_without_the_collector(changes, expect):
    code = f"CHANGES = {changes!r}\nEXPECT = {expect!r}\n" + _FIRST_RUN
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (f"the first run still holds its model after it ended:\n{proc.stdout}"
                                  f"{proc.stderr[-3000:]}")
