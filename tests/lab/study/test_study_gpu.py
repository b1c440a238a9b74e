"""Studies on GPU machines, checked on CPU: the GPU count is faked, the workers are real Dask processes.

- one worker per GPU, each seeing only its own GPU (CUDA_VISIBLE_DEVICES) and declaring {"GPU": n};
- a study asking for CUDA where there is none is refused before anything starts;
- a folder's loaders in a (daemonic) Dask worker use no worker processes of their own;
- cancelling a study on a remote scheduler stops its running cells, not only their futures.
"""
from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest
from PIL import Image

from lab.events import CellProgress, StudyStarted
from lab.store import RunStore
from lab.study import Study, runner

BASE = {"dataset": "digits", "img_size": 16, "backbone": "mlp:depth=2,width=16", "n_unseen": 4, "strategy": "full",
        "epochs": 1, "projection": "none", "unseen_per_class": 10, "seen_per_class": 6, "metrics": ["nmi"],
        "save_weights": False}


@pytest.fixture
def two_gpus(monkeypatch):
    """A machine with two CUDA devices, as far as the study runner can tell (and no dask-cuda)."""
    monkeypatch.setattr(runner, "gpu_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "dask_cuda", None)          # import dask_cuda raises ImportError
    # On a machine with fewer real GPUs, a worker pinned to a GPU that is not there fails its start in
    # Dask's NVML monitor (NVMLError_InvalidArgument, seen on a 1-GPU machine): that monitor is Dask's,
    # not what is tested here.
    import dask
    import distributed  # noqa: F401 - its defaults must be in the config before set() (which restores by deleting)

    with dask.config.set({"distributed.diagnostics.nvml": False}):
        yield


@pytest.fixture(scope="module")
def remote():
    """A LocalCluster of one CPU worker standing in for a remote scheduler (its address)."""
    with runner.local_cluster(1, dashboard=False) as cluster:
        yield cluster.scheduler_address


def _no_cluster(*args, **kwargs):
    raise AssertionError("a cluster was started")


# -- one worker per GPU --------------------------------------------------------------------------------

def test_gpu_cluster_pins_one_worker_per_gpu(two_gpus):
    from distributed import Client

    with runner.local_cluster(2, gpus=["0", "1"], cells_per_gpu=1, dashboard=False) as cluster, \
            Client(cluster) as client:
        visible = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        resources = {w["name"]: w["resources"] for w in client.scheduler_info()["workers"].values()}
        # a lambda: `os.environ.get` itself would be pickled with the client's environ
        trim = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    assert sorted(visible.values()) == ["0", "1"]
    assert list(resources.values()) == [{"GPU": 1}, {"GPU": 1}]
    assert not any(trim.values())                                   # the study workers' settings hold here too


def test_gpu_study_runs_one_cell_per_gpu_and_names_the_devices(two_gpus, tmp_path, monkeypatch):
    from distributed import Client

    submitted = []
    submit = Client.submit

    def recording_submit(self, *args, **kwargs):
        submitted.append(kwargs.get("resources"))
        return submit(self, *args, **kwargs)

    monkeypatch.setattr(Client, "submit", recording_submit)
    events = []
    # "auto" cells resolve to the worker's own GPU; on this CPU machine that is the CPU
    study = Study("gpus", {**BASE, "device": "auto"}, {"seeds": [[0], [1]]})
    result = runner.run_study(study, scheduler=None, store=RunStore(tmp_path / "runs"), workers=None,
                              threads_per_worker=None, on_event=events.append)
    assert not result.failed and len(result.run_ids) == 2
    started = next(e for e in events if isinstance(e, StudyStarted))
    assert started.workers == 2 and sorted(started.devices) == ["GPU 0", "GPU 1"]
    assert submitted == [{"GPU": 1}, {"GPU": 1}]


def test_gpus_are_those_cuda_visible_devices_names(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6")
    assert runner._machine_gpus(2) == ["3", "5"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert runner._machine_gpus(2) == ["0", "1"]


def test_cells_per_gpu_is_a_positive_count(two_gpus, tmp_path):
    study = Study("gpus", {**BASE, "device": "cuda"})
    with pytest.raises(ValueError, match=r"cells_per_gpu must be a positive integer\. Got 0 instead"):
        runner.run_study(study, scheduler=None, store=RunStore(tmp_path / "runs"), workers=None,
                         threads_per_worker=None, cells_per_gpu=0)


# -- bad input: CUDA asked for where there is none -------------------------------------------------------

def test_cuda_study_without_gpus_is_refused_before_a_cluster_starts(monkeypatch, tmp_path):
    monkeypatch.setattr(runner, "gpu_count", lambda: 0)
    monkeypatch.setattr(runner, "local_cluster", _no_cluster)
    study = Study("cuda", BASE, {"device": ["cpu", "cuda:1"]})
    with pytest.raises(ValueError, match=r"cell 2 \(device=cuda:1\) asks for device 'cuda:1', but this machine has "
                                         r"no CUDA device"):
        runner.run_study(study, scheduler=None, store=RunStore(tmp_path / "runs"), workers=None,
                         threads_per_worker=None)
    monkeypatch.setattr(runner, "gpu_count", lambda: 1)
    with pytest.raises(ValueError, match=r"asks for device 'cuda:1', but this machine has 1 CUDA device \(cuda:0\)"):
        runner.run_study(study, scheduler=None, store=RunStore(tmp_path / "runs"), workers=None,
                         threads_per_worker=None)
    assert not (tmp_path / "runs").exists()


def test_cli_refuses_a_cuda_study_on_a_machine_without_gpus(tmp_path, cli):
    if runner.gpu_count():
        pytest.skip("this machine has a CUDA device")
    spec = tmp_path / "cuda.yaml"
    spec.write_text("name: cuda\nbase: {dataset: digits, backbone: mlp, device: cuda}\n")
    proc = cli("study", "run", str(spec), "--runs-dir", str(tmp_path / "runs"), "--no-progress")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "asks for device 'cuda'" in lines[0] and "no CUDA device" in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists()


def test_cuda_study_on_a_scheduler_without_gpu_workers_is_refused(remote, tmp_path, monkeypatch):
    from distributed import Client

    monkeypatch.setattr(Client, "submit", _no_cluster)
    study = Study("cuda", {**BASE, "device": "cuda"})
    with pytest.raises(ValueError, match=rf"asks for device 'cuda', but no worker of the scheduler at {remote} "
                                         r"has a GPU resource"):
        runner.run_study(study, scheduler=remote, store=RunStore(tmp_path / "runs"), workers=None,
                         threads_per_worker=None)


# -- folders in Dask workers --------------------------------------------------------------------------

def _iterate_folder(root: str, cache: str) -> tuple[int, int]:
    """In a Dask worker: a folder's train loader as a CUDA run builds it, iterated once."""
    os.environ["LAB_CACHE_DIR"] = cache
    import lab.data._dataset as dataset
    from lab.data import load

    dataset.LOADER_WORKERS = 2                     # as on a machine with cores to spare
    ds = load(f"folder:{root}", image_size=8)
    options = {**ds.loader_options("cuda"), "pin_memory": False}       # no CUDA here to pin for
    return options["num_workers"], sum(len(y) for _, y in ds.train_loader(4, **options))


def test_folder_loaders_in_a_dask_worker_start_no_processes(remote, tmp_path):
    from distributed import Client

    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (tmp_path / "imgs" / c).mkdir(parents=True)
        for i in range(5):
            Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(tmp_path / "imgs" / c / f"{i}.png")
    with Client(remote) as client:
        workers, images = client.submit(_iterate_folder, str(tmp_path / "imgs"), str(tmp_path / "cache"),
                                        pure=False).result()
    assert (workers, images) == (0, 10)


# -- cancelling on a remote scheduler ---------------------------------------------------------------------

@pytest.mark.slow
def test_cancel_on_a_remote_scheduler_stops_the_running_cell(remote, tmp_path):
    from distributed import Client

    cancel = threading.Event()

    def on_event(msg):
        if isinstance(msg, CellProgress):
            cancel.set()                                    # what Ctrl-C / the app's Stop does

    study = Study("long", {**BASE, "device": "cpu", "epochs": 400})
    result = runner.run_study(study, scheduler=remote, store=RunStore(tmp_path / "runs"), workers=None,
                              threads_per_worker=None, on_event=on_event, cancel=cancel)
    assert result.cancelled
    t0 = time.monotonic()
    with Client(remote) as client:
        while True:
            busy = sum(client.run(lambda dask_worker: dask_worker.state.executing_count).values())
            if not busy or time.monotonic() - t0 > 10:
                break
            time.sleep(0.2)
    assert busy == 0, f"the worker still runs the cancelled cell {time.monotonic() - t0:.1f} s after the cancel"
