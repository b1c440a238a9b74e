"""Pen and scan augmentations of glyph batches, drawn on the fly from a seeded generator.

The zoo's source images are rendered once (:mod:`lab.zoo._source`); every training batch
is then varied the way a pen, a printer and a scanner vary a character: stroke weight
(a fraction of a 1 px dilation or erosion, min/max pooling), a small affine warp
(rotation, shear, scale, shift) plus a smooth elastic displacement (Simard et al. 2003,
"Best practices for convolutional neural networks applied to visual document
analysis"), blur, faded ink on shaded paper, and pixel noise. Each image draws its own
amounts, uniformly up to the maxima of :class:`Augment`; all of a batch goes through
the same few tensor operations, so the cost on a CPU is small beside the model's.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

__all__ = ["Augment", "augment"]


@dataclass(frozen=True)
class Augment:
    """Maxima of the pen and scan augmentations at ``strength`` 1 (each image draws its own).

    Parameters
    ----------
    strength : float
        Multiplies every maximum below; 0 leaves images unchanged.
    thickness : float
        Stroke weight change as a fraction of a 1 px dilation (bolder) or erosion (thinner),
        at most 1. Kept small: weight is what tells a Regular face from its Bold.
    rotate : float
        Rotation, degrees either way.
    shear : float
        Horizontal and vertical shear (tangent of the angle), either way.
    scale : float
        Relative size change, either way.
    translate : float
        Shift in pixels, either way, along each axis.
    elastic : float
        Amplitude in pixels of a smooth displacement field (4 x 4 control points, bicubic).
    blur : float
        Largest Gaussian sigma in pixels (5-tap kernel).
    contrast : float
        How far ink may fade and paper may darken together, in [0, 1) gray: ink level up to
        ``contrast / 2``, paper level down to ``1 - contrast / 2``.
    texture : float
        Amplitude of smooth paper shading (4 x 4 control points), in [0, 1] gray.
    noise : float
        Largest standard deviation of pixel noise, in [0, 1] gray.
    """

    strength: float = 1.0
    thickness: float = 0.25
    rotate: float = 4.0
    shear: float = 0.1
    scale: float = 0.06
    translate: float = 2.0
    elastic: float = 1.0
    blur: float = 0.7
    contrast: float = 0.3
    texture: float = 0.04
    noise: float = 0.03

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise ValueError(f"augment {f.name} must be a finite number >= 0. Got {value!r} instead.")
            object.__setattr__(self, f.name, float(value))
        if self.thickness * self.strength > 1:
            raise ValueError(f"augment thickness x strength must be at most 1 (a 1 px dilation). "
                             f"Got {self.thickness:g} x {self.strength:g} instead; lower --augment.")
        if self.contrast * self.strength >= 1:
            raise ValueError(f"augment contrast x strength must stay below 1, else ink may turn lighter than "
                             f"paper. Got {self.contrast:g} x {self.strength:g} instead; lower --augment.")

    def to_dict(self) -> dict:
        """The maxima as a plain dict (for cards and checkpoints)."""
        return asdict(self)


def augment(images, generator, spec: Augment = Augment()):
    """Pen and scan variations of a batch of glyphs: dark ink on white stays dark ink on white.

    Parameters
    ----------
    images : torch.Tensor
        uint8 (B, 1, H, W), 255 = paper.
    generator : torch.Generator
        Source of every random draw (CPU); the same seed gives the same batch.
    spec : Augment
        The maxima; ``Augment(strength=0)`` returns an unchanged copy.

    Returns
    -------
    torch.Tensor
        uint8 (B, 1, H, W).
    """
    import torch
    import torch.nn.functional as F

    if not isinstance(images, torch.Tensor) or images.dtype != torch.uint8 or images.dim() != 4 \
            or images.shape[1] != 1:
        got = (f"{images.dtype} {tuple(images.shape)}" if isinstance(images, torch.Tensor)
               else type(images).__name__)
        raise ValueError(f"augment expects uint8 images of shape (B, 1, H, W). Got {got} instead.")
    if spec.strength == 0 or images.shape[0] == 0:
        return images.clone()
    s = spec.strength
    b, _, h, w = images.shape

    def uniform(lo: float, hi: float, *shape: int):
        return lo + (hi - lo) * torch.rand((b, *shape), generator=generator)

    # Every draw happens whatever the maxima, so one seed gives the same amounts to each step.
    weight = uniform(-1, 1, 1, 1, 1) * spec.thickness * s                   # (B, 1, 1, 1)
    angle = uniform(-1, 1) * math.radians(spec.rotate * s)                 # (B,)
    shear = uniform(-1, 1, 2) * spec.shear * s                             # (B, 2)
    zoom = 1 + uniform(-1, 1) * spec.scale * s                             # (B,)
    shift = uniform(-1, 1, 2) * spec.translate * s * 2 / w                 # (B, 2) normalized
    field = torch.randn((b, 2, 4, 4), generator=generator) * spec.elastic * s * 2 / w
    sigma = uniform(0, 1) * spec.blur * s                                  # (B,)
    paper = 1 - uniform(0, 1, 1, 1, 1) * spec.contrast * s / 2             # (B, 1, 1, 1)
    ink_level = uniform(0, 1, 1, 1, 1) * spec.contrast * s / 2             # (B, 1, 1, 1)
    shading = torch.randn((b, 1, 4, 4), generator=generator) * spec.texture * s
    noise_sd = uniform(0, 1, 1, 1, 1) * spec.noise * s                     # (B, 1, 1, 1)
    noise = torch.randn((b, 1, h, w), generator=generator)

    ink = 1 - images.float() / 255                                         # (B, 1, H, W), 1 = ink
    if spec.thickness:
        bolder, thinner = _max3(ink), -_max3(-ink)                         # 1 px dilation, erosion
        ink = ink + weight.clamp(min=0) * (bolder - ink) + (-weight).clamp(min=0) * (thinner - ink)
    if spec.rotate or spec.shear or spec.scale or spec.translate or spec.elastic:
        cos, sin = torch.cos(angle), torch.sin(angle)
        rot = torch.stack([torch.stack([cos, -sin], 1), torch.stack([sin, cos], 1)], 1)      # (B, 2, 2)
        skew = torch.eye(2).repeat(b, 1, 1)
        skew[:, 0, 1], skew[:, 1, 0] = shear[:, 0], shear[:, 1]
        theta = torch.cat([rot @ skew / zoom[:, None, None], shift[:, :, None]], 2)         # (B, 2, 3)
        grid = F.affine_grid(theta, [b, 1, h, w], align_corners=False)                       # (B, H, W, 2)
        grid = grid + _smooth(field, h, w).permute(0, 2, 3, 1)
        ink = F.grid_sample(ink, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    if spec.blur:
        taps = torch.arange(-2, 3, dtype=torch.float32)                                      # (5,)
        kernel = torch.exp(-taps ** 2 / (2 * sigma.clamp(min=1e-3)[:, None] ** 2))          # (B, 5)
        kernel = kernel / kernel.sum(1, keepdim=True)
        flat = ink.reshape(1, b, h, w)
        flat = F.conv2d(flat, kernel[:, None, :, None], padding=(2, 0), groups=b)
        ink = F.conv2d(flat, kernel[:, None, None, :], padding=(0, 2), groups=b).reshape(b, 1, h, w)
    out = paper - ink.clamp(0, 1) * (paper - ink_level)                                      # (B, 1, H, W)
    if spec.texture:
        out = out + _smooth(shading, h, w)
    if spec.noise:
        out = out + noise * noise_sd
    return (out.clamp(0, 1) * 255).round().to(torch.uint8)


def _max3(x):
    """Maximum over each pixel's 3 x 3 neighbourhood, outside counting as 0: (B, C, H, W).

    Two shifted 1-D maxima; several times faster on a CPU than ``max_pool2d(x, 3, 1, 1)``."""
    import torch
    import torch.nn.functional as F

    p = F.pad(x, (0, 0, 1, 1))
    x = torch.maximum(torch.maximum(p[..., :-2, :], p[..., 1:-1, :]), p[..., 2:, :])
    p = F.pad(x, (1, 1))
    return torch.maximum(torch.maximum(p[..., :-2], p[..., 1:-1]), p[..., 2:])


def _smooth(coarse, h: int, w: int):
    """Bicubic upsampling of (B, C, k, k) control points to (B, C, h, w) corners aligned, as two
    small matrix products (the interpolation is separable)."""
    import torch
    import torch.nn.functional as F

    k = coarse.shape[-1]
    basis = torch.eye(k).reshape(k, 1, k, 1)                                             # one control point each
    rows = F.interpolate(basis, size=(h, 1), mode="bicubic", align_corners=True)[:, 0, :, 0]   # (k, h)
    cols = rows if w == h else F.interpolate(basis, size=(w, 1), mode="bicubic", align_corners=True)[:, 0, :, 0]
    return torch.einsum("kh,bckl,lw->bchw", rows, coarse, cols)
