"""Any module of a model as a tap: name lookup, forward order, kinds and pooling rules, clear errors,
listing a block's modules, and a dummy forward that leaves no trace (hooks, train flags, RNG, statistics)."""
from __future__ import annotations

import functools

import pytest
import torch

from lab.backbones import PRE_LOGITS, load


@functools.lru_cache(maxsize=None)
def _vit():
    return load("vit_tiny_patch16_224", img_size=32, device="cpu")


@functools.lru_cache(maxsize=None)
def _resnet():
    return load("resnet18", in_chans=1, img_size=32, device="cpu")


@functools.lru_cache(maxsize=None)
def _hf_vit():
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    return load("hf:vit", in_chans=1, img_size=32, device="cpu", hidden_size=16, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=32, patch_size=8)


def _no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_modules_are_put_in_forward_order_among_the_catalogue_taps():
    bb = _vit()
    catalogue = list(bb.layers)
    names = [PRE_LOGITS, "blocks.1.mlp.fc1", "blocks.1", "blocks.1.attn", "stem", "patch_embed", "norm"]
    assert bb.resolve_layers(names) == ["patch_embed", "stem", "blocks.1.attn", "blocks.1.mlp.fc1", "blocks.1",
                                        "norm", PRE_LOGITS]
    assert bb.layers == catalogue                                # the default list stays the catalogue's
    assert bb.resolve_layers(["blocks.3", "blocks.0"]) == ["blocks.0", "blocks.3"]
    assert bb.resolve_layers(["blocks.1.attn", "blocks.1.attn"]) == ["blocks.1.attn"]
    assert _no_hooks(bb.model)


def test_module_taps_take_the_catalogue_pooling_rules():
    bb = _vit()
    attn, fc1 = bb.tap("blocks.1.attn"), bb.tap("blocks.1.mlp.fc1")
    assert (attn.kind, attn.dim, attn.prefix_tokens, attn.cls_token) == ("tokens", 192, 1, True)
    assert (fc1.kind, fc1.dim, fc1.shape, fc1.cls_token) == ("tokens", 768, (5, 768), True)
    assert attn.module_name == "blocks.1.attn" and not attn.after_features
    # Patches before the class token is prepended: no prefix token, the mean of every token.
    patches = bb.tap("patch_embed")
    assert (patches.kind, patches.prefix_tokens, patches.cls_token, patches.shape) == ("tokens", 0, False, (4, 192))
    # Before any attention the class token is the same learned vector for every image: the mean is taken.
    assert not bb.tap("blocks.0.norm1").cls_token and bb.tap("blocks.0.attn").cls_token
    conv = bb.tap("patch_embed.proj")
    assert (conv.kind, conv.layout, conv.dim, conv.shape) == ("map", "NCHW", 192, (192, 2, 2))
    head = bb.tap("head_drop")                 # runs in forward_head: extraction must run the head for it
    assert (head.kind, head.after_features) == ("vector", True)

    resnet = _resnet()
    conv1 = resnet.tap("layer1.0.conv1")
    assert (conv1.kind, conv1.layout, conv1.dim, conv1.shape) == ("map", "NCHW", 64, (64, 8, 8))
    assert resnet.tap("layer2.0.downsample").dim == 128


def test_tap_module_gives_a_module_tap_its_module_when_it_has_weights():
    bb = _vit()
    assert bb.tap_module("blocks.1.attn") is bb.model.blocks[1].attn
    assert bb.tap_module("blocks.1.mlp.act") is None             # no weights of its own
    assert bb.tap_module("blocks.1") is bb.model.blocks[1]       # catalogue taps unchanged


def test_a_name_that_is_no_module_names_the_closest_modules():
    bb = _vit()
    with pytest.raises(ValueError, match=r"^layer 'blocks.7.atn' is not a tap of vit_tiny_patch16_224; valid: stem, "
                                         r"blocks.0, .*, pre_logits; nor is it a module of vit_tiny_patch16_224 "
                                         r"\(closest: blocks.7.attn, .*\)\. Pass a catalogue tap or a name from "
                                         r"bb.module_names\(\)\.$"):
        bb.resolve_layers(["blocks.1", "blocks.7.atn"])
    with pytest.raises(ValueError, match=r"^layers: 'blocks.7.mlp.fc9' is not a tap .*closest: blocks.7.mlp.fc2, blocks.7.mlp.fc1, "):
        bb.resolve_layers(["blocks.7.mlp.fc9"], field="layers")
    with pytest.raises(ValueError, match=r"layer '' is not a tap of vit_tiny_patch16_224"):
        bb.tap("")
    with pytest.raises(ValueError, match=r"layer 3 is not a tap of vit_tiny_patch16_224"):
        bb.resolve_layers([3])
    assert _no_hooks(bb.model)


def test_a_module_without_an_output_per_image_is_refused_with_the_reason():
    bb = _vit()
    with pytest.raises(ValueError, match=r"layer 'head': module 'head' of vit_tiny_patch16_224 never runs in a "
                                         r"forward pass \(no output to tap\); tap one of its sub-modules or the "
                                         r"block around it"):
        bb.resolve_layers(["blocks.1", "head"])        # the classifier: pre_logits stops before it
    swin = load("swin_tiny_patch4_window7_224", in_chans=1, img_size=32, window_size=2, embed_dim=24,
                depths=(1, 1, 2, 1), num_heads=(1, 1, 2, 2), device="cpu")
    with pytest.raises(ValueError, match=r"module 'layers.0.blocks.0.attn' of swin_tiny_patch4_window7_224 returns "
                                         r"shape \(32, 4, 24\) for a batch of 2 images: its first dimension is not "
                                         r"the batch"):
        swin.tap("layers.0.blocks.0.attn")             # attention over windows: one row per window
    fc1 = swin.tap("layers.0.blocks.0.mlp.fc1")         # Swin's MLP sees (B, H*W, C): tokens, no class token
    assert (fc1.kind, fc1.prefix_tokens, fc1.cls_token) == ("tokens", 0, False)
    norm = swin.tap("layers.0.blocks.0.norm1")          # channels last, as its block
    assert (norm.kind, norm.layout, norm.dim) == ("map", "NHWC", 24)
    assert _no_hooks(bb.model) and _no_hooks(swin.model)


def test_module_names_and_submodules_list_what_can_be_tapped():
    bb = _vit()
    names = bb.module_names()
    assert "blocks.1.attn" in names and "blocks.1.mlp.fc1" in names and "head" not in names
    assert all(name for name in names)
    inside = bb.submodules("blocks.1")
    assert inside[:2] == ["blocks.1.norm1", "blocks.1.attn"] and "blocks.1.mlp.fc1" in inside
    assert "blocks.1" not in inside and all(n.startswith("blocks.1.") for n in inside)
    assert "patch_embed.proj" in bb.submodules("stem") and bb.submodules(PRE_LOGITS) == []
    for name in inside:                                # every listed module resolves
        assert bb.tap(name).module_name == name
    with pytest.raises(ValueError, match=r"layer 'blocks.99' is not a tap of vit_tiny_patch16_224; valid: stem"):
        bb.submodules("blocks.99")


def test_hugging_face_modules_are_named_in_the_catalogues_namespace():
    bb = _hf_vit()
    block = bb.layers[2]                               # the second transformer layer
    attention = next(n for n in bb.submodules(block) if n.rsplit(".", 1)[-1] == "attention")
    full = bb.tap(attention).module_name
    assert full.endswith("." + attention) and bb.model.get_submodule(full) is not None
    # Also relative to any module above the catalogue's namespace, up to the backbone's own names.
    parts = full[: -len(attention) - 1].split(".")
    for i in range(len(parts) + 1):
        spelled = ".".join(parts[i:] + [attention])
        assert bb.tap(spelled).module_name == full
    tap = bb.tap(attention)
    assert (tap.kind, tap.cls_token, tap.prefix_tokens) == ("tokens", True, 1)
    assert bb.resolve_layers([PRE_LOGITS, attention, block, bb.layers[1]]) == [bb.layers[1], attention, block,
                                                                              PRE_LOGITS]


def test_resolving_leaves_train_flags_rng_and_statistics_as_they_were():
    bb = load("resnet18", in_chans=1, img_size=32, device="cpu")
    bb.model.train()
    bn = bb.model.layer1[0].bn1
    stats = bn.running_mean.clone()
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    bb.resolve_layers(["layer1.0.conv1", "layer1.0.bn1", "layer3.1"])
    bb.module_names()
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(m.training for m in bb.model.modules())
    assert torch.equal(bn.running_mean, stats)
    assert _no_hooks(bb.model)
