"""The zoo recipe's pen and scan augmentations (lab.zoo._augment): shapes, seeds, ink on paper, identity."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from lab.zoo import _augment
from lab.zoo._augment import Augment, augment

OPS = [f.name for f in dataclasses.fields(Augment) if f.name != "strength"]
OFF = Augment(**{name: 0.0 for name in OPS})          # strength 1, every maximum 0


def _glyphs(n: int = 8, h: int = 64, w: int = 64) -> torch.Tensor:
    """White paper with a black cross of 5 px strokes, placed a little differently in each image."""
    x = torch.full((n, 1, h, w), 255, dtype=torch.uint8)
    for i in range(n):
        o = i % 5
        x[i, 0, h // 3 + o:h // 3 + o + 5, w // 6:w - w // 6] = 0
        x[i, 0, h // 6:h - h // 6, w // 2 - o:w // 2 - o + 5] = 0
    return x


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("shape", [(8, 1, 64, 64), (3, 1, 32, 48), (1, 1, 16, 16)])
def test_shape_and_dtype_are_kept(shape):
    x = _glyphs(shape[0], *shape[2:])
    out = augment(x, _gen(), Augment())
    assert out.shape == x.shape and out.dtype == torch.uint8
    assert augment(x[:0], _gen()).shape == (0, *shape[1:])


def test_a_seed_gives_the_same_batch_and_another_seed_another():
    x = _glyphs()
    a, b, c = augment(x, _gen(1)), augment(x, _gen(1)), augment(x, _gen(2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    same = x[:1].repeat(4, 1, 1, 1)                      # each image draws its own amounts
    out = augment(same, _gen(3))
    assert all(not torch.equal(out[0], out[i]) for i in range(1, 4))


def test_strength_zero_and_zero_maxima_are_the_identity():
    x = _glyphs()
    out = augment(x, _gen(), Augment(strength=0))
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()
    assert torch.equal(augment(x, _gen(), OFF), x)       # through every step, all amounts zero


@pytest.mark.parametrize("op", OPS)
def test_each_augmentation_alone_changes_the_images(op):
    spec = dataclasses.replace(OFF, **{op: getattr(Augment(), op)})
    x = _glyphs()
    assert not torch.equal(augment(x, _gen(), spec), x)


@pytest.mark.parametrize("strength", [1.0, 2.0])
def test_ink_stays_dark_on_white_paper(strength):
    x = _glyphs(16)
    out = augment(x, _gen(5), Augment(strength=strength)).float()        # (16, 1, 64, 64)
    for img in out:
        assert img.median() > 180                                          # most of it is paper
        assert img.median() - torch.quantile(img.flatten(), 0.05) > 80    # and some of it much darker ink


def test_without_warps_the_dark_pixels_are_where_the_ink_was():
    photometric = dataclasses.replace(Augment(strength=2), rotate=0, shear=0, scale=0, translate=0, elastic=0)
    x = _glyphs(16)
    out = augment(x, _gen(5), photometric).float()
    for img, mask in zip(out, (x == 0).float()):
        darkness = 255 - img.flatten()
        assert torch.corrcoef(torch.stack([darkness, mask.flatten()]))[0, 1] > 0.6


def test_stroke_weight_goes_both_ways():
    spec = dataclasses.replace(OFF, thickness=0.5)
    x = _glyphs(1).repeat(32, 1, 1, 1)
    ink = (255 - augment(x, _gen(), spec).float()).sum((1, 2, 3))         # (32,) ink mass per image
    before = (255 - x[0].float()).sum()
    assert (ink > before).any() and (ink < before).any()


def test_bad_input_names_what_was_expected():
    with pytest.raises(ValueError, match=r"augment expects uint8 images of shape \(B, 1, H, W\). "
                                         r"Got torch.float32 \(2, 1, 8, 8\) instead."):
        augment(torch.zeros(2, 1, 8, 8), _gen())
    with pytest.raises(ValueError, match=r"Got torch.uint8 \(2, 3, 8, 8\) instead"):
        augment(torch.zeros(2, 3, 8, 8, dtype=torch.uint8), _gen())
    with pytest.raises(ValueError, match="augment blur must be a finite number >= 0. Got -1 instead."):
        Augment(blur=-1)
    with pytest.raises(ValueError, match="contrast x strength must stay below 1.*lower --augment"):
        Augment(strength=4)


def test_helpers_match_their_torch_references():
    x = torch.rand(3, 2, 4, 4)
    torch.testing.assert_close(_augment._smooth(x, 64, 48),
                               F.interpolate(x, size=(64, 48), mode="bicubic", align_corners=True))
    y = torch.rand(3, 1, 20, 24)
    assert torch.equal(_augment._max3(y), F.max_pool2d(F.pad(y, (1, 1, 1, 1)), 3, 1))
