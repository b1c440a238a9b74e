"""Label-free quality of one layer's features: RankMe, alpha-ReQ, TwoNN intrinsic dimension, LiDAR.

Definitions: ``docs/METRICS.md`` ("Label-free layer quality (no labels used)"). None of these
reads a label; each takes one layer's pooled features ``X`` (N images × d) -- LiDAR takes several
augmented views per image -- and returns a Python float.

- :func:`rankme`: effective rank of the uncentred features (Garrido et al. 2023).
- :func:`alpha_req`: decay exponent of the centred covariance spectrum (Agrawal et al. 2022).
- :func:`twonn_id`: intrinsic dimension from second/first nearest-neighbour distance ratios
  (Facco et al. 2017).
- :func:`lidar`: effective rank of the between-image covariance whitened by the within-image
  (augmentation) covariance (Thilak et al. 2024).

Everything runs on X's device with torch linear algebra (on CPU the large products go through numpy's
BLAS, as in ``_neighbors``), spectra in float64 (on MPS, which has no float64, on the CPU). Nothing
forms an N × N matrix: spectra come from the d × d (or, when d > N, the N × N) Gram accumulated over
blocks, and TwoNN's exact nearest neighbours from row strips of the distance matrix
(``_two_nearest``). Features for which a measure is undefined raise
:class:`~lab.metrics.DegenerateFeaturesError` (the layer report turns it into NaN and a warning).

The catalogue's family "label_free" computes them from a layer context (``*_of_layer``, as every entry's
``function``): the features alone (``needs=()``), LiDAR the layer's views (``needs=("views",)``:
``compute_layer(..., views=)``).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from ._checks import DegenerateFeaturesError, _as_features, _is_constant
from ._device import _float64_device
from ._docs import metric_doc
from ._two_nearest import matmul, two_nearest

__all__ = ["rankme", "alpha_req", "twonn_id", "lidar", "rankme_of_layer", "alpha_req_of_layer", "twonn_id_of_layer",
           "lidar_of_layer"]

# The +1e-7 of RankMe's and LiDAR's entropy (Garrido et al. 2023; reptrix's get_rank).
_ENTROPY_EPS = 1e-7
# alpha-ReQ's fit range: ranks 6 ... 100 (zero-based 5 ... 99), at least this many eigenvalues in it.
_FIT_FIRST, _FIT_LAST, _FIT_MIN = 5, 99, 10
# TwoNN keeps the smallest 90 % of the ratios (scikit-dimension's default discard_fraction=0.1).
_TWONN_KEEP_TENTHS = 9
# Rows of X per block when accumulating a Gram (float64 blocks of about 8 MB).
_GRAM_BLOCK_ELEMENTS = 1 << 20
# View-means closer than this times the largest mean norm count as coinciding (LiDAR).
_COINCIDE = 1e-12


# -------------------------------------------------------------------------- shared helpers
def _features(X) -> torch.Tensor:
    """X checked (2-D, finite, floating; lab.metrics' one checker) on the device of its float64 work."""
    X = _as_features(X)
    return X.to(_float64_device(X.device))


def _blocks(n: int, width: int):
    rows = max(1, _GRAM_BLOCK_ELEMENTS // max(width, 1))
    for start in range(0, n, rows):
        yield slice(start, min(start + rows, n))


def _small_gram(X: torch.Tensor, *, centre: bool) -> torch.Tensor:
    """Gram of the smaller side of X in float64: XᵀX (d × d) when N ≥ d, else XXᵀ (N × N).

    Both have the same non-zero eigenvalues (the squared singular values of X). With ``centre`` X's
    column means are subtracted first. Accumulated over float64 blocks, so X is never copied whole; on
    CPU through numpy (OpenBLAS: about 2x torch's MKL build for this product here).
    """
    n, d = X.shape
    mean = X.sum(dim=0, dtype=torch.float64) / n if centre else None                # (d,)
    if n >= d:
        gram = torch.zeros(d, d, dtype=torch.float64, device=X.device)               # (d, d)
        for rows in _blocks(n, d):
            B = X[rows].to(torch.float64)                                            # (b, d)
            if centre:
                B = B - mean
            gram += matmul(B.T, B)
        return gram
    gram = torch.zeros(n, n, dtype=torch.float64, device=X.device)                   # (N, N), N < d
    for cols in _blocks(d, n):
        B = X[:, cols].to(torch.float64)                                             # (N, c)
        if centre:
            B = B - mean[cols]
        gram += matmul(B, B.T)
    return gram


def _spectrum(X: torch.Tensor, *, centre: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(eigenvalues of the smaller Gram, descending, float64 (min(N, d),); their "non-zero" mask).

    Eigenvalues at or below λ_1 · max(N, d) · ε (float64) are below what the Gram resolves: they are
    set to 0 and count as zero (numpy's ``matrix_rank`` rule, applied to the squared singular values).
    """
    n, d = X.shape
    lam = torch.linalg.eigvalsh(_small_gram(X, centre=centre)).flip(0)              # (min(N, d),) descending
    tol = lam[0].clamp_min(0.0) * max(n, d) * torch.finfo(torch.float64).eps
    nonzero = lam > tol
    return torch.where(nonzero, lam, torch.zeros_like(lam)), nonzero


def _entropy_rank(values: torch.Tensor, extra_zeros: int = 0) -> float:
    """exp(−Σ p_i log p_i), p_i = v_i / Σ v + 1e-7, over ``values`` and ``extra_zeros`` more zeros."""
    p = values / values.sum() + _ENTROPY_EPS                                         # (m,)
    entropy = -(p * p.log()).sum()
    entropy = entropy - extra_zeros * _ENTROPY_EPS * math.log(_ENTROPY_EPS)
    return float(torch.exp(entropy))


# -------------------------------------------------------------------------- RankMe
@metric_doc
def rankme(X) -> float:
    """RankMe: the effective rank of the features' singular values.

    exp(−Σ_i p_i log p_i) with p_i = σ_i / Σ_j σ_j + 1e-7 over the min(N, d) singular values σ_i of X,
    *not* centred (as in the paper). σ_i comes from the eigenvalues of the smaller Gram (XᵀX or XXᵀ) in
    float64; those below λ_1 · max(N, d) · ε count as zero (σ_i < about 1e-6 σ_1).

    {X_one_layer}

    Returns
    -------
    float
        In [1, min(N, d)] (up to the 1e-7 term): 1 when X has rank 1 (e.g. every image has the same
        non-zero features), min(N, d) when all singular values are equal.

    {raises_degenerate}
        When every feature of every image is zero (no singular value to normalise by).
    ValueError
        When X is not a finite 2-D array.

    References
    ----------
    Garrido, Balestriero, Najman & LeCun, "RankMe: Assessing the downstream performance of pretrained
    self-supervised representations by their rank", ICML 2023.
    """
    X = _features(X)
    lam, _ = _spectrum(X, centre=False)                                             # (min(N, d),)
    if not bool((lam > 0).any()):
        raise DegenerateFeaturesError(
            f"rankme is undefined: all {X.shape[0]} images have all-zero features (every singular value is 0)."
        )
    return _entropy_rank(lam.sqrt())


# -------------------------------------------------------------------------- alpha-ReQ
@metric_doc
def alpha_req(X) -> float:
    """alpha-ReQ: the power-law decay exponent α of the centred covariance spectrum, λ_i ∝ i^(−α).

    λ_1 ≥ λ_2 ≥ … are the eigenvalues of the covariance of the centred X (float64). As reptrix's
    ``get_powerlaw`` (after Stringer et al. 2019): weighted least squares of log λ_i on (−log i, 1)
    over the ranks i = 6 … 100 with weights 1/i; α is the slope. When fewer than 100 eigenvalues are
    non-zero (above λ_1 · max(N, d) · ε), the range ends at the last non-zero eigenvalue but one.

    {X_one_layer}

    Returns
    -------
    float
        α, usually in (0, 5); about 1 for the power law Agrawal et al. found in good representations,
        larger for a faster decay (fewer effective dimensions).

    {raises_degenerate}
        When fewer than 10 eigenvalues lie in the fit range (fewer than 16 non-zero eigenvalues: too
        few images or features), or when the features are constant.
    ValueError
        When X is not a finite 2-D array.

    References
    ----------
    Agrawal, Mondal, Ghosh & Richards, "α-ReQ: Assessing representation quality in self-supervised
    learning by measuring eigenspectrum decay", NeurIPS 2022.
    """
    X = _features(X)
    n, d = X.shape
    lam, nonzero = _spectrum(X, centre=True)                                        # (min(N, d),)
    rank = int(nonzero.sum())
    if rank == 0:
        raise DegenerateFeaturesError(
            f"alpha_req is undefined for constant features: all {n} images are identical (a dead layer), "
            "so the centred covariance is zero."
        )
    last = _FIT_LAST if rank >= _FIT_LAST + 1 else rank - 2
    count = last - _FIT_FIRST + 1
    if count < _FIT_MIN:
        raise DegenerateFeaturesError(
            f"alpha_req needs at least {_FIT_MIN} eigenvalues in its fit range (ranks 6 to 100, ending at "
            f"the last non-zero eigenvalue but one); the centred features of {n} images × {d} features "
            f"have {rank} non-zero eigenvalues, so the range holds {max(count, 0)}. It needs "
            f"{_FIT_FIRST + _FIT_MIN + 1} non-zero eigenvalues: at least {_FIT_FIRST + _FIT_MIN + 2} images "
            f"and {_FIT_FIRST + _FIT_MIN + 1} features that do not all lie in a smaller subspace."
        )
    ranks = torch.arange(_FIT_FIRST + 1, last + 2, dtype=torch.float64, device=lam.device)   # (m,) i
    y = lam[_FIT_FIRST:last + 1].log()                                              # (m,) log λ_i
    x = torch.stack([-ranks.log(), torch.ones_like(ranks)], dim=1)                  # (m, 2)
    w = (1.0 / ranks)[:, None]                                                      # (m, 1)
    b = torch.linalg.solve(x.T @ (x * w), (x * w).T @ y[:, None])                   # (2, 1)
    return float(b[0, 0])


# -------------------------------------------------------------------------- TwoNN
@metric_doc
def twonn_id(X) -> float:
    """TwoNN intrinsic dimension of the features (Facco et al. 2017, scikit-dimension's formula).

    For each image μ_i = r2 / r1, its second- over first-nearest-neighbour Euclidean distance among
    the other images. Sort μ ascending and keep the floor(0.9 · N) smallest; with F_i = i / N for the
    i-th kept value (i = 0, 1, …), the dimension is the least-squares slope of the line through the
    origin of −log(1 − F_i) against log μ_(i).

    The neighbours are exact: row strips of the squared distance matrix in float32 (only the upper
    triangle: each pair once) propose 4 candidates per image; their distances are recomputed in
    float64 by direct differences, and a rounding bound proves that no other image is nearer than
    the second; the images it cannot prove are searched again in float64. Memory: a float32 copy of
    X and one strip of 256 × N keys (more rows on CUDA), never N × N.

    Images with a zero distance to their nearest neighbour (duplicates) have no ratio: they are left
    out (N counts the others) and a warning says how many.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
        One layer's pooled features of N ≥ 3 images; computed on X's device.

    Returns
    -------
    float
        The estimated dimension, > 0; about k for points spread over a k-dimensional manifold.

    {raises_degenerate}
        When fewer than 3 images have a non-zero nearest-neighbour distance (fewer than 3 images, all
        identical, or mostly duplicates), or when every kept ratio is 1.
    ValueError
        When X is not a finite 2-D array.

    Warns
    -----
    UserWarning
        When duplicate images were left out.

    References
    ----------
    Facco, d'Errico, Rodriguez & Laio, "Estimating the intrinsic dimension of datasets by a minimal
    neighborhood information", Scientific Reports 7, 12140 (2017).
    """
    X = _features(X)
    n = X.shape[0]
    if n < 3:
        raise DegenerateFeaturesError(
            f"twonn_id needs at least 3 images (each needs two nearest neighbours among the others); got {n}."
        )
    r1, r2 = two_nearest(X)                                                         # (N,), (N,) float64
    distinct = r1 > 0
    left_out = n - int(distinct.sum())
    n_used = n - left_out
    if n_used == 0 and _is_constant(X):
        raise DegenerateFeaturesError(
            f"twonn_id is undefined for constant features: all {n} images are identical (a dead layer), "
            "so every nearest-neighbour distance is 0."
        )
    if n_used < 3:
        raise DegenerateFeaturesError(
            f"twonn_id needs at least 3 images with a non-zero nearest-neighbour distance; {left_out} of the "
            f"{n} images are duplicates of another (distance 0), which leaves {n_used}."
        )
    if left_out:
        warnings.warn(
            f"twonn_id left out {left_out} of {n} images that duplicate another image (nearest-neighbour "
            f"distance 0) and estimated the dimension from the other {n_used}.", UserWarning, stacklevel=2)
    mu = (r2[distinct] / r1[distinct]).sort().values                                # (N',) ascending
    keep = (_TWONN_KEEP_TENTHS * n_used) // 10
    x = mu[:keep].log()                                                             # (keep,) log μ_(i)
    F = torch.arange(keep, dtype=torch.float64, device=x.device) / n_used           # (keep,) i / N'
    y = -torch.log1p(-F)                                                            # (keep,) −log(1 − F_i)
    xx = float((x * x).sum())
    if xx == 0.0:
        raise DegenerateFeaturesError(
            "twonn_id is undefined: every kept image has its two nearest neighbours at the same distance "
            "(all ratios r2/r1 are 1), so the fit has no slope."
        )
    return float((x * y).sum()) / xx


# -------------------------------------------------------------------------- LiDAR
@metric_doc
def lidar(views) -> float:
    """LiDAR: the effective rank of the between-image covariance whitened by the within-image one.

    Each image is a surrogate class and its q augmented views its samples. Σ_b is the covariance of
    the n view-means (around their mean); Σ_w the mean over images of the covariance of its views
    (around the image's view-mean) plus δI, δ = 1e-4 · tr(Σ_w) / d. With the symmetric inverse square
    root Σ_w^(−1/2) (from the eigendecomposition), LiDAR = exp(−Σ_i p_i log p_i) over the d eigenvalues
    λ_i of Σ_w^(−1/2) Σ_b Σ_w^(−1/2), p_i = λ_i / Σ_j λ_j + 1e-7. Float64; when d > n · q the work is
    done in the span of the views (same eigenvalues, the rest zero).

    Parameters
    ----------
    views : torch.Tensor or numpy.ndarray, shape (n, q, d)
        One layer's pooled features of q ≥ 2 augmented views of each of n ≥ 2 images; computed on
        their device.

    Returns
    -------
    float
        In [1, min(n − 1, d)] (up to the 1e-7 terms): larger when the images differ along more
        directions than their augmentations do.

    {raises_degenerate}
        With fewer than 2 images or 2 views, constant features, views identical within every image
        (Σ_w = 0: nothing to whiten by), or view-means that all coincide (Σ_b = 0).
    ValueError
        When ``views`` is not a finite 3-D array.

    References
    ----------
    Thilak, Huang, Zhai, Saremi, Littwin et al., "LiDAR: Sensing linear probing performance in joint
    embedding SSL architectures", ICLR 2024.
    """
    V = _views(views)
    n, q, d = V.shape
    if n < 2 or q < 2:
        raise DegenerateFeaturesError(
            f"lidar needs at least 2 images with at least 2 views each; got views of shape {(n, q, d)} "
            f"({n} images × {q} views)."
        )
    if _is_constant(V.reshape(n * q, d)):
        raise DegenerateFeaturesError(
            f"lidar is undefined for constant features: all {n * q} views of the {n} images are identical "
            "(a dead layer)."
        )
    if torch.equal(V, V[:, :1].expand(n, q, d)):
        raise DegenerateFeaturesError(
            f"lidar is undefined: the {q} views of each of the {n} images are identical (the within-image "
            "covariance Σ_w is 0, nothing to whiten by). Pass augmented views."
        )
    means, within = _view_statistics(V)                                             # (n, r), (r, r)
    centred = means - means.mean(dim=0)                                             # (n, r)
    if float(centred.norm(dim=1).max()) <= _COINCIDE * float(means.norm(dim=1).max()):
        raise DegenerateFeaturesError(
            f"lidar is undefined: the view-means of all {n} images coincide (the between-image covariance "
            "Σ_b is 0)."
        )
    between = matmul(centred.T, centred) / (n - 1)                                  # (r, r) Σ_b
    r = within.shape[0]
    delta = 1e-4 * float(within.diagonal().sum()) / d
    w, U = torch.linalg.eigh(within + delta * torch.eye(r, dtype=within.dtype, device=within.device))
    inv_sqrt = (U * w.rsqrt()) @ U.T                                                # (r, r) Σ_w^(−1/2)
    lam = torch.linalg.eigvalsh(inv_sqrt @ between @ inv_sqrt).clamp_min(0.0)       # (r,)
    return _entropy_rank(lam, extra_zeros=d - r)


def _views(views) -> torch.Tensor:
    """``views`` as a finite floating (n, q, d) tensor on the device of its float64 work."""
    if isinstance(views, np.ndarray):
        if views.dtype == object or not np.issubdtype(views.dtype, np.number):
            raise ValueError(f"views must hold numbers; got a numpy array of dtype {views.dtype}.")
        views = np.ascontiguousarray(views)
        views = torch.from_numpy(views if views.flags.writeable else views.copy())   # torch warns on read-only
    elif not isinstance(views, torch.Tensor):
        raise ValueError(
            f"views must be a torch.Tensor or numpy array of shape (n images, q views, d features); got "
            f"{type(views).__name__}."
        )
    views = views.detach()
    if views.ndim != 3:
        raise ValueError(
            f"views must be 3-D (n images, q views, d features); got shape {tuple(views.shape)}. Stack the "
            "pooled features of each image's augmented views along dimension 1."
        )
    if 0 in views.shape:
        raise ValueError(f"views must have at least one image, view and feature; got shape {tuple(views.shape)}.")
    if not views.is_floating_point() or views.dtype in (torch.float16, torch.bfloat16):
        views = views.float()
    n, q, d = views.shape
    # min and max propagate NaN and show inf: one reduction; only bad input is examined view by view
    if not bool(torch.isfinite(torch.stack(torch.aminmax(views))).all()):
        bad = (~torch.isfinite(views).all(dim=2)).nonzero()                         # (b, 2) image, view
        raise ValueError(
            f"views contains non-finite values (NaN or inf) in {bad.shape[0]} of {n * q} views (first: image "
            f"{int(bad[0, 0])}, view {int(bad[0, 1])}). Check the layer's features: a diverged model or "
            "half-precision overflow produces these."
        )
    return views.to(_float64_device(views.device))


def _view_statistics(V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(view-means (n, r) float64, Σ_w without δ (r, r) float64), r = d, or n · q coordinates in the span
    of the views when d > n · q (an orthonormal basis of that span keeps every eigenvalue)."""
    n, q, d = V.shape
    if d > n * q:
        # Coordinates of every view in an orthonormal basis of the views' span: V Q = Rᵀ.
        R = torch.linalg.qr(V.reshape(n * q, d).to(torch.float64).T, mode="r")[1]   # (n·q, n·q)
        V = R.T.reshape(n, q, n * q)
        d = n * q
    means = torch.empty(n, d, dtype=torch.float64, device=V.device)                 # (n, r)
    within = torch.zeros(d, d, dtype=torch.float64, device=V.device)                # (r, r)
    per_block = max(1, _GRAM_BLOCK_ELEMENTS // (q * d))
    for s in range(0, n, per_block):
        e = min(s + per_block, n)
        B = V[s:e].to(torch.float64)                                                # (b, q, r)
        means[s:e] = B.mean(dim=1)
        D = (B - means[s:e, None]).reshape(-1, d)                                   # (b·q, r)
        within += matmul(D.T, D)
    return means, within / (n * (q - 1))


# -------------------------------------------------------------------------- catalogue entries
def rankme_of_layer(layer) -> float:
    """:func:`rankme` of a layer context's features (the catalogue's ``rankme``)."""
    return rankme(layer.X)


def alpha_req_of_layer(layer) -> float:
    """:func:`alpha_req` of a layer context's features (the catalogue's ``alpha_req``)."""
    return alpha_req(layer.X)


def twonn_id_of_layer(layer) -> float:
    """:func:`twonn_id` of a layer context's features (the catalogue's ``twonn_id``)."""
    return twonn_id(layer.X)


def lidar_of_layer(layer) -> float:
    """:func:`lidar` of a layer context's views (n images, q views, d), the input its entry needs."""
    return lidar(layer.input("views"))
