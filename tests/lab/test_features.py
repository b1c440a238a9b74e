"""Tests for lab.features.extract: one pass, pooling per METRICS.md, hooks as resources, any data source."""
from __future__ import annotations

import functools
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lab import features
from lab.backbones import PRE_LOGITS, load
from lab.features import Cancelled, FeatureSet, extract

SPECS = {
    "resnet": ("resnet18", dict(in_chans=1, img_size=32)),
    "vit": ("vit_tiny_patch16_224", dict(in_chans=1, img_size=32, patch_size=8, depth=4)),
    "swin": ("swin_tiny_patch4_window7_224",
             dict(in_chans=1, img_size=32, window_size=2, embed_dim=24, depths=(1, 1, 2, 1), num_heads=(1, 1, 2, 2))),
    "pvt_v2": ("pvt_v2_b0", dict(in_chans=1, img_size=32)),
    "mlp": ("mlp:depth=3,width=16", dict(in_chans=1, img_size=16)),
}


@functools.lru_cache(maxsize=None)
def _bb(key: str):
    name, kwargs = SPECS[key]
    return load(name, device="cpu", **kwargs)


def _images(bb, n=10, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, bb.in_chans, bb.img_size, bb.img_size, generator=gen)  # (N, C, H, W)


def _no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


class _Pairs(Dataset):
    """A plain torch Dataset of (image, label)."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], int(self.y[i])


class _LabLike:
    """Duck-typed lab.data Dataset: extraction must go through its eval_loader."""

    def __init__(self, x, y):
        self.x, self.y, self.asked = x, y, []

    def __len__(self):
        return len(self.x)

    def eval_loader(self, batch_size):
        self.asked.append(batch_size)
        return DataLoader(TensorDataset(self.x, self.y), batch_size=batch_size, shuffle=False)


@pytest.mark.parametrize("family", list(SPECS))
def test_extraction_is_deterministic_and_leaves_no_hooks(family):
    bb = _bb(family)
    x = _images(bb)
    a = extract(bb, x, batch_size=4)
    b = extract(bb, x, batch_size=4)
    assert isinstance(a, FeatureSet) and list(a) == bb.layers and a.labels is None
    for name in bb.layers:
        assert a[name].dtype == torch.float32 and a[name].device == bb.device
        assert torch.equal(a[name], b[name])
        assert torch.isfinite(a[name]).all()
    assert _no_hooks(bb.model)


def test_sources_agree_and_carry_labels():
    bb = _bb("resnet")
    x = _images(bb, n=9)
    y = torch.arange(9) % 3
    from_tensor = extract(bb, x, batch_size=4)
    from_dataset = extract(bb, _Pairs(x, y), batch_size=4)
    from_loader = extract(bb, DataLoader(TensorDataset(x, y), batch_size=5))
    lab_like = _LabLike(x, y)
    from_lab = extract(bb, lab_like, batch_size=3)
    assert lab_like.asked == [3]
    for other in (from_dataset, from_loader, from_lab):
        assert torch.equal(other.labels, y)
        for name in bb.layers:
            torch.testing.assert_close(other[name], from_tensor[name])


def test_pooling_matches_timm_forward_intermediates():
    """Pooled taps agree with timm's own forward_intermediates (an independent path, no hooks)."""
    bb = _bb("resnet")
    x = _images(bb, n=4)
    feats = extract(bb, x, layers=["layer2.1", "layer4.1"])
    inter = bb.model.forward_intermediates(bb.normalize(x), indices=[2, 4],
                                           intermediates_only=True)  # layer2, layer4 outputs
    torch.testing.assert_close(feats["layer2.1"], inter[0].mean((2, 3)))
    torch.testing.assert_close(feats["layer4.1"], inter[1].mean((2, 3)))

    vit = _bb("vit")
    xv = _images(vit, n=4)
    auto = extract(vit, xv, layers=["stem", "blocks.2"])
    mean = extract(vit, xv, layers=["blocks.2"], pooling="mean")
    spatial, prefix = vit.model.forward_intermediates(vit.normalize(xv), indices=[2], return_prefix_tokens=True,
                                                      intermediates_only=True)[0]  # (N, D, h, w), (N, 1, D)
    torch.testing.assert_close(auto["blocks.2"], prefix[:, 0])  # class token
    torch.testing.assert_close(mean["blocks.2"], spatial.mean((2, 3)))  # mean of patch tokens
    # (N, 16, D): the stem without the class token
    patches = vit.model.patch_embed(vit.normalize(xv)) + vit.model.pos_embed[:, 1:]
    torch.testing.assert_close(auto["stem"], patches.mean(1))

    swin = _bb("swin")
    xs = _images(swin, n=4)
    sf = extract(swin, xs, layers=["layers.1.blocks.0"])
    stage1 = swin.model.forward_intermediates(swin.normalize(xs), indices=[1],
                                              intermediates_only=True)[0]  # (N, C, H, W)
    torch.testing.assert_close(sf["layers.1.blocks.0"], stage1.mean((2, 3)))


def test_flatten_pooling_and_budget_warning(monkeypatch):
    bb = _bb("swin")
    x = _images(bb, n=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flat = extract(bb, x, layers=["stem", "layers.3.blocks.0", PRE_LOGITS], pooling="flatten")
    stem = bb.tap("stem")
    assert flat["stem"].shape == (3, 24 * 8 * 8)  # (N, C*H*W), H = W = 32 / 4
    assert flat[PRE_LOGITS].shape == (3, bb.num_features)
    # Flattened maps are in NCHW order whatever the layer's layout (Swin is NHWC).
    stem_out = bb.model.patch_embed(bb.normalize(x))  # (N, H, W, C)
    torch.testing.assert_close(flat["stem"], stem_out.permute(0, 3, 1, 2).flatten(1))
    assert stem.layout == "NHWC"
    monkeypatch.setattr(features, "FLATTEN_BUDGET_BYTES", 100)
    with pytest.warns(ResourceWarning, match=r"pooling='flatten' holds .* GiB of features"):
        extract(bb, x, layers=["stem"], pooling="flatten")


def test_partial_layers_stop_early_and_match_full():
    bb = _bb("resnet")
    x = _images(bb, n=4)
    full = extract(bb, x)
    seen = []
    handle = bb.model.layer4.register_forward_hook(lambda *a: seen.append(1))
    try:
        part = extract(bb, x, layers=["layer2.0", "stem"])
    finally:
        handle.remove()
    assert list(part) == ["layer2.0", "stem"]  # requested order
    assert not seen  # the forward stopped after layer2.0
    torch.testing.assert_close(part["layer2.0"], full["layer2.0"])
    torch.testing.assert_close(part["stem"], full["stem"])


@pytest.mark.parametrize("family", ["resnet", "vit"])
def test_batches_and_cpu_passes_do_not_change_features(family, monkeypatch):
    """Batch sizes that do not divide N, and batches split into several CPU passes (with a
    remainder), give the features of one batch of all images, row for row. (Equal up to
    rounding: the CPU kernels may differ between batch sizes in the last bit.)"""
    bb = _bb(family)
    x = _images(bb, n=11)
    layers = ["stem", bb.layers[-2], PRE_LOGITS]
    whole = extract(bb, x, layers=layers, batch_size=11)
    monkeypatch.setattr(features, "_CPU_PASS", 3)
    for batch_size in (4, 11):                      # passes of 3+1, and 3+3+3+2
        split = extract(bb, x, layers=layers, batch_size=batch_size)
        for name in layers:
            torch.testing.assert_close(split[name], whole[name], rtol=1e-5, atol=1e-6)
    stem = extract(bb, x, layers=["stem"], batch_size=11)["stem"]       # every pass stops after the stem
    torch.testing.assert_close(stem, whole["stem"], rtol=1e-5, atol=1e-6)


def test_progress_and_cancel_remove_hooks():
    bb = _bb("mlp")
    x = _images(bb, n=10)
    calls = []
    extract(bb, x, batch_size=4, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(4, 10), (8, 10), (10, 10)]
    batches = []
    with pytest.raises(Cancelled, match=r"feature extraction cancelled after 4 of 10 images"):
        extract(bb, x, batch_size=4, should_stop=lambda: len(batches) >= 1,
                progress=lambda done, total: batches.append(done))
    assert _no_hooks(bb.model)


def test_errors_leave_no_hooks_and_restore_mode():
    bb = _bb("resnet")
    with pytest.raises(ValueError, match=r"layer 'layer9.0' is not a tap of resnet18; valid: stem, layer1.0, "):
        extract(bb, _images(bb, n=2), layers=["layer9.0"])
    with pytest.raises(ValueError, match=r"resnet18 expects images \(B, 1 or 3, H, W\). "
                                         r"Got a batch of shape \(2, 2, 32, 32\)"):
        extract(bb, torch.rand(2, 2, 32, 32))                       # gray and RGB (averaged) are accepted
    with pytest.raises(ValueError, match=r"pooling must be one of auto, mean, flatten. Got 'max' instead."):
        extract(bb, _images(bb, n=2), pooling="max")
    with pytest.raises(ValueError, match=r"an image tensor must have shape \(N, C, H, W\)"):
        extract(bb, torch.randn(2, 32, 32))

    class Boom(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    original = bb.model.layer3[1]
    bb.model.layer3[1] = Boom()
    bb.model.train()
    try:
        with pytest.raises(RuntimeError, match="boom"):
            extract(bb, _images(bb, n=2))
        assert _no_hooks(bb.model)
        assert bb.model.training and bb.model.layer1[0].bn1.training  # flags restored
    finally:
        bb.model.layer3[1] = original
        bb.model.eval()


def test_feature_set_to_and_repr():
    bb = _bb("mlp")
    fs = extract(bb, TensorDataset(_images(bb, n=4), torch.tensor([0, 1, 0, 1])), layers="fc2")
    assert list(fs) == ["fc2"] and fs.layers == ["fc2"] and fs.pooling == "auto"
    moved = fs.to("cpu")
    assert torch.equal(moved["fc2"], fs["fc2"]) and torch.equal(moved.labels, fs.labels)
    assert "fc2: (4, 16)" in repr(fs)


def test_extract_equals_a_hand_normalized_forward():
    """A lab dataset's uint8 pixels, normalized by hand with timm's ImageNet statistics (gray: their
    channel means), give the same features as extract's own normalization."""
    from timm.data import resolve_data_config

    from lab.data import ImageDataset

    bb = _bb("resnet")
    gen = torch.Generator().manual_seed(3)
    pixels = torch.randint(0, 256, (6, 1, 32, 32), dtype=torch.uint8, generator=gen)   # (N, 1, H, W)
    ds = ImageDataset(pixels, [0, 1, 2, 0, 1, 2], ["a", "b", "c"], name="hand")
    cfg = resolve_data_config(model=bb.model)
    mean, std = sum(cfg["mean"]) / 3, sum(cfg["std"]) / 3
    assert abs(mean - 0.449) < 1e-3 and bb.normalization.source == "timm pretrained_cfg (resnet18)"
    hand = (pixels.double() / 255 - mean) / std                                         # (N, 1, H, W)
    with torch.no_grad():
        expected = bb.model.forward_head(bb.model.forward_features(hand.float()), pre_logits=True)
    got = extract(bb, ds, layers=[PRE_LOGITS])
    torch.testing.assert_close(got[PRE_LOGITS], expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(extract(bb, pixels, layers=[PRE_LOGITS])[PRE_LOGITS], expected, rtol=1e-4, atol=1e-5)
