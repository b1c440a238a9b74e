"""Extraction at any module of the model: pooled like the catalogue (checked against a manual forward
hook), inside the head too, mixed with catalogue taps, hooks removed; and a run that measures a module."""
from __future__ import annotations

import functools

import pytest
import torch

from lab.backbones import PRE_LOGITS, first_tensor, load
from lab.features import extract


@functools.lru_cache(maxsize=None)
def _bb(key: str):
    torch.manual_seed(0)
    if key == "vit":
        return load("vit_tiny_patch16_224", in_chans=1, img_size=32, device="cpu")
    if key == "resnet":
        return load("resnet18", in_chans=1, img_size=32, device="cpu")
    pytest.importorskip("transformers")
    return load("hf:vit", in_chans=1, img_size=32, device="cpu", hidden_size=16, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=32, patch_size=8)


def _images(n=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 32, 32, generator=gen)                 # (N, C, H, W) pixels in [0, 1]


def _no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def _manual(bb, module_name: str, x: torch.Tensor) -> torch.Tensor:
    """The raw output of ``module_name`` for pixels ``x``, caught by a forward hook of our own."""
    caught = {}

    def hook(module, args, output):        # returns None: the model's output stays its own
        caught.setdefault("out", first_tensor(output).detach().clone())

    handle = bb.model.get_submodule(module_name).register_forward_hook(hook)
    try:
        with torch.no_grad():
            bb.model.forward_features(bb.normalize(x))
    finally:
        handle.remove()
    return caught["out"]


def test_vit_attention_and_mlp_are_pooled_to_their_class_token():
    bb, x = _bb("vit"), _images()
    feats = extract(bb, x, layers=["blocks.1.mlp.fc1", "blocks.1.attn"])
    assert feats.layers == ["blocks.1.mlp.fc1", "blocks.1.attn"]            # the requested order
    assert feats["blocks.1.attn"].shape == (6, 192) and feats["blocks.1.mlp.fc1"].shape == (6, 768)
    for name in feats.layers:
        raw = _manual(bb, name, x)                                           # (N, T, D)
        torch.testing.assert_close(feats[name], raw[:, 0])                   # token 0: the class token
    mean = extract(bb, x, layers=["blocks.1.attn"], pooling="mean")["blocks.1.attn"]
    torch.testing.assert_close(mean, _manual(bb, "blocks.1.attn", x)[:, 1:].mean(dim=1))
    assert _no_hooks(bb.model)


def test_resnet_convolution_is_pooled_to_its_spatial_mean():
    bb, x = _bb("resnet"), _images()
    feats = extract(bb, x, layers="layer1.0.conv1")
    raw = _manual(bb, "layer1.0.conv1", x)                                   # (N, 64, 8, 8)
    torch.testing.assert_close(feats["layer1.0.conv1"], raw.mean(dim=(2, 3)))
    assert _no_hooks(bb.model)


def test_module_taps_mix_with_catalogue_taps_and_leave_them_unchanged():
    bb, x = _bb("resnet"), _images()
    alone = extract(bb, x, layers=["layer2.1", PRE_LOGITS])
    mixed = extract(bb, x, layers=[PRE_LOGITS, "layer3.0.bn1", "layer2.1", "layer1.0.conv1"])
    assert mixed.layers == [PRE_LOGITS, "layer3.0.bn1", "layer2.1", "layer1.0.conv1"]
    for name in alone:
        torch.testing.assert_close(mixed[name], alone[name])
    torch.testing.assert_close(mixed["layer3.0.bn1"], _manual(bb, "layer3.0.bn1", x).mean(dim=(2, 3)))


def test_a_module_inside_the_head_runs_the_head_without_pre_logits():
    bb, x = _bb("vit"), _images()
    feats = extract(bb, x, layers=["head_drop", "blocks.0"])
    pre = extract(bb, x, layers=[PRE_LOGITS])[PRE_LOGITS]
    torch.testing.assert_close(feats["head_drop"], pre)      # the head's dropout (identity in eval) is pre_logits
    assert _no_hooks(bb.model)


def test_hugging_face_attention_is_tapped_through_its_tuple_output():
    bb, x = _bb("hf"), _images()
    block = bb.layers[2]
    attention = next(n for n in bb.submodules(block) if n.rsplit(".", 1)[-1] == "attention")
    feats = extract(bb, x, layers=[attention, block])
    raw = _manual(bb, bb.tap(attention).module_name, x)                      # first tensor of the tuple
    assert feats[attention].shape == (6, 16)
    torch.testing.assert_close(feats[attention], raw[:, 0])
    assert _no_hooks(bb.model)


def test_bad_module_names_fail_before_any_forward_and_leave_no_hooks():
    bb = _bb("vit")
    with pytest.raises(ValueError, match=r"layer 'blocks.1.atn' is not a tap of vit_tiny_patch16_224; .*"
                                         r"closest: blocks.1.attn"):
        extract(bb, _images(n=2), layers=["blocks.1", "blocks.1.atn"])
    with pytest.raises(ValueError, match=r"module 'head' of vit_tiny_patch16_224 never runs"):
        extract(bb, _images(n=2), layers=["head"])
    assert _no_hooks(bb.model)


def test_a_run_measures_a_module_inside_a_block(store, tiny_config, one_thread):
    from lab.runs import run

    cfg = tiny_config(layers=["fc2", "fc1.0", "pre_logits"], projection_layers=["fc1.0"], epochs=1)
    events = list(run(cfg, store=store))
    assert events[-1].kind == "run_finished", getattr(events[-1], "message", "")
    started = events[0]
    assert started.layers == [{"name": "fc1.0", "kind": "vector", "dim": 16},
                              {"name": "fc2", "kind": "vector", "dim": 16},
                              {"name": "pre_logits", "kind": "vector", "dim": 16}]
    unseen = [e.layer for e in events if e.kind == "layer_metrics" and e.split == "unseen" and e.epoch == 1]
    assert unseen == ["fc1.0", "fc2", "pre_logits"]
    rec = store.load(started.run_id)
    rows = rec.metrics[rec.metrics["layer"] == "fc1.0"]
    assert set(rows["epoch"]) == {0, 1} and {"nmi", "knn_accuracy", "nc1"} <= set(rows["metric"])
    assert set(rec.utilization["layer"]) == {"fc1.0", "fc2"}            # the Linear has weights of its own
    coords, _, _ = rec.projection(0, 1, "fc1.0", method="pca")
    assert coords.shape == (40, 2)
