"""Fine-tuning strategies' mechanics: the block a strategy trains and the classifier it builds.

The strategies themselves (what trains, their names and defaults) are rows of the one table,
:data:`lab.catalogue.STRATEGIES`; this module looks them up (:func:`get_strategy`), resolves the block
of Layer FT and SCL FT (:func:`resolve_block`) and builds the backbone + head a :class:`~lab.finetune.FineTuner`
trains, with SCL FT's skip connection (:func:`combine_skip`).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from lab.backbones import first_tensor
from lab.catalogue import STRATEGIES, Strategy
from lab.features import pool_tap_output   # the one pooling: SCL's skip sees what extraction measures

__all__ = ["get_strategy", "resolve_block", "combine_skip"]


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(
            f"strategy must be one of {', '.join(map(repr, STRATEGIES))}. Got {name!r} instead."
        ) from None


def resolve_block(bb, block: str | int) -> tuple[str, nn.Module]:
    """The (tap name, module) that ``block`` names: a tap name or an index into ``bb.block_modules()``.

    Raises ValueError listing the valid names and the index range.
    """
    blocks = bb.block_modules()   # [(tap, module)], input -> output
    names = [name for name, _ in blocks]
    if isinstance(block, (int, np.integer)) and not isinstance(block, bool):
        i = int(block)
        if not -len(blocks) <= i < len(blocks):
            raise ValueError(
                f"block index {i} is out of range ({-len(blocks)} to {len(blocks) - 1}) for {bb.name}; "
                f"its blocks are {', '.join(names)}."
            )
        return blocks[i]
    if isinstance(block, str) and block.lstrip("-").isdigit():
        return resolve_block(bb, int(block))
    for name, module in blocks:
        if name == block:
            return name, module
    raise ValueError(f"block {block!r} is not a trainable block of {bb.name}; choose one of {', '.join(names)} "
                     f"or an index from {-len(blocks)} to {len(blocks) - 1}.")


class _Classifier(nn.Module):
    """backbone (pre-logits) [+ zero-padded pooled block output] -> linear head.

    The block output is captured by a forward hook registered only while this
    module's own forward runs, so feature extraction elsewhere is unaffected.
    """

    def __init__(self, bb, head: nn.Linear, skip_tap=None, skip_module: nn.Module | None = None):
        super().__init__()
        self.backbone = bb.model
        self.head = head
        self._pre_logits = bb.pre_logits
        self.skip_tap = skip_tap
        # Not registered as a submodule: the block already belongs to ``backbone`` (no duplicate
        # entries in state_dict / parameters).
        self._skip = [skip_module] if skip_module is not None else []
        self._captured: torch.Tensor | None = None

    @property
    def skip_module(self) -> nn.Module | None:
        return self._skip[0] if self._skip else None

    def _capture(self, module, args, output):
        self._captured = first_tensor(output)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """What the head sees: (N, D) pre-logits, plus the SCL skip when enabled."""
        if self.skip_module is None:
            return self._pre_logits(x)                                                  # (N, D)
        handle = self.skip_module.register_forward_hook(self._capture)
        try:
            pre = self._pre_logits(x)                                                   # (N, D)
            skip = self._captured
        finally:
            handle.remove()
            self._captured = None
        return combine_skip(pre, pool_tap_output(skip, self.skip_tap))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))                                              # (N, K)


def combine_skip(pre_logits: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """SCL feature: pre-logits (N, D) + block features (N, C) zero-padded to D channels (C <= D)."""
    d, c = pre_logits.shape[1], block.shape[1]
    if c > d:
        raise ValueError(f"the SCL skip needs the block's width ({c}) to be at most the pre-logits width ({d}).")
    if c < d:
        block = F.pad(block, (0, d - c))                                                # (N, D)
    return pre_logits + block
