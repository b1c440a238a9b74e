"""The GPU paths, exercised on CPU: autocast (bfloat16, float16 + loss scaler) in extraction and
fine-tuning, channels_last, pinned / worker loaders, the out-of-memory message, a missing device."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import lab
import lab.device
from lab import backbones, features, finetune
from lab.device import (DeviceOutOfMemoryError, autocast_dtype, channels_last, out_of_memory_hint,
                        out_of_memory_message, resolve_device)
from lab.errors import user_message

_IMG = 32


def _resnet(**kw):
    torch.manual_seed(0)
    return backbones.load("resnet18", pretrained=False, in_chans=3, img_size=_IMG, device="cpu", **kw)


def _vit():
    torch.manual_seed(0)
    return backbones.load("vit_tiny_patch16_224", pretrained=False, in_chans=3, img_size=_IMG, patch_size=8,
                          device="cpu")


def _pixels(n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, _IMG, _IMG, generator=g), torch.arange(n) % 2     # (N, 3, H, W), (N,)


# -- device resolution -----------------------------------------------------------------------------

@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_clear_line_from_the_config_and_from_load():
    with pytest.raises(ValueError, match=r"^device 'cuda' was requested but CUDA is not available here; "
                                         r"use device='auto' or 'cpu'\.$"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        backbones.load("resnet18", pretrained=False, device="cuda:0")


def test_autocast_dtype_is_float32_on_cpu_by_default_and_forced_when_named():
    cpu = torch.device("cpu")
    assert autocast_dtype(cpu) is None and autocast_dtype(cpu, "float32") is None
    assert autocast_dtype(cpu, "bfloat16") is torch.bfloat16
    assert autocast_dtype(cpu, "float16") is torch.float16
    if not torch.cuda.is_available():
        # "auto" on CUDA is decided by the GPU; torch.device("cuda") itself exists without one.
        assert autocast_dtype(torch.device("cuda")) in (torch.bfloat16, torch.float16)
    with pytest.raises(ValueError, match=r"precision must be one of 'auto', 'float32', 'bfloat16', 'float16'\. "
                                         r"Got 'half' instead\."):
        autocast_dtype(cpu, "half")


# -- extraction under autocast -----------------------------------------------------------------------

@pytest.mark.parametrize("make", [_resnet, _vit], ids=["resnet18", "vit"])
def test_extraction_under_bfloat16_autocast_gives_float32_features_close_to_float32(make):
    bb = make()
    x, _ = _pixels()
    ref = features.extract(bb, x, layers=bb.layers)
    amp = features.extract(bb, x, layers=bb.layers, precision="bfloat16")
    for name in bb.layers:
        assert amp[name].dtype == torch.float32 and amp[name].shape == ref[name].shape
        assert torch.isfinite(amp[name]).all()
        rel = (amp[name] - ref[name]).norm() / ref[name].norm().clamp_min(1e-12)
        assert rel < 0.05, (name, float(rel))
    # The forward really ran in bfloat16 (8 mantissa bits): the last layer's bits differ.
    assert not torch.equal(amp[bb.layers[-1]], ref[bb.layers[-1]])
    # The default on CPU is float32: bit-identical to asking for it.
    again = features.extract(bb, x, layers=bb.layers, precision="float32")
    assert all(torch.equal(again[n], ref[n]) for n in bb.layers)


def test_extraction_rejects_an_unknown_precision():
    bb = _resnet()
    with pytest.raises(ValueError, match="precision must be one of"):
        features.extract(bb, _pixels()[0], layers=["stem"], precision="fp8")


# -- fine-tuning under autocast ------------------------------------------------------------------------

def _train(precision: str, steps: int = 3):
    bb = _resnet()
    ft = finetune.prepare(bb, 2, "full", lr=1e-3, seed=0, precision=precision)
    ft.model.train()
    x, y = _pixels(8)
    losses = [ft.train_step(x, y)[0] for _ in range(steps)]
    ft.model.eval()
    return ft, losses


def test_cpu_fine_tuning_defaults_to_float32_without_autocast_or_scaler():
    ft, losses = _train("auto", steps=1)
    assert ft.amp_dtype is None and ft.scaler is None
    ref, ref_losses = _train("float32", steps=1)
    assert losses == ref_losses
    assert all(torch.equal(a, b) for a, b in zip(ft.model.state_dict().values(), ref.model.state_dict().values()))


def test_bfloat16_fine_tuning_keeps_float32_weights_and_trains():
    ft, losses = _train("bfloat16")
    ref, ref_losses = _train("float32")
    assert ft.amp_dtype is torch.bfloat16 and ft.scaler is None
    assert all(p.dtype == torch.float32 for p in ft.model.parameters())
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert abs(losses[0] - ref_losses[0]) < 0.05 * abs(ref_losses[0])     # same start, bfloat16's rounding
    assert losses != ref_losses                                           # the forward ran in bfloat16


def test_float16_fine_tuning_scales_the_loss_and_steps_the_optimizer():
    ft, losses = _train("float16")
    assert ft.amp_dtype is torch.float16 and isinstance(ft.scaler, torch.amp.GradScaler)
    assert all(p.dtype == torch.float32 for p in ft.model.parameters())
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    before = _resnet().model.state_dict()
    moved = [not torch.equal(before[k], v) for k, v in ft.bb.model.state_dict().items() if v.is_floating_point()]
    assert any(moved)                    # the scaler did not skip every step
    assert ft.optimizer.state[ft.trainable[0]]["exp_avg"].dtype == torch.float32


def test_a_strategy_that_trains_nothing_has_no_scaler_even_in_float16():
    bb = _resnet()
    assert finetune.prepare(bb, 2, "none", seed=0, precision="float16").scaler is None


# -- channels_last -----------------------------------------------------------------------------------------

def test_channels_last_is_cuda_only_by_default_and_only_for_cnns(monkeypatch):
    assert lab.device.CHANNELS_LAST_DEVICES == frozenset({"cuda"})
    assert not channels_last(_resnet())                           # on CPU
    monkeypatch.setattr(lab.device, "CHANNELS_LAST_DEVICES", frozenset({"cpu"}))
    assert channels_last(_resnet())
    assert not channels_last(_vit())                              # token taps: nothing to gain


def test_channels_last_path_extracts_the_same_features_and_trains(monkeypatch):
    x, y = _pixels()
    ref_bb = _resnet()
    ref = features.extract(ref_bb, x, layers=ref_bb.layers)
    monkeypatch.setattr(lab.device, "CHANNELS_LAST_DEVICES", frozenset({"cpu"}))
    bb = _resnet()
    got = features.extract(bb, x, layers=bb.layers)
    conv = bb.model.conv1.weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    for name in bb.layers:
        torch.testing.assert_close(got[name], ref[name], rtol=1e-4, atol=1e-5)
    ft = finetune.prepare(bb, 2, "full", lr=1e-3, seed=0)
    assert ft.channels_last
    ft.model.train()
    loss, right = ft.train_step(x, y)
    assert np.isfinite(loss) and 0 <= right <= len(y)


# -- loaders: pinned batches, workers for a memory-mapped folder ----------------------------------------

def _folder(root, classes=("a", "b"), n=6, size=16):
    rng = np.random.default_rng(0)
    for c in classes:
        (root / c).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(root / c / f"{i}.png")


def test_loader_options_pin_only_for_cuda_and_use_workers_only_for_a_mapped_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    _folder(tmp_path / "imgs")
    mapped = lab.data.load(f"folder:{tmp_path / 'imgs'}", image_size=16)
    glyphs = lab.data.load("glyphs")
    assert mapped.loader_options(torch.device("cpu")) == {"num_workers": 0, "pin_memory": False}
    assert glyphs.loader_options("cuda") == {"num_workers": 0, "pin_memory": True}
    workers = lab.data._dataset.LOADER_WORKERS
    assert mapped.loader_options("cuda") == {"num_workers": workers, "pin_memory": True}
    assert mapped.subset(["b"]).loader_options("cuda")["num_workers"] == workers   # views map the same file


def test_pinned_loader_yields_the_same_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    _folder(tmp_path / "imgs")
    ds = lab.data.load(f"folder:{tmp_path / 'imgs'}", image_size=16)
    plain = list(ds.train_loader(5, seed=1))
    with pytest.warns(UserWarning, match="pin_memory") if not torch.cuda.is_available() else _no_warning():
        pinned = list(ds.train_loader(5, seed=1, pin_memory=True))
    assert len(plain) == len(pinned)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(plain, pinned))
    if torch.cuda.is_available():
        assert pinned[0][0].is_pinned()


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# -- out of memory --------------------------------------------------------------------------------------------

def test_out_of_memory_message_names_the_batch_size_and_what_to_lower_it_to():
    msg = out_of_memory_message("training (epoch 3)", "batch_size", 256, "cuda:0")
    assert msg == ("the cuda device ran out of memory in training (epoch 3) with batches of 256 images; lower "
                   "batch_size to 128 or less, use a smaller img_size, or free the device from other processes.")
    assert "lower batch_size to 1 or less" in out_of_memory_message("training", "batch_size", 1, "cuda")


def test_out_of_memory_hint_turns_the_device_error_into_the_one_line_users_see():
    with pytest.raises(DeviceOutOfMemoryError) as info:
        with out_of_memory_hint("feature extraction", "eval_batch_size", 64, torch.device("cuda")):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value.__cause__, torch.OutOfMemoryError)
    assert user_message(info.value) == out_of_memory_message("feature extraction", "eval_batch_size", 64, "cuda")
    with pytest.raises(RuntimeError, match="other"):              # other errors pass through untouched
        with out_of_memory_hint("training", "batch_size", 8, "cuda"):
            raise RuntimeError("other")
