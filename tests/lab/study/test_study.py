"""Studies on a real Dask LocalCluster (processes): grids, resuming, a killed worker, archives."""
import json
import os
import signal
import sys
import threading

import pytest

from lab import analysis
from lab import events as ev
from lab.archive import ArchiveError, pack, pack_bytes, unpack, unpack_bytes
from lab.status import RunStatus
from lab.store import RunStore
from lab.study import Study, figures

pytestmark = pytest.mark.slow

BASE = {"dataset": "digits", "backbone": "mlp:depth=3,width=16", "strategy": "full", "epochs": 1,
        "projection": "none", "unseen_per_class": 30, "seen_per_class": 15, "metrics": ["nmi", "knn_accuracy", "nc1"],
        "save_weights": False}
AXES = {"label_noise": [0.0, 0.3], "seeds": [[0], [1]]}


def _runs(store):
    return sorted(store.ids())


def test_bad_axis_value_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match=r"axis 'label_noise' value #2 \(1.5\) is not valid"):
        Study("bad", BASE, {"label_noise": [0.0, 1.5]})
    with pytest.raises(ValueError, match="sets 'widthh', which is not a RunConfig field"):
        Study("bad", BASE, {"widthh": [1]})
    with pytest.raises(ValueError, match="axis 'backbone' must be a non-empty list"):
        Study("bad", BASE, {"backbone": []})
    with pytest.raises(ValueError, match=r"axis 'strategy' value #2 \(strategy=linear, block=fc2\) is not valid: block"):
        Study("bad", BASE, {"strategy": [{"strategy": "layer", "block": "fc2"}, {"strategy": "linear", "block": "fc2"}]})
    assert not (tmp_path / "runs").exists()


def test_spec_file_round_trip(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nbase: {dataset: digits, epochs: 1}\naxes:\n  seeds: [[0], [1]]\n  n_unseen: [3, 4]\n")
    study = Study.from_file(spec)
    cells = study.cells()
    assert len(cells) == 4 and cells[1].values == {"seeds": [0], "n_unseen": 4}
    assert cells[1].config.n_unseen == 4 and cells[2].config.seeds == (1,)
    (tmp_path / "bad.yaml").write_text("name: s\nbase: {epochs: -1}\n")
    with pytest.raises(ValueError, match="base config is not valid"):
        Study.from_file(tmp_path / "bad.yaml")


def test_four_cells_complete_tagged_and_rerun_starts_nothing(tmp_path):
    store = RunStore(tmp_path / "runs")
    study = Study("grid", BASE, AXES)
    events = []
    result = study.run(store=store, workers=2, on_event=events.append)
    assert not result.failed and len(result.run_ids) == 4
    ids = _runs(store)
    assert len(ids) == 4
    cells = {json.dumps(store.load(i).meta["cell"], sort_keys=True) for i in ids}
    assert cells == {c.key for c in study.cells()}
    assert all(store.load(i).meta["study"] == "grid" and store.load(i).status == "finished" for i in ids)
    # typed study events: the client's own and, read back from the workers' topic, those of each cell
    assert all(isinstance(e, ev.StudyEvent) for e in events), events
    kinds = {e.kind for e in events}
    assert {"study_started", "cell_started", "cell_progress", "cell_epoch_finished", "cell_run_ended",
            "cell_done"} <= kinds
    done = [e for e in events if isinstance(e, ev.CellDone)]
    assert sorted(e.cell for e in done) == [0, 1, 2, 3] and all(e.status is RunStatus.FINISHED for e in done)
    assert {e.run_id for e in done} == set(ids)
    started = next(e for e in events if isinstance(e, ev.StudyStarted))
    assert (started.total, started.todo, started.skipped, started.workers) == (4, 4, 0, 2)
    status = study.status(store=store)
    assert list(status["status"]) == ["finished"] * 4
    # the status table's g is the analysis module's g of the stored run
    rec = store.load(status["run_id"].iloc[0])
    assert status["g"].iloc[0] == analysis.run_summary(rec.metrics, rec.training, layers=rec.meta["layers"])["g"]
    again = study.run(store=store, workers=2)
    assert sorted(again.skipped) == [0, 1, 2, 3] and _runs(store) == ids
    figs = figures(study, store=store)
    assert set(figs["generalization"]["group"]) == {"label_noise=0.0", "label_noise=0.3"}
    assert (figs["generalization"]["n_runs"] == 2).all()


def test_cancel_keeps_finished_runs_and_a_rerun_completes_the_rest(tmp_path):
    store = RunStore(tmp_path / "runs")
    study = Study("stop", {**BASE, "epochs": 3}, AXES)
    cancel = threading.Event()

    def on_event(msg):
        if isinstance(msg, ev.CellDone):
            cancel.set()                        # what Ctrl-C / the app's Stop does

    result = study.run(store=store, workers=1, on_event=on_event, cancel=cancel)
    assert result.cancelled
    kept = _runs(store)
    assert 1 <= len(kept) < 4
    assert all(store.load(i).status == "finished" for i in kept)       # whole runs only
    assert not [p for p in (tmp_path / "runs").iterdir() if p.name.startswith(".tmp")]
    again = study.run(store=store, workers=1)       # one worker process fewer to start: 2 workers are tested above
    assert not again.failed and sorted(again.skipped) == sorted(
        c.index for c in study.cells() if c.key in {json.dumps(store.load(i).meta["cell"], sort_keys=True)
                                                     for i in kept})
    ids = _runs(store)
    assert len(ids) == 4 and set(kept) <= set(ids)
    assert len({json.dumps(store.load(i).meta["cell"], sort_keys=True) for i in ids}) == 4


def test_a_killed_worker_is_retried_without_duplicates(tmp_path):
    import dask
    from distributed import Client

    from lab.study import local_cluster

    store = RunStore(tmp_path / "runs")
    study = Study("kill", BASE, AXES)
    killed = []
    lock = threading.Lock()

    def on_event(msg):
        with lock:
            if isinstance(msg, ev.CellStarted) and not killed:
                killed.append(msg.pid)
                os.kill(msg.pid, signal.SIGKILL)

    with local_cluster(2, retries=3, dashboard=False) as cluster:
        result = study.run(cluster.scheduler_address, store=store, on_event=on_event)
        with Client(cluster) as client:     # the restarted worker too runs as configured:
            profiling = client.run(dask.config.get, "distributed.worker.profile.enabled")
            # a lambda reads the worker's environment (os.environ.get would pickle the client's os.environ)
            trim = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    assert profiling and not any(profiling.values()), profiling     # no stack sampler
    assert trim and not any(trim.values()), trim                    # glibc's own malloc trimming
    assert killed, "no worker was killed"
    assert not result.failed
    ids = _runs(store)
    assert len(ids) == 4
    assert len({json.dumps(store.load(i).meta["cell"], sort_keys=True) for i in ids}) == 4
    assert not [p for p in (tmp_path / "runs").iterdir() if p.name.startswith(".tmp")]


def test_cpu_workers_fork_from_a_server_that_imported_torch_and_lab():
    from distributed import Client

    from lab.study import local_cluster

    def probe():            # defined here so that cloudpickle sends it by value, importing nothing
        return os.getppid(), sorted(m for m in ("torch", "lab.runs.engine") if m in sys.modules)

    with local_cluster(1, dashboard=False) as cluster, Client(cluster) as client:
        ((parent, imported),) = client.run(probe).values()
    assert imported == ["lab.runs.engine", "torch"] and parent != os.getpid()    # the fork server's child
    with local_cluster(1, dashboard=False, start_method="spawn") as cluster, Client(cluster) as client:
        ((parent, imported),) = client.run(probe).values()
    assert imported == [] and parent == os.getpid()                             # a fresh interpreter
    with pytest.raises(ValueError, match=r"start_method must be one of \['forkserver', 'spawn'\]"):
        with local_cluster(1, start_method="fork"):
            pass


def test_archives_move_runs_between_stores_unchanged(tmp_path):
    import pandas as pd

    import lab

    src = RunStore(tmp_path / "a")
    cfg = lab.RunConfig(**{**BASE, "seeds": (0,)})
    for ev in lab.run(cfg, store=src):
        pass
    (run_id,) = src.ids()
    archive = pack([run_id], tmp_path / "runs.tar.gz", store=src)
    dst = RunStore(tmp_path / "b")
    assert unpack(archive, store=dst) == [run_id]
    assert unpack(archive, store=dst) == []                   # second import: nothing new, no duplicate
    a, b = src.load(run_id), dst.load(run_id)
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    assert a.summary() == b.summary()
    (tmp_path / "junk.tar.gz").write_bytes(b"not an archive")
    with pytest.raises(ArchiveError, match="is not a layerscope run archive"):
        unpack(tmp_path / "junk.tar.gz", store=dst)
