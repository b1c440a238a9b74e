"""Device resolution and the device-dependent choices shared by extraction, fine-tuning and loading.

- :func:`resolve_device`: ``"auto"`` -> cuda, then mps, then cpu; a device that is asked for but
  absent (no CUDA, ``cuda:7`` on a one-GPU machine) is one clear ValueError.
- :func:`check_device`: the device and the precision of a config, checked before a run starts.
- :func:`device_key` / :func:`device_choices`: one name per physical device (the app's device locks)
  and the devices this machine offers.
- :func:`autocast_dtype` / :func:`autocast`: mixed precision. ``precision="auto"`` is bfloat16 on
  CUDA where the GPU has it natively (compute capability 8.0 and later), else float16 (fine-tuning
  then scales the loss); float32 (no autocast) on CPU and MPS, so CPU results stay bit-identical.
  ``"bfloat16"``/``"float16"`` force autocast on any device (CPU autocast runs both), which is how
  the CPU tests exercise the GPU path.
- :func:`channels_last`: whether a backbone's convolutions run in NHWC memory order.
- :func:`device_scope`, :func:`exact_float32`, :func:`release_device_memory`: what a run sets up
  around its work on a device, and gives back at its end.
- :data:`OutOfMemoryError`, :class:`DeviceOutOfMemoryError` / :func:`out_of_memory_hint`: the
  device ran out of memory; the message names the batch size to lower.

Determinism: every run seeds torch (``torch.manual_seed`` seeds every CUDA device too) and leaves
``torch.backends.cudnn.benchmark`` at torch's default (False), so cuDNN does not pick its
convolution algorithms by timing; the config has no "deterministic" option, so the nondeterministic
CUDA kernels (atomic adds in some backward passes) stay allowed: on a GPU the same seed gives close,
not bit-identical, results.
"""
from __future__ import annotations

import contextlib
import gc
import inspect
import threading

import torch

from lab.config import PRECISIONS

__all__ = ["resolve_device", "check_device", "device_key", "device_choices", "cuda_index", "PRECISIONS",
           "bf16_supported", "autocast_dtype", "autocast", "CHANNELS_LAST_DEVICES", "channels_last",
           "device_scope", "exact_float32", "release_device_memory", "OutOfMemoryError",
           "DeviceOutOfMemoryError", "out_of_memory_message", "out_of_memory_hint", "float64_device"]

OutOfMemoryError = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
"""The exception torch raises when a device runs out of memory: the one place lab names it
(``torch.OutOfMemoryError`` since torch 2.5, ``torch.cuda.OutOfMemoryError`` before)."""

CHANNELS_LAST_DEVICES = frozenset({"cuda"})
"""Device types on which CNN backbones run channels_last (NHWC). Only CUDA: there cuDNN's tensor-core
convolutions take NHWC natively, and timm trains CNNs with ``--channels-last`` under AMP for that
reason (PyTorch's channels-last tutorial reports 8-35 % faster AMP training of torchvision CNNs on
Volta and later; no GPU was lent when this was written, so ``benchmarks/gpu.py --device cuda`` prints
both orders for resnet50). Not on CPU, although it is a little faster there (resnet50, 224 px, batch 8,
no_grad, 2 shared cores, best of 5: 1.73 s NHWC vs 1.93 s NCHW): other convolution kernels change the
last bits of the features (6e-8 here), and CPU results must stay bit-identical to earlier runs."""


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Return a torch.device for ``device``: "auto" picks cuda, then mps, then cpu.

    Raises ValueError naming the device when it is requested but not available (no CUDA, no MPS,
    or a CUDA index this machine does not have).
    """
    if isinstance(device, torch.device):
        return device
    name = str(device).strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available here; use device='auto' or 'cpu'.")
    if name == "mps" and not _mps_available():
        raise ValueError("device 'mps' was requested but MPS is not available here; use device='auto' or 'cpu'.")
    try:
        resolved = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'. Got {device!r} instead.") from exc
    if resolved.type == "cuda" and resolved.index is not None:
        n = torch.cuda.device_count()
        if resolved.index >= n:
            names = ", ".join(f"cuda:{i}" for i in range(n))
            plural = "" if n == 1 else "s"
            raise ValueError(f"device {device!r} was requested but this machine has {n} CUDA device{plural} "
                             f"({names}); use device={', '.join(repr(f'cuda:{i}') for i in range(n))}, "
                             f"'auto' or 'cpu'.")
    return resolved


def cuda_index(device: str | torch.device) -> int | None:
    """The index of the GPU ``device`` runs on ("cuda" is the current device), None for other devices."""
    dev = torch.device(device) if isinstance(device, torch.device) else torch.device(str(device).strip().lower())
    if dev.type != "cuda":
        return None
    return dev.index if dev.index is not None else int(torch.cuda.current_device())


def device_key(device: str | torch.device) -> str:
    """One name per physical device: "cuda" and "cuda:0" are the same GPU (when 0 is current), "auto"
    is what it resolves to. For the app's device locks, so two names never let two runs share a GPU."""
    name = device if isinstance(device, torch.device) else str(device).strip().lower()
    dev = resolve_device("auto") if name == "auto" else torch.device(name)
    index = cuda_index(dev) if dev.type == "cuda" and torch.cuda.is_available() else dev.index
    return dev.type if index is None else f"{dev.type}:{index}"


def device_choices() -> list[str]:
    """The devices this machine offers: "auto", "cpu", then "cuda" (one GPU) or "cuda:0".."cuda:N-1"
    (several: "cuda" alone would always mean the current one, GPU 0), then "mps"."""
    choices = ["auto", "cpu"]
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    choices += ["cuda"] if n == 1 else [f"cuda:{i}" for i in range(n)]
    if _mps_available():
        choices.append("mps")
    return choices


def bf16_supported(device: str | torch.device = "cuda") -> bool:
    """Whether the GPU runs bfloat16 natively (compute capability 8.0 and later). Torch's own
    ``is_bf16_supported()`` also counts emulation (T4, V100), where bfloat16 is slow and cuDNN has no
    bfloat16 convolutions; float16 with a loss scaler is the right choice there."""
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return False
    index = cuda_index(device)
    native = "including_emulation" in inspect.signature(torch.cuda.is_bf16_supported).parameters
    if native and index == torch.cuda.current_device():          # torch asks the current GPU only
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    return torch.cuda.get_device_capability(index)[0] >= 8       # what torch checks on NVIDIA GPUs


def check_device(device: str | torch.device, precision: str = "auto") -> torch.device:
    """The resolved ``device``, after checking that it can run ``precision``; one ValueError line
    otherwise, before anything starts (the CLI and the app call it; the engine resolves the same way).

    "bfloat16" needs native bfloat16 on CUDA (:func:`bf16_supported`); "float16" and "bfloat16" run
    on the CPU (CPU autocast has both; slow, but it is how the GPU path is tested there).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}. Got {precision!r} instead.")
    dev = resolve_device(device)
    if dev.type == "cuda" and precision == "bfloat16" and not bf16_supported(dev):
        raise ValueError(f"precision 'bfloat16' was requested but {device_key(dev)} has no native bfloat16 "
                         f"(compute capability below 8.0); use precision='auto' (float16 there), 'float16' "
                         f"or 'float32'.")
    return dev


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device``, or None for float32 (no autocast).

    "auto": bfloat16 on CUDA where the GPU has it natively (:func:`bf16_supported`), else float16;
    None on CPU/MPS. "float32": None. "bfloat16" / "float16": that dtype on any device.
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
    return torch.bfloat16 if bf16_supported(device) else torch.float16


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
    (:func:`out_of_memory_message`). The allocator's cache is released by the run at its end
    (:func:`release_device_memory`), once the failed step's tensors are no longer referenced."""
    try:
        yield
    except OutOfMemoryError as exc:
        raise DeviceOutOfMemoryError(out_of_memory_message(what, option, batch_size, device)) from exc


@contextlib.contextmanager
def device_scope(device: str | torch.device):
    """Make ``device``'s GPU the current CUDA device for the block (nothing for other devices).

    Torch allocates some things on the *current* device whatever a tensor's device is: pinned host
    memory and the CUDA context itself. Each thread starts on GPU 0, so a ``cuda:1`` run must enter
    this in every thread it works in, or it also opens a context on GPU 0.
    """
    index = cuda_index(device)
    if index is None:
        yield
        return
    with torch.cuda.device(index):
        yield


_EXACT = {"depth": 0, "saved": None}
_EXACT_GUARD = threading.Lock()


@contextlib.contextmanager
def exact_float32():
    """float32 matrix products in full float32 inside the block: TF32 off (``"highest"`` matmul
    precision), even when the user turned it on globally; their setting is restored after.

    For the metrics: TF32 keeps 10 mantissa bits, enough for training but not for ranks, eigenvalues
    or CKA. The setting is process-wide: nested and concurrent blocks (two runs in one app) keep it
    off until the last one ends. On the CPU "highest" is torch's default, so nothing changes there.
    """
    with _EXACT_GUARD:
        if _EXACT["depth"] == 0:
            _EXACT["saved"] = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("highest")
        _EXACT["depth"] += 1
    try:
        yield
    finally:
        with _EXACT_GUARD:
            _EXACT["depth"] -= 1
            if _EXACT["depth"] == 0:
                torch.set_float32_matmul_precision(_EXACT["saved"])


def release_device_memory(device: str | torch.device, *, collect: bool = False) -> None:
    """Give the allocator's cached blocks back to the device, after the run dropped its tensors.

    ``torch.cuda.empty_cache`` can only return blocks no tensor uses, so call it once the model,
    optimizer and features are unreferenced; ``collect=True`` first runs the cycle collector, for
    a caller that cannot rule out reference cycles. Nothing to do off CUDA (or before CUDA started).
    """
    if collect:
        gc.collect()
    if cuda_index(device) is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def float64_device(device) -> torch.device:
    """The device where float64 work on data from ``device`` runs: the CPU for MPS (no float64 there),
    else ``device`` itself."""
    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device
