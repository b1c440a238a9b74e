"""Hostile data, checkpoints and config values, and faults while a run writes: every problem the engine
can see before training is reported up front (before RunStarted) in one line that names the class, the
number and the fix; operating-system faults are named as such; only genuine bugs say "bug", and then
the traceback is really kept where the message says."""
from __future__ import annotations

import errno
import json
import os
import pickle
import re
from pathlib import Path

import pytest
from hostile_helpers import assert_one_line, check_kept

import lab
from lab.config import RunConfig

SMALL = dict(img_size=16, backbone="mlp:depth=2,width=16", epochs=1, batch_size=64, device="cpu",
             projection="none", seeds=(0,), metrics=("nmi", "knn_accuracy", "nc1"))


def _events(config, store=False):
    return list(lab.run(config, store=store))


def _failed_up_front(events):
    """The run failed before it started: one RunFailed, no RunStarted; returns its message."""
    kinds = [e.kind for e in events]
    assert kinds[-1] == "run_failed", kinds
    assert "run_started" not in kinds, kinds
    message = events[-1].message
    assert "looks like a bug" not in message and "\n" not in message
    return message


# ---------------------------------------------------------------------------------- data

def test_folder_with_one_class(image_folder, one_thread):
    root = image_folder({"only": 6})
    message = _failed_up_front(_events(RunConfig(dataset=f"folder:{root}", **SMALL)))
    assert "has 1 class" in message and "at least 4" in message and "add classes" in message
    assert "<= -1" not in message and "n_unseen" not in message          # no impossible advice


def test_folder_with_three_classes(image_folder, one_thread):
    root = image_folder({"a": 6, "b": 6, "c": 6})
    message = _failed_up_front(_events(RunConfig(dataset=f"folder:{root}", n_unseen=2, **SMALL)))
    assert "has 3 classes" in message and "at least 4" in message


def test_n_unseen_too_large_gives_a_possible_range(one_thread):
    message = _failed_up_front(_events(RunConfig(dataset="digits", n_unseen=9, **SMALL)))
    assert "n_unseen=9" in message and "choose n_unseen between 2 and 8" in message


def test_unseen_class_with_one_image_is_named(image_folder, one_thread):
    root = image_folder({"a": 6, "b": 6, "c": 6, "lonely": 1})
    cfg = RunConfig(dataset=f"folder:{root}", unseen=("c", "lonely"), **SMALL)
    message = _failed_up_front(_events(cfg))
    assert "unseen class 'lonely' has 1 image" in message
    assert "needs at least 2 per class" in message and "add images" in message


def test_heldout_class_with_one_image_is_named(image_folder, one_thread):
    root = image_folder({"a": 3, "b": 6, "c": 6, "d": 6})            # 3 images: 1 held out at 0.2
    cfg = RunConfig(dataset=f"folder:{root}", unseen=("c", "d"), **SMALL)
    message = _failed_up_front(_events(cfg))
    assert "seen class 'a' has 1 held-out image" in message and "nc1" in message
    assert "raise heldout_fraction" in message


def test_seen_class_with_one_image_is_named(image_folder, one_thread):
    root = image_folder({"a": 1, "b": 6, "c": 6, "d": 6})
    cfg = RunConfig(dataset=f"folder:{root}", unseen=("c", "d"), **SMALL)
    message = _failed_up_front(_events(cfg))
    assert "seen class 'a' has 1 image" in message and "list it in unseen" in message


def test_linear_probe_needs_folds_per_class(one_thread):
    cfg = RunConfig(dataset="digits", n_unseen=2, unseen_per_class=3,
                    **{**SMALL, "metrics": ("nmi", "linear_probe_accuracy")})
    message = _failed_up_front(_events(cfg))
    assert re.search(r"unseen class '\d' has 3 images", message)
    assert "linear_probe_accuracy (5-fold cross-validation) needs at least 5" in message
    assert "raise unseen_per_class to at least 5" in message


def test_small_class_error_via_cli_keeps_no_record(hcli, image_folder, store, kept):
    root = image_folder({"a": 6, "b": 6, "c": 6, "lonely": 1})
    res = hcli("run", "--dataset", f"folder:{root}", "--unseen", "c", "lonely", "--backbone", "mlp:depth=2,width=16",
               "--img-size", "16", "--epochs", "1", "--no-progress", "--runs-dir", store.root)
    assert res.returncode == 2
    assert "unseen class 'lonely' has 1 image" in res.stderr
    assert_one_line(res.stderr)
    assert sorted(store.list()["run_id"]) == sorted(kept)               # no record of the refused run
    check_kept(store, kept)


def test_missing_dataset_folder(hcli, tmp_path):
    res = hcli("run", "--dataset", f"folder:{tmp_path / 'nope'}", "--backbone", "mlp", "--no-progress",
               "--runs-dir", tmp_path / "runs")
    # resolved before anything loads (lab.runs.check_names): the path and what to write instead
    assert res.returncode == 2 and f"{tmp_path / 'nope'} does not exist" in res.stderr and "folder:PATH" in res.stderr
    assert_one_line(res.stderr)


def test_corrupt_image_is_named(image_folder, one_thread):
    root = image_folder({"a": 6, "b": 6, "c": 6, "d": 6})
    (root / "b" / "3.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage")
    message = _failed_up_front(_events(RunConfig(dataset=f"folder:{root}", n_unseen=2, **SMALL)))
    assert "3.png" in message and "Remove or fix the file" in message


def test_relative_folder_is_stored_absolute(image_folder, store, kept, monkeypatch, one_thread):
    root = image_folder({"a": 10, "b": 10, "c": 10, "d": 10}, name="rel-imgs")
    monkeypatch.chdir(root.parent)
    cfg = RunConfig(dataset="folder:rel-imgs", n_unseen=2, **SMALL)
    assert cfg.dataset == "folder:rel-imgs"                            # the config itself keeps what was typed
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    events = _events(cfg, store=store)
    assert events[-1].kind == "run_finished", events[-1]
    stored = json.loads((store.path(events[-1].run_id) / "config.json").read_text())
    assert stored["dataset"] == f"folder:{root.resolve()}"
    monkeypatch.chdir("/")                                            # rebuildable from anywhere
    data = lab.runs.prepare_data(store.load(events[-1].run_id).config)
    assert len(data.unseen) == 20
    check_kept(store, kept)


def test_unsafe_cifar_pickle_is_refused(tmp_path, one_thread):
    folder = tmp_path / "cifar"
    folder.mkdir()

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    for name in ("data_batch_1", "test_batch", "batches.meta"):
        (folder / name).write_bytes(pickle.dumps({"data": Evil()}))
    message = _failed_up_front(_events(RunConfig(dataset=f"cifar10:{folder}", **SMALL)))
    assert not (tmp_path / "pwned").exists()
    assert "refus" in message.lower() or "unsafe" in message.lower() or "pickle" in message.lower()


# ---------------------------------------------------------------------------------- checkpoints

def test_missing_checkpoint_file(tmp_path, one_thread):
    cfg = RunConfig(dataset="digits", checkpoint=str(tmp_path / "w.safetensors"), **SMALL)
    message = _failed_up_front(_events(cfg))
    assert "does not exist" in message and "w.safetensors" in message


def test_checkpoint_that_is_a_malicious_pickle(tmp_path, one_thread):
    import torch

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    path = tmp_path / "evil.pt"
    torch.save({"w": Evil()}, path)
    message = _failed_up_front(_events(RunConfig(dataset="digits", checkpoint=str(path), **SMALL)))
    assert "refused to unpickle" in message and "safetensors" in message
    assert not (tmp_path / "pwned").exists()


def test_checkpoint_of_garbage_bytes(tmp_path, one_thread):
    path = tmp_path / "junk.safetensors"
    path.write_bytes(b"\x00\x01not a tensor file")
    message = _failed_up_front(_events(RunConfig(dataset="digits", checkpoint=str(path), **SMALL)))
    assert "junk.safetensors" in message


def test_checkpoint_of_an_unknown_run(store, kept, one_thread):
    cfg = RunConfig(dataset="digits", checkpoint="run:no-such-run", **SMALL)
    message = _failed_up_front(_events(cfg, store=store))
    assert "checkpoint 'run:no-such-run': no such run in the store" in message
    check_kept(store, kept)


def test_checkpoint_of_a_damaged_run(store, kept, make_run, one_thread):
    victim = make_run()
    (store.path(victim) / "config.json").unlink()
    cfg = RunConfig(dataset="digits", checkpoint=f"run:{victim}", **SMALL)
    message = _failed_up_front(_events(cfg, store=store))
    assert "is damaged: config.json is missing" in message
    check_kept(store, kept)


# ---------------------------------------------------------------------------------- config values

@pytest.mark.parametrize("args, expected", [
    (["--epochs", "-1"], "epochs must be an integer >= 0"),
    (["--metrics", "nmii"], "unknown metric 'nmii'"),
    (["--heldout-fraction", "1.5"], "heldout_fraction must be a number in (0, 1)"),
    (["--unseen-per-class", "1"], "unseen_per_class must be an integer >= 2"),
])
def test_bad_config_values(hcli, tmp_path, args, expected):
    res = hcli("run", "--dataset", "digits", "--backbone", "mlp", "--no-progress", *args,
               "--runs-dir", tmp_path / "runs")
    assert res.returncode == 2 and expected in res.stderr
    assert_one_line(res.stderr)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_config_file_that_is_a_folder(hcli, tmp_path):
    res = hcli("run", "--config", tmp_path, "--runs-dir", tmp_path / "runs")
    assert res.returncode == 2
    assert "cannot read --config" in res.stderr and "is a folder where a file is expected" in res.stderr
    assert_one_line(res.stderr)


def test_config_file_that_is_not_json(hcli, tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text("{dataset: digits")
    res = hcli("run", "--config", path, "--runs-dir", tmp_path / "runs")
    assert res.returncode == 2 and "is not valid JSON" in res.stderr
    assert_one_line(res.stderr)


# ---------------------------------------------------------------------------------- faults while writing

def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(args[0]))


def test_disk_full_during_a_run(store, kept, monkeypatch, one_thread):
    import lab.store

    monkeypatch.setattr(lab.store._tables, "_write_parquet", _no_space)        # the table write hits a full disk
    events = _events(RunConfig(dataset="digits", **SMALL), store=store)
    failed = events[-1]
    assert failed.kind == "run_failed"
    assert failed.message.startswith("no space left on the disk holding")
    assert str(store.root) in failed.message and "--runs-dir" in failed.message
    assert "looks like a bug" not in failed.message
    monkeypatch.undo()
    rec = store.load(failed.run_id)                                    # the run's record is still readable
    assert rec.status == "failed" and rec.config.dataset == "digits"
    check_kept(store, kept)


def test_read_only_file_system_when_creating_the_run(store, kept, monkeypatch, one_thread):
    import lab.store

    def read_only(path, obj):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(lab.store._files, "_write_json", read_only)
    events = _events(RunConfig(dataset="digits", **SMALL), store=store)
    message = _failed_up_front(events)
    assert "is on a read-only file system" in message and "--runs-dir" in message
    monkeypatch.undo()
    check_kept(store, kept)


def test_read_only_store_via_cli(hcli, store, kept, read_only):
    with read_only(store.root):
        res = hcli("run", "--dataset", "digits", "--backbone", "mlp:depth=2,width=16", "--img-size", "16",
                   "--epochs", "1", "--no-progress", "--runs-dir", store.root)
    assert res.returncode == 2
    assert str(store.root) in res.stderr and "--runs-dir" in res.stderr
    assert "looks like a bug" not in res.stderr
    assert_one_line(res.stderr)
    check_kept(store, kept)


def test_genuine_bug_keeps_its_traceback_in_the_run_folder(store, kept, monkeypatch, one_thread):
    from lab.runs import evaluation

    def broken(self, state, epoch):
        raise RuntimeError("an internal invariant broke")
        yield                                                          # a generator, like the real one

    monkeypatch.setattr(evaluation.Evaluator, "evaluate", broken)
    events = _events(RunConfig(dataset="digits", **SMALL), store=store)
    failed = events[-1]
    assert failed.kind == "run_failed" and "looks like a bug" in failed.message
    kept_at = Path(re.search(r"the traceback is kept in (\S+?)\. ", failed.message).group(1))
    assert kept_at == store.path(failed.run_id) / "traceback.txt"
    assert "an internal invariant broke" in kept_at.read_text() and "Traceback" in kept_at.read_text()
    check_kept(store, kept)


def test_genuine_bug_with_an_unwritable_run_folder_keeps_it_in_the_cache(cache_dir, tmp_path):
    from lab.errors import user_message

    blocker = tmp_path / "file"
    blocker.write_text("x")
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        message = user_message(exc, folder=blocker / "run")           # the run folder cannot be written
    kept_at = Path(re.search(r"the traceback is kept in (\S+?)\. ", message).group(1))
    assert kept_at.parent == cache_dir / "layerscope" and "RuntimeError: boom" in kept_at.read_text()


def test_app_reports_os_errors_without_traceback():
    from app.live.run_controls import readable_error

    message = readable_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/runs/r1/tables"))
    assert message.startswith("no space left on the disk holding /data/runs/r1/tables")
    assert "free some space" in message and "Traceback" not in message
    assert readable_error(ValueError("bad choice")) == "bad choice"


def test_bug_before_the_run_starts_keeps_the_folder_that_holds_its_traceback(store, kept, monkeypatch, capsys):
    from lab.__main__ import main
    from lab.runs import engine

    def broken(config):
        raise AttributeError("'NoneType' object has no attribute 'classes'")

    monkeypatch.setattr(engine, "prepare_data", broken)
    status = main(["run", "--dataset", "digits", "--backbone", "mlp", "--no-progress", "--runs-dir", str(store.root)])
    err = capsys.readouterr().err
    assert status == 1 and "looks like a bug" in err and "Traceback" not in err
    kept_at = Path(re.search(r"the traceback is kept in (\S+?)\. ", err).group(1))
    assert kept_at.is_file() and "AttributeError" in kept_at.read_text()    # not deleted with the run
    check_kept(store, kept)
