"""timm's classifier interface, shared by the models lab builds itself (the teaching MLP, the Hugging Face
wrapper): their ``forward_features`` already returns the pooled (N, D) pre-logits features, and their
classifier is ``self.head``, a ``Linear(num_features, num_classes)`` or an identity for 0 classes."""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["TimmHead"]


class TimmHead:
    """``forward_head``, ``forward``, ``get_classifier`` and ``reset_classifier`` as timm models have them,
    for an ``nn.Module`` with ``forward_features``, ``num_features`` and ``head``."""

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Pre-logits are the features themselves; otherwise apply the classifier."""
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))

    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool=None) -> None:
        """Replace the classifier with a fresh ``Linear(num_features, num_classes)`` (identity for 0), on
        the model's device."""
        self.num_classes = int(num_classes)
        device = next(self.parameters()).device
        self.head = (nn.Linear(self.num_features, self.num_classes) if self.num_classes > 0
                     else nn.Identity()).to(device)
