"""Neural-collapse measures of one layer's features.

Definitions: ``docs/METRICS.md`` ("Collapse"), after Papyan, Han & Donoho (2020),
"Prevalence of neural collapse during the terminal phase of deep learning" (PNAS), Galanti
et al. (2022) for CDNV, and Li, Liu et al., "Principled and efficient transfer learning of
deep models via neural collapse" for layer-wise NC1 and the numerical rank.

All class statistics come from one :class:`_ClassStats` per layer (two blocked passes over X
in float64; :func:`class_stats` keeps it in the layer context, so nc1, cdnv, nc2 and ncc share
it): class means, the K × K Gram of the centred means, per-class scatter, the projected
within-class scatter ``Mᵀ Σ_W M`` and the nearest-class-centre predictions.
No d × d matrix is ever formed.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg
import torch

from ._checks import DegenerateFeaturesError, _Checked, _single_thread_on_cpu
from ._context import LayerContext, measure
from ._docs import metric_doc
from ._neighbors import _matmul_t

__all__ = ["nc1", "cdnv", "numerical_rank", "nc2", "ncc_accuracy"]

# Elements of X processed per chunk (2 MB in float64): small enough for the temporaries to
# stay in cache at large d, large enough to amortise per-op overhead.
_BLOCK_ELEMENTS = 1 << 18
# Relative cutoff of the K × K pseudo-inverse: eigenvalues of MᵀM below rtol · largest are
# treated as zero. MᵀM always has one zero eigenvalue (the centred means sum to zero); with
# M in float64 it sits near 1e-32 relative, far below 1e-10. In float32 (MPS) it sits near
# 1e-7, hence METRICS.md's 1e-4 there.
_RTOL = {torch.float64: 1e-10, torch.float32: 1e-4}
# Class means closer than _COINCIDE · (largest mean norm) count as coinciding (float64
# means of identical data agree to ~1e-16 relative).
_COINCIDE = {torch.float64: 1e-12, torch.float32: 1e-5}


def _acc_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64   # MPS has no float64


def _rows_per_block(d: int) -> int:
    return max(1, _BLOCK_ELEMENTS // max(d, 1))


def _class_chunks(c: _Checked, rows: int):
    """Yield (class code, row indices (B,), X rows of that class (B, d) in X's dtype), in chunks of ``rows``.

    A class whose samples are contiguous in X is sliced (no copy); otherwise its rows are
    gathered chunk by chunk, so memory stays bounded.
    """
    for k in range(c.n_classes):
        idx = (c.codes == k).nonzero().flatten()                                     # (n_k,)
        first, last = int(idx[0]), int(idx[-1])
        contiguous = last - first + 1 == idx.numel()
        for s in range(0, idx.numel(), rows):
            if contiguous:
                yield k, idx[s:s + rows], c.X[first + s:first + min(s + rows, idx.numel())]
            else:
                yield k, idx[s:s + rows], c.X.index_select(0, idx[s:s + rows])


class _ClassStats:
    """Class statistics shared by nc1, cdnv, nc2 and ncc_accuracy (computed lazily).

    Works class by class on row chunks of bounded size (cache-friendly at large d), with
    float64 accumulation that never materialises a float64 copy of X.
    """

    def __init__(self, c: _Checked):
        self.c = c
        self.dtype = _acc_dtype(c.X.device)
        X, K = c.X, c.n_classes
        rows = _rows_per_block(c.d)
        sums = torch.zeros(K, c.d, dtype=self.dtype, device=X.device)               # (K, d)
        with _single_thread_on_cpu(X.device):
            for k, _, Xk in _class_chunks(c, rows):
                # Chunk-wise conversion then a native sum: ~10x faster on CPU than
                # sum(dtype=float64) or converting X at once (page faults of a big buffer).
                sums[k] += Xk.to(self.dtype).sum(dim=0)
        counts = torch.as_tensor(c.counts, dtype=self.dtype, device=X.device)        # (K,)
        self.counts = counts
        self.means = sums / counts[:, None]                                          # (K, d)
        self.centred = self.means - self.means.mean(dim=0, keepdim=True)             # (K, d) μ_k - μ_G
        self.gram = (self.centred @ self.centred.T).cpu().double()                   # (K, K) MᵀM
        # Pairwise squared distances of the means by direct differences (no |a|²+|b|²-2ab
        # cancellation; coinciding means give exact zeros).
        pair = torch.cdist(self.means, self.means, compute_mode="donot_use_mm_for_euclid_dist") ** 2
        self.pair_sq = pair.cpu().double()                                           # (K, K)
        scale = float(self.means.norm(dim=1).max().cpu())
        self.coincide_sq = (_COINCIDE[self.dtype] * scale) ** 2
        self._second = None

    # -- second pass: within-class scatter, projected scatter, nearest centre
    def _second_pass(self):
        if self._second is not None:
            return self._second
        c, K = self.c, self.c.n_classes
        rows = _rows_per_block(c.d)
        within = torch.zeros(K, dtype=self.dtype, device=c.X.device)                 # (K,)
        proj = torch.zeros(K, K, dtype=self.dtype, device=c.X.device)                # (K, K) Σ z zᵀ
        correct = torch.zeros((), dtype=torch.int64, device=c.X.device)
        gap = torch.empty(c.n, dtype=self.dtype, device=c.X.device)                  # (N,) see margins()
        pair = self.pair_sq.to(device=c.X.device, dtype=self.dtype)
        with _single_thread_on_cpu(c.X.device):
            for k, idx, Xk in _class_chunks(c, rows):
                # (B, d) x - μ_k; copy=True so the in-place subtraction never writes into X.
                D = Xk.to(self.dtype, copy=True).sub_(self.means[k])
                dsq = torch.linalg.vector_norm(D, dim=1).square_()                   # (B,) no (B, d) temp
                within[k] += dsq.sum()
                Z = D @ self.centred.T                                               # (B, K) Mᵀ(x - μ_k)
                proj += Z.T @ Z
                # |x - μ_j|² = |x - μ_k|² + |μ_k - μ_j|² + 2 (x - μ_k)·(μ_k - μ_j), and
                # (x - μ_k)·(μ_k - μ_j) = Z[k] - Z[j] since μ_k - μ_j = c_k - c_j.
                dist = dsq[:, None] + pair[k] + 2.0 * (Z[:, k:k + 1] - Z)           # (B, K)
                correct += (dist.argmin(dim=1) == k).sum()
                if K > 1:
                    # the same distances give each image's margin: nearest other centre minus its own
                    others = torch.cat([dist[:, :k], dist[:, k + 1:]], dim=1).amin(dim=1)   # (B,)
                    gap[idx] = others.clamp_min(0.0).sqrt() - dsq.sqrt()
                else:
                    gap[idx] = float("nan")
        self._second = (within.cpu().double(), proj.cpu().double(), int(correct), gap)
        return self._second

    # -- degeneracy checks
    def _label(self, k: int):
        return self.c.labels[k].item()

    def require_spread(self, metric: str) -> None:
        if float(self.gram.diagonal().sum()) <= self.coincide_sq:
            raise DegenerateFeaturesError(
                f"{metric} is undefined: all {self.c.n_classes} class means coincide (the between-class "
                "scatter Σ_B is zero), e.g. a constant (dead) layer."
            )

    def require_distinct_means(self, metric: str) -> None:
        self.require_spread(metric)
        K = self.c.n_classes
        close = (self.pair_sq <= self.coincide_sq) & ~torch.eye(K, dtype=torch.bool)
        if bool(close.any()):
            i, j = (int(v) for v in close.nonzero()[0])
            raise DegenerateFeaturesError(
                f"{metric} is undefined: the means of classes {self._label(i)!r} and {self._label(j)!r} coincide."
            )

    # -- the measures
    def nc1(self) -> float:
        self.require_spread("nc1")
        _, proj, _, _ = self._second_pass()
        w, V = torch.linalg.eigh(self.gram)                                          # ascending
        keep = w > _RTOL[self.dtype] * w[-1]
        w, V = w[keep], V[:, keep]
        # nc1 = (1/K) tr(Σ_W Σ_B⁺) = tr((MᵀM)⁺² · MᵀΣ_W M) with MᵀΣ_W M = proj / N.
        quad = ((V.T @ proj) * V.T).sum(dim=1)                                        # v_iᵀ proj v_i
        return float((quad / w**2).sum() / self.c.n)

    def cdnv(self) -> float:
        self.require_distinct_means("cdnv")
        i, j = torch.triu_indices(self.c.n_classes, self.c.n_classes, offset=1)
        return float(self.cdnv_pairs()[i, j].mean())

    def cdnv_pairs(self) -> torch.Tensor:
        """(K, K) float64 CPU: (Var_i + Var_j) / (2 ‖μ_i − μ_j‖²) for i ≠ j (cdnv is the mean over
        i < j); NaN on the diagonal and for pairs whose means coincide."""
        within, _, _, _ = self._second_pass()
        var = within / torch.as_tensor(self.c.counts, dtype=torch.float64)           # (K,)
        close = (self.pair_sq <= self.coincide_sq) | torch.eye(self.c.n_classes, dtype=torch.bool)
        terms = (var[:, None] + var[None, :]) / (2.0 * self.pair_sq.masked_fill(close, 1.0))
        return terms.masked_fill(close, float("nan"))                                # (K, K)

    def margins(self) -> torch.Tensor:
        """(N,) float64 CPU, in X's row order: (min over c ≠ y_i of ‖x_i − μ_c‖ − ‖x_i − μ_{y_i}‖) divided
        by the mean distance between two class means, from the distances the NCC rule compares
        (positive: nearer its own class mean than any other). NaN with a single class."""
        self.require_spread("margin")
        _, _, _, gap = self._second_pass()
        i, j = torch.triu_indices(self.c.n_classes, self.c.n_classes, offset=1)
        scale = self.pair_sq[i, j].clamp_min(0.0).sqrt().mean()                      # mean ‖μ_i − μ_j‖
        return gap.cpu().double() / scale

    def nc2_equinorm(self) -> float:
        self.require_spread("nc2_equinorm")
        norms = self.gram.diagonal().clamp_min(0.0).sqrt()                           # (K,) |μ_k - μ_G|
        return float(norms.std(correction=1) / norms.mean())

    def nc2_equiangularity(self) -> float:
        self.require_spread("nc2_equiangularity")
        K = self.c.n_classes
        norms = self.gram.diagonal().clamp_min(0.0).sqrt()
        if bool((norms**2 <= self.coincide_sq).any()):
            k = int((norms**2 <= self.coincide_sq).nonzero()[0])
            raise DegenerateFeaturesError(
                f"nc2_equiangularity is undefined: the mean of class {self._label(k)!r} equals the "
                "global mean, so its angle to the other classes is undefined."
            )
        cos = self.gram / (norms[:, None] * norms[None, :])                          # (K, K)
        i, j = torch.triu_indices(K, K, offset=1)
        return float((cos[i, j] + 1.0 / (K - 1)).abs().mean())

    def ncc_accuracy(self) -> float:
        self.require_distinct_means("ncc_accuracy")
        _, _, correct, _ = self._second_pass()
        return correct / self.c.n


def class_stats(layer: LayerContext) -> _ClassStats:
    """The layer's class statistics, computed once for every metric that reads them."""
    return layer.shared("class_stats", lambda layer: _ClassStats(layer.checked))


def nc1_of_layer(layer: LayerContext) -> float:
    """:func:`nc1` of a prepared layer (catalogue function)."""
    return class_stats(layer).nc1()


def cdnv_of_layer(layer: LayerContext) -> float:
    """:func:`cdnv` of a prepared layer (catalogue function)."""
    return class_stats(layer).cdnv()


def nc2_equinorm_of_layer(layer: LayerContext) -> float:
    """The equinorm of :func:`nc2` of a prepared layer (catalogue function)."""
    return class_stats(layer).nc2_equinorm()


def nc2_equiangularity_of_layer(layer: LayerContext) -> float:
    """The equiangularity of :func:`nc2` of a prepared layer (catalogue function)."""
    return class_stats(layer).nc2_equiangularity()


def ncc_accuracy_of_layer(layer: LayerContext) -> float:
    """:func:`ncc_accuracy` of a prepared layer (catalogue function)."""
    return class_stats(layer).ncc_accuracy()


def margin_samples(layer: LayerContext) -> dict[str, np.ndarray]:
    """What the per-image record reads from the class statistics (docs/METRICS.md, "The answer per image").

    ``"margin"``: each sample's nearest-class-centre margin (N,) float64; ``"cdnv_pairs"``: the CDNV term
    of every class pair (K, K) float64 (NaN on the diagonal; classes in sorted label order). Both NaN
    when undefined (every class mean in one place).
    """
    c = layer.checked
    try:
        stats = class_stats(layer)
        return {"margin": stats.margins().numpy(), "cdnv_pairs": stats.cdnv_pairs().numpy()}
    except DegenerateFeaturesError:
        return {"margin": np.full(c.n, np.nan), "cdnv_pairs": np.full((c.n_classes, c.n_classes), np.nan)}


@metric_doc
def nc1(X, y) -> float:
    """NC1 within-class variability collapse: (1/K) · tr(Σ_W Σ_B⁺).

    Σ_W = (1/N) Σ_i (x_i − μ_{y_i})(x_i − μ_{y_i})ᵀ, Σ_B = (1/K) Σ_k (μ_k − μ_G)(μ_k − μ_G)ᵀ,
    μ_G the mean of the class means. Computed exactly in the K-dimensional span of the
    centred means M (d × K): nc1 = tr((MᵀM)⁺² · MᵀΣ_W M), float64, O(N·d·K), never a d × d
    matrix; the pseudo-inverse drops eigenvalues of MᵀM below 1e-10 × the largest.

    {X_y_two_per_class}

    Returns
    -------
    float
        ≥ 0; 0 for perfectly collapsed classes (every sample at its class mean); grows as
        classes overlap. Invariant to scaling X, relabelling classes and reordering samples.

    {raises_degenerate}
        When all class means coincide (Σ_B = 0, e.g. a constant layer): the literal
        formula would give a misleading 0.

    References
    ----------
    Papyan, Han & Donoho (2020), PNAS 117(40); Li, Liu et al., neural-collapse transfer.
    """
    return measure("nc1", X, y)


@metric_doc
def cdnv(X, y) -> float:
    """Class-distance normalized variance, averaged over class pairs.

    mean over pairs i ≠ j of (Var_i + Var_j) / (2 ‖μ_i − μ_j‖²), with
    Var_k = (1/n_k) Σ_{x in class k} ‖x − μ_k‖².

    {X_y_two_per_class}

    Returns
    -------
    float
        ≥ 0; 0 for perfectly collapsed classes. Invariant to scaling X.

    {raises_degenerate}
        When two class means coincide (division by zero).

    References
    ----------
    Galanti, György & Hutter (2022), "On the role of neural collapse in transfer learning", ICLR.
    """
    return measure("cdnv", X, y)


@metric_doc
def nc2(X, y) -> dict[str, float]:
    """NC2 convergence of the centred class means to a simplex ETF.

    equinorm = std/mean of ‖μ_k − μ_G‖ (sample std, ``torch.std`` as in Papyan et al.'s
    code); equiangularity = mean over pairs of |cos(μ_i − μ_G, μ_j − μ_G) + 1/(K − 1)|.

    {X_y}

    Returns
    -------
    dict
        ``{"equinorm": float ≥ 0, "equiangularity": float in [0, K/(K-1)]}``; both 0 at a
        simplex equiangular tight frame.

    {raises_degenerate}
        When all class means coincide, or (equiangularity) one equals the global mean.

    References
    ----------
    Papyan, Han & Donoho (2020), PNAS 117(40).
    """
    layer = LayerContext(X, y)
    return {"equinorm": nc2_equinorm_of_layer(layer), "equiangularity": nc2_equiangularity_of_layer(layer)}


@metric_doc
def ncc_accuracy(X, y) -> float:
    """Accuracy of the nearest-class-centre rule (NC4), centres = class means of all of X.

    {X_y}

    Returns
    -------
    float
        In [0, 1]; 1 for collapsed classes. Exact distance ties go to the lowest class.

    {raises_degenerate}
        When two class means coincide.

    References
    ----------
    Papyan, Han & Donoho (2020), PNAS 117(40) (NC4).
    """
    return measure("ncc_accuracy", X, y)


def numerical_rank_of_layer(layer: LayerContext) -> float:
    """:func:`numerical_rank` of a prepared layer (catalogue function)."""
    with _single_thread_on_cpu(layer.X.device):
        return _numerical_rank_impl(layer.checked)


def _numerical_rank_impl(c: _Checked) -> float:
    dtype = _acc_dtype(c.X.device)
    ratios = []
    for k in range(c.n_classes):
        idx = (c.codes == k).nonzero().flatten()                                     # (n_k,)
        n_k = int(idx.numel())
        # ‖H‖_2² = largest eigenvalue of the smaller Gram (HᵀH if d ≤ n_k, else HHᵀ).
        if c.d <= n_k:
            gram = torch.zeros(c.d, c.d, dtype=dtype, device=c.X.device)            # (d, d)
            rows = _rows_per_block(c.d)
            for s in range(0, n_k, rows):
                Hb = c.X.index_select(0, idx[s:s + rows]).to(dtype)                  # (B, d)
                gram += _matmul_t(Hb.T, Hb.T)
        else:
            gram = torch.zeros(n_k, n_k, dtype=dtype, device=c.X.device)            # (n_k, n_k)
            cols = max(1, _BLOCK_ELEMENTS // n_k)
            for s in range(0, c.d, cols):
                Hb = c.X[:, s:s + cols].index_select(0, idx).to(dtype)               # (n_k, b)
                gram += _matmul_t(Hb, Hb)
        gram = gram.cpu().double().numpy()
        fro2 = float(np.trace(gram))
        # Only the largest eigenvalue: LAPACK's subset driver, ~1.5x faster than all of them.
        spec2 = float(scipy.linalg.eigh(gram, eigvals_only=True, subset_by_index=[len(gram) - 1] * 2,
                                        driver="evx", check_finite=False)[0])
        if not spec2 > 0:
            raise DegenerateFeaturesError(
                f"numerical_rank is undefined: every feature of class {c.labels[k].item()!r} is zero "
                "(‖H_k‖₂ = 0), e.g. a dead layer."
            )
        ratios.append(fro2 / spec2)
    return float(np.mean(ratios))


@metric_doc
def numerical_rank(X, y) -> float:
    """Mean numerical (stable) rank of the class feature matrices.

    (1/K) Σ_k ‖H_k‖_F² / ‖H_k‖_2², H_k the n_k × d matrix of class-k features,
    uncentred (as in the neural-collapse transfer paper).

    {X_y}

    Returns
    -------
    float
        In [1, min(n_k, d)]; 1 when every class matrix has rank 1 (e.g. collapsed classes).

    {raises_degenerate}
        When a class's features are all zero.

    References
    ----------
    Li, Liu et al., "Principled and efficient transfer learning of deep models via neural collapse".
    """
    return measure("numerical_rank", X, y)
