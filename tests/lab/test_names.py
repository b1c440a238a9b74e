"""Names resolved up front, loading nothing: lab.backbones.check_name, lab.data.check_name,
lab.runs.check_names and the UnknownNameError they raise (kind, value, closest names, fix)."""
from __future__ import annotations

import importlib
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lab import backbones, data
from lab.config import RunConfig
from lab.runs.names import check_names
from lab.errors import UnknownNameError

REPO = Path(__file__).resolve().parents[2]


def _raises(check, name, kind, **kwargs) -> UnknownNameError:
    with pytest.raises(UnknownNameError) as info:
        check(name, **kwargs)
    exc = info.value
    assert exc.kind == kind and exc.value == name
    text = str(exc)
    assert "\n" not in text and repr(name) in text and kind in text
    return exc


def _hf_folder(folder: Path, model_type: str = "resnet") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    return folder


# ------------------------------------------------------------------------------------------ the error


def test_unknown_name_error_is_one_line_with_kind_value_closest_and_fix():
    exc = UnknownNameError("backbone", "resnet1", ["resnet18", "resnet18d"], "use a timm model name")
    assert isinstance(exc, ValueError)
    assert (exc.kind, exc.value, exc.suggestions, exc.fix) == ("backbone", "resnet1", ["resnet18", "resnet18d"],
                                                             "use a timm model name")
    assert str(exc) == "unknown backbone 'resnet1'; closest: 'resnet18', 'resnet18d'; use a timm model name"
    why = UnknownNameError("dataset", "folder:/x", [], "check the path", reason="/x does not exist")
    assert str(why) == "dataset 'folder:/x': /x does not exist; check the path"
    back = pickle.loads(pickle.dumps(why))      # Dask ships it between processes
    assert (type(back), str(back), back.kind, back.value, back.suggestions) == (
        UnknownNameError, str(why), "dataset", "folder:/x", [])


# ------------------------------------------------------------------------------------------ backbones


@pytest.mark.parametrize("name", ["resnet18", "resnet18.a1_in1k", "vit_tiny_patch16_224", "mlp",
                                  "mlp:depth=3,width=16", "zoo:glyph_resnet18", "glyph_vit_tiny", "hf:vit",
                                  "hf:cvt", " resnet18 "])
def test_valid_backbone_names_pass(name):
    backbones.check_name(name)


@pytest.mark.parametrize("name, closest", [
    ("resnet1", "resnet18"),                     # timm
    ("ResNet18", "resnet18"),
    ("zoo:glyph_resnet", "zoo:glyph_resnet18"),  # zoo
    ("glyph_resnet", "glyph_resnet18"),
    ("hf:vitt", "hf:vit"),                       # hf families
    ("mpl", "mlp"),
])
def test_unknown_backbone_lists_the_closest_names_and_the_fix(name, closest):
    exc = _raises(backbones.check_name, name, "backbone")
    assert exc.suggestions[0] == closest and len(exc.suggestions) <= 5
    assert f"closest: {closest!r}" in str(exc)
    assert "timm model name" in exc.fix and "hf:FAMILY" in exc.fix and "mlp:depth=D,width=W" in exc.fix


def test_a_backbone_far_from_every_name_still_gets_the_fix():
    exc = _raises(backbones.check_name, "no_such_model_xyz", "backbone")
    assert str(exc).startswith("unknown backbone 'no_such_model_xyz'") and "zoo:NAME (glyph_resnet18" in str(exc)


@pytest.mark.parametrize("name, text", [
    ("mlp:depth=0", "must be a positive integer"),
    ("mlp:deep=3", "'depth=INT' and/or 'width=INT'"),
    ("mlp:depth=3,width=x", "must be a positive integer"),
])
def test_mlp_options_are_checked_by_the_loaders_parser(name, text):
    assert text in str(_raises(backbones.check_name, name, "backbone"))


@pytest.mark.parametrize("name", ["foo/bar", "nosuch:thing", "", "zoo:"])
def test_other_malformed_backbones_raise(name):
    with pytest.raises(UnknownNameError) as info:
        backbones.check_name(name)
    assert info.value.kind == "backbone"


def test_a_stored_run_is_a_checkpoint_not_a_backbone():
    exc = _raises(backbones.check_name, "run:abc123", "backbone")
    assert "checkpoint='run:abc123'" in str(exc)


def test_hf_directory(tmp_path):
    good = _hf_folder(tmp_path / "saved")
    backbones.check_name(f"hf:{good}")
    missing = tmp_path / "nope"
    exc = _raises(backbones.check_name, f"hf:{missing}", "backbone")
    assert str(missing) in str(exc) and "does not exist" in str(exc)
    (tmp_path / "empty").mkdir()
    assert "has no config.json" in str(_raises(backbones.check_name, f"hf:{tmp_path / 'empty'}", "backbone"))
    other = _hf_folder(tmp_path / "bert", model_type="bert")
    assert "model_type 'bert'" in str(_raises(backbones.check_name, f"hf:{other}", "backbone"))


def test_hf_hub_id_is_looked_up_in_the_local_cache_only(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    repo = cache / "models--someorg--tiny-resnet"
    _hf_folder(repo / "snapshots" / ("a" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backbones.check_name("hf:someorg/tiny-resnet")
    exc = _raises(backbones.check_name, "hf:someorg/missing", "backbone")
    assert str(cache) in str(exc) and "hf download someorg/missing" in exc.fix


def test_timm_local_dir_needs_its_config(tmp_path):
    backbones.check_name(f"local-dir:{_hf_folder(tmp_path / 'timm')}")
    exc = _raises(backbones.check_name, f"local-dir:{tmp_path / 'gone'}", "backbone")
    assert str(tmp_path / "gone" / "config.json") in str(exc)


def test_check_name_builds_no_model(monkeypatch):
    import timm
    import torch

    def refuse(*args, **kwargs):
        raise AssertionError("check_name must not build a model")

    monkeypatch.setattr(timm, "create_model", refuse)
    monkeypatch.setattr(torch.nn.Module, "__init__", refuse)
    for name in ("resnet18", "mlp:depth=2,width=8", "zoo:glyph_resnet18", "glyph_vit_tiny", "hf:vit"):
        backbones.check_name(name)


# ------------------------------------------------------------------------------------------ datasets


def _cifar(folder: Path, files) -> Path:
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_bytes(b"")
    return folder


def test_valid_dataset_names_pass(tmp_path):
    for name in ("glyphs", "glyphs:character", "digits", "Digits", f"folder:{tmp_path}"):
        data.check_name(name)
    c10 = _cifar(tmp_path / "c10", [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"])
    data.check_name(f"cifar10:{c10}")
    _cifar(tmp_path / "c100" / "cifar-100-python", ["train", "test", "meta"])
    data.check_name(f"cifar100:{tmp_path / 'c100'}")


@pytest.mark.parametrize("name, closest", [
    ("glyph", "glyphs"), ("digit", "digits"), ("glyphs:characters", "glyphs:character"), ("digits:x", "digits"),
    ("foldr:/data/x", "folder:/data/x"), ("cifar:/data/x", "cifar10:/data/x"),
])
def test_unknown_dataset_lists_the_closest_names(name, closest):
    exc = _raises(data.check_name, name, "dataset")
    assert exc.suggestions[0] == closest and "'folder:PATH'" in exc.fix


def test_dataset_paths_are_named_when_missing(tmp_path):
    gone = tmp_path / "gone"
    for kind in ("folder", "cifar10", "cifar100"):
        exc = _raises(data.check_name, f"{kind}:{gone}", "dataset")
        assert str(gone) in str(exc) and "does not exist" in str(exc)
    afile = tmp_path / "a.txt"
    afile.write_text("x")
    assert "is not a folder" in str(_raises(data.check_name, f"folder:{afile}", "dataset"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "data_batch_1" in str(_raises(data.check_name, f"cifar10:{empty}", "dataset"))
    assert "folder:PATH" in _raises(data.check_name, "", "dataset").fix


def test_config_and_data_names_import_no_torch():
    code = ("import sys, lab.config, lab.data; lab.data.check_name('glyphs'); lab.data.SPECS; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False", out.stderr


# ------------------------------------------------------------------------------------------ configs


def test_check_names_passes_a_good_config_and_names_the_first_bad_field(tiny_config, store, tmp_path):
    check_names(tiny_config(), store=store)
    for field, value in (("dataset", "digitz"), ("backbone", "mlp:depth=0")):
        with pytest.raises(UnknownNameError) as info:
            check_names(tiny_config(**{field: value}), store=store)
        assert (info.value.kind, info.value.value) == (field, value)
    weights = tmp_path / "w.safetensors"
    with pytest.raises(UnknownNameError) as info:
        check_names(tiny_config(checkpoint=str(weights)), store=store)
    assert info.value.kind == "checkpoint" and str(weights) in str(info.value)
    weights.write_bytes(b"")
    check_names(tiny_config(checkpoint=str(weights)), store=store)
    close = tmp_path / "w2.safetensors"
    with pytest.raises(UnknownNameError, match="closest") as info:
        check_names(tiny_config(checkpoint=str(close)), store=store)
    assert info.value.suggestions == [str(weights)]


def test_check_names_looks_up_run_checkpoints_in_the_store(tiny_config, store, make_run, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path / "default-store"))
    run_id = make_run()
    with pytest.raises(UnknownNameError) as info:
        check_names(tiny_config(checkpoint=f"run:{run_id}"), store=store)    # the run saved no weights
    assert info.value.kind == "checkpoint" and "no weights for seed 0" in str(info.value)
    (store.path(run_id) / "weights").mkdir()
    (store.path(run_id) / "weights" / "seed0.safetensors").write_bytes(b"")
    check_names(tiny_config(checkpoint=f"run:{run_id}"), store=store)
    check_names(tiny_config(checkpoint=f"run:{run_id}/0"), store=store)
    bad = f"run:{run_id}x"
    with pytest.raises(UnknownNameError) as info:
        check_names(tiny_config(checkpoint=bad), store=store)
    assert (info.value.kind, info.value.value) == ("checkpoint", bad)
    assert info.value.suggestions == [f"run:{run_id}"] and str(store.root.resolve()) in str(info.value)


# ------------------------------------------------------------------------------------------ shipped names


def _shipped_configs():
    out = []
    for path in sorted((REPO / "studies").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        base, axes = spec.get("base", {}), spec.get("axes", {})
        for backbone in axes.get("backbone", [base.get("backbone", "resnet18")]):
            # a mapping sets several fields at once (studies/tunnel.yaml: backbone with img_size and epochs)
            variant = backbone if isinstance(backbone, dict) else {"backbone": backbone}
            backbone = variant.get("backbone", base.get("backbone", "resnet18"))
            label = ",".join(f"{k}={v}" for k, v in variant.items())
            for dataset in axes.get("dataset", [variant.get("dataset", base.get("dataset", "glyphs"))]):
                out.append(pytest.param(dataset, backbone, id=f"{path.stem}-{label}-{dataset}"))
    presets = importlib.import_module("app.choose.presets")
    for title, preset in presets.PRESETS.items():
        cfg = preset["config"]
        out.append(pytest.param(cfg["dataset"], cfg["backbone"], id=f"preset-{title}"))
    out += [pytest.param("glyphs", name, id=f"seed-{name}") for name in presets.SEED_ARCHITECTURES]
    return out


@pytest.mark.parametrize("dataset, backbone", _shipped_configs())
def test_shipped_studies_and_presets_name_only_loadable_things(dataset, backbone):
    data.check_name(dataset)
    backbones.check_name(backbone)
