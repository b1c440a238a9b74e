"""``python -m lab study run|show`` and ``runs pack|unpack`` as a user types them (subprocesses).

The slow tests share one 4-cell study of tiny runs, run once on a real LocalCluster of 2 worker
processes into a temporary store ($LAB_RUNS_DIR).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lab.store import RunStore
from lab.study import Study

ROOT = Path(__file__).resolve().parents[3]
SPEC = """\
name: cli-tiny
description: four tiny runs for the CLI tests.
base:
  dataset: digits
  backbone: "mlp:depth=3,width=16"
  strategy: full
  epochs: 1
  projection: none
  unseen_per_class: 30
  seen_per_class: 15
  metrics: [nmi, knn_accuracy, nc1]
  save_weights: false
axes:
  label_noise: [0.0, 0.3]
  seeds: [[0], [1]]
"""
TIMING = {"seconds", "train_seconds", "evaluate_seconds", "extract_seconds", "metrics_seconds",
          "projection_seconds"}


def lab_cli(*args: str, runs: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, LAB_RUNS_DIR=str(runs), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def run_ids(runs: Path) -> list[str]:
    return sorted(p.name for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")) if runs.is_dir() else []


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The tiny study, run once with ``study run SPEC --workers 2``."""
    folder = tmp_path_factory.mktemp("study")
    spec = folder / "cli_tiny.yaml"
    spec.write_text(SPEC)
    runs = folder / "runs"
    proc = lab_cli("study", "run", str(spec), "--workers", "2", "--no-progress", runs=runs)
    return {"spec": spec, "runs": runs, "proc": proc}


@pytest.mark.slow
def test_study_run_prints_a_summary_and_stores_four_tagged_runs(study):
    proc = study["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "study 'cli-tiny': 4 run(s) into" in out
    assert "4 run(s) to do, 0 already finished; 2 worker(s) x 1 thread(s), dashboard http://127.0.0.1:" in out
    assert "study 'cli-tiny': 4 of 4 finished (0 from before), 0 failed" in out
    # one line per cell as it lands
    for label in ("label_noise=0.0, seeds=[0]", "label_noise=0.0, seeds=[1]", "label_noise=0.3, seeds=[0]",
                  "label_noise=0.3, seeds=[1]"):
        assert f"({label}): finished (run " in out, label
    ids = run_ids(study["runs"])
    assert len(ids) == 4
    store = RunStore(study["runs"])
    cells = [store.load(i).meta["cell"] for i in ids]
    assert all(store.load(i).meta["study"] == "cli-tiny" and store.load(i).status == "finished" for i in ids)
    expected = Study.from_file(study["spec"]).cells()
    assert sorted(json.dumps(c, sort_keys=True) for c in cells) == sorted(c.key for c in expected)
    # the stored config is the cell's config (label noise and seed of the axes)
    for i in ids:
        rec = store.load(i)
        assert rec.config.label_noise == rec.meta["cell"]["label_noise"]
        assert list(rec.config.seeds) == rec.meta["cell"]["seeds"]


@pytest.mark.slow
def test_running_it_again_starts_nothing(study):
    before = {i: (study["runs"] / i / "meta.json").stat().st_mtime_ns for i in run_ids(study["runs"])}
    proc = lab_cli("study", "run", str(study["spec"]), "--workers", "2", "--no-progress", runs=study["runs"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 run(s) to do, 4 already finished" in proc.stdout
    assert "4 of 4 finished (4 from before), 0 failed" in proc.stdout
    assert "dashboard" not in proc.stdout                 # no cluster was started
    after = {i: (study["runs"] / i / "meta.json").stat().st_mtime_ns for i in run_ids(study["runs"])}
    assert after == before


@pytest.mark.slow
def test_show_lists_every_cell_and_the_g_table(study):
    proc = lab_cli("study", "show", "cli-tiny", runs=study["runs"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "study 'cli-tiny': 4 cells, 4 finished" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["cell", "label_noise"])
    cells = [line.split() for line in lines[header + 1:header + 5]]
    assert [c[0] for c in cells] == ["1", "2", "3", "4"]
    assert all("finished" in c for c in cells)
    assert set(run_ids(study["runs"])) == {next(w for w in c if w.startswith("20")) for c in cells}
    assert "g per condition" in out and "label_noise=0.0" in out and "label_noise=0.3" in out
    # the printed g of a condition is lab.analysis's g of its pooled runs (3 decimals)
    from lab.study import figures

    figs = figures(Study.from_file(study["spec"]), store=RunStore(study["runs"]))
    for _, row in figs["generalization"].iterrows():
        line = next(line for line in lines if line.strip().startswith(row["group"]) and " g " not in line)
        assert f"{row['g']:.3f}" in line.split(), (line, row["g"])
    assert "unseen NMI per layer" in out and "fc1" in out


def test_show_of_an_unknown_study_names_what_the_store_has(tmp_path):
    proc = lab_cli("study", "show", "nope", runs=tmp_path / "runs")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "no study 'nope' in the store" in proc.stderr and "studies run there: none" in proc.stderr


def test_a_bad_axis_value_exits_2_naming_axis_and_position_and_runs_nothing(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(SPEC.replace("label_noise: [0.0, 0.3]", "label_noise: [0.0, 1.5]"))
    runs = tmp_path / "runs"
    proc = lab_cli("study", "run", str(spec), "--workers", "2", runs=runs)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = proc.stderr.strip()
    assert "\n" not in message, message
    assert "axis 'label_noise' value #2 (1.5) is not valid" in message
    assert "label_noise must be a fraction between 0.0 and 1.0" in message
    assert proc.stdout == ""
    assert not runs.exists()


def test_a_mistyped_backbone_exits_2_naming_the_cell_and_the_closest_names_and_starts_nothing(tmp_path):
    spec = tmp_path / "typo.yaml"
    spec.write_text(SPEC.replace("  label_noise: [0.0, 0.3]\n",
                                 '  backbone: ["mlp:depth=3,width=16", "resnet1", "no_such_model_xyz"]\n'))
    runs = tmp_path / "runs"
    proc = lab_cli("study", "run", str(spec), "--workers", "2", runs=runs)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = proc.stderr.strip()
    assert "\n" not in message, message
    # the first bad cell (backbone is the first axis: cells 3 and 4 are its second value, seeds 0 and 1)
    assert "cell 3 (backbone=resnet1, seeds=[0]): unknown backbone 'resnet1'; closest: 'resnet18'" in message
    assert "3 more cell(s)" in message                      # cell 4 and the two 'no_such_model_xyz' cells
    assert proc.stdout == "" and "dashboard" not in proc.stderr
    assert not runs.exists()                                # no spec saved, no run, no cluster


def test_study_run_checks_names_before_the_runner_is_called(tmp_path, monkeypatch):
    import lab.study.runner

    called = []
    monkeypatch.setattr(lab.study.runner, "run_study", lambda *a, **k: called.append(a))
    study = Study("typo", {"dataset": "digit", "backbone": "mlp:depth=3,width=16"}, {"seeds": [[0], [1]]})
    with pytest.raises(ValueError) as info:
        study.run(store=RunStore(tmp_path / "runs"))
    assert str(info.value).startswith("study 'typo': cell 1 (seeds=[0]): unknown dataset 'digit'; closest: 'digits'")
    assert called == []
    good = Study("fine", {"dataset": "digits", "backbone": "mlp:depth=3,width=16"}, {"seeds": [[0], [1]]})
    good.run(store=RunStore(tmp_path / "runs"))
    assert len(called) == 1


def test_unpack_of_a_non_archive_exits_2_with_a_clear_message(tmp_path):
    junk = tmp_path / "notes.tar.gz"
    junk.write_text("these are notes, not runs\n")
    proc = lab_cli("runs", "unpack", str(junk), runs=tmp_path / "runs")
    assert proc.returncode == 2
    message = proc.stderr.strip()
    assert "\n" not in message
    assert f"{junk} is not a layerscope run archive" in message
    assert "python -m lab runs pack RUN_ID... -o FILE" in message
    assert "ReadError" not in message and "method" not in message      # no tarfile internals
    assert run_ids(tmp_path / "runs") == []
    missing = lab_cli("runs", "unpack", str(tmp_path / "missing.tar.gz"), runs=tmp_path / "runs")
    assert missing.returncode == 2 and "no archive at" in missing.stderr


@pytest.mark.slow
def test_pack_and_unpack_round_trip_into_another_store(study, tmp_path):
    ids = run_ids(study["runs"])[:2]
    archive = tmp_path / "two.tar.gz"
    proc = lab_cli("runs", "pack", *ids, "-o", str(archive), runs=study["runs"])
    assert proc.returncode == 0, proc.stderr
    assert f"packed 2 run(s) into {archive}" in proc.stdout
    other = tmp_path / "other"
    proc = lab_cli("runs", "unpack", str(archive), "--runs-dir", str(other), runs=study["runs"])
    assert proc.returncode == 0, proc.stderr
    assert f"imported 2 run(s) into {other}" in proc.stdout
    assert run_ids(other) == ids
    src, dst = RunStore(study["runs"]), RunStore(other)
    for run_id in ids:
        a, b = src.load(run_id), dst.load(run_id)
        pd.testing.assert_frame_equal(a.metrics, b.metrics, check_exact=True)
        pd.testing.assert_frame_equal(a.training, b.training, check_exact=True)
        assert a.meta == b.meta and a.config == b.config
    again = lab_cli("runs", "unpack", str(archive), "--runs-dir", str(other), runs=study["runs"])
    assert again.returncode == 0 and "imported 0 run(s)" in again.stdout and "already there" in again.stdout
    assert run_ids(other) == ids
    # and the study still reads from the other store: the two packed cells are finished there
    status = Study.from_file(study["spec"]).status(store=dst)
    assert sorted(status["status"]) == ["finished", "finished", "pending", "pending"]


@pytest.mark.slow
def test_runs_from_worker_archives_match_the_same_config_run_in_process(study, tmp_path):
    """The no-shared-filesystem path: a worker ran the cell in its own temporary store and sent it back
    as an archive. The same config run here, with the worker's thread counts (1 torch thread, 1 BLAS
    thread), gives bit-identical metrics and training numbers."""
    import torch
    from threadpoolctl import threadpool_limits

    import lab

    spec = Study.from_file(study["spec"])
    cell = spec.cells()[2]                                  # label_noise 0.3, seed 0: the noisy path too
    (worker_run,) = [r for r in spec.records(store=RunStore(study["runs"])) if r.meta["cell"] == cell.values]
    local = RunStore(tmp_path / "local")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            for ev in lab.run(cell.config, store=local):
                pass
    finally:
        torch.set_num_threads(threads)
    (run_id,) = local.ids()
    here = local.load(run_id)
    assert here.status == "finished"
    assert here.config == worker_run.config
    pd.testing.assert_frame_equal(here.metrics, worker_run.metrics, check_exact=True)
    keep = [c for c in here.training.columns if c not in TIMING]
    pd.testing.assert_frame_equal(here.training[keep], worker_run.training[keep], check_exact=True)
    here_summary, worker_summary = here.summary(), worker_run.summary()
    assert here_summary.pop("timings") and worker_summary.pop("timings")      # wall time, as TIMING above
    assert here_summary == worker_summary
