"""The model wrapper behind :mod:`lab.backbones._hf`: a transformers vision model speaking timm's interface.

Private: :mod:`lab.backbones._hf` re-exports :class:`HFNet` and :func:`prefix_tokens`.
"""
from __future__ import annotations

import torch
from torch import nn

from lab.backbones._head import TimmHead

__all__ = ["HFNet", "prefix_tokens"]

_POOLS = ("logits", "output")


class HFNet(TimmHead, nn.Module):
    """A transformers vision model (``net``) plus a linear ``head``, speaking timm's interface
    (``forward_features``/``forward_head``, ``get_classifier``/``reset_classifier``).

    ``forward_features`` already returns the pooled (N, D) pre-logits features, so
    ``forward_head(f, pre_logits=True)`` returns them unchanged. ``pool`` says where they come
    from: ``"logits"`` (a classification model whose head linears are identities) or
    ``"output"`` (the model's ``pooler_output``, else the class token of its last hidden
    state, else the mean of its patch tokens or of its map).
    """

    def __init__(self, net: nn.Module, num_features: int, num_classes: int, forward_kwargs: dict,
                 pool: str = "logits", adapter: str | None = None):
        super().__init__()
        if pool not in _POOLS:
            raise ValueError(f"pool must be one of {_POOLS}. Got {pool!r} instead.")
        self.net = net
        self.num_features = int(num_features)
        self._forward_kwargs = dict(forward_kwargs)
        self._pool = pool
        self._adapter = adapter
        self.num_classes = 0
        self.head: nn.Module = nn.Identity()
        self.reset_classifier(num_classes)
        # A classification model's base model is its encoder; a bare model is its own base unless its
        # base_model attribute holds all of it (CLIP's vision_model), whose paths then name the taps.
        base = net.base_model
        whole = sum(p.numel() for p in base.parameters()) == sum(p.numel() for p in net.parameters())
        self._base_name = next(n for n, m in net.named_modules() if m is (base if pool == "logits" or whole
                                                                          else net))

    @property
    def base(self) -> nn.Module:
        """The model's base (encoder) module, whose module paths name the taps."""
        return self.net.get_submodule(self._base_name)

    def _inputs(self, x: torch.Tensor) -> dict:
        """Model keyword inputs for images ``x`` (N, C, H, W)."""
        config = self.net.config
        if self._adapter == "naflex":   # SigLIP 2: (N, h*w, p*p*C) patches in row order, as its processor makes
            p = int(config.patch_size)
            n, c, h, w = x.shape
            gh, gw = h // p, w // p
            patches = x[:, :, :gh * p, :gw * p].reshape(n, c, gh, p, gw, p).permute(0, 2, 4, 3, 5, 1)
            patches = patches.reshape(n, gh * gw, p * p * c)                                   # (N, L, p*p*C)
            shapes = torch.tensor([[gh, gw]], device=x.device).expand(n, 2)
            mask = torch.ones(n, gh * gw, dtype=torch.long, device=x.device)
            return {"pixel_values": patches, "spatial_shapes": shapes, "pixel_attention_mask": mask}
        if self._adapter == "mae_no_mask":  # argsort of an increasing noise keeps every patch in place
            p = config.patch_size
            ph, pw = (p, p) if isinstance(p, int) else p
            n_patches = (x.shape[-2] // ph) * (x.shape[-1] // pw)
            noise = torch.arange(n_patches, device=x.device, dtype=x.dtype).expand(x.shape[0], -1)  # (N, L)
            return {"pixel_values": x, "noise": noise, **self._forward_kwargs}
        return {"pixel_values": x, **self._forward_kwargs}

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(**self._inputs(x))
        if self._pool == "logits":   # (PP-LCNet returns what its identity head gives as last_hidden_state)
            logits = getattr(out, "logits", None)
            return (out.last_hidden_state if logits is None else logits).flatten(1)           # (N, D)
        pooled = getattr(out, "pooler_output", None)
        if pooled is not None:
            return pooled.flatten(1)                                                           # (N, D)
        last = out.last_hidden_state
        if last.dim() == 4:
            return last.mean(dim=(2, 3))                                                       # (N, C)
        prefix = prefix_tokens(self.net.config, last.shape[1], x.shape[-2:])
        return last[:, 0] if prefix else last.mean(dim=1)                                      # (N, D)


def prefix_tokens(config, n_tokens: int, hw) -> int:
    """Tokens before the patch tokens (class, distillation, registers): ``n_tokens`` minus the
    patch grid of an (H, W) input by ``config.patch_size``; 0 when the config has no patch
    size or the tokens are not one per patch plus a few (hierarchical stages)."""
    p = getattr(config, "patch_size", None)
    if p is None:
        return 0
    ph, pw = (p, p) if isinstance(p, int) else tuple(p)[-2:]
    extra = int(n_tokens) - (int(hw[0]) // int(ph)) * (int(hw[1]) // int(pw))
    return extra if 0 < extra <= 16 else 0
