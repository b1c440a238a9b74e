"""Fixtures shared by the test files: tmp run stores, tiny configs, hand-written and real tiny runs,
the command line in a subprocess.

Hand-written runs (:func:`make_run`) go through the public RunWriter API with chosen values, so
a test knows the exact answer; :func:`tiny_run` is one real engine run (2 seeds, 1 epoch, an MLP
on 16 px digits), shared by the whole session because it costs seconds.
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# --suite-report PATH: the suite's wall time and slowest tests as JSON (make test writes test-artifacts/suite.json);
# the order the files run in and what one worker is handed whole
pytest_plugins = ("tests.suite_time", "tests.scheduling")

def _threads_per_worker() -> int | None:
    """Under pytest-xdist (``make test`` runs ``-n auto``), the cores each worker may use: the workers
    share the machine, and torch's default of one thread per core in every worker would put two threads
    per core (that variant was not timed). None outside xdist."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers < 1:
        return None
    return max(1, (os.cpu_count() or 1) // workers)


def _suite_gc() -> bool:
    """Whether the suite's collector settings apply (``LAB_TEST_GC_DEFAULTS=1``: CPython's, for a comparison)."""
    return os.environ.get("LAB_TEST_GC_DEFAULTS") != "1"


def pytest_configure(config):
    # A test process keeps one to two million objects alive (torch, HoloViews, Bokeh, fixtures), and each of
    # CPython's automatic full collections walks them all (about 1 s here): on tests/app/test_live_picker.py the
    # collector took 21.6 s of 150 s, 18.2 s of it in 17 full collections. A full collection at most every 100
    # middle ones, and the imports frozen out of the walks (pytest_collection_finish), took it to 10.1 s in 6
    # (benchmarks/gc_time.py; benchmarks/results/gc_time.txt). Garbage in cycles still goes, a little later.
    if _suite_gc():
        gc.set_threshold(700, 10, 100)
    threads = _threads_per_worker()
    if threads is None:
        return
    # the worker itself and every process it starts (notebooks, the served app, the CLI, Dask workers)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch

    torch.set_num_threads(threads)


def pytest_collection_finish(session):
    if _suite_gc():             # what collecting imported lives as long as the process: no walk needs it
        gc.collect()
        gc.freeze()


from tests.fixtures.configs import TINY  # noqa: E402  (re-exported for fixtures below)


@pytest.fixture(scope="session")
def installed_face():
    """``installed_face(faces, package, what)``: the first of ``faces`` whose font file is on this
    machine, those of the Debian ``package`` CI installs first; none fails under CI (it must install
    it) and skips elsewhere, the message naming ``what`` and the package."""
    from lab.data import build_glyphs

    def first(faces, package: str, what: str):
        for face in sorted(faces, key=lambda f: f.package != package):
            if build_glyphs.find_font(face) is not None:
                return face
        msg = f"{what} is installed (apt-get install {package})"
        if os.environ.get("CI") == "true":
            pytest.fail(msg + "; CI must install one")
        pytest.skip(msg)

    return first


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository checkout the tests run from."""
    return REPO


@pytest.fixture
def store(tmp_path):
    """An empty run store in a temporary folder."""
    from lab.store import RunStore

    return RunStore(tmp_path / "runs")


@pytest.fixture
def one_thread():
    """Torch on one thread for the test (small problems gain nothing from threads on shared cores)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def tiny_config():
    """``tiny_config(**changes)``: a :class:`lab.RunConfig` of :data:`TINY` with ``changes``."""
    from lab.config import RunConfig

    def make(**changes):
        return RunConfig(**{**TINY, **changes})

    return make


@pytest.fixture
def make_run(store):
    """``make_run(...)`` writes a finished run by hand through the RunWriter API and returns its id.

    Parameters (keywords)
    ---------------------
    layers : layer names, stored in meta["layers"] (input -> output)
    seeds, epochs : the seeds and the epochs (0..epochs) written
    nmi : ``nmi(seed, epoch, i)`` -> the unseen NMI of layer ``i``
    seen : {metric: value} written on the seen split of every layer
    training : ``training(seed, epoch)`` -> the training row's fields, or None for no row
    status : the status given to ``finish`` (None leaves the run "running")
    target : the store written to (default: the ``store`` fixture)
    meta : extra meta fields
    **config : RunConfig fields (default a digits MLP)
    """
    from lab.config import RunConfig

    def make(*, layers=("stem", "blocks.0", "pre_logits"), seeds=(0,), epochs=1,
             nmi=lambda seed, epoch, i: 0.1 * i + epoch, seen=None, training=None, status="finished",
             target=None, meta=None, **config):
        w = (target or store).create(RunConfig(**{"dataset": "digits", "backbone": "mlp", "seeds": tuple(seeds),
                                                  "epochs": epochs, **config}))
        w.update_meta(layers=list(layers), **(meta or {}))
        for seed in seeds:
            for epoch in range(epochs + 1):
                for i, layer in enumerate(layers):
                    rows = [{"seed": seed, "epoch": epoch, "layer": layer, "split": "unseen", "metric": "nmi",
                             "value": nmi(seed, epoch, i)}]
                    rows += [{"seed": seed, "epoch": epoch, "layer": layer, "split": "seen", "metric": metric,
                              "value": value} for metric, value in (seen or {}).items()]
                    w.append_metrics(rows)
                row = training(seed, epoch) if training is not None else None
                if row is not None:
                    w.append_training({"seed": seed, "epoch": epoch, **row})
        if status is not None:
            w.finish(status)
        return w.run_id

    return make


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_config):
    """One real finished engine run, 2 seeds x 1 epoch of :data:`TINY`: (store, run_id, events)."""
    import torch

    from lab.runs import run
    from lab.store import RunStore

    store = RunStore(tmp_path_factory.mktemp("tiny_run") / "runs")
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        events = list(run(tiny_config(epochs=1, seeds=(0, 1), name="tiny"), store=store))
    finally:
        torch.set_num_threads(previous)
    assert events[-1].kind == "run_finished", events[-1]
    return store, events[-1].run_id, events


@pytest.fixture(scope="session")
def cli(repo_root):
    """``cli(*args, cwd=None)``: ``python -m lab`` in a subprocess (the real entry point, exit code, stderr)."""
    def run_cli(*args, cwd=None):
        env = {**os.environ, "PYTHONPATH": str(repo_root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True,
                              cwd=cwd or repo_root, env=env, timeout=600)

    return run_cli


@pytest.fixture(scope="session")
def cancelled_run(tmp_path_factory):
    """A real TINY run cancelled before its first evaluation: (store, run_id)."""
    from lab.store import RunStore
    from tests.fixtures.states import cancelled_before_first_evaluation

    store = RunStore(tmp_path_factory.mktemp("cancelled_run") / "runs")
    return store, cancelled_before_first_evaluation(store)


@pytest.fixture(scope="session")
def monitored_run(tmp_path_factory):
    """A real finished lab.Monitor run counted in optimizer steps (0, 4, 8), without the loop's loss and
    without a seen split: (store, run_id)."""
    from lab.store import RunStore
    from tests.fixtures.states import monitored_steps

    store = RunStore(tmp_path_factory.mktemp("monitored_run") / "runs")
    return store, monitored_steps(store)
