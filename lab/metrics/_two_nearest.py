"""Exact first and second nearest-neighbour distances of every row of X, in bounded memory (TwoNN).

1. **Candidates, float32, upper triangle only.** X is centred (distances do not move; the norms the
   rounding is relative to shrink) and rounded to float32, with two extra columns so that one GEMM
   gives the key K_ij = a·b − ‖a‖²/2 − ‖b‖²/2 = −‖a − b‖²/2 (larger is nearer). Strip s holds rows I
   against every row from I's first on: its rows give rows I their :data:`_CANDIDATES` best keys to
   the right; its columns beyond I give the later rows their best keys among rows I, merged only for
   the columns where some row of I beats the worst key held so far. Each pair is computed once (half
   the GEMM of a full search), and at most one strip of ``rows × N`` keys exists at a time.
2. **Proof, float64.** The candidates' distances are recomputed by direct float64 differences of the
   original rows; the two smallest are r1 and r2 when no other row can be nearer than r2, which holds
   when every other row is a candidate or when the worst candidate's squared distance, less the
   rounding bound of a key, is at least r2².
3. **The rest.** Rows the float32 bound does not prove (neighbours closer than the rounding allows to
   tell apart) are searched again against every row with float64 keys, and rows that bound does not
   prove either (near-duplicates) by direct differences to every row.

On CPU the GEMMs run through numpy (its OpenBLAS is 1.1-2x faster than torch's MKL build here, as in
``_neighbors._matmul_t``), the strips into one reused buffer; elsewhere through torch with TF32 off.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ._device import _cuda_block_rows, _exact_float32

# Candidates kept per row before the float64 proof: the two neighbours and two more to prove them.
_CANDIDATES = 4
# Columns per group in a row's first selection (see _row_top).
_GROUP = 64
# Rows per strip on CPU: cache-sized, as in lab.metrics._neighbors.
_STRIP_ROWS = 256
# Elements per block when converting, re-checking or scanning X (8 MB in float64).
_BLOCK_ELEMENTS = 1 << 20
# Squared norms (centred) above this would overflow float32 keys.
_FLOAT32_SQ_MAX = 1e36


def two_nearest(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(r1, r2): each row's distances to its nearest and second-nearest other row, (N,) float64 each.

    X : (N, d) floating with N ≥ 3, on a device with float64. Distances are those of direct float64
    differences of X's rows (a duplicate row gives r1 = 0).
    """
    n, d = X.shape
    mean = X.sum(dim=0, dtype=torch.float64) / n                                    # (d,)
    Q, sq = _augmented(X, mean)                                                     # (N, d + 2), (N,)
    if float(sq.max()) > _FLOAT32_SQ_MAX:           # float32 keys would overflow: float64 throughout
        return _search_float64(X, mean, torch.arange(n, device=X.device))
    keys, idx = _candidates(Q)                                                      # (N, m), (N, m)
    unit = torch.finfo(torch.float32).eps / 2
    # Bound on |computed − exact| squared distance from a float32 key: a (d + 2)-term dot product with
    # the halved squared norms in it, the norms' own rounding, the rounding of the centred rows.
    bound = 1.01 * (2 * d + 16) * unit * (sq.sqrt() + sq.sqrt().max()) ** 2          # (N,)
    worst = -2.0 * keys.amin(dim=1).to(torch.float64)                               # (N,) m-th squared distance
    r1, r2, ok = _prove(X, torch.arange(n, device=X.device), idx, worst, bound)
    left = (~ok).nonzero().flatten()                                                # (R,) rows not proven
    if left.numel():
        r1[left], r2[left] = _search_float64(X, mean, left)
    return r1, r2


def matmul(A: torch.Tensor, B: torch.Tensor, out: np.ndarray | None = None) -> torch.Tensor:
    """A @ B; on CPU through numpy (transposed views need no copy), into ``out`` (a contiguous buffer of the
    result's shape) when given."""
    if A.device.type == "cpu":
        return torch.from_numpy(np.matmul(A.numpy(), B.numpy(), out=out))
    return A @ B


def _augmented(X: torch.Tensor, mean: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q = [x − μ, 1, −‖x − μ‖²/2] in float32 (N, d + 2), and ‖x − μ‖² (N,) float64 of those rounded rows."""
    n, d = X.shape
    Q = torch.empty(n, d + 2, dtype=torch.float32, device=X.device)                 # (N, d + 2)
    rows = max(1, _BLOCK_ELEMENTS // d)
    for s in range(0, n, rows):
        Q[s:s + rows, :d] = X[s:s + rows].to(torch.float64) - mean
    sq = torch.linalg.vector_norm(Q[:, :d], dim=1, dtype=torch.float64).square()    # (N,)
    Q[:, d] = 1.0
    Q[:, d + 1] = (-0.5 * sq).to(torch.float32)
    return Q, sq


def _strip_rows(n: int, device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_block_rows(n, device)
    return max(1, min(n, _STRIP_ROWS))


def _merge(keys: torch.Tensor, idx: torch.Tensor, rows, new_keys: torch.Tensor, new_idx: torch.Tensor) -> None:
    """Keep the m largest keys of rows ``rows``: those held plus (r, k) new ones, in place."""
    m = keys.shape[1]
    new_idx = new_idx.masked_fill(new_keys == -math.inf, -1)                        # (r, k) the row itself
    cand_k = torch.cat([keys[rows], new_keys], dim=1)                               # (r, m + k)
    cand_i = torch.cat([idx[rows], new_idx], dim=1)                                 # (r, m + k)
    best, pos = cand_k.topk(m, dim=1, largest=True, sorted=False)                   # (r, m)
    keys[rows] = best
    idx[rows] = cand_i.gather(1, pos)


def _candidates(Q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The m largest keys −‖a − b‖²/2 of every row among the others (N, m) float32, and their rows (N, m).

    Rows with fewer than m others keep −inf keys with index −1.
    """
    n, d2 = Q.shape
    m = _CANDIDATES
    keys = torch.full((n, m), -math.inf, dtype=Q.dtype, device=Q.device)            # (N, m)
    idx = torch.full((n, m), -1, dtype=torch.int64, device=Q.device)                # (N, m)
    step = _strip_rows(n, Q.device)
    # One buffer for every strip on CPU: a fresh 20 MB block per strip costs page faults.
    buffer = np.empty(step * n, dtype=np.float32) if Q.device.type == "cpu" else None
    with _exact_float32(Q.device):
        for start in range(0, n, step):
            stop = min(start + step, n)
            b, w = stop - start, n - start
            P = Q[start:stop].clone()                                               # (b, d + 2)
            P[:, [d2 - 2, d2 - 1]] = Q[start:stop, [d2 - 1, d2 - 2]]                # [a, −‖a‖²/2, 1]
            out = None if buffer is None else buffer[:b * w].reshape(b, w)
            S = matmul(P, Q[start:].T, out)                                          # (b, w) keys
            S[:, :b].diagonal().fill_(-math.inf)                                     # not its own neighbour
            v, j = _row_top(S, m)                                                   # (b, k)
            _merge(keys, idx, slice(start, stop), v, j + start)
            if stop == n:
                break
            right = S[:, b:]                                                        # (b, N − stop)
            held = keys[stop:].amin(dim=1)                                          # (N − stop,) worst held
            cols = (right.amax(dim=0) > held).nonzero().flatten()                   # (c,) columns to update
            if cols.numel():
                sub = right.index_select(1, cols)                                   # (b, c)
                v, j = sub.topk(min(m, b), dim=0, largest=True, sorted=False)       # (k, c)
                _merge(keys, idx, cols + stop, v.T, j.T + start)
    return keys, idx


def _row_top(S: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The min(m, w) largest keys of each row of S (b, w) and their columns, (b, k) each.

    Through groups of :data:`_GROUP` columns: the m largest keys lie in the m groups with the largest
    maxima (a key in another group is below m group maxima, each a key), so one max-reduction over S
    and a selection among m · _GROUP keys replace a selection over all w (about 5x cheaper on CPU).
    """
    b, w = S.shape
    full = (w // _GROUP) * _GROUP
    if full // _GROUP <= m:
        return S.topk(min(m, w), dim=1, largest=True, sorted=False)
    groups = S[:, :full].unflatten(1, (-1, _GROUP))                                  # (b, w / G, G) view
    top_groups = groups.amax(dim=2).topk(m, dim=1, largest=True, sorted=False).indices   # (b, m)
    cols = (top_groups[:, :, None] * _GROUP
            + torch.arange(_GROUP, device=S.device)).flatten(1)                     # (b, m · G)
    if full < w:                                                                    # the last, partial group
        tail = torch.arange(full, w, device=S.device).expand(b, -1)                 # (b, w − full)
        cols = torch.cat([cols, tail], dim=1)
    v, pos = S.gather(1, cols).topk(m, dim=1, largest=True, sorted=False)           # (b, m)
    return v, cols.gather(1, pos)


def _prove(X: torch.Tensor, rows: torch.Tensor, idx: torch.Tensor, worst: torch.Tensor,
           bound: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """r1, r2 of ``rows`` (R,) float64 from their candidates ``idx`` (R, m), and whether they are proven.

    ``worst`` (R,): the largest computed squared distance among the candidates, every other row's being
    at least as large; ``bound`` (R,): how far a computed squared distance may be from the exact one.
    """
    n, d = X.shape
    R, m = idx.shape
    r1 = torch.empty(R, dtype=torch.float64, device=X.device)
    r2 = torch.empty(R, dtype=torch.float64, device=X.device)
    ok = torch.empty(R, dtype=torch.bool, device=X.device)
    step = max(1, _BLOCK_ELEMENTS // (m * d))
    for s in range(0, R, step):
        e = min(s + step, R)
        cand = idx[s:e]                                                             # (b, m)
        valid = cand >= 0
        others = X[cand.clamp_min(0).flatten()].to(torch.float64).view(e - s, m, d)  # (b, m, d)
        own = X[rows[s:e]].to(torch.float64)                                        # (b, d)
        dist = torch.linalg.vector_norm(others - own[:, None], dim=2)               # (b, m)
        two = dist.masked_fill(~valid, math.inf).topk(2, dim=1, largest=False, sorted=True).values   # (b, 2)
        r1[s:e], r2[s:e] = two[:, 0], two[:, 1]
        ok[s:e] = (valid.sum(dim=1) == n - 1) | (worst[s:e] - bound[s:e] >= two[:, 1] ** 2)
    return r1, r2, ok


def _search_float64(X: torch.Tensor, mean: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """r1, r2 of ``rows`` (R,) searched against every row with float64 keys ‖a‖² + ‖b‖² − 2a·b, then proven;
    rows the float64 bound does not prove either are measured by direct differences to every row."""
    parts = [_search_float64_rows(X, mean, chunk) for chunk in rows.split(_STRIP_ROWS)]
    return torch.cat([r1 for r1, _ in parts]), torch.cat([r2 for _, r2 in parts])


def _search_float64_rows(X: torch.Tensor, mean: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_search_float64` for at most a strip of rows."""
    n, d = X.shape
    m = min(_CANDIDATES, n - 1)
    A = X[rows].to(torch.float64) - mean                                            # (R, d)
    sq_a = A.square().sum(dim=1)                                                    # (R,)
    keys = torch.full((rows.numel(), m), -math.inf, dtype=torch.float64, device=X.device)   # (R, m)
    idx = torch.full((rows.numel(), m), -1, dtype=torch.int64, device=X.device)            # (R, m)
    sq_max = torch.zeros((), dtype=torch.float64, device=X.device)
    step = max(1, _BLOCK_ELEMENTS // d)
    for s in range(0, n, step):
        e = min(s + step, n)
        C = X[s:e].to(torch.float64) - mean                                         # (c, d)
        sq_c = C.square().sum(dim=1)                                                # (c,)
        sq_max = torch.maximum(sq_max, sq_c.max())
        S = matmul(A, C.T).mul_(2.0).sub_(sq_c).sub_(sq_a[:, None])                    # (R, c) −‖a − b‖²
        own = ((rows >= s) & (rows < e)).nonzero().flatten()
        S[own, rows[own] - s] = -math.inf                                           # not its own neighbour
        v, j = S.topk(min(m, e - s), dim=1, largest=True, sorted=False)
        _merge(keys, idx, slice(None), v, j + s)
    unit = torch.finfo(torch.float64).eps / 2
    bound = 1.01 * (d + 8) * unit * (sq_a.sqrt() + sq_max.sqrt()) ** 2              # (R,)
    r1, r2, ok = _prove(X, rows, idx, -keys.amin(dim=1), bound)
    left = (~ok).nonzero().flatten()
    if left.numel():
        r1[left], r2[left] = _direct(X, rows[left])
    return r1, r2


def _direct(X: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """r1, r2 of ``rows`` (R,) from direct float64 differences to every other row (no bound needed)."""
    n, d = X.shape
    A = X[rows].to(torch.float64)                                                   # (R, d)
    step = max(1, _BLOCK_ELEMENTS // (d * rows.numel()))
    dist = torch.empty(rows.numel(), n, dtype=torch.float64, device=X.device)       # (R, N), R ≤ a strip
    for s in range(0, n, step):
        C = X[s:s + step].to(torch.float64)                                         # (c, d)
        dist[:, s:s + step] = torch.linalg.vector_norm(A[:, None] - C[None], dim=2)   # (R, c)
    dist[torch.arange(rows.numel(), device=X.device), rows] = math.inf              # not its own neighbour
    two = dist.topk(2, dim=1, largest=False, sorted=True).values                    # (R, 2)
    return two[:, 0].clone(), two[:, 1].clone()
