"""Exact blocked nearest-neighbour search on the features' device.

One pass over row blocks computes the Gram block ``X[rows] @ X.T`` once and derives both
the squared Euclidean distances ``|a|^2 + |b|^2 - 2 a.b`` and the cosine similarities
``a.b / (|a| |b|)`` from it; every kNN variant selects its top k from those blocks, so they
share one distance computation, and at most a (block × N) slice of the N × N matrix
exists at a time.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import torch

# Elements of one (block × N) slice: 2**24 float64 = 128 MB (a few such slices coexist:
# Gram, ranking key, selection indices); N = 50,000 -> 335 rows per block. At most 256 rows
# even for small N: a whole 1600 x 1600 block and its same-size temporaries added ~70 MiB to
# a run's peak memory, and measured on CPU 256-row blocks are as fast or faster (cache-sized,
# fewer page faults) while still long enough for an efficient GEMM.
_BLOCK_ELEMENTS = 1 << 24
_MAX_BLOCK_ROWS = 256
# Up to 2**20 elements (8 MB in float64; N <= 1024) the whole Gram is computed at once.
_WHOLE_GRAM_ELEMENTS = 1 << 20


class _Graph(NamedTuple):
    values: torch.Tensor    # (N, k) distances (euclidean) or similarities (cosine), nearest first if sorted
    indices: torch.Tensor   # (N, k) int64 neighbour indices


def _compute_dtype(X: torch.Tensor) -> torch.dtype:
    """float64 on CPU (sklearn ranks in float64 too; ~2x cost), float32 on accelerators.

    GPUs run float64 matmuls 30-60x slower and MPS has none, so there we rank in float32;
    neighbour order can then differ from float64 only at near-ties (relative gap < ~1e-6).
    """
    return torch.float64 if (X.dtype == torch.float64 or X.device.type == "cpu") else torch.float32


def _block_rows(n: int, block_rows: int | None = None) -> int:
    if block_rows is not None:
        return max(1, int(block_rows))
    return max(1, min(n, _MAX_BLOCK_ROWS, _BLOCK_ELEMENTS // max(n, 1)))


def _neighbor_graphs(
    X: torch.Tensor,
    requests: Mapping[str, tuple[str, int, bool]],
    *,
    include_self: bool = False,
    block_rows: int | None = None,
    codes: torch.Tensor | None = None,
) -> dict[str, _Graph | torch.Tensor]:
    """Exact k-nearest neighbours of every row of X among all rows, for several requests.

    The distance / similarity block of each row block is computed once and every request
    selects its own top k from it.

    Parameters
    ----------
    X : torch.Tensor, shape (N, d)
    requests : mapping of str to (metric, k, mode)
        ``metric`` is "euclidean" or "cosine"; ``k`` neighbours (callers have checked
        ``k <= N - 1``, ``<= N`` with ``include_self``); ``mode`` is "ordered" (the k
        nearest first), "set" (any order; ~2x cheaper for large k) or "same_class" (only
        how many of the k share the sample's class, from ``codes``; cheaper still).
    include_self : bool
        False: leave-one-out (a sample is never its own neighbour). True: the sample is
        forced to be its own first neighbour at distance 0 (UMAP's convention).
    codes : torch.Tensor, shape (N,), optional
        Class codes, needed by "same_class" requests.

    Returns
    -------
    dict of str to _Graph or torch.Tensor
        Per request: (N, k) Euclidean distances (ascending) or cosine similarities
        (descending) and int64 indices, on X's device; for "same_class" an (N,) int64
        count.
    """
    n = X.shape[0]
    dtype = _compute_dtype(X)
    need_e = any(m == "euclidean" for m, _, _ in requests.values())
    need_c = any(m == "cosine" for m, _, _ in requests.values())
    Xc = X.to(dtype)                                       # (N, d)
    sq = (Xc * Xc).sum(dim=1)                              # (N,)
    if need_c:
        norms = sq.sqrt()
        # F.normalize semantics (DINOv2): a zero vector stays zero, so its similarities are 0.
        inv = torch.where(norms > 0, 1.0 / norms, torch.zeros_like(norms))   # (N,)
    rows = _block_rows(n, block_rows)
    # A small N x N Gram at once: X Xᵀ is then a symmetric rank-k update (half the flops);
    # the work below still runs on cache-sized row blocks of it.
    whole = _matmul_t(Xc, Xc) if n * n <= _WHOLE_GRAM_ELEMENTS else None
    parts: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {name: [] for name in requests}
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        b = torch.arange(stop - start, device=X.device)
        self_cols = start + b
        # (B, N) the only N-wide block
        G = whole[start:stop] if whole is not None else _matmul_t(Xc[start:stop], Xc)
        blocks = {}
        # Ranking keys: per-row constants (|a|^2, 1/|a|) do not change a row's order, so the
        # keys skip them and the selected values are finished below.
        if need_c:                                         # (B, N) cos * |a|; G reused if it can be
            S = G * inv[None, :] if need_e else G.mul_(inv[None, :])
            S[b, self_cols] = float("inf") if include_self else float("-inf")
            blocks["cosine"] = S
        if need_e:
            R = G.mul_(-2.0).add_(sq[None, :])             # (B, N) |a-b|^2 - |a|^2, in place
            R[b, self_cols] = -float("inf") if include_self else float("inf")
            blocks["euclidean"] = R
        for name, (metric, k, mode) in requests.items():
            if mode == "same_class":
                parts[name].append(_same_class_count(blocks[metric], k, largest=metric == "cosine",
                                                     row_codes=codes[start:stop], codes=codes))
                continue
            v, i = _select(blocks[metric], k, largest=metric == "cosine", ordered=mode == "ordered")
            if metric == "euclidean":
                v = (v + sq[start:stop, None]).clamp_min_(0.0).sqrt_()
                if include_self:
                    v[:, 0] = 0.0
            else:
                v = v * inv[start:stop, None]
                if include_self:
                    v[:, 0] = torch.where(inv[start:stop] > 0, 1.0, 0.0).to(v.dtype)
            parts[name].append((v, i))
        del G, blocks
    return {name: (torch.cat(p) if requests[name][2] == "same_class"
                   else _Graph(torch.cat([v for v, _ in p]), torch.cat([i for _, i in p])))
            for name, p in parts.items()}


def _same_class_count(M: torch.Tensor, k: int, *, largest: bool, row_codes: torch.Tensor,
                      codes: torch.Tensor) -> torch.Tensor:
    """How many of each row's k top entries of M (B, N) (largest or smallest) are columns
    of the row's class; (B,) int64.

    On CPU only the k-th value per row is selected (no index array: ~2.5x cheaper than a
    top-k), then the entries on its side are counted. Rows where that value is tied with
    an entry outside the top k (duplicate samples) take the explicit top-k path, as do
    accelerators.
    """
    if M.device.type != "cpu":
        return _same_class_in_top_k(M, k, largest=largest, row_codes=row_codes, codes=codes)
    a, n = M.numpy(), M.shape[1]
    pos = n - k if largest else k - 1                                 # k-th value's column after partition
    part = np.partition(a, pos, axis=1)                               # (B, N)
    kth = part[:, pos:pos + 1]                                        # (B, 1)
    if largest:
        inside = a >= kth
        tied = part[:, :pos].max(axis=1, initial=-np.inf) == kth[:, 0]
    else:
        inside = a <= kth
        tied = part[:, pos + 1:].min(axis=1, initial=np.inf) == kth[:, 0]
    inside &= (row_codes[:, None] == codes[None, :]).numpy()
    count = torch.from_numpy(np.count_nonzero(inside, axis=1).astype(np.int64))
    if tied.any():
        rows = torch.from_numpy(np.flatnonzero(tied))
        count[rows] = _same_class_in_top_k(M[rows], k, largest=largest, row_codes=row_codes[rows], codes=codes)
    return count


def _same_class_in_top_k(M, k, *, largest, row_codes, codes) -> torch.Tensor:
    """The explicit path of :func:`_same_class_count`: select each row's top k, count its class."""
    _, i = _select(M, k, largest=largest, ordered=False)
    return (codes[i] == row_codes[:, None]).sum(dim=1)


def _matmul_t(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """A @ B.T. On CPU in float64 through numpy: its OpenBLAS runs this ~1.7x faster than
    torch's MKL build (measured: 4.7 ms vs 8.0 ms for 1000 x 192 x 1000, one thread)."""
    if A.device.type == "cpu" and A.dtype == torch.float64:
        return torch.from_numpy(A.detach().numpy() @ B.detach().numpy().T)
    return A @ B.T


def _select(M: torch.Tensor, k: int, *, largest: bool, ordered: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Top k per row of M (B, N): values and int64 indices, nearest first when ``ordered``."""
    if k == 1:
        v, i = M.max(dim=1, keepdim=True) if largest else M.min(dim=1, keepdim=True)
        return v, i
    if M.device.type != "cpu":
        return torch.topk(M, k, dim=1, largest=largest, sorted=ordered)
    # On CPU numpy's introselect is ~10x faster than torch.topk (measured: 2.9 ms vs 26 ms for
    # k=199 of 1000 x 1000 float64); .numpy() shares memory, torch.gather reads the values.
    a = M.numpy()                                                       # (B, N)
    n = a.shape[1]
    if k >= n:
        order = np.argsort(a, axis=1)
        idx = order[:, ::-1][:, :k] if largest else order[:, :k]
    else:
        idx = np.argpartition(a, n - k, axis=1)[:, n - k:] if largest else np.argpartition(a, k - 1, axis=1)[:, :k]
    i = torch.from_numpy(np.ascontiguousarray(idx, dtype=np.int64))    # (B, k)
    v = M.gather(1, i)
    if ordered and k < n:
        v, o = torch.sort(v, dim=1, descending=largest, stable=True)
        i = i.gather(1, o)
    return v, i


def _vote(neighbor_codes: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Majority vote of (N, k) neighbour class codes, nearest first.

    Ties go to the class of the nearest neighbour among the tied classes.
    """
    n, k = neighbor_codes.shape
    counts = torch.zeros(n, n_classes, dtype=torch.int64, device=neighbor_codes.device)
    counts.scatter_add_(1, neighbor_codes, torch.ones_like(neighbor_codes))        # (N, K)
    best = counts.max(dim=1, keepdim=True).values                                  # (N, 1)
    is_top = counts.gather(1, neighbor_codes) == best                              # (N, k)
    first = is_top.to(torch.uint8).argmax(dim=1)                                   # first True, nearest
    return neighbor_codes.gather(1, first[:, None]).squeeze(1)                     # (N,)
