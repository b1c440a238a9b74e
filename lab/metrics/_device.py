"""What the metrics need to know about a device: where float64 work can run, exact float32 matmuls on
CUDA, and how large a row block of an N-wide distance matrix may be there.

- :func:`_float64_device`: MPS has no float64 (``.double()`` on an MPS tensor raises), so small float64
  algebra (an eigenproblem, a sum of squares) moves to the CPU there; every other device keeps it.
- :func:`_exact_float32`: on Ampere and later, PyTorch may run float32 matmuls as TF32 (10-bit
  mantissa) when ``torch.backends.cuda.matmul.allow_tf32`` or ``torch.set_float32_matmul_precision``
  allow it. A distance ``|a|^2 + |b|^2 - 2 a.b`` from a TF32 Gram loses about three decimal digits,
  enough to reorder neighbours and move k-means assignments, so the metrics' distance GEMMs run with
  both switched to exact float32 and restored afterwards (the caller's training keeps its setting).
- :func:`_cuda_block_rows`: a GPU computes a (rows x N) Gram block at GEMM speed only when the block
  is large; the CPU's cache-sized blocks cost 1.5-3x a bare GEMM there.
"""
from __future__ import annotations

import contextlib

import torch

from lab.device import float64_device

# A row block of distances on CUDA: at most this many bytes per (rows x N) float32 slice (a few
# such slices coexist: Gram, ranking keys, selection), and at most this share of the free memory.
_CUDA_BLOCK_BYTES = 1 << 30
_CUDA_FREE_SHARE = 0.125
_CUDA_MIN_ROWS = 4096


_float64_device = float64_device      # the one definition lives in lab.device, which lab.projection uses too


@contextlib.contextmanager
def _exact_float32(device):
    """Run the block with TF32 off for float32 matmuls when ``device`` is a CUDA device
    (:func:`lab.device.exact_float32`, which restores the caller's setting); elsewhere a no-op."""
    if torch.device(device).type != "cuda":
        yield
        return
    from lab.device import exact_float32

    with exact_float32():
        yield


def _cuda_block_rows(n: int, device, *, itemsize: int = 4) -> int:
    """Rows of a (rows x ``n``) distance block on a CUDA ``device``: as many as fit in
    :data:`_CUDA_BLOCK_BYTES` and in :data:`_CUDA_FREE_SHARE` of the free memory, at least
    :data:`_CUDA_MIN_ROWS`, at most ``n``."""
    budget = _CUDA_BLOCK_BYTES
    try:
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        budget = min(budget, int(free * _CUDA_FREE_SHARE))
    except (RuntimeError, AssertionError, ValueError):      # no CUDA runtime to ask: the fixed budget
        pass
    rows = max(_CUDA_MIN_ROWS, budget // max(1, n * itemsize))
    return max(1, min(n, rows))
