"""The input normalization a backbone expects, and the conversion of images to its input.

Images reach a backbone as pixels: uint8 0..255 or float in [0, 1] (what lab datasets
yield), with 1 or 3 channels. :meth:`Normalization.apply` turns them into the model's
input: channels adapted (gray -> RGB by repetition, RGB -> gray by the channel mean),
the optional fixed input size (zoo models) enforced by resizing, then
``(x - mean) / std`` per channel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.nn import functional as F

__all__ = ["Normalization", "lab_default", "from_stats"]


@dataclass(frozen=True)
class Normalization:
    """Per-channel statistics of the model's input, and where they came from.

    Attributes
    ----------
    mean, std : tuple[float, ...]
        One value per model input channel, applied to pixels in [0, 1].
    channels : int
        Input channels of the model.
    source : str
        Where the statistics come from (``"timm pretrained_cfg (resnet18)"``,
        ``"hf image processor (/path)"``, ``"zoo card (glyph_cnn)"``, ...).
    size : tuple[int, int] or None
        (H, W) the model must see (images of another size are resized); None: any size.
    """

    mean: tuple
    std: tuple
    channels: int
    source: str
    size: tuple | None = None
    # (device, dtype) -> (mean, std) tensors (1, C, 1, 1): built once, not per batch on the device
    _tensors: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def as_dict(self) -> dict:
        """JSON-friendly record of what was used (for a run's meta)."""
        return {"mean": [float(m) for m in self.mean], "std": [float(s) for s in self.std],
                "channels": int(self.channels), "source": self.source,
                "size": None if self.size is None else [int(s) for s in self.size]}

    def apply(self, images: torch.Tensor) -> torch.Tensor:
        """Pixels (B, C, H, W), uint8 or float in [0, 1] -> model input (B, channels, H', W') float.

        C may be 1 or ``channels``; a model with one channel also takes RGB (averaged).
        """
        if images.dim() != 4:
            raise ValueError(f"images must have shape (B, C, H, W). Got shape {tuple(images.shape)} instead.")
        x = images.float().div(255.0) if not images.is_floating_point() else images   # (B, C, H, W) in [0, 1]
        c = x.shape[1]
        if c != self.channels:
            if c == 1:
                x = x.expand(-1, self.channels, -1, -1)                                 # gray -> RGB
            elif self.channels == 1:
                x = x.mean(dim=1, keepdim=True)                                         # RGB -> gray
            else:
                raise ValueError(f"the model takes {self.channels}-channel images; got {c} channels. "
                                 f"Convert the images to 1 or {self.channels} channels.")
        if self.size is not None and tuple(x.shape[-2:]) != tuple(self.size):
            x = F.interpolate(x, size=tuple(self.size), mode="bilinear", align_corners=False, antialias=True)
        mean, std = self._statistics(x.device, x.dtype)                                # (1, channels, 1, 1)
        return (x - mean) / std                                                         # (B, channels, H', W')

    def _statistics(self, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and std (1, channels, 1, 1) on ``device``: made once per device and dtype (a new
        tensor per batch is a host-to-device copy per batch)."""
        key = (device, dtype)
        pair = self._tensors.get(key)
        if pair is None:
            pair = (torch.tensor(self.mean, dtype=dtype, device=device).view(1, -1, 1, 1),
                    torch.tensor(self.std, dtype=dtype, device=device).view(1, -1, 1, 1))
            self._tensors[key] = pair        # a race builds the same pair twice, harmlessly
        return pair


def from_stats(mean, std, channels: int, source: str, size=None) -> Normalization:
    """Statistics adapted to ``channels``: RGB stats for a one-channel model are averaged
    (timm sums a pretrained stem's RGB weights for ``in_chans=1``), one value is repeated."""
    mean, std = [float(m) for m in mean], [float(s) for s in std]
    if len(mean) != len(std) or not mean:
        raise ValueError(f"mean and std must have the same, non-zero length. Got {mean} and {std} instead.")
    if any(s <= 0 for s in std):
        raise ValueError(f"std must be positive. Got {std} instead.")
    channels = int(channels)
    if len(mean) != channels:
        if len(mean) == 1:
            mean, std = mean * channels, std * channels
        elif channels == 1:
            mean, std = [sum(mean) / len(mean)], [sum(std) / len(std)]
        else:
            raise ValueError(f"{source}: {len(mean)} mean/std values for a {channels}-channel model.")
    return Normalization(tuple(mean), tuple(std), channels, source,
                         None if size is None else (int(size[0]), int(size[1])))


def lab_default(channels: int) -> Normalization:
    """``(x - 0.5) / 0.5``: models without recorded statistics (the teaching MLP)."""
    return from_stats([0.5], [0.5], channels, "lab default (x - 0.5) / 0.5")
