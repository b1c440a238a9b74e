"""Test accuracy of ``make_pipeline(StandardScaler(), LogisticRegression(C, max_iter))``, exactly.

Why not the pipeline itself: at the sizes a layer report sees (N ~ 10^3, d ~ 10^2, a few
classes) ~40 % of ``LogisticRegression.fit`` is per-call overhead (array-API dispatch and
validation inside every loss evaluation). For the multinomial lbfgs fit this module makes
the same calls in the same order with the same dtypes — scikit-learn's ``StandardScaler``,
its compiled ``HalfMultinomialLoss``, ``scipy.optimize.minimize`` with the options
``LogisticRegression`` passes — so the optimiser sees bit-identical losses and gradients
and returns bit-identical coefficients (tests compare them). Two classes (a binomial
model in scikit-learn) and a scikit-learn without these private helpers, or whose helpers take
other arguments (a TypeError from them is caught), use the pipeline.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ._kmeans import _takes

try:   # private in scikit-learn; guarded so an upgrade degrades to the pipeline, never breaks
    from sklearn._loss.loss import HalfMultinomialLoss
    from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
except ImportError:          # pragma: no cover - depends on the installed scikit-learn
    HalfMultinomialLoss = None

if HalfMultinomialLoss is not None and not (
        _takes(HalfMultinomialLoss, "n_classes")
        and _takes(HalfMultinomialLoss.loss_gradient, "self", "y_true", "raw_prediction", "sample_weight",
                   "n_threads")):
    HalfMultinomialLoss = None      # pragma: no cover - an installed scikit-learn whose loss changed

__all__ = ["probe_accuracy"]

_TOL = 1e-4        # LogisticRegression's default


def probe_accuracy(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
                   *, n_classes: int, C: float, max_iter: int) -> float:
    """Accuracy on (X_test, y_test) of the scaled logistic-regression probe fitted on the
    training part; y are class codes 0..n_classes-1, every class present in y_train."""
    if HalfMultinomialLoss is not None and n_classes >= 3:
        try:
            return _probe_private(X_train, y_train, X_test, y_test, n_classes=n_classes, C=C, max_iter=max_iter)
        except TypeError:        # a private helper's arguments changed: the public pipeline instead
            pass
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))
    return float(probe.fit(X_train, y_train).score(X_test, y_test))


def _probe_private(X_train, y_train, X_test, y_test, *, n_classes: int, C: float, max_iter: int) -> float:
    """:func:`probe_accuracy` through scikit-learn's private loss (bit-identical coefficients)."""
    scaler = StandardScaler().fit(X_train)
    A, B = scaler.transform(X_train), scaler.transform(X_test)
    if A.dtype not in (np.float32, np.float64):          # LogisticRegression's lbfgs dtypes
        A, B = A.astype(np.float64), B.astype(np.float64)
    coef = _fit_multinomial(A, y_train, n_classes, C=C, max_iter=max_iter)
    W = coef.reshape((n_classes, -1), order="F").astype(A.dtype)   # as coef_ / intercept_
    scores = B @ W[:, :-1].T + W[:, -1]                              # decision_function
    return float(np.mean(np.argmax(scores, axis=1) == y_test))


def _fit_multinomial(X: np.ndarray, codes: np.ndarray, K: int, *, C: float, max_iter: int) -> np.ndarray:
    """``LogisticRegression(C, max_iter).fit(X, codes)``'s lbfgs solution, raveled in F order."""
    n, d = X.shape
    base = HalfMultinomialLoss(n_classes=K)
    y = codes.astype(X.dtype)
    l2 = 1.0 / (C * n)
    n_threads = _openmp_effective_n_threads()

    def loss_gradient(coef):           # sklearn's LinearModelLoss.loss_gradient, op for op
        W = coef.reshape((K, d + 1), order="F")
        weights, intercept = W[:, :-1], W[:, -1]
        raw = X @ weights.astype(X.dtype).T + intercept.astype(X.dtype)        # (n, K)
        loss, grad_pointwise = base.loss_gradient(y_true=y, raw_prediction=raw, sample_weight=None,
                                                  n_threads=n_threads)
        value = float(np.sum(loss) / n)
        flat = np.ravel(weights, order="K")
        value += float(0.5 * l2 * np.dot(flat, flat))
        grad_pointwise /= n
        grad = np.empty((K, d + 1), dtype=weights.dtype, order="F")
        grad[:, :-1] = grad_pointwise.T @ X + l2 * weights
        grad[:, -1] = np.sum(grad_pointwise, axis=0)
        return value, grad.ravel(order="F")

    w0 = np.zeros((K, d + 1), order="F", dtype=X.dtype).ravel(order="F")
    result = scipy.optimize.minimize(
        loss_gradient, w0, method="L-BFGS-B", jac=True,
        options={"maxiter": max_iter, "maxls": 50, "gtol": _TOL, "ftol": 64 * np.finfo(float).eps},
    )
    if result.status != 0:
        warnings.warn(f"linear probe: lbfgs failed to converge after {result.nit} iterations "
                      f"({result.message}); raise max_iter.", ConvergenceWarning, stacklevel=4)
    return result.x
