"""Linear centred kernel alignment (CKA) between two representations of the same images.

Definitions: ``docs/METRICS.md`` ("Similarity of representations"), after Kornblith, Norouzi, Lee &
Hinton (2019), "Similarity of neural network representations revisited" (ICML), with the unbiased
HSIC estimator of Song, Smola, Gretton, Bedo & Borgwardt (2012), "Feature selection via dependence
maximization" (JMLR), and the minibatch estimator of Nguyen, Raghu & Kornblith (2021), "Do wide and
deep networks learn the same things?" (ICLR).

With K = X Xᵀ and L = Y Yᵀ over the same n images (linear kernels),
``CKA = HSIC(K, L) / sqrt(HSIC(K, K) · HSIC(L, L))``. Both HSIC estimators are invariant to
translating the features (the biased one centres with H; the unbiased one is a U-statistic of a
translation-invariant quantity), so features are centred first (exact, and it keeps the sums
small); both are homogeneous in the scale of each representation, so each is also divided by its
largest absolute value (exact for the ratio, and it keeps features of very different scale away
from overflow and underflow). No n × n matrix is formed when d <= n.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from ._checks import DegenerateFeaturesError, DegenerateLayerWarning, _as_features, _check_pair, _is_constant

__all__ = ["cka", "CKAAccumulator"]


def _acc_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64   # MPS has no float64


def _prepared(X: torch.Tensor, what: str) -> torch.Tensor:
    """X centred per column and divided by its largest absolute value, in the accumulation dtype."""
    if _is_constant(X):
        raise DegenerateFeaturesError(
            f"cka is undefined for constant features: all {X.shape[0]} samples of {what} are identical "
            "(a dead layer has no variation to compare)."
        )
    X = X.to(_acc_dtype(X.device))
    X = X - X.mean(dim=0, keepdim=True)                                          # (n, d)
    return X / X.abs().max()


class _Kernel:
    """What HSIC needs of one linear kernel K = X Xᵀ: tr(K·) via X or K, diag(K), K̃1 and 1ᵀK̃1
    (K̃ = K with a zero diagonal)."""

    def __init__(self, X: torch.Tensor):
        n, d = X.shape
        self.n = n
        self.X = X if d <= n else None                     # (n, d): cheaper than K when d <= n
        self.K = None if d <= n else X @ X.T               # (n, n)
        self.diag = (X * X).sum(dim=1)                     # (n,)
        col = X.sum(dim=0)                                 # (d,)   ~0 after centring, kept for exactness
        self.rows = X @ col - self.diag                    # (n,)   K̃ 1
        self.total = self.rows.sum()                       # 1ᵀ K̃ 1

    def trace(self, other: "_Kernel") -> torch.Tensor:
        """tr(K L) for this kernel K and ``other``'s L."""
        if self.X is not None and other.X is not None:
            return (self.X.T @ other.X).square().sum()     # ‖XᵀY‖_F²
        if self.K is not None and other.K is not None:
            return (self.K * other.K).sum()
        gram, feats = (self.K, other.X) if self.K is not None else (other.K, self.X)
        return ((gram @ feats) * feats).sum()              # tr(K Y Yᵀ)


def _hsic(a: _Kernel, b: _Kernel, unbiased: bool) -> torch.Tensor:
    n = a.n
    tr = a.trace(b)
    if not unbiased:
        # tr(K H L H) / (n-1)²; the columns are centred, so H X = X and tr(KHLH) = tr(KL)
        return tr / (n - 1) ** 2
    tr_tilde = tr - (a.diag * b.diag).sum()                                      # tr(K̃ L̃)
    return (tr_tilde + a.total * b.total / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * (a.rows * b.rows).sum()) / (n * (n - 3))


def cka(X, Y, *, unbiased: bool = True) -> float:
    """Linear CKA between two representations of the same n images.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (n, d_x)
    Y : torch.Tensor or numpy.ndarray, shape (n, d_y)
        The same images, in the same order (Y is moved to X's device).
    unbiased : bool
        True (default): the unbiased HSIC₁ estimator of Song et al. (2012), as Nguyen et al. (2021)
        use it; needs n >= 4. False: the biased HSIC₀ = tr(KHLH)/(n−1)² of Kornblith et al. (2019).

    Returns
    -------
    float
        Biased: in [0, 1]. Unbiased: ≈ [0, 1]; unrelated features give ≈ 0 (the biased estimate of
        unrelated features is positive and grows with d/n), and it can fall slightly below 0. 1 for
        X compared with itself, or with an orthogonal transform or isotropic rescaling of itself.

    Raises
    ------
    ValueError
        X and Y with different numbers of rows; n < 4 (unbiased) or n < 2 (biased); non-finite values.
    DegenerateFeaturesError
        Constant features (every row identical), or an unbiased self-HSIC estimate that is not positive
        (possible at very small n): CKA is not defined there.

    References
    ----------
    Kornblith et al. (2019), ICML, arXiv 1905.00414; Song et al. (2012), JMLR 13; Nguyen et al.
    (2021), ICLR, arXiv 2010.15327.
    """
    X, Y = _check_pair(X, Y, min_samples=4 if unbiased else 2, need_for="cka" + (" (unbiased)" if unbiased else ""))
    Xp = _prepared(X, "X")
    Yp = _prepared(Y.to(X.device), "Y")
    if Xp.dtype != Yp.dtype:
        Yp = Yp.to(Xp.dtype)
    kx, ky = _Kernel(Xp), _Kernel(Yp)
    xy, xx, yy = (float(_hsic(a, b, unbiased)) for a, b in ((kx, ky), (kx, kx), (ky, ky)))
    for value, what in ((xx, "X"), (yy, "Y")):
        if not value > 0:
            raise DegenerateFeaturesError(
                f"cka is undefined here: the {'unbiased ' if unbiased else ''}HSIC estimate of {what} with itself is "
                f"{value:.3g}, not positive (n={X.shape[0]} is too small for these features); use more images"
                + (" or unbiased=False." if unbiased else ".")
            )
    return xy / math.sqrt(xx * yy)


# ---------------------------------------------------------------------------------------------- minibatch


def _layer_list(feats, expected: int, which: str) -> list[torch.Tensor]:
    items = list(feats.values()) if isinstance(feats, Mapping) else feats
    if isinstance(items, (torch.Tensor, np.ndarray)) or not isinstance(items, Sequence):
        raise ValueError(f"{which} must be a list (or mapping) of {expected} feature tensors (b, d), one per layer; "
                         f"got {type(feats).__name__}.")
    if len(items) != expected:
        raise ValueError(f"{which} must hold {expected} layers' features (as the accumulator was created with); "
                         f"got {len(items)}.")
    return [_as_features(x) for x in items]


class CKAAccumulator:
    """Minibatch linear CKA of every pair of layers (Nguyen, Raghu & Kornblith 2021).

    For each minibatch of b >= 4 images, the unbiased HSIC₁ (Song et al. 2012) of every pair of
    layers' linear kernels is added up; :meth:`result` divides the mean over minibatches of
    HSIC₁(K_i, L_j) by sqrt(mean HSIC₁(K_i, K_i) · mean HSIC₁(L_j, L_j)). Memory: the b × b kernels of
    one minibatch, whatever the number of images. The work stays on the features' device (float64,
    float32 on MPS). Minibatches are weighted equally; draw them in a random order of the images (a
    minibatch of one class measures something else).

    Parameters
    ----------
    n_layers_a : int
        Layers of the first representation (rows of the result).
    n_layers_b : int, optional
        Layers of the second representation (columns); None compares the first with itself.
    names_a, names_b : sequence of str, optional
        Layer names, for warnings.

    Examples
    --------
    >>> acc = CKAAccumulator(3)                                   # doctest: +SKIP
    >>> for batch in batches: acc.update([f[batch] for f in feats])   # doctest: +SKIP
    >>> acc.result()            # (3, 3) numpy array, 1 on the diagonal   # doctest: +SKIP

    References
    ----------
    Nguyen, Raghu & Kornblith (2021), ICLR, arXiv 2010.15327, section 3 ("minibatch CKA").
    """

    def __init__(self, n_layers_a: int, n_layers_b: int | None = None, *, names_a: Sequence[str] | None = None,
                 names_b: Sequence[str] | None = None):
        for name, value in (("n_layers_a", n_layers_a), ("n_layers_b", n_layers_b)):
            if value is None and name == "n_layers_b":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")
        self.n_a = int(n_layers_a)
        self.n_b = None if n_layers_b is None else int(n_layers_b)
        self.names_a = list(names_a) if names_a is not None else [f"a[{i}]" for i in range(self.n_a)]
        self.names_b = (list(names_b) if names_b is not None else [f"b[{j}]" for j in range(self.n_b or 0)])
        self.batches = 0
        self.n_samples = 0
        self._xy = self._xx = self._yy = None
        self._scale_a: list[torch.Tensor] | None = None
        self._scale_b: list[torch.Tensor] | None = None
        self.undefined: dict[str, str] = {}
        """Layer name -> why its CKA is NaN (after :meth:`result`)."""

    @staticmethod
    def _kernels(feats: list[torch.Tensor], scales: list[torch.Tensor] | None, device):
        """(flattened K̃ (L, b²), K̃1 (L, b), 1ᵀK̃1 (L,), scales) of one minibatch's layers."""
        dtype = _acc_dtype(device)
        flat, rows, new_scales = [], [], []
        for i, X in enumerate(feats):
            X = X.to(device=device, dtype=dtype)
            X = X - X.mean(dim=0, keepdim=True)          # per-minibatch centring: HSIC₁ is translation invariant
            if scales is None:
                top = X.abs().max()
                new_scales.append(torch.where(top > 0, top, torch.ones_like(top)))
            scale = scales[i] if scales is not None else new_scales[-1]
            X = X / scale                                 # one scale per layer for every minibatch: exact
            K = X @ X.T                                   # (b, b)
            K.fill_diagonal_(0.0)
            flat.append(K.reshape(-1))
            rows.append(K.sum(dim=1))
        rows_t = torch.stack(rows)                        # (L, b)
        return torch.stack(flat), rows_t, rows_t.sum(dim=1), (scales if scales is not None else new_scales)

    @staticmethod
    def _hsic1(fa, ra, sa, fb, rb, sb, b: int) -> torch.Tensor:
        """Unbiased HSIC₁ of every pair (i, j): (La, Lb)."""
        tr = fa @ fb.T                                    # tr(K̃_i L̃_j)
        return (tr + sa[:, None] * sb[None, :] / ((b - 1) * (b - 2)) - 2.0 / (b - 2) * (ra @ rb.T)) / (b * (b - 3))

    @staticmethod
    def _hsic1_self(f, r, s, b: int) -> torch.Tensor:
        """Unbiased HSIC₁ of every layer with itself: (L,)."""
        return ((f * f).sum(dim=1) + s * s / ((b - 1) * (b - 2)) - 2.0 / (b - 2) * (r * r).sum(dim=1)) / (b * (b - 3))

    def update(self, feats_a, feats_b=None) -> None:
        """Add one minibatch: ``feats_a`` a list (or mapping) of ``n_layers_a`` tensors (b, d_i) of the same
        b images, and ``feats_b`` likewise of ``n_layers_b`` layers (only when created with it)."""
        if (feats_b is None) != (self.n_b is None):
            raise ValueError("update takes feats_b exactly when the accumulator compares two representations "
                             f"(n_layers_b={self.n_b!r}).")
        a = _layer_list(feats_a, self.n_a, "feats_a")
        b_list = _layer_list(feats_b, self.n_b, "feats_b") if feats_b is not None else []
        sizes = {int(x.shape[0]) for x in a + b_list}
        if len(sizes) != 1:
            raise ValueError(f"every layer of a minibatch must hold the same images; got row counts {sorted(sizes)}.")
        b = sizes.pop()
        if b < 4:
            raise ValueError(f"a minibatch needs at least 4 images for the unbiased HSIC estimator; got {b}. "
                             "Use larger minibatches (or merge the last, small one into the previous).")
        device = a[0].device
        fa, ra, sa, self._scale_a = self._kernels(a, self._scale_a, device)
        if b_list:
            fb, rb, sb, self._scale_b = self._kernels(b_list, self._scale_b, device)
            xy = self._hsic1(fa, ra, sa, fb, rb, sb, b)
            xx, yy = self._hsic1_self(fa, ra, sa, b), self._hsic1_self(fb, rb, sb, b)
        else:
            xy = self._hsic1(fa, ra, sa, fa, ra, sa, b)
            xx = yy = torch.diagonal(xy).clone()
        if self._xy is None:
            self._xy, self._xx, self._yy = xy, xx, yy
        else:
            self._xy, self._xx, self._yy = self._xy + xy, self._xx + xx, self._yy + yy
        self.batches += 1
        self.n_samples += b

    def result(self) -> np.ndarray:
        """The (La, Lb) minibatch CKA matrix (La × La without a second representation), as numpy float64.

        A layer whose mean self-HSIC is not positive (constant features) gets NaN in its row or column,
        a :class:`DegenerateLayerWarning` naming it, and an entry in :attr:`undefined`.

        Raises
        ------
        ValueError
            No minibatch was added.
        """
        if self._xy is None:
            raise ValueError("CKAAccumulator.result() needs at least one update() first.")
        xy = (self._xy / self.batches).double().cpu().numpy()
        xx = (self._xx / self.batches).double().cpu().numpy()
        yy = (self._yy / self.batches).double().cpu().numpy()
        names_b = self.names_b if self.n_b is not None else self.names_a
        self.undefined = {}
        for values, names in ((xx, self.names_a), (yy, names_b)):
            for value, name in zip(values, names):
                if not value > 0 and name not in self.undefined:
                    self.undefined[name] = ("constant features (no variation in any minibatch)" if value == 0 else
                                            f"its HSIC estimate with itself is {value:.3g}, not positive")
                    warnings.warn(f"layer {name!r}: CKA set to NaN: {self.undefined[name]}", DegenerateLayerWarning,
                                  stacklevel=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            denom = np.sqrt(np.where(xx > 0, xx, np.nan)[:, None] * np.where(yy > 0, yy, np.nan)[None, :])
            return xy / denom
