"""Transferability of one layer's features to a labelled task, scored without fine-tuning.

Definitions: ``docs/METRICS.md`` ("Transferability"). Both scores take the features of the classes a
model is about to be fine-tuned on (the *seen* classes, before any training) and predict how well it
will do; layerscope compares them with what each layer actually reaches on the *unseen* classes
after fine-tuning (:func:`lab.analysis.transfer_vs_g`).

- :func:`logme` — You, Liu, Wang & Long (2021), "LogME: Practical assessment of pre-trained models
  for transfer learning" (ICML): the log marginal evidence of a Bayesian linear model from the
  features to each one-hot label column, maximised over its two precisions by the paper's
  fixed-point iteration, averaged over classes and divided by n.
- :func:`sfda` — Shao, Zhao, Ge, Ma, Tao & Luo (2022), "Not all models are equal: predicting model
  transferability in a self-challenging Fisher space" (ECCV): the mean probability of the true class
  under a shrinkage Fisher discriminant, refitted after the ConfMix "self-challenge".

Both compute in float64 on a CPU copy (they need d × d or one SVD; d is a pooled layer's width).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from ._checks import DegenerateFeaturesError, _Checked
from ._context import LayerContext, measure
from ._docs import metric_doc

__all__ = ["logme", "sfda"]

_LOGME_TOL = 1e-10        # relative change of alpha / beta at which the fixed point has converged
_LOGME_MAX_ITER = 1000
_SFDA_DECAY = 5.0          # shrinkage = exp(-5 * largest eigenvalue of S_w) (Shao et al., eq. 6)
_SFDA_MIN_SHRINKAGE = 1e-10


# ---------------------------------------------------------------------------------------------- LogME


def _logme_from_checked(c: _Checked, *, max_iter: int = _LOGME_MAX_ITER, tol: float = _LOGME_TOL) -> float:
    F = c.X_numpy().astype(np.float64, copy=False)                          # (n, d)
    n, d = F.shape
    U, s, _ = np.linalg.svd(F, full_matrices=False)                          # U (n, k), s (k,)
    sigma = s * s                                                            # nonzero eigenvalues of FᵀF (k,)
    k = sigma.size
    Y = np.zeros((n, c.n_classes))                                           # one-hot label columns (n, C)
    Y[np.arange(n), c.codes_numpy()] = 1.0
    x = U.T @ Y                                                              # (k, C): Y in F's column space
    x2 = x * x
    outside = np.maximum((Y * Y).sum(axis=0) - x2.sum(axis=0), 0.0)          # (C,) ‖y‖² beyond that space
    # With d >= n the evidence has no interior maximum: it rises towards its supremum at a boundary
    # (α → ∞, m → 0 for uninformative features; β → ∞, an exact fit, otherwise). Flooring mᵀm and
    # ‖F m − y‖² at 1e-12 n and stopping once the evidence per sample changes by less than 1e-12 gives
    # that supremum to about 1e-6. (The paper's code adds 1e-5 to both denominators instead.)
    floor = 1e-12 * n
    alpha, beta = np.ones(c.n_classes), np.ones(c.n_classes)

    def evidence(alpha, beta):
        t = alpha / beta                                                     # (C,)
        shrink = sigma[:, None] / (sigma[:, None] + t)                       # (k, C) β σ / (α + β σ)
        m2 = (sigma[:, None] * x2 / (sigma[:, None] + t) ** 2).sum(axis=0)   # mᵀm
        res2 = ((1.0 - shrink) ** 2 * x2).sum(axis=0) + outside              # ‖F m − y‖²
        # log det(αI + βFᵀF) over all d eigenvalues: the d − k zero ones contribute log α each
        logdet = np.log(alpha[None, :] + beta[None, :] * sigma[:, None]).sum(axis=0) + (d - k) * np.log(alpha)
        value = (n / 2 * np.log(beta) + d / 2 * np.log(alpha) - n / 2 * math.log(2 * math.pi)
                 - beta / 2 * res2 - alpha / 2 * m2 - logdet / 2) / n
        return value, shrink.sum(axis=0), m2, res2                          # evidence / n, γ, mᵀm, residual

    value, gamma, m2, res2 = evidence(alpha, beta)
    for _ in range(max_iter):
        alpha_new = gamma / np.maximum(m2, floor)
        beta_new = (n - gamma) / np.maximum(res2, floor)
        t_old, t_new = alpha / beta, alpha_new / beta_new
        alpha, beta = alpha_new, beta_new
        new_value, gamma, m2, res2 = evidence(alpha, beta)
        settled = (np.abs(t_new - t_old) <= tol * t_old) | (np.abs(new_value - value) <= 1e-12 * np.abs(value))
        value = new_value
        if settled.all():
            break
    return float(np.mean(value))


@metric_doc
def logme(X, y) -> float:
    """LogME: the mean over classes of the maximised log evidence of a Bayesian linear model, per sample.

    For each class c, the one-hot column y_c (n,) is modelled as ``y_c = F w + ε`` with prior
    ``w ~ N(0, α⁻¹ I_d)`` and noise ``ε ~ N(0, β⁻¹ I_n)``. With σ_i the d eigenvalues of FᵀF,
    A = αI + βFᵀF and m = β A⁻¹ Fᵀ y_c, the evidence is
    ``L(α, β) = n/2 log β + d/2 log α − n/2 log 2π − β/2 ‖F m − y_c‖² − α/2 mᵀm − 1/2 Σ_i log(α + β σ_i)``,
    maximised by the fixed point γ = Σ_i β σ_i / (α + β σ_i), α = γ / mᵀm, β = (n − γ) / ‖F m − y_c‖²
    (iterated from α = β = 1 to a relative change of α/β below 1e-10, on one SVD of F). The score is
    (1/C) Σ_c L_c / n.

    With d >= n the evidence has no interior maximum (it rises towards a boundary: α → ∞ for
    uninformative features, β → ∞ for an exact fit); the score is that supremum, to about 1e-6.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (n, d)
        Features of the labelled target task (layerscope: the seen classes, before fine-tuning).
    y : array-like of int, shape (n,)

    Returns
    -------
    float
        A log-likelihood per sample (unbounded; typically between about −2 and 2 for pooled features).
        Higher means the features fit the labels linearly with more evidence: more transferable.
        Invariant to rescaling the features.

    {raises_degenerate}
        Constant features.

    References
    ----------
    You, Liu, Wang & Long (2021), ICML, arXiv 2102.11005, Algorithm 1 and eq. (2)-(3).
    """
    return measure("logme", X, y)


def logme_of_layer(layer: LayerContext) -> float:
    """:func:`logme` of a prepared layer (catalogue function)."""
    layer.reject_constant("logme")
    return _logme_from_checked(layer.checked)


# ---------------------------------------------------------------------------------------------- SFDA


def _softmax(scores: np.ndarray) -> np.ndarray:
    scores = scores - scores.max(axis=1, keepdims=True)
    out = np.exp(scores)
    return out / out.sum(axis=1, keepdims=True)


def _within_scatter(X: np.ndarray, codes: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Class means (K, d) and S_w = Σ_k prior_k · cov_k = (1/n) Σ_i (x_i − μ_{y_i})(x_i − μ_{y_i})ᵀ (d, d)."""
    counts = np.bincount(codes, minlength=n_classes).astype(np.float64)
    means = np.zeros((n_classes, X.shape[1]))
    np.add.at(means, codes, X)
    means /= counts[:, None]
    Z = X - means[codes]                                                     # (n, d)
    return means, (Z.T @ Z) / X.shape[0]


def _fisher_probabilities(X: np.ndarray, codes: np.ndarray, n_classes: int, priors: np.ndarray,
                          d_full: int, shrinkage: float | None) -> tuple[np.ndarray, float]:
    """p(class | x) (n, K) of the shrinkage Fisher discriminant, and the shrinkage used."""
    means, Sw = _within_scatter(X, codes, n_classes)
    trace = float(np.trace(Sw))
    if not trace > 0:
        raise DegenerateFeaturesError(
            "sfda is undefined when every class is a single point (the within-class scatter is 0).")
    if shrinkage is None:
        top = float(scipy.linalg.eigvalsh(Sw, subset_by_index=[Sw.shape[0] - 1, Sw.shape[0] - 1])[0])
        shrinkage = max(math.exp(-_SFDA_DECAY * top), _SFDA_MIN_SHRINKAGE)
    # shrink towards (tr S_w / d) I, d the layer's width (also when X was reduced to its row space)
    Sw_shrunk = (1.0 - shrinkage) * Sw
    Sw_shrunk[np.diag_indices_from(Sw_shrunk)] += shrinkage * trace / d_full
    coef = scipy.linalg.solve(Sw_shrunk, means.T, assume_a="pos").T          # (K, d) μ_k S⁻¹
    intercept = -0.5 * (coef * means).sum(axis=1) + np.log(priors)           # (K,)
    return _softmax(X @ coef.T + intercept), shrinkage


def _sfda_from_checked(c: _Checked) -> float:
    X = c.X_numpy().astype(np.float64)                                       # (n, d), a copy: ConfMix rewrites it
    codes, K = c.codes_numpy(), c.n_classes
    n, d = X.shape
    if d > n:
        # Every x_i and class mean lies in the row space of X, where the discriminant is exact; the
        # orthogonal rest only ever sees the shrinkage term. Work in that r <= n dimensional space.
        _, s, Vt = np.linalg.svd(X, full_matrices=False)
        X = X @ Vt[s > s[0] * 1e-12].T                                       # (n, r)
    priors = c.counts / n
    prob, shrinkage = _fisher_probabilities(X, codes, K, priors, d, None)
    soft = _softmax(prob)                                 # "soften" the probabilities (Shao et al., ConfMix)
    means, _ = _within_scatter(X, codes, K)
    others = (means.sum(axis=0, keepdims=True) - means) / (K - 1)            # (K, d) mean of the other classes
    p = soft[np.arange(n), codes][:, None]                                   # (n, 1) confidence in the true class
    X = p * X + (1.0 - p) * others[codes]                                    # ConfMix: pull towards the others
    prob, _ = _fisher_probabilities(X, codes, K, priors, d, shrinkage)
    return float(prob[np.arange(n), codes].mean())


@metric_doc
def sfda(X, y) -> float:
    """SFDA: mean probability of the true class in a self-challenging Fisher space (Shao et al. 2022).

    1. Fisher discriminant with shrinkage: S_w = Σ_k π_k Σ_k (π_k = n_k/n, Σ_k the class covariance,
       1/n_k), shrinkage λ = max(exp(−5 · λ_max(S_w)), 1e-10) and S_λ = (1 − λ) S_w + λ (tr S_w / d) I;
       p(k | x) = softmax_k(xᵀ S_λ⁻¹ μ_k − ½ μ_kᵀ S_λ⁻¹ μ_k + log π_k). (The paper projects onto the
       eigenvectors W of the generalised problem S_b w = λ S_λ w, scaled Wᵀ S_λ W = I and kept in full,
       so that W Wᵀ = S_λ⁻¹: the same discriminant.)
    2. ConfMix: q = softmax of those probabilities; each sample becomes
       x̃_i = q_i x_i + (1 − q_i) μ̄_{−y_i}, q_i its softened probability of the true class and μ̄_{−k}
       the mean of the other classes' means.
    3. Refit step 1 on x̃ with the same λ; the score is (1/n) Σ_i p(y_i | x̃_i).

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (n, d)
    y : array-like of int, shape (n,)

    Returns
    -------
    float
        In (0, 1]; higher means more transferable. Depends on the scale of the features through λ
        (as defined by the paper).

    {raises_degenerate}
        Constant features, or every class collapsed to one point.

    References
    ----------
    Shao et al. (2022), ECCV, arXiv 2207.03036, section 3 (eq. 4-8); the largest eigenvalue is computed
    exactly here, where the authors' code estimates it with three power iterations.
    """
    return measure("sfda", X, y)


def sfda_of_layer(layer: LayerContext) -> float:
    """:func:`sfda` of a prepared layer (catalogue function)."""
    layer.reject_constant("sfda")
    return _sfda_from_checked(layer.checked)
