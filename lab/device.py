"""Device resolution shared by every part of lab."""
from __future__ import annotations

import torch

__all__ = ["resolve_device"]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Return a torch.device for ``device``: "auto" picks cuda, then mps, then cpu.

    Raises ValueError naming the device when it is requested but not available.
    """
    if isinstance(device, torch.device):
        return device
    name = str(device).strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available here; use device='auto' or 'cpu'.")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("device 'mps' was requested but MPS is not available here; use device='auto' or 'cpu'.")
    try:
        return torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'. Got {device!r} instead.") from exc
