"""Zoo models (card + fp16 safetensors) loaded by name, and each backbone's input normalization."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from lab.backbones import PRE_LOGITS, load, zoo_dir, zoo_names
from lab.features import extract

ARCH, KWARGS = "resnet18", {"in_chans": 1}


def _write_zoo(folder, name="glyph_tiny", *, architecture=ARCH, kwargs=KWARGS, state=None, num_classes=7):
    """A card and fp16 weights of a timm model with its 7-class source head, as the zoo ships them."""
    import timm

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    if state is None:
        model = timm.create_model(architecture, num_classes=num_classes, **kwargs)
        state = model.state_dict()
    save_file({k: v.detach().half().contiguous() if v.is_floating_point() else v.contiguous()
               for k, v in state.items()}, str(folder / f"{name}.safetensors"))
    card = {"name": name, "architecture": architecture, "model_kwargs": kwargs, "num_classes": num_classes,
            "weights": f"{name}.safetensors", "input_size": [1, 32, 32], "mean": [0.9], "std": [0.25],
            "source": "test fonts", "recipe": "python -m lab pretrain --test", "epochs": 1,
            "source_accuracy": 0.5, "seed": 0}
    (folder / f"{name}.json").write_text(json.dumps(card))
    return folder / f"{name}.safetensors"


@pytest.fixture
def zoo(tmp_path, monkeypatch):
    folder = tmp_path / "zoo"
    monkeypatch.setenv("LAB_ZOO_DIR", str(folder))
    return folder


def test_zoo_dir_defaults_to_the_package(monkeypatch):
    monkeypatch.delenv("LAB_ZOO_DIR", raising=False)
    assert zoo_dir().parts[-2:] == ("lab", "zoo")
    assert isinstance(zoo_names(), list)


def test_empty_zoo_lists_nothing(zoo):
    assert zoo_names() == []
    zoo.mkdir()
    assert zoo_names() == []


def test_zoo_model_loads_by_name_with_its_weights_stats_and_a_fresh_head(zoo):
    weights = _write_zoo(zoo)
    assert zoo_names() == ["glyph_tiny"]
    bb = load("zoo:glyph_tiny", device="cpu")
    fp16 = load_file(str(weights))
    own = bb.model.state_dict()
    for key, value in fp16.items():
        if not key.startswith("fc."):
            assert own[key].dtype == (torch.float32 if value.is_floating_point() else value.dtype)
            assert torch.equal(own[key], value.to(own[key].dtype)), key
    assert isinstance(bb.head_module(), torch.nn.Identity)                  # source head reset, as for timm
    assert bb.source == "zoo" and bb.in_chans == 1 and bb.input_size == (1, 32, 32)
    assert bb.normalization.mean == (0.9,) and bb.normalization.std == (0.25,)
    assert bb.normalization.source == "zoo card (glyph_tiny)"
    assert bb.info["normalization"]["mean"] == [0.9]
    assert load("glyph_tiny", device="cpu").layers == bb.layers              # bare name: not a timm name
    assert load("zoo:glyph_tiny", num_classes=3, device="cpu").head_module().out_features == 3


def test_zoo_features_equal_a_hand_normalized_forward_and_other_sizes_are_resized(zoo):
    _write_zoo(zoo)
    bb = load("zoo:glyph_tiny", device="cpu")
    pixels = torch.randint(0, 256, (4, 1, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    hand = (pixels.float() / 255 - 0.9) / 0.25                                 # (N, 1, 32, 32)
    with torch.no_grad():
        expected = bb.pre_logits(hand)
    torch.testing.assert_close(extract(bb, pixels)[PRE_LOGITS], expected, rtol=1e-4, atol=1e-5)
    rgb = pixels.expand(-1, 3, -1, -1).float() / 255                           # RGB -> the model's one channel
    torch.testing.assert_close(extract(bb, rgb)[PRE_LOGITS], expected, rtol=1e-4, atol=1e-5)
    small = torch.nn.functional.interpolate(pixels.float() / 255, size=16, mode="bilinear", antialias=True)
    assert bb.normalize(small).shape == (4, 1, 32, 32)                       # the card's input size


def test_zoo_name_typo_suggests_the_closest(zoo):
    _write_zoo(zoo)
    with pytest.raises(ValueError, match=r"no zoo model 'glyph_tiyn' in .*zoo\. Did you mean 'glyph_tiny'\?"):
        load("zoo:glyph_tiyn", device="cpu")
    with pytest.raises(ValueError, match=r"unknown backbone 'glyph_tiyn'.*Close matches: glyph_tiny"):
        load("glyph_tiyn", device="cpu")


def test_zoo_weights_of_another_architecture(zoo):
    import timm

    other = timm.create_model("resnet10t", num_classes=7, in_chans=1).state_dict()
    _write_zoo(zoo, state=other)
    with pytest.raises(ValueError, match=r"checkpoint '.*glyph_tiny.safetensors' does not fit ResNet "
                                         r"\((missing|unexpected) keys: "):
        load("zoo:glyph_tiny", device="cpu")


def test_timm_normalization_is_recorded():
    bb = load("resnet18", in_chans=3, img_size=32, device="cpu")
    assert bb.normalization.mean == pytest.approx((0.485, 0.456, 0.406))
    assert bb.info["normalization"]["source"] == "timm pretrained_cfg (resnet18)"
    mlp = load("mlp:depth=2,width=8", in_chans=1, img_size=8, device="cpu")
    assert mlp.normalization.mean == (0.5,) and "lab default" in mlp.normalization.source
    x = torch.rand(2, 1, 8, 8)
    torch.testing.assert_close(mlp.normalize(x), (x - 0.5) / 0.5)
    torch.testing.assert_close(mlp.normalize((x * 255).round().to(torch.uint8)),
                               ((x * 255).round() / 255 - 0.5) / 0.5)


VIT, VIT_KWARGS = "vit_tiny_patch16_224", {"in_chans": 1, "img_size": 32, "patch_size": 8, "depth": 1}


def test_zoo_vit_runs_at_another_size_with_timms_resampled_position_embedding(zoo):
    from timm.layers import resample_abs_pos_embed

    weights = _write_zoo(zoo, "glyph_vit", architecture=VIT, kwargs=VIT_KWARGS)   # card: 32 px, 4 x 4 patches
    stored = load_file(str(weights))["pos_embed"].float()                              # (1, 1 + 16, D)
    same = load("zoo:glyph_vit", img_size=32, device="cpu")
    torch.testing.assert_close(same.model.pos_embed.detach(), stored, rtol=0, atol=0)   # the stored size: identity
    torch.testing.assert_close(same.model.pos_embed.detach(),
                               resample_abs_pos_embed(stored, new_size=[4, 4], old_size=[4, 4]), rtol=0, atol=0)
    big = load("zoo:glyph_vit", img_size=48, device="cpu")
    assert big.input_size == (1, 48, 48) and big.normalization.size == (48, 48)
    grid = big.model.patch_embed.grid_size
    assert tuple(grid) == (6, 6) and big.model.pos_embed.shape[1] == 1 + 36
    torch.testing.assert_close(big.model.pos_embed.detach(),
                               resample_abs_pos_embed(stored, new_size=list(grid), old_size=[4, 4],
                                                      num_prefix_tokens=1), rtol=1e-6, atol=1e-6)
    own = same.model.state_dict()
    for key, value in big.model.state_dict().items():                                  # nothing else changed
        if key != "pos_embed":
            assert torch.equal(value, own[key]), key
    for bb, side in ((same, 32), (big, 48)):
        pixels = torch.rand(2, 1, side, side, generator=torch.Generator().manual_seed(side))
        feats = extract(bb, pixels)
        assert feats[PRE_LOGITS].shape == (2, bb.model.embed_dim) and torch.isfinite(feats[PRE_LOGITS]).all()
    cnn_weights = _write_zoo(zoo)                                                       # a CNN keeps its card's size
    assert cnn_weights.is_file() and load("zoo:glyph_tiny", img_size=48, device="cpu").input_size == (1, 32, 32)
    with pytest.raises(ValueError, match=r"cuts images into 8 px patches, so its img_size must be a multiple of "
                                         r"8\. Got 30 instead; use 24 or 32"):
        load("zoo:glyph_vit", img_size=30, device="cpu")
