"""Hostile inputs to the run store and the commands that read it: damaged runs, a store path that is
a file, read-only stores, deleting running or damaged runs, odd run ids."""
from __future__ import annotations

import json
import os
import warnings

import pytest
from hostile_helpers import assert_one_line, check_kept

from lab.store import DamagedRunError, RunNotFoundError


def _truncate(path, keep: int = 20) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep])


def _metric_part(store, run_id, epoch):
    parts = sorted((store.path(run_id) / "tables" / "metrics").glob(f"s0-e{epoch:04d}-*.parquet"))
    assert parts, "the hand-written run has a metrics part per epoch"
    return parts[0]


# ---------------------------------------------------------------------------------- damaged config / meta

def test_missing_config_is_listed_as_damaged_not_defaults(hcli, store, kept, make_run):
    victim = make_run(name="victim")
    (store.path(victim) / "config.json").unlink()
    res = hcli("runs", "list", "--runs-dir", store.root)
    assert res.returncode == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if line.startswith(victim))
    assert "damaged" in row and "config.json is missing" in row
    assert "glyphs" not in row and "resnet18" not in row             # never a default config
    check_kept(store, kept)


def test_missing_config_load_raises_with_the_fix(store, kept, make_run):
    victim = make_run()
    (store.path(victim) / "config.json").unlink()
    with pytest.raises(DamagedRunError, match=r"config.json is missing.*restore the file.*runs delete"):
        store.load(victim)
    rec = store.load(victim, damaged_ok=True)
    assert rec.config is None and rec.status == "damaged" and rec.config_dict == {}
    assert len(rec.metrics) == 6                                        # its tables still read
    check_kept(store, kept)


def test_show_of_run_without_config(hcli, store, kept, make_run):
    victim = make_run(name="victim")
    (store.path(victim) / "config.json").unlink()
    res = hcli("runs", "show", victim, "--runs-dir", store.root)
    assert res.returncode == 0, res.stderr
    assert "status: damaged" in res.stdout and "config.json is missing" in res.stdout
    assert "config: unknown" in res.stdout and "resnet18" not in res.stdout
    assert "runs delete" in res.stdout
    assert_one_line(res.stderr)
    check_kept(store, kept)


def test_meta_not_json_is_listed_as_damaged(hcli, store, kept, make_run):
    victim = make_run()
    (store.path(victim) / "meta.json").write_text('{"status": "finis')
    res = hcli("runs", "list", "--runs-dir", store.root)
    assert res.returncode == 0
    row = next(line for line in res.stdout.splitlines() if line.startswith(victim))
    assert "damaged" in row and "meta.json is not valid JSON" in row
    check_kept(store, kept)


def test_meta_holding_a_list_is_damaged(store, kept, make_run):
    victim = make_run()
    (store.path(victim) / "meta.json").write_text("[1, 2]")
    with pytest.raises(DamagedRunError, match="meta.json holds a JSON list, not an object"):
        store.load(victim)
    listed = store.list().set_index("run_id")
    assert listed.loc[victim, "status"] == "damaged"
    check_kept(store, kept)


def test_missing_meta_with_config_is_damaged(store, kept, make_run):
    victim = make_run()
    (store.path(victim) / "meta.json").unlink()
    listed = store.list().set_index("run_id")
    assert listed.loc[victim, "status"] == "damaged" and "meta.json is missing" in listed.loc[victim, "damage"]
    check_kept(store, kept)


def test_export_of_a_damaged_run_refuses_before_writing(hcli, store, kept, make_run, tmp_path):
    victim = make_run()
    (store.path(victim) / "config.json").write_text("not json")
    out = tmp_path / "x.ipynb"
    res = hcli("export", victim, "-o", out, "--runs-dir", store.root)
    assert res.returncode == 2
    assert "is damaged: config.json is not valid JSON" in res.stderr and "runs delete" in res.stderr
    assert_one_line(res.stderr)
    assert not out.exists()
    check_kept(store, kept)


# ---------------------------------------------------------------------------------- damaged table parts

def test_truncated_metrics_part_skips_only_that_epoch(store, kept, make_run):
    victim = make_run(epochs=2)
    part = _metric_part(store, victim, 1)
    _truncate(part)
    rec = store.load(victim)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = rec.metrics
    assert sorted(set(m["epoch"])) == [0, 2]                         # the intact epochs load
    text = " ".join(str(w.message) for w in caught)
    assert part.name in text and "skipping the damaged table part" in text and "delete that file" in text
    assert rec.damaged_parts == [part.relative_to(rec.path).as_posix()]
    assert rec.damage.startswith("partially damaged")
    check_kept(store, kept)


def test_truncated_part_flagged_by_runs_list(hcli, store, kept, make_run):
    victim = make_run(epochs=2)
    _truncate(_metric_part(store, victim, 1))
    res = hcli("runs", "list", "--runs-dir", store.root)
    assert res.returncode == 0
    row = next(line for line in res.stdout.splitlines() if line.startswith(victim))
    assert "finished" in row and "partially damaged" in row
    check_kept(store, kept)


def test_truncated_part_flagged_by_runs_show(hcli, store, kept, make_run):
    victim = make_run(epochs=2)
    part = _metric_part(store, victim, 2)
    _truncate(part)
    res = hcli("runs", "show", victim, "--runs-dir", store.root)
    assert res.returncode == 0, res.stderr
    assert "partially damaged" in res.stdout and part.name in res.stdout
    assert "best layer at epoch 1" in res.stdout                     # the rest of the run is shown
    for line in res.stderr.strip().splitlines():                     # one clean line per warning
        assert line.startswith("warning: ") and "UserWarning" not in line
    check_kept(store, kept)


def test_garbage_training_part_keeps_other_rows(store, make_run):
    victim = make_run(epochs=1, training=lambda seed, epoch: {"heldout_accuracy": 0.5 + 0.1 * epoch})
    parts = sorted((store.path(victim) / "tables" / "training").glob("*.parquet"))
    parts[0].write_bytes(b"PAR1" + b"\0" * 40 + b"PAR1")              # right magic, garbage inside
    with pytest.warns(UserWarning, match=parts[0].name):
        training = store.load(victim).training
    assert list(training["epoch"]) == [1]


# ---------------------------------------------------------------------------------- cancelled-run summary

def test_summary_of_an_unfinished_epoch_is_the_last_complete_one(hcli, store, make_run):
    layers = [f"l{i}" for i in range(9)]
    run_id = make_run(layers=layers, epochs=1, status=None, nmi=lambda s, e, i: 0.1 + 0.01 * i)
    rec = store.load(run_id)
    from lab.store import RunWriter

    writer = RunWriter(store, run_id, rec.path, json.loads((rec.path / "meta.json").read_text()))
    writer.append_metrics([{"seed": 0, "epoch": 2, "layer": f"l{i}", "split": "unseen", "metric": "nmi",
                            "value": 0.9} for i in range(3)])        # 3 of 9 layers of epoch 2
    writer.finish("cancelled", message="cancelled by the user")
    summary = store.load(run_id).summary()
    assert summary["epoch"] == 1 and summary["best_layer"] == "l8"
    res = hcli("runs", "show", run_id, "--runs-dir", store.root)
    assert "best layer at epoch 1" in res.stdout and "layers at epoch 1" in res.stdout
    assert "at epoch 2" not in res.stdout


# ---------------------------------------------------------------------------------- store path problems

def test_runs_list_on_a_file(hcli, tmp_path):
    target = tmp_path / "runs.txt"
    target.write_text("not a store")
    res = hcli("runs", "list", "--runs-dir", target)
    assert res.returncode == 1
    assert f"{target} is a file, not a folder" in res.stderr and "--runs-dir" in res.stderr
    assert "no runs" not in res.stdout
    assert_one_line(res.stderr)
    assert target.read_text() == "not a store"


def test_runs_show_on_a_file(hcli, tmp_path):
    target = tmp_path / "runs.txt"
    target.write_text("x")
    res = hcli("runs", "show", "some-run", "--runs-dir", target)
    assert res.returncode == 1 and "is a file, not a folder" in res.stderr
    assert_one_line(res.stderr)


def test_runs_list_under_a_file(hcli, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    res = hcli("runs", "list", "--runs-dir", blocker / "runs")
    assert res.returncode == 1
    assert f"{blocker} is a file, not a folder" in res.stderr and "--runs-dir" in res.stderr
    assert_one_line(res.stderr)


def test_run_into_a_store_that_is_a_file(hcli, tmp_path):
    target = tmp_path / "runs"
    target.write_text("x")
    res = hcli("run", "--dataset", "digits", "--backbone", "mlp:depth=2,width=16", "--epochs", "1",
               "--no-progress", "--runs-dir", target)
    assert res.returncode == 2
    assert f"{target} is a file, not a folder" in res.stderr and "--runs-dir" in res.stderr
    assert "looks like a bug" not in res.stderr
    assert_one_line(res.stderr)


def test_run_into_a_store_below_a_file(hcli, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    res = hcli("run", "--dataset", "digits", "--backbone", "mlp:depth=2,width=16", "--epochs", "1",
               "--no-progress", "--runs-dir", blocker / "runs")
    assert res.returncode == 2
    assert f"{blocker} is a file, not a folder" in res.stderr and "looks like a bug" not in res.stderr
    assert_one_line(res.stderr)


# ---------------------------------------------------------------------------------- delete

def test_delete_on_a_read_only_store_loses_nothing(hcli, store, kept, read_only):
    with read_only(store.root):
        res = hcli("runs", "delete", kept[0], "--runs-dir", store.root)
    assert res.returncode == 1
    assert str(store.root) in res.stderr and ("permission" in res.stderr or "read-only" in res.stderr)
    assert "Traceback" not in res.stderr
    assert_one_line(res.stderr)
    check_kept(store, kept)                                            # the run is whole


def test_delete_refused_by_the_os_names_path_and_fix(store, kept, monkeypatch, capsys):
    import errno

    from lab.__main__ import main

    def refuse(src, dst):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(src))

    monkeypatch.setattr(os, "rename", refuse)
    assert main(["runs", "delete", kept[0], "--runs-dir", str(store.root)]) == 1
    err = capsys.readouterr().err
    assert "permission denied on" in err and kept[0] in err and "--runs-dir" in err
    monkeypatch.undo()
    check_kept(store, kept)


def test_delete_of_a_running_run_names_the_flag(hcli, store, kept):
    w = store.create({"dataset": "digits", "backbone": "mlp"})         # this process is alive: running
    res = hcli("runs", "delete", w.run_id, "--runs-dir", store.root)
    assert res.returncode == 2
    assert "--force" in res.stderr and "force=True" not in res.stderr.replace("with force=True (", "")
    assert store.exists(w.run_id)
    check_kept(store, kept)


def test_delete_of_a_damaged_run_works_and_spares_the_others(hcli, store, kept, make_run):
    victim = make_run()
    (store.path(victim) / "config.json").unlink()
    res = hcli("runs", "delete", victim, "--runs-dir", store.root)
    assert res.returncode == 0, res.stderr
    assert not store.path(victim).exists()
    check_kept(store, kept)


def test_delete_unknown_run(hcli, store, kept):
    res = hcli("runs", "delete", "no-such-run", "--runs-dir", store.root)
    assert res.returncode == 2 and "no run 'no-such-run'" in res.stderr and "runs list" in res.stderr
    check_kept(store, kept)


def test_run_id_escaping_the_store(hcli, store, kept):
    res = hcli("runs", "delete", "../" + kept[0], "--runs-dir", store.root)
    assert res.returncode == 2 and "is not valid" in res.stderr and "runs list" in res.stderr
    check_kept(store, kept)


def test_unknown_run_is_not_found_not_damaged(store):
    with pytest.raises(RunNotFoundError, match="runs list"):
        store.load("nothing-here")


# ---------------------------------------------------------------------------------- warnings

def test_runs_show_warning_is_one_clean_line(hcli, store, kept, make_run):
    victim = make_run()
    cfg_path = store.path(victim) / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["colour"] = "blue"                                             # a field this version does not know
    cfg_path.write_text(json.dumps(cfg))
    res = hcli("runs", "show", victim, "--runs-dir", store.root)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines and all(line.startswith("warning: ") for line in lines), res.stderr
    assert "UserWarning" not in res.stderr and "warnings.warn" not in res.stderr and ".py:" not in res.stderr
    assert "colour" in res.stderr
    with pytest.warns(UserWarning, match="colour"):                    # listing reads the odd run too
        check_kept(store, kept)
