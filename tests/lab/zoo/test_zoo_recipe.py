"""The zoo recipe's run lifecycle: checkpoints, resuming, refusing another recipe's checkpoint, the
render cache and its key, missing fonts. Tiny runs: two faces x 6 characters, ResNet-18, one thread."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from lab.__main__ import main as cli
from lab.data import glyphs
from lab.zoo import _resume, _source, _training, recipe

QUIET = dict(log=lambda m: None)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A fresh render cache for each test (never the user's)."""
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def faces(installed_face):
    face = installed_face(recipe.SOURCE_FACES, "fonts-sawarabi-mincho", "no source font of SOURCE_FACES")
    return face, dataclasses.replace(face, name=face.name + " twin")


@pytest.fixture(scope="module")
def tiny(faces):
    """12 rendered images: 2 faces x 6 characters."""
    return recipe.render_source(faces, n_chars=6, seed=3, candidates=recipe.source_characters()[:30], **QUIET)


def _run(out, tiny, faces, *, log=QUIET["log"], **options):
    kw = dict(n_chars=6, epochs=2, batch_size=4, seed=3, threads=1, faces=faces, data=tiny)
    return recipe.pretrain("resnet18", out, log=log, **{**kw, **options})


def _stop_after(epoch: int, lines: list):
    """A log that records lines and presses Ctrl-C when epoch ``epoch`` has been reported."""
    def log(msg):
        lines.append(msg)
        if msg.startswith(f"epoch {epoch}/"):
            raise KeyboardInterrupt
    return log


def _without_times(history):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


# ------------------------------------------------------------------------------------------ resuming


def test_an_interrupted_run_resumes_to_the_weights_of_an_uninterrupted_one(tiny, faces, tmp_path):
    whole = _run(tmp_path / "whole" / "m", tiny, faces)
    lines = []
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "cut" / "m", tiny, faces, log=_stop_after(1, lines))
    partial = tmp_path / "cut" / "m.partial"
    assert "interrupted after epoch 1/2, checkpointed in" in lines[-1] and str(partial) in lines[-1]
    assert "Resume with the same command: `python -m lab pretrain --arch resnet18" in lines[-1]
    assert [p.name for p in partial.iterdir()] == ["epoch-0001"]
    assert {p.name for p in (partial / "epoch-0001").iterdir()} == {"state.json", "state.safetensors"}
    assert not (tmp_path / "cut" / "m.safetensors").exists()

    lines.clear()
    resumed = _run(tmp_path / "cut" / "m", tiny, faces, log=lines.append)
    assert any(line.startswith(f"resuming m after epoch 1/2 from {partial}") for line in lines)
    assert not any(line.startswith("epoch 1/") for line in lines)             # epoch 1 is not trained again
    a, b = load_file(tmp_path / "whole" / "m.safetensors"), load_file(tmp_path / "cut" / "m.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _without_times(resumed["history"]) == _without_times(whole["history"])
    assert resumed["source_accuracies"] == whole["source_accuracies"] and not partial.exists()


def test_a_run_stopped_after_its_last_checkpoint_only_writes_its_files(tiny, faces, tmp_path):
    lines = []
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "m", tiny, faces, epochs=1, log=_stop_after(1, lines))
    assert "interrupted after epoch 1/1" in lines[-1]
    card = _run(tmp_path / "m", tiny, faces, epochs=1)
    assert len(card["history"]) == 1 and (tmp_path / "m.safetensors").is_file()


def test_an_interrupt_before_the_first_epoch_says_nothing_is_resumed(tiny, faces, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_training, "train_epoch", interrupted)
    lines = []
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "m", tiny, faces, log=lines.append)
    assert lines[-1].startswith("interrupted before the first epoch ended: nothing to resume.")


# ------------------------------------------------------------------------------------------ another recipe


def test_a_checkpoint_of_another_recipe_is_refused_naming_what_differs(tiny, faces, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "m", tiny, faces, log=_stop_after(1, []))
    with pytest.raises(ValueError) as err:
        _run(tmp_path / "m", tiny, faces, epochs=3, lr=1e-3, augment=0.5)
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path / 'm.partial'} holds a checkpoint (epoch 1) of another recipe: ")
    assert "epochs: 2 in the checkpoint, 3 now" in msg and "lr: 0.002 in the checkpoint, 0.001 now" in msg
    assert "augment.strength: 1.0 in the checkpoint, 0.5 now" in msg and "seed:" not in msg
    assert "Resume it with its own command (`python -m lab pretrain --arch resnet18" in msg and "--epochs 2 " in msg
    assert msg.endswith(f"or start over with --restart (deletes {tmp_path / 'm.partial'}).")
    with pytest.raises(ValueError, match=r"another recipe: fonts: \[.*twin'\] in the checkpoint, \[.*\] now"):
        _run(tmp_path / "m", tiny, faces[:1], data=None)                    # refused before any rendering
    other = recipe.render_source(faces, n_chars=6, seed=3, candidates=recipe.source_characters()[30:60],
                                   **QUIET)
    with pytest.raises(ValueError, match=r"another recipe: data.chars_sha256: '\w+' in the checkpoint, '\w+' now"):
        _run(tmp_path / "m", other, faces)
    card = _run(tmp_path / "m", tiny, faces, epochs=3, restart=True)        # --restart: starts over
    assert [h["epoch"] for h in card["history"]] == [1, 2, 3]


def test_the_command_line_resumes_and_refuses_with_one_line(tiny, faces, tmp_path, monkeypatch, capsys):
    real, calls = _training.train_epoch, []

    def interrupted_in_epoch_2(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(_training, "train_epoch", interrupted_in_epoch_2)
    real_pretrain = recipe.pretrain
    monkeypatch.setattr(recipe, "pretrain", lambda *a, **k: real_pretrain(*a, faces=faces, data=tiny, **k))
    args = ["pretrain", "--arch", "resnet18", "--out", str(tmp_path / "m"), "--epochs", "2", "--chars", "6",
            "--batch-size", "4", "--seed", "3", "--threads", "1"]
    assert cli(args) == 130
    out, err = capsys.readouterr()
    assert "interrupted after epoch 1/2" in out and "Resume with the same command" in out and "cancelled" in err
    assert cli(args[:-4] + ["--seed", "4", "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert "holds a checkpoint (epoch 1) of another recipe: seed: 3 in the checkpoint, 4 now" in err
    assert "--restart" in err and len(err.strip().splitlines()) == 1
    assert cli(args) == 0
    assert "resuming m after epoch 1/2" in capsys.readouterr().out
    assert json.loads((tmp_path / "m.json").read_text())["epochs"] == 2


# ------------------------------------------------------------------------------------------ checkpoint files


def test_checkpoint_state_round_trips_without_pickle(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5 ** step)
    for _ in range(2):
        model(torch.randn(5, 3)).sum().backward()
        opt.step()
        sched.step()
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / ".tmp-epoch-0002-99").mkdir()                  # a write that was cut short
    _resume.save(tmp_path / "p", 1, recipe={"a": 1}, model=model, optimizer=opt, scheduler=sched, info={})
    _resume.save(tmp_path / "p", 2, recipe={"a": 1}, model=model, optimizer=opt, scheduler=sched,
                     info={"history": [1.5]})
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["epoch-0002"]   # older epochs and tmp go
    ckpt = _resume.load_latest(tmp_path / "p")
    assert ckpt["epoch"] == 2 and ckpt["recipe"] == {"a": 1} and ckpt["info"] == {"history": [1.5]}
    for k, v in model.state_dict().items():
        assert torch.equal(ckpt["model"][k], v)
    saved, now = ckpt["optimizer"], opt.state_dict()
    assert saved["state"].keys() == now["state"].keys()
    assert all(torch.equal(saved["state"][i][n], now["state"][i][n]) for i in now["state"] for n in now["state"][i])
    assert ckpt["scheduler"] == sched.state_dict() | {"lr_lambdas": [None]}
    assert torch.equal(ckpt["torch_rng"], torch.get_rng_state())
    json.loads((tmp_path / "p" / "epoch-0002" / "state.json").read_text())          # plain JSON
    (tmp_path / "p" / "epoch-0002" / "state.safetensors").write_bytes(b"damaged")
    with pytest.raises(ValueError, match=r"the checkpoint .*epoch-0002 cannot be read .*start over with --restart"):
        _resume.load_latest(tmp_path / "p")
    assert _resume.load_latest(tmp_path / "nothing") is None


def test_recipe_differences_name_nested_fields():
    assert _resume.recipe_differences({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}, "d": 4}) == [
        "b.c: 2 in the checkpoint, 3 now", "d: '(absent)' in the checkpoint, 4 now"]


# ------------------------------------------------------------------------------------------ render cache


def test_the_render_key_changes_with_every_data_parameter(faces):
    base = dict(n_chars=6, seed=3, pool="common", val_fraction=0.1)
    key = _source.render_key(faces[:1], **base)
    assert _source.render_key(faces[:1], **base) == key and len(key) == 24
    for change in (dict(n_chars=7), dict(n_chars=None), dict(seed=4), dict(pool="wide"), dict(val_fraction=0.2),
                   dict(stroke_jitter=True)):
        assert _source.render_key(faces[:1], **{**base, **change}) != key, change
    assert _source.render_key(faces, **base) != key                        # one more font
    renamed = (dataclasses.replace(faces[0], name="another name"),)
    assert _source.render_key(renamed, **base) != key


def test_load_source_renders_once_and_then_reads_the_cache(faces, cache):
    lines = []
    first = _source.load_source(faces[:1], n_chars=4, seed=3, pool="common", log=lines.append)
    assert any(line.startswith("rendered ") for line in lines)
    entry = cache / "zoo-source" / f"{first.key}.npz"
    assert entry.is_file() and entry.with_suffix(".json").is_file()
    lines.clear()
    again = _source.load_source(faces[:1], n_chars=4, seed=3, pool="common", log=lines.append)
    assert not any(line.startswith("rendered ") for line in lines) and "from the cache" in lines[0]
    assert np.array_equal(again.images, first.images) and again.chars == first.chars
    assert np.array_equal(again.val, first.val) and again.fonts == first.fonts
    assert again.render_seconds == pytest.approx(first.render_seconds, abs=0.1)
    other = _source.load_source(faces[:1], n_chars=4, seed=4, pool="common", **QUIET)
    assert other.key != first.key and not np.array_equal(other.images, first.images)
    entry.write_bytes(b"damaged")
    lines.clear()
    fixed = _source.load_source(faces[:1], n_chars=4, seed=3, pool="common", log=lines.append)
    assert "unreadable" in lines[0] and np.array_equal(fixed.images, first.images)


def test_the_wide_pool_holds_thousands_of_characters_none_of_glyphs():
    common, wide = recipe.source_characters(), recipe.source_characters(pool="wide")
    target = set(json.loads(glyphs.DEFAULT_PATH.with_suffix(".json").read_text(encoding="utf-8"))["characters"])
    assert set(common) < set(wide) and len(wide) > 5000 and not set(wide) & target
    with pytest.raises(ValueError, match="unknown character pool 'huge'; expected one of common, wide"):
        recipe.source_characters(pool="huge")


# ------------------------------------------------------------------------------------------ bad input


def test_a_missing_font_names_its_package_and_the_install_line(tmp_path):
    ghost = glyphs.Face("Ghost Gothic", "Ghost Gothic", "fonts-ghost-gothic", "/nonexistent/ghost.ttf")
    with pytest.raises(ValueError, match=r"source fonts not found: Ghost Gothic\. Install them with "
                                         r"`apt-get install fonts-ghost-gothic` and run the recipe again\."):
        recipe.pretrain("resnet18", tmp_path / "m", faces=(ghost,), **QUIET)
    assert not (tmp_path / "m.partial").exists()


# ------------------------------------------------------------------------------------------ architectures


@pytest.mark.parametrize("arch", sorted(recipe.ARCHITECTURES))
def test_every_architecture_trains_and_loads_from_the_zoo_by_name(arch, tiny, faces, tmp_path, monkeypatch):
    from lab.backbones import load
    from lab.features import extract

    card = recipe.pretrain(arch, tmp_path / "zoo" / "m", n_chars=6, epochs=1, batch_size=4, seed=3, threads=1,
                             faces=faces, data=tiny, **QUIET)
    # trained on 2 fonts + 6 characters; shipped with the 2 font rows of the head only
    assert card["num_classes"] == 2 and card["architecture"] == recipe.ARCHITECTURES[arch][0]
    shared = card["disjoint_from_targets"]
    assert shared["shared_packages"] == shared["shared_families"] == [] and shared["shared_characters"] == 0
    monkeypatch.setenv("LAB_ZOO_DIR", str(tmp_path / "zoo"))
    bb = load("zoo:m", device="cpu")
    feats = extract(bb, torch.from_numpy(tiny.images[:3]).unsqueeze(1))
    assert len(bb.layers) >= 3 and all(f.shape[0] == 3 and torch.isfinite(f).all() for f in feats.values())
