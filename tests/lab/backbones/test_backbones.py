"""Contract tests for lab.backbones on tiny models of every seed-paper family (CPU, random init)."""
from __future__ import annotations

import functools
import os
import pickle
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lab import backbones
from lab.backbones import PRE_LOGITS, load

# family -> (timm name, load kwargs, expected number of taps = stem + blocks + pre_logits)
FAMILIES = {
    "resnet": ("resnet18", dict(in_chans=1, img_size=32), 1 + 8 + 1),
    "vit": ("vit_tiny_patch16_224", dict(in_chans=1, img_size=32, patch_size=8), 1 + 12 + 1),
    "swin": ("swin_tiny_patch4_window7_224",
             dict(in_chans=1, img_size=32, window_size=2, embed_dim=24, depths=(1, 1, 2, 1), num_heads=(1, 1, 2, 2)),
             1 + 5 + 1),
    "pvt_v2": ("pvt_v2_b0", dict(in_chans=1, img_size=32), 1 + 8 + 1),
    "poolformer": ("poolformer_s12", dict(in_chans=1, img_size=32), 1 + 12 + 1),
    "convnextv2": ("convnextv2_atto", dict(in_chans=1, img_size=32), 1 + 12 + 1),
    "mlp": ("mlp:depth=4,width=32", dict(in_chans=1, img_size=16), 4 + 1),
}


@functools.lru_cache(maxsize=None)
def _family(key: str):
    name, kwargs, _ = FAMILIES[key]
    return load(name, device="cpu", **kwargs)


def _images(bb, n=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, bb.in_chans, bb.img_size, bb.img_size, generator=gen)  # (N, C, H, W)


def _no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


# ----------------------------------------------------------------------------------------------- catalogue


def test_resnet18_tap_names():
    bb = _family("resnet")
    assert bb.layers == ["stem", "layer1.0", "layer1.1", "layer2.0", "layer2.1",
                         "layer3.0", "layer3.1", "layer4.0", "layer4.1", "pre_logits"]
    assert [t.dim for t in bb.taps] == [64, 64, 64, 128, 128, 256, 256, 512, 512, 512]
    assert {t.kind for t in bb.taps[:-1]} == {"map"} and bb.taps[-1].kind == "vector"
    assert bb.num_features == 512


def test_vit_tap_names_and_class_token():
    bb = _family("vit")
    assert bb.layers == ["stem"] + [f"blocks.{i}" for i in range(12)] + ["pre_logits"]
    stem, block = bb.tap("stem"), bb.tap("blocks.0")
    assert stem.kind == block.kind == "tokens"
    assert block.shape == (1 + 16, 192) and block.prefix_tokens == 1 and block.cls_token
    # The embedding's class token is the same vector for every image: the stem pools patch tokens.
    assert stem.prefix_tokens == 1 and not stem.cls_token


def test_swin_blocks_are_nhwc_maps():
    bb = _family("swin")
    assert bb.layers == ["stem", "layers.0.blocks.0", "layers.1.blocks.0", "layers.2.blocks.0",
                         "layers.2.blocks.1", "layers.3.blocks.0", "pre_logits"]
    assert all(t.kind == "map" and t.layout == "NHWC" for t in bb.taps[:-1])
    assert [t.dim for t in bb.taps] == [24, 24, 48, 96, 96, 192, 192]


def test_mlp_taps_are_hidden_layers():
    bb = _family("mlp")
    assert bb.layers == ["fc1", "fc2", "fc3", "fc4", "pre_logits"]
    assert all(t.kind == "vector" and t.dim == 32 for t in bb.taps)
    x = _images(bb)
    fc4 = bb.model.fc4(bb.model.fc3(bb.model.fc2(bb.model.fc1(x.flatten(1)))))
    torch.testing.assert_close(bb.pre_logits(x), fc4)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_contract(family):
    """Tap count and order, pooled widths, last tap = pre-logits, eval mode, no leftover hooks."""
    bb = _family(family)
    _, _, n_taps = FAMILIES[family]
    assert len(bb.layers) == n_taps == len(set(bb.layers))
    assert bb.layers[-1] == PRE_LOGITS
    assert bb.layers[0] == ("fc1" if family == "mlp" else "stem")
    assert not bb.model.training
    assert bb.device == torch.device("cpu")
    assert _no_hooks(bb.model)
    # Taps are in execution order: record the order in which their modules finish.
    seen = []
    handles = [bb.model.get_submodule(t.module_name).register_forward_hook(
        lambda m, a, o, name=t.name: seen.append(name)) for t in bb.taps if t.module_name]
    x = _images(bb)
    try:
        with torch.no_grad():
            pre = bb.model.forward_head(bb.model.forward_features(x), pre_logits=True)
    finally:
        for h in handles:
            h.remove()
    assert seen == bb.layers[:-1]
    assert pre.shape == (3, bb.num_features) == (3, bb.taps[-1].dim)
    from lab.features import extract

    feats = extract(bb, x, normalize=False)   # x is model input already
    assert [tuple(v.shape) for v in feats.values()] == [(3, t.dim) for t in bb.taps]
    torch.testing.assert_close(feats[PRE_LOGITS], pre)
    assert _no_hooks(bb.model)


def test_block_modules_and_tap_module():
    bb = _family("resnet")
    blocks = bb.block_modules()
    assert [n for n, _ in blocks] == bb.layers[:-1]
    assert bb.tap_module("layer2.1") is bb.model.layer2[1]
    assert bb.tap_module(PRE_LOGITS) is None
    stem = bb.tap_module("stem")  # conv1 + bn1, sharing the model's parameters
    assert {n for n, _ in stem.named_parameters()} == {"conv1.weight", "bn1.weight", "bn1.bias"}
    assert stem.conv1.weight is bb.model.conv1.weight
    vit_stem = _family("vit").tap_module("stem")
    assert {"patch_embed.proj.weight", "pos_embed", "cls_token"} <= {n for n, _ in vit_stem.named_parameters()}
    with pytest.raises(ValueError, match=r"layer 'layer9' is not a tap of resnet18; valid: stem, layer1.0, "):
        bb.tap_module("layer9")


def test_head_reset_and_state_dict_cpu():
    bb = load("mlp:depth=2,width=8", in_chans=1, img_size=8, num_classes=3, device="cpu")
    assert isinstance(bb.head_module(), torch.nn.Linear) and bb.head_module().out_features == 3
    head = bb.reset_head(5)
    assert head is bb.head_module() and head.out_features == 5 and bb.model(torch.randn(2, 1, 8, 8)).shape == (2, 5)
    assert isinstance(bb.reset_head(0), torch.nn.Identity)
    snap = bb.state_dict_cpu()
    with torch.no_grad():
        bb.model.fc1[0].weight.add_(1.0)
    assert not torch.equal(snap["fc1.0.weight"], bb.model.fc1[0].weight)  # a copy, not a view


def test_timm_head_reset():
    bb = _family("resnet")
    try:
        assert bb.reset_head(7).out_features == 7 and bb.model(_images(bb)).shape == (3, 7)
    finally:
        bb.reset_head(0)


def test_device_auto_and_eval_mode():
    bb = load("mlp:depth=1,width=4", in_chans=1, img_size=4)
    from lab.device import resolve_device

    assert bb.device == resolve_device("auto")
    assert next(bb.model.parameters()).device.type == bb.device.type
    assert not bb.model.training


# ----------------------------------------------------------------------------------------------- errors


def test_unknown_name_suggests_close_matches():
    with pytest.raises(ValueError, match=r"unknown backbone 'resnet19'.*Close matches: .*resnet18"):
        load("resnet19", device="cpu")


def test_img_size_ignored_by_conv_nets_but_bad_kwargs_rejected():
    assert _family("resnet").img_size == 32 and _family("resnet").input_size == (1, 32, 32)
    with pytest.raises(ValueError, match=r"timm model 'resnet18' does not accept these arguments .*patch_size"):
        load("resnet18", patch_size=8, device="cpu")


def test_dummy_forward_failure_is_explained():
    with pytest.raises(ValueError, match=r"ConvNeXt failed on a dummy input of shape \(1, 1, 4, 4\) .*check img_size"):
        load("test_convnext", in_chans=1, img_size=4, device="cpu")


def test_catalogue_falls_back_to_child_modules_without_feature_info():
    bb = load("mlp:depth=3,width=8", in_chans=1, img_size=8, num_classes=2, device="cpu")
    del bb.model.feature_info  # no timm contract: hooks on the top-level children, minus the classifier
    taps, stem = backbones._timm.build_catalogue(bb.model, bb.input_size, bb.device)
    assert [t.name for t in taps] == bb.layers == ["fc1", "fc2", "fc3", "pre_logits"]
    assert stem is None and _no_hooks(bb.model)


def test_mlp_spec_errors_and_input_check():
    with pytest.raises(ValueError, match=r"mlp options must be 'depth=INT' and/or 'width=INT'.*'height=3'"):
        load("mlp:height=3")
    with pytest.raises(ValueError, match=r"mlp option 'depth' must be a positive integer. Got '0'"):
        load("mlp:depth=0")
    with pytest.raises(ValueError, match=r"takes options in its name"):
        load("mlp", depth=3)
    with pytest.raises(ValueError, match=r"mlp option 'bn' must be 0 \(no BatchNorm\) or 1 .*Got '2'"):
        load("mlp:bn=2")


def test_mlp_without_batchnorm_has_the_same_layers_and_no_batchnorm():
    plain = load("mlp:depth=3,width=8,bn=0", in_chans=1, img_size=8, num_classes=2, device="cpu")
    normed = load("mlp:depth=3,width=8", in_chans=1, img_size=8, num_classes=2, device="cpu")
    assert plain.layers == normed.layers == ["fc1", "fc2", "fc3", "pre_logits"]
    assert not any(isinstance(m, torch.nn.BatchNorm1d) for m in plain.model.modules())
    assert sum(isinstance(m, torch.nn.BatchNorm1d) for m in normed.model.modules()) == 3
    x = torch.randn(4, 1, 8, 8)
    hidden = plain.model.fc1[0](x.flatten(1)).clamp(min=0)          # Linear then ReLU, nothing between
    torch.testing.assert_close(plain.model.fc1(x.flatten(1)), hidden)
    bb = load("mlp:depth=2,width=8", in_chans=1, img_size=8, device="cpu")
    with pytest.raises(ValueError, match=r"mlp was built for inputs of 1x8x8 \(64 values per image\)"):
        bb.model(torch.randn(2, 1, 16, 16))


# ----------------------------------------------------------------------------------------------- checkpoints


def _same_outputs(a, b, x):
    with torch.no_grad():
        return torch.equal(a.pre_logits(x), b.pre_logits(x))


def test_safetensors_round_trip(tmp_path):
    from safetensors.torch import save_file

    name, kwargs, _ = FAMILIES["swin"]
    src = _family("swin")
    path = tmp_path / "swin.safetensors"
    save_file({k: v.contiguous() for k, v in src.state_dict_cpu().items()}, str(path))
    dst = load(name, device="cpu", checkpoint=path, **kwargs)
    assert _same_outputs(src, dst, _images(src))
    fresh = load(name, device="cpu", **kwargs)
    assert not _same_outputs(src, fresh, _images(src))  # random init differs: the checkpoint did the work


def test_torch_state_dict_round_trip_nested_and_prefixed(tmp_path):
    src = load("mlp:depth=3,width=8", in_chans=1, img_size=8, num_classes=4, device="cpu")
    path = tmp_path / "mlp.pt"
    torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in src.model.state_dict().items()}}, path)
    dst = load("mlp:depth=3,width=8", in_chans=1, img_size=8, num_classes=4, device="cpu", checkpoint=str(path))
    x = torch.randn(5, 1, 8, 8)
    with torch.no_grad():
        assert torch.equal(src.model(x), dst.model(x))


def test_checkpoint_head_of_other_size_is_dropped_with_warning(tmp_path):
    src = load("mlp:depth=2,width=8", in_chans=1, img_size=8, num_classes=10, device="cpu")
    path = tmp_path / "ten.pt"
    torch.save({"model": src.model.state_dict()}, path)
    with pytest.warns(UserWarning, match=r"checkpoint classifier \(head.bias \(10,\), head.weight \(10, 8\)\) "
                                         r"does not match this model's head"):
        dst = load("mlp:depth=2,width=8", in_chans=1, img_size=8, num_classes=0, device="cpu", checkpoint=path)
    assert _same_outputs(src, dst, torch.randn(4, 1, 8, 8))


def test_checkpoint_mismatch_lists_keys(tmp_path):
    path = tmp_path / "other.pt"
    torch.save(load("mlp:depth=2,width=8", in_chans=1, img_size=8, device="cpu").model.state_dict(), path)
    with pytest.raises(ValueError, match=r"does not fit MLP \(missing keys: fc3.0.bias, fc3.0.weight, .*\)"):
        load("mlp:depth=3,width=8", in_chans=1, img_size=8, device="cpu", checkpoint=path)
    with pytest.raises(ValueError, match=r"shape mismatches: fc1.0.weight \(8, 64\) vs model \(8, 16\)"):
        load("mlp:depth=2,width=8", in_chans=1, img_size=4, device="cpu", checkpoint=path)
    with pytest.raises(ValueError, match=r"checkpoint '.*nope.pt': no such file"):
        load("mlp", checkpoint=tmp_path / "nope.pt")


class _Evil:
    """Unpickling this would run a shell command that creates a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("writer", ["torch.save", "pickle.dump"])
def test_malicious_pickle_is_refused(tmp_path, writer):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    payload = {"fc1.0.weight": torch.zeros(1), "boom": _Evil(marker)}
    if writer == "torch.save":
        torch.save(payload, path)
    else:
        with open(path, "wb") as fh:
            pickle.dump(payload, fh, protocol=2)
    with pytest.raises(ValueError, match=r"refused to unpickle .*evil.pt.*save as safetensors or a plain state_dict"):
        load("mlp:depth=2,width=8", in_chans=1, img_size=8, device="cpu", checkpoint=path)
    assert not marker.exists()


def test_run_spec_is_not_a_path_and_backbones_never_import_the_store(tmp_path):
    with pytest.raises(ValueError, match=r"checkpoint 'run:abc123/1': names a stored run, which only its run store "
                                         r"can find, and no store was given; pass the store: "
                                         r"lab.backbones.resolve_checkpoint\('run:abc123/1', store=lab.RunStore\(\)\)"):
        load("mlp:depth=2,width=8", in_chans=1, img_size=8, device="cpu", checkpoint="run:abc123/1")
    with pytest.raises(ValueError, match=r"and store='runs' was given; pass the store"):   # a folder is no store
        backbones.resolve_checkpoint("run:abc123/1", store="runs")
    assert not hasattr(backbones, "register_checkpoint_resolver")
    imports = [f"{path.name}: {line.strip()}" for path in Path(backbones.__file__).parent.glob("*.py")
               for line in path.read_text().splitlines() if re.search(r"\b(from|import) lab\.store\b", line)]
    assert imports == []
    # a run: spec goes to the store passed down (any object with run_weights): the store is never imported
    weights = tmp_path / "seed1.safetensors"
    weights.write_bytes(b"")
    code = ("import sys, lab.backbones as b\n"
            "class Store:\n    def run_weights(self, spec): return sys.argv[1] if spec == 'run:abc/1' else None\n"
            "c = b.resolve_checkpoint('run:abc/1', store=Store()); b.check_checkpoint('run:abc/1', store=Store())\n"
            "b.load('mlp:depth=2,width=8', in_chans=1, img_size=8, device='cpu')\n"
            "print(c.path, c.kind, c.source, 'lab.store' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(weights)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"{weights} safetensors run False", out.stderr


def test_pretrained_offline_gives_clear_message(tmp_path, monkeypatch):
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    # huggingface_hub reads these at import time: patch the module constants too.
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hf_constants, "HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(torch.hub, "_hub_dir", None)

    def no_network(*args, **kwargs):
        raise OSError("network access is disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(ValueError, match=r"could not get pretrained weights for 'resnet18'.*"
                                         r"pass a local file: load\('resnet18', checkpoint='PATH.safetensors'\)"):
        load("resnet18", pretrained=True, device="cpu")
    assert not (tmp_path / "hf" / "hub").exists() or not any((tmp_path / "hf" / "hub").rglob("*.safetensors"))
