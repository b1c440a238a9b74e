"""The devices of this machine a study's local cluster uses (held as the Run tab holds its device)."""
from __future__ import annotations

import os

__all__ = ["study_device_keys"]


def study_device_keys(configs) -> list[str]:
    """The devices of this machine a study's local cluster uses, to hold as the Run tab does.

    Every GPU for cells on CUDA ("auto" included: the local cluster starts a worker per GPU), "cpu"
    for cells on the CPU; none when ``$DASK_SCHEDULER_ADDRESS`` sends the study to another cluster.
    """
    from lab.device import device_key, resolve_device

    if os.environ.get("DASK_SCHEDULER_ADDRESS"):
        return []
    keys = set()
    for config in configs:
        device = resolve_device(config.device)
        if device.type == "cuda":
            keys.update(f"cuda:{i}" for i in range(_cuda_count()))
        else:
            keys.add(device_key(device))
    return sorted(keys)


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
