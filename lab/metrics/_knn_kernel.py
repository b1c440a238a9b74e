"""Compiled per-row kNN work on CPU: every neighbour metric of a row from one read of its Gram row.

:func:`block_tasks` takes one row block ``G = X[rows] @ X.T`` (float64) and, row by row,
builds the ranking keys once (Euclidean ``|b|^2 - 2 a.b``, cosine ``-(a.b / |b|)``; smaller
is nearer for both, the sample itself is +inf) in a cache-resident buffer, then serves
every requested task from it:

- ``nn``: the nearest neighbour (1-NN) and whether it is tied;
- ``count``: how many of the k nearest share the sample's class (k-th value by a sampled
  bracket, no full selection), and whether the k-th value is tied outside the top k;
- ``weighted``: the DINO weighted vote of the k most cosine-similar samples, and whether
  the vote is too close to call in a different summation order.

Keys are bit-identical to the numpy/torch path in ``_neighbors`` (the same IEEE
operations), so untied results are the same; rows flagged tied / undecided are redone
there by the exact original code. Serial (no threads): safe to call from any thread.
"""
from __future__ import annotations

import math

import numba
import numpy as np

# A vote decided by less than this relative margin is recomputed exactly: a different
# summation order (and exp implementation) moves k-term sums by ~1e-15 relative.
_VOTE_MARGIN = 1e-9
# Sample size for the k-th value's bracket (a larger one brackets tighter but costs a
# selection per row) and the bracket's half-width in binomial standard deviations.
_SAMPLE = 256                                # at least; ~4 sqrt(N) for large N
_BRACKET_SIGMAS = 3.0
# Rows are scanned in chunks of this many entries: a vectorised count first, a scalar
# loop only for the rare chunk with something to do.
_CHUNK = 16
# Entries per group for the weighted vote's first bound (about N / _GROUP group minima).
_GROUP = 16


def _jit(fn):
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:   # pragma: no cover - no writable cache location: compile per process
        return numba.njit(nogil=True)(fn)


@_jit
def _kth_value(src, n, r, x, y):
    """The r-th smallest (0-based) value of src[:n]; x and y (length >= n) are scratch
    (src may be y, not x).

    Quickselect whose partition step has no data-dependent branches (each value is stored
    to both ends and the ends advance by the comparisons): a branchy partition mispredicts
    on about every other value and runs ~5x slower. Values equal to the pivot are counted,
    not kept: only the value is wanted.
    """
    a, off, into_x = src, 0, True
    while n > 16:
        out = x if into_x else y
        p0, p1, p2 = a[off], a[off + (n >> 1)], a[off + n - 1]
        pivot = max(min(p0, p1), min(max(p0, p1), p2))          # median of three
        nl, ng = 0, 0
        for i in range(n):
            v = a[off + i]
            out[nl] = v
            out[n - 1 - ng] = v
            nl += v < pivot
            ng += v > pivot
        if r < nl:
            off, n = 0, nl
        elif r < n - ng:
            return pivot
        else:
            r -= n - ng
            off, n = n - ng, ng
        a, into_x = out, not into_x
    out = x if into_x else y
    for i in range(n):                                          # insertion sort of the rest
        v = a[off + i]
        j = i
        while j > 0 and out[j - 1] > v:
            out[j] = out[j - 1]
            j -= 1
        out[j] = v
    return out[r]


@_jit
def _min(K):
    """Smallest entry. Eight independent running minima: a single chain of dependent
    compares runs ~6x slower, and min is exact in any order."""
    n = K.shape[0]
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = np.inf
    j = 0
    while j + 8 <= n:
        v0, v1, v2, v3 = K[j], K[j + 1], K[j + 2], K[j + 3]
        v4, v5, v6, v7 = K[j + 4], K[j + 5], K[j + 6], K[j + 7]
        b0 = v0 if v0 < b0 else b0
        b1 = v1 if v1 < b1 else b1
        b2 = v2 if v2 < b2 else b2
        b3 = v3 if v3 < b3 else b3
        b4 = v4 if v4 < b4 else b4
        b5 = v5 if v5 < b5 else b5
        b6 = v6 if v6 < b6 else b6
        b7 = v7 if v7 < b7 else b7
        j += 8
    best = min(min(min(b0, b1), min(b2, b3)), min(min(b4, b5), min(b6, b7)))
    for t in range(j, n):
        best = min(best, K[t])
    return best


@_jit
def _nearest(K):
    """Index and value of K's smallest entry; tied: another entry has the same value."""
    n = K.shape[0]
    best = _min(K)
    idx, equal = 0, 0
    for j in range(n):                       # vectorises
        equal += K[j] == best
    for s in range(0, n, _CHUNK):            # the first chunk holding it, then the entry
        e = min(s + _CHUNK, n)
        hits = 0
        for j in range(s, e):
            hits += K[j] == best
        if hits:
            for j in range(s, e):
                if K[j] == best:
                    return j, K[j], equal > 1
    return idx, K[idx], equal > 1


@_jit
def _count_same(K, k, codes, ci, sample, cand_i, x, y):
    """Same-class entries among K's k smallest; tied: more than k entries <= the k-th value.

    The k-th value lies, with high probability, between two order statistics of a strided
    sample. A vectorised pass counts the entries below and inside that bracket; a second
    collects the indices of those inside, and a selection among those few gives the k-th
    value. A miss (the k-th value outside the bracket) selects on the whole row.
    """
    n = K.shape[0]
    m = min(n, max(_SAMPLE, int(4.0 * math.sqrt(n))))
    for t in range(m):
        sample[t] = K[(t * n) // m]
    q = k / n
    half = _BRACKET_SIGMAS * math.sqrt(m * q * (1.0 - q)) + 2.0
    lo_i, hi_i = int(q * m - half), int(q * m + half) + 1
    lo = _kth_value(sample, m, lo_i, x, y) if lo_i >= 0 else -np.inf
    hi = _kth_value(sample, m, hi_i, x, y) if hi_i < m else np.inf
    below, same_below, inside = 0, 0, 0
    for j in range(n):                       # vectorises: counts, no branches
        v = K[j]
        is_below = v < lo
        below += is_below
        same_below += is_below & (codes[j] == ci)
        inside += (lo <= v) & (v <= hi)
    if below < k <= below + inside:
        nc = 0
        for j in range(n):                   # branch-free compaction of the indices inside
            v = K[j]
            cand_i[nc] = j
            nc += (lo <= v) & (v <= hi)
        for t in range(nc):
            y[t] = K[cand_i[t]]
        kth = _kth_value(y, nc, k - below - 1, x, y)         # reads y before it writes there
        count, same_count = below, same_below
        for t in range(nc):
            j = cand_i[t]
            is_in = K[j] <= kth
            count += is_in
            same_count += is_in & (codes[j] == ci)
    else:                                    # bracket missed: select on the whole row
        kth = _kth_value(K, n, k - 1, x, y)
        count, same_count = 0, 0
        for j in range(n):
            is_in = K[j] <= kth
            count += is_in
            same_count += is_in & (codes[j] == ci)
    return same_count, count > k


@_jit
def _weighted_vote(K, k, inv_i, temperature, codes, votes, cand_v, cand_i, gmins, x, y):
    """DINO weighted vote of the k smallest entries of the cosine key K (= -similarity * |a|).

    The (k+1)-th smallest of the minima of any k+1 or more disjoint groups of entries
    bounds the (k+1)-th smallest entry from above. Groups here are the residues j mod M
    (their minima: elementwise, vectorised); one pass then collects the few entries
    under that bound, visiting only the groups whose minimum is under it.

    Returns (predicted class, decided). Undecided: the k-th value is tied with the
    (k+1)-th, the two largest class totals are within ``_VOTE_MARGIN``, anything is not
    finite, or too many entries tie under the bound.
    """
    n = K.shape[0]
    groups = max(k + 1, min(n, n // _GROUP))
    mins = gmins[:groups]
    mins[:] = np.inf
    for s in range(0, n - groups + 1, groups):   # elementwise over contiguous slices: vectorises
        np.minimum(mins, K[s:s + groups], mins)
    for c in range(n - n % groups, n):
        mins[c - (n - n % groups)] = min(mins[c - (n - n % groups)], K[c])
    t = _kth_value(mins, groups, k, x, y)
    cap = cand_v.shape[0]
    nc = 0
    for c in range(groups):                      # only groups whose minimum is under the bound
        if mins[c] <= t:
            for j in range(c, n, groups):
                if K[j] <= t:
                    if nc == cap:                # many ties under the bound: the exact path decides
                        return -1, False
                    cand_v[nc] = K[j]
                    cand_i[nc] = j
                    nc += 1
    kth = _kth_value(cand_v, nc, k - 1, x, y)
    inside = 0
    for u in range(nc):
        inside += cand_v[u] <= kth
    if inside > k:                           # the (k+1)-th value ties the k-th
        return -1, False
    votes[:] = 0.0
    top = -np.inf
    for u in range(nc):
        if cand_v[u] <= kth:
            top = max(top, (-cand_v[u] * inv_i) / temperature)
    for u in range(nc):
        if cand_v[u] <= kth:
            votes[codes[cand_i[u]]] += math.exp((-cand_v[u] * inv_i) / temperature - top)
    best, second, pred = -np.inf, -np.inf, -1
    for c in range(votes.shape[0]):
        if votes[c] > best:
            best, second, pred = votes[c], best, c
        elif votes[c] > second:
            second = votes[c]
    decided = math.isfinite(best) and math.isfinite(top) and best - second > _VOTE_MARGIN * best
    return pred, decided


@_jit
def block_tasks(G, sq, inv, codes, start, need_e, need_c,
                nn_metric, nn_idx, nn_val, nn_tied,
                cnt_metric, cnt_k, cnt_same, cnt_tied,
                w_k, w_temperature, w_pred, w_decided, n_classes):
    """Every task for the rows of one Gram block.

    Parameters
    ----------
    G : (B, N) float64, rows ``start .. start + B`` of X X^T
    sq, inv : (N,) float64, squared norms and inverse norms (0 for a zero row)
    codes : (N,) int64 class codes
    need_e, need_c : which keys the tasks use
    nn_metric, cnt_metric : (T,) int64, 0 Euclidean / 1 cosine, per task
    cnt_k, w_k : (T,) int64; w_temperature : (T,) float64
    nn_idx, nn_val, nn_tied, cnt_same, cnt_tied, w_pred, w_decided : (T, N) outputs, written
        at columns ``start .. start + B``; nn_val is the Euclidean key or the cosine
        similarity key (a.b / |b|) of the nearest.
    """
    b, n = G.shape
    keys = np.empty((2, n))
    sample = np.empty(max(n, _SAMPLE))
    cand_i = np.empty(n + 1, dtype=np.int64)
    x, y, gmins = np.empty(n + 1), np.empty(n + 1), np.empty(n + 1)
    w_cap = min(max(32 * (int(w_k.max()) + 1), 1024), n + 1) if w_k.shape[0] else 1
    wv = np.empty(w_cap)
    wi = np.empty(w_cap, dtype=np.int64)
    votes = np.empty(n_classes)
    for i in range(b):
        row = start + i
        g = G[i]
        if need_e:
            ke = keys[0]
            for j in range(n):
                ke[j] = sq[j] - 2.0 * g[j]
            ke[row] = np.inf
        if need_c:
            kc = keys[1]
            for j in range(n):
                kc[j] = -(g[j] * inv[j])
            kc[row] = np.inf
        for t in range(nn_metric.shape[0]):
            idx, val, tied = _nearest(keys[nn_metric[t]])
            nn_idx[t, row] = idx
            nn_val[t, row] = val if nn_metric[t] == 0 else -val
            nn_tied[t, row] = tied
        for t in range(cnt_metric.shape[0]):
            same, tied = _count_same(keys[cnt_metric[t]], cnt_k[t], codes, codes[row], sample, cand_i, x, y)
            cnt_same[t, row] = same
            cnt_tied[t, row] = tied
        for t in range(w_k.shape[0]):
            pred, decided = _weighted_vote(keys[1], w_k[t], inv[row], w_temperature[t], codes, votes,
                                           wv, wi, gmins, x, y)
            w_pred[t, row] = pred
            w_decided[t, row] = decided
