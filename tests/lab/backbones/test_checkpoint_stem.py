"""Checkpoints fit the data: a 3-channel checkpoint on 1-channel data (and the reverse) adapts the
stem as timm does for pretrained weights (timm.models._manipulate.adapt_input_conv), says so once,
and any other shape mismatch is still refused."""
from __future__ import annotations

import warnings

import pytest
import torch

timm = pytest.importorskip("timm")
from safetensors.torch import save_file  # noqa: E402
from timm.models._manipulate import adapt_input_conv  # noqa: E402

from lab.backbones import load  # noqa: E402

NAME = "test_efficientnet"   # timm's tiny test model; its stem is conv_stem (24, C, 3, 3)


def _saved(tmp_path, in_chans: int, **kwargs):
    torch.manual_seed(0)
    model = timm.create_model(NAME, in_chans=in_chans, num_classes=0, **kwargs).eval()
    path = tmp_path / f"c{in_chans}.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return model, path


def _load(path, in_chans: int):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bb = load(NAME, in_chans=in_chans, img_size=32, device="cpu", checkpoint=path)
    return bb, [str(w.message) for w in caught]


@pytest.mark.parametrize("saved,wanted", [(3, 1), (1, 3)])
def test_stem_adapts_to_the_data_channels(tmp_path, saved, wanted):
    model, path = _saved(tmp_path, saved)
    bb, messages = _load(path, wanted)
    stem = bb.model.state_dict()["conv_stem.weight"]
    expected = adapt_input_conv(wanted, model.state_dict()["conv_stem.weight"], base_chans=saved)
    torch.testing.assert_close(stem, expected)                         # timm's rule, exactly
    if wanted == 1:   # sum over RGB: a gray image gives what the RGB model gives on gray-as-RGB
        torch.testing.assert_close(stem, model.state_dict()["conv_stem.weight"].sum(dim=1, keepdim=True))
    # Every other weight is the checkpoint's.
    own = model.state_dict()
    assert all(torch.equal(v, own[k]) for k, v in bb.model.state_dict().items() if k != "conv_stem.weight")
    said = [m for m in messages if "conv_stem.weight" in m]
    assert len(said) == 1, messages                                       # said once
    assert (f"conv_stem.weight (24, {saved}, 3, 3) adapted to the model's {wanted} input channel"
            in said[0]) and "adapt_input_conv" in said[0]


def test_gray_checkpoint_sees_what_rgb_sees(tmp_path):
    """A 3-channel model on gray-as-RGB images equals the adapted 1-channel model on the gray images
    (sum over RGB is exact for inputs whose three channels are equal)."""
    model, path = _saved(tmp_path, 3)
    bb, _ = _load(path, 1)
    gray = torch.rand(2, 1, 32, 32)                                       # (N, 1, H, W)
    with torch.no_grad():
        torch.testing.assert_close(bb.model(gray), model(gray.expand(-1, 3, -1, -1)), rtol=1e-4, atol=1e-5)


def test_other_mismatches_are_refused(tmp_path):
    """Only the 1 <-> 3 input channels of the stem are fitted; a stem of another width, or any
    other layer that differs, keeps the clear refusal."""
    state = timm.create_model(NAME, in_chans=3, num_classes=0).state_dict()

    def saved_with(key, rows):
        changed = dict(state, **{key: torch.zeros(rows, *state[key].shape[1:])})
        path = tmp_path / f"{key}.safetensors"
        save_file({k: v.contiguous() for k, v in changed.items()}, str(path))
        return path

    with pytest.raises(ValueError, match=r"shape mismatches: conv_stem.weight \(16, 3, 3, 3\) vs model "
                                         r"\(24, 1, 3, 3\).*Load with the same backbone name"):
        load(NAME, in_chans=1, img_size=32, device="cpu", checkpoint=saved_with("conv_stem.weight", 16))
    with pytest.raises(ValueError, match=r"shape mismatches: conv_head.weight \(7, .*\) vs model"):
        load(NAME, in_chans=1, img_size=32, device="cpu", checkpoint=saved_with("conv_head.weight", 7))
