"""The teaching MLP: equal-width fully connected layers on flattened images.

Shaped like the MLPs of the neural-collapse transfer paper's Figure 2 (Li, Liu
et al., "Principled and efficient transfer learning of deep models via neural
collapse"): ``depth`` hidden layers, each ``Linear -> BatchNorm1d -> ReLU`` of the
same width (``bn=0``: ``Linear -> ReLU``), then a linear classifier. It speaks timm's model interface
(``forward_features``, ``forward_head(x, pre_logits=True)``, ``reset_classifier``,
``get_classifier``, ``num_features``, ``feature_info``, ``pretrained_cfg``) so that
:mod:`lab.backbones`, :mod:`lab.features` and fine-tuning treat it like any timm model.
"""
from __future__ import annotations

import torch
from torch import nn

from lab.backbones._head import TimmHead

__all__ = ["MLP", "parse_mlp_spec"]

_DEFAULTS = {"depth": 8, "width": 256, "bn": 1}
_LOWEST = {"depth": 1, "width": 1, "bn": 0}


def parse_mlp_spec(name: str) -> dict[str, int]:
    """Parse ``"mlp"``, ``"mlp:depth=8,width=256"`` or ``"mlp:depth=8,width=256,bn=0"`` (no BatchNorm) into
    keyword arguments.

    Raises
    ------
    ValueError
        For unknown options or values that are not positive integers.
    """
    _, _, opts = name.partition(":")
    out = dict(_DEFAULTS)
    for item in filter(None, (part.strip() for part in opts.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in _DEFAULTS:
            raise ValueError(
                f"mlp options must be 'depth=INT' and/or 'width=INT', and 'bn=0' for no BatchNorm "
                f"(e.g. 'mlp:depth=8,width=256,bn=0'). Got {item!r} in {name!r} instead."
            )
        try:
            number = int(value)
        except ValueError:
            number = -1
        if key == "bn" and number not in (0, 1):
            raise ValueError(f"mlp option 'bn' must be 0 (no BatchNorm) or 1 (BatchNorm, the default). "
                             f"Got {value.strip()!r} in {name!r} instead.")
        if number < _LOWEST[key]:
            raise ValueError(f"mlp option {key!r} must be a positive integer. "
                             f"Got {value.strip()!r} in {name!r} instead.")
        out[key] = number
    return out


class _Dense(nn.Sequential):
    """One hidden layer: Linear -> BatchNorm1d -> ReLU (Linear -> ReLU without ``bn``)."""

    def __init__(self, in_features: int, width: int, bn: bool = True):
        norm = [nn.BatchNorm1d(width)] if bn else []
        super().__init__(nn.Linear(in_features, width), *norm, nn.ReLU(inplace=True))


class MLP(TimmHead, nn.Module):
    """Equal-width MLP on flattened images, with timm's model interface.

    Parameters
    ----------
    depth : int
        Number of hidden layers (``fc1`` .. ``fc{depth}``).
    width : int
        Width of every hidden layer; also ``num_features`` (the pre-logits width).
    bn : int or bool
        BatchNorm1d after each hidden layer's Linear (1, the default) or none (0).
    in_chans, img_size : int
        Input images are (N, in_chans, img_size, img_size); they are flattened to
        ``in_chans * img_size**2`` features.
    num_classes : int
        Classifier outputs; 0 makes the head an identity (the model returns pre-logits).
    """

    def __init__(self, depth: int = 8, width: int = 256, bn: int | bool = True, *, in_chans: int = 1,
                 img_size: int = 32, num_classes: int = 0):
        super().__init__()
        self.depth, self.width, self.bn = int(depth), int(width), bool(bn)
        self.in_chans, self.img_size = int(in_chans), int(img_size)
        self.in_features = self.in_chans * self.img_size * self.img_size
        self.num_classes = int(num_classes)
        self.num_features = self.head_hidden_size = self.width
        in_features = self.in_features
        for i in range(1, self.depth + 1):
            self.add_module(f"fc{i}", _Dense(in_features, self.width, self.bn))
            in_features = self.width
        self.head = nn.Linear(self.width, self.num_classes) if self.num_classes > 0 else nn.Identity()
        # timm's contracts: one feature_info entry per hidden layer, and a pretrained_cfg naming the classifier.
        self.feature_info = [
            {"num_chs": self.width, "reduction": 1, "module": f"fc{i}"} for i in range(1, self.depth + 1)
        ]
        self.pretrained_cfg = {
            "architecture": "mlp", "classifier": "head", "num_classes": self.num_classes,
            "input_size": (self.in_chans, self.img_size, self.img_size), "fixed_input_size": True,
        }

    def _hidden(self):
        return [getattr(self, f"fc{i}") for i in range(1, self.depth + 1)]

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) images -> (N, width) output of the last hidden layer."""
        if x.dim() < 2 or x[0].numel() != self.in_features:
            raise ValueError(
                f"mlp was built for inputs of {self.in_chans}x{self.img_size}x{self.img_size} "
                f"({self.in_features} values per image); got a batch of shape {tuple(x.shape)}. "
                f"Load it with in_chans and img_size matching the data."
            )
        x = x.flatten(1)  # (N, C*H*W)
        for layer in self._hidden():
            x = layer(x)  # (N, width)
        return x

    def reset_classifier(self, num_classes: int, global_pool=None) -> None:
        """Replace the classifier with a fresh ``Linear(width, num_classes)`` (identity for 0)."""
        super().reset_classifier(num_classes)
        self.pretrained_cfg["num_classes"] = self.num_classes

    def extra_repr(self) -> str:
        return (f"depth={self.depth}, width={self.width}, bn={int(self.bn)}, "
                f"input={self.in_chans}x{self.img_size}x{self.img_size}")
