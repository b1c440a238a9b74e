"""Device resolution and the device-dependent choices shared by extraction, fine-tuning and loading.

- :func:`resolve_device`: ``"auto"`` -> cuda, then mps, then cpu; a device that is asked for but
  absent is one clear ValueError.
- :func:`autocast_dtype` / :func:`autocast`: mixed precision. ``precision="auto"`` is bfloat16 on
  CUDA where the GPU supports it, else float16 (fine-tuning then scales the loss); float32 (no
  autocast) on CPU and MPS, so CPU results stay bit-identical. ``"bfloat16"``/``"float16"`` force
  autocast on any device (CPU autocast runs both), which is how the CPU tests exercise the GPU path.
- :func:`channels_last`: whether a backbone's convolutions run in NHWC memory order.
- :class:`DeviceOutOfMemoryError` / :func:`out_of_memory_hint`: the device ran out of memory; the
  message names the batch size to lower.
"""
from __future__ import annotations

import contextlib

import torch

from lab.config import PRECISIONS

__all__ = ["resolve_device", "PRECISIONS", "autocast_dtype", "autocast", "CHANNELS_LAST_DEVICES", "channels_last",
           "DeviceOutOfMemoryError", "out_of_memory_message", "out_of_memory_hint"]

CHANNELS_LAST_DEVICES = frozenset({"cuda"})
"""Device types on which CNN backbones run channels_last (NHWC). Only CUDA: there cuDNN's tensor-core
convolutions take NHWC natively, and timm trains CNNs with ``--channels-last`` under AMP for that
reason (PyTorch's channels-last tutorial reports 8-35 % faster AMP training of torchvision CNNs on
Volta and later; no GPU was lent when this was written, so ``benchmarks/gpu.py --device cuda`` prints
both orders for resnet50). Not on CPU, although it is a little faster there (resnet50, 224 px, batch 8,
no_grad, 2 shared cores, best of 5: 1.73 s NHWC vs 1.93 s NCHW): other convolution kernels change the
last bits of the features (6e-8 here), and CPU results must stay bit-identical to earlier runs."""


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


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device``, or None for float32 (no autocast).

    "auto": bfloat16 on CUDA when ``torch.cuda.is_bf16_supported()``, else float16; None on CPU/MPS.
    "float32": None. "bfloat16" / "float16": that dtype on any device.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}. Got {precision!r} instead.")
    if precision == "float32":
        return None
    if precision == "bfloat16":
        return torch.bfloat16
    if precision == "float16":
        return torch.float16
    if torch.device(device).type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.autocast`` on ``device`` with ``dtype``, or a no-op context for None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)


def channels_last(bb) -> bool:
    """Whether backbone ``bb`` runs channels_last: on a device in :data:`CHANNELS_LAST_DEVICES`, and
    only for a CNN, i.e. one whose taps include NCHW feature maps (from its layer catalogue, not its
    name; ViT and Swin taps are tokens or NHWC maps and gain nothing)."""
    if bb.device.type not in CHANNELS_LAST_DEVICES:
        return False
    return any(tap.kind == "map" and tap.layout != "NHWC" for tap in bb.taps)


def to_channels_last(bb) -> bool:
    """Convert ``bb.model`` to channels_last when :func:`channels_last` says so (idempotent);
    returns whether inputs should be made channels_last too."""
    if not channels_last(bb):
        return False
    if not getattr(bb.model, "_lab_channels_last", False):
        bb.model.to(memory_format=torch.channels_last)
        bb.model._lab_channels_last = True
    return True


class DeviceOutOfMemoryError(ValueError):
    """The device ran out of memory; the message names the batch size to lower.

    A ValueError because the fix is a value of the run's configuration (so the engine, the CLI and
    the app show its text as it is, like any other input error).
    """


def out_of_memory_message(what: str, option: str, batch_size: int, device) -> str:
    """One line: where the device ran out of memory and which batch size to lower, to what.

    >>> out_of_memory_message("training", "batch_size", 256, "cuda").split(";")[1]
    ' lower batch_size to 128 or less, use a smaller img_size, or free the device from other processes.'
    """
    n, lower = int(batch_size), max(1, int(batch_size) // 2)
    return (f"the {torch.device(device).type} device ran out of memory in {what} with batches of {n} images; "
            f"lower {option} to {lower} or less, use a smaller img_size, or free the device from other processes.")


@contextlib.contextmanager
def out_of_memory_hint(what: str, option: str, batch_size: int, device):
    """Turn the device's out-of-memory error inside the block into :class:`DeviceOutOfMemoryError`
    (:func:`out_of_memory_message`), after releasing the allocator's cached blocks."""
    try:
        yield
    except torch.OutOfMemoryError as exc:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        raise DeviceOutOfMemoryError(out_of_memory_message(what, option, batch_size, device)) from exc
