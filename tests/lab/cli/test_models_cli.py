"""``python -m lab models`` lists what loads here without a network: the zoo and the ImageNet backbone
always; timm and Hugging Face weights from a hub cache laid out as huggingface_hub lays it out
(``models--ORG--NAME/refs/main`` + ``snapshots/<hash>/config.json`` + weights), timm files in torch
hub's cache, with sizes on disk. An empty cache says so and how to add models; a cache variable that
points at no folder is named in one line; the app's picker lists the offline models first, marked."""
from __future__ import annotations

import json

import pytest

from lab.backbones import check_name, offline_models
from lab.cli.entry import main

TIMM_BYTES, CVT_BYTES, TORCH_BYTES = 1234, 4321, 777


def _repo(root, org: str, name: str, config, files: dict[str, int], revision: str = "0123abcd", main=True):
    """A hub-cache repo folder: refs/main -> snapshots/<revision>/ with config.json and files of given sizes."""
    repo = root / f"models--{org}--{name}"
    snap = repo / "snapshots" / revision
    snap.mkdir(parents=True)
    if main:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(revision)
    (snap / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    for file, size in files.items():
        (snap / file).write_bytes(b"\0" * size)
    return snap


@pytest.fixture
def empty_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    (tmp_path / "hub").mkdir()
    return tmp_path


@pytest.fixture
def filled_caches(empty_caches):
    hub = empty_caches / "hub"
    _repo(hub, "timm", "resnet18.a1_in1k", {"architecture": "resnet18", "num_classes": 1000},
          {"model.safetensors": TIMM_BYTES})
    old = _repo(hub, "microsoft", "cvt-13", {"model_type": "cvt"}, {"model.safetensors": 99}, revision="old",
                main=False)
    _repo(hub, "microsoft", "cvt-13", {"model_type": "cvt"}, {"model.safetensors": CVT_BYTES}, main=False)
    old.parent.parent.joinpath("refs").mkdir()
    old.parent.parent.joinpath("refs", "main").write_text("0123abcd")     # main is the new one, not "old"
    _repo(hub, "google-bert", "bert-base-uncased", {"model_type": "bert"}, {"model.safetensors": 10})
    _repo(hub, "someone", "no-weights", {"model_type": "vit"}, {"README.md": 5})
    _repo(hub, "someone", "broken", "{not json", {"model.safetensors": 5})
    checkpoints = empty_caches / "torch" / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "resnet18-f37072fd.pth").write_bytes(b"\0" * TORCH_BYTES)    # timm's resnet18.tv_in1k URL
    (checkpoints / "mystery.pth").write_bytes(b"\0" * 3)
    return empty_caches


def _rows(capsys, *args) -> dict[str, dict]:
    assert main(["models", "--json", *args]) == 0
    return {row["name"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}


def test_an_empty_cache_lists_the_shipped_models_and_says_how_to_add(empty_caches, capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in ("glyph_resnet18", "glyph_vit_tiny", "imagenet_efficientnet_lite0"):
        assert name in out
    assert "75.1% top-1 as published" in out and "18.8 MB" in out
    assert "No timm or Hugging Face weights in these caches" in out
    assert "hf download timm/resnet18.a1_in1k" in out and "HF_HUB_CACHE" in out
    assert str(empty_caches / "hub") in out


def test_a_filled_cache_lists_timm_and_hf_models_with_their_sizes(filled_caches, capsys):
    rows = _rows(capsys)
    assert rows["resnet18.a1_in1k"]["kind"] == "timm" and rows["resnet18.a1_in1k"]["loads"]
    assert rows["resnet18.a1_in1k"]["size"] == TIMM_BYTES + len(json.dumps({"architecture": "resnet18",
                                                                              "num_classes": 1000}))
    assert "pretrained=True" in rows["resnet18.a1_in1k"]["note"]
    cvt = rows["hf:microsoft/cvt-13"]
    assert cvt["kind"] == "hf" and cvt["loads"] and cvt["path"].endswith("0123abcd")     # refs/main's snapshot
    assert cvt["size"] == CVT_BYTES + len(json.dumps({"model_type": "cvt"}))
    assert rows["resnet18"]["kind"] == "torch-hub" and rows["resnet18"]["size"] == TORCH_BYTES
    assert "checkpoint=" in rows["resnet18"]["note"]
    assert "hf:google-bert/bert-base-uncased" not in rows                                 # cannot load: --all
    order = list(rows)
    assert order.index("imagenet_efficientnet_lite0") < order.index("resnet18.a1_in1k") < order.index(
        "hf:microsoft/cvt-13")
    check_name("hf:microsoft/cvt-13")          # what the list says loads, the name check accepts


def test_all_lists_what_cannot_load_and_why(filled_caches, capsys):
    rows = _rows(capsys, "--all")
    assert not rows["hf:google-bert/bert-base-uncased"]["loads"]
    assert "bert" in rows["hf:google-bert/bert-base-uncased"]["note"]
    assert "no weight file" in rows["hf:someone/no-weights"]["note"]
    assert "not a readable JSON object" in rows["hf:someone/broken"]["note"]
    assert not rows["mystery.pth"]["loads"]
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "resnet18.a1_in1k" in out and "hf:microsoft/cvt-13" in out and "No timm" not in out
    assert "4 more cached model(s) cannot load here (--all" in out


def test_hf_home_is_read_when_hf_hub_cache_is_unset(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    _repo(tmp_path / "hfhome" / "hub", "timm", "vit_tiny_patch16_224.augreg_in21k",
          {"architecture": "vit_tiny_patch16_224"}, {"model.safetensors": 8})
    assert "vit_tiny_patch16_224.augreg_in21k" in [m.name for m in offline_models()]


def test_a_cache_variable_that_points_at_no_folder_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "nowhere"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    (tmp_path / "torch").mkdir()
    assert main(["models"]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: HF_HUB_CACHE={tmp_path / 'nowhere'}: found nothing there; set it to a Hugging "
                        f"Face hub cache (a folder of models--ORG--NAME folders), or unset it for the default"]


def test_the_picker_lists_offline_models_first_and_marks_them(filled_caches):
    from app.choose._widgets import backbone_choices, offline_backbones, offline_note_html

    offline = offline_backbones()
    names = [m.name for m in offline]
    assert names[:3] == ["glyph_resnet18", "glyph_vit_tiny", "imagenet_efficientnet_lite0"]
    assert "resnet18.a1_in1k" in names and "hf:microsoft/cvt-13" in names
    assert "resnet18" not in names                                # a torch hub file needs its checkpoint path
    choices = backbone_choices(offline)
    assert choices[:len(names)] == names and len(choices) == len(set(choices))
    note = offline_note_html(offline)
    assert "available offline" in note and "<code>resnet18.a1_in1k</code> (tick pretrained)" in note
    assert "<code>imagenet_efficientnet_lite0</code>," in note
