"""The linear probe on the features' own device: ``make_pipeline(StandardScaler(), LogisticRegression(C))``
written in torch, for features that live on a GPU (no copy of X to the host).

The same model and objective as scikit-learn's lbfgs fit: features standardised with the training
part's mean and population std (near-constant features keep scale 1, scikit-learn's rule), then
multinomial logistic regression minimising ``mean log-loss + ||W||² / (2 C n)`` (intercepts not
penalised), by L-BFGS (``torch.optim.LBFGS``, strong-Wolfe line search, 10 corrections as scipy)
until the largest gradient entry is at most 1e-4, scikit-learn's ``tol``. Two classes: scikit-learn
fits one sigmoid vector w with penalty ``||w||² / (2 C n)``; a two-class softmax with ``C / 2`` has
exactly that optimum (w = w₁ - w₀, split evenly), so it serves both. The optimisation runs in
float64 (cheap: the problem is n × d × K), so the optimum is reached to scikit-learn's tolerance
whatever the features' dtype.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

__all__ = ["TorchProbe", "fit_probe", "probe_accuracy_torch"]

_TOL = 1e-4        # LogisticRegression's default
_DTYPE = torch.float64


@dataclass
class TorchProbe:
    """A fitted probe: standardisation and the linear map, on the training features' device."""

    mean: torch.Tensor        # (d,)
    scale: torch.Tensor       # (d,)
    weight: torch.Tensor      # (K, d)
    bias: torch.Tensor        # (K,)

    def decision_function(self, X: torch.Tensor) -> torch.Tensor:
        """Class scores (n, K) of features X (n, d)."""
        A = (X.to(_DTYPE) - self.mean) / self.scale                       # (n, d)
        return torch.addmm(self.bias, A, self.weight.T)

    def predict(self, X: torch.Tensor) -> torch.Tensor:
        """Class codes (n,) int64; ties to the lowest code, as scikit-learn."""
        return self.decision_function(X).argmax(dim=1)

    def predict_proba(self, X: torch.Tensor) -> torch.Tensor:
        """Class probabilities (n, K) float64."""
        return torch.softmax(self.decision_function(X), dim=1)


def _standardizer(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """StandardScaler's ``mean_`` and ``scale_`` (d,) of float64 X (n, d)."""
    n = X.shape[0]
    mean = X.mean(dim=0)                                                  # (d,)
    var = X.var(dim=0, unbiased=False)                                    # (d,) no (n, d) temporary
    eps = torch.finfo(_DTYPE).eps
    constant = var <= n * eps * var + (n * mean * eps) ** 2              # scikit-learn's _is_constant_feature
    scale = torch.where(constant, torch.ones_like(var), var.sqrt())
    return mean, scale


def fit_probe(X: torch.Tensor, codes: torch.Tensor, *, n_classes: int, C: float, max_iter: int,
              tol: float = _TOL) -> TorchProbe:
    """Fit the scaled logistic-regression probe on X (n, d) with class codes (n,) in 0..n_classes-1
    (each present), on X's device. ``tol``: the largest gradient entry at which L-BFGS stops
    (scikit-learn's ``tol``).

    Warns :class:`sklearn.exceptions.ConvergenceWarning` when L-BFGS runs out of iterations, as scikit-learn.
    """
    A = X.to(_DTYPE, copy=True)                  # (n, d) the probe's one copy, standardised in place
    mean, scale = _standardizer(A)
    A.sub_(mean).div_(scale)
    n, d = A.shape
    K = n_classes
    onehot = torch.nn.functional.one_hot(codes, K).to(_DTYPE)            # (n, K)
    l2 = 1.0 / ((C / 2 if K == 2 else C) * n)
    theta = torch.zeros((K, d + 1), dtype=_DTYPE, device=A.device, requires_grad=True)

    def closure():
        # loss and gradient by hand: one pass, no autograd graph
        with torch.no_grad():
            W, b = theta[:, :d], theta[:, d]
            Z = torch.addmm(b, A, W.T)                                    # (n, K)
            lse = torch.logsumexp(Z, dim=1)                               # (n,)
            loss = (lse.sum() - (Z * onehot).sum()) / n + 0.5 * l2 * (W * W).sum()
            G = (torch.exp(Z - lse[:, None]) - onehot) / n                # (n, K)
            theta.grad = torch.cat([G.T @ A + l2 * W, G.sum(dim=0)[:, None]], dim=1)
        return loss

    max_eval = max(15_000, max_iter * 5 // 4)      # scipy's maxfun default: iterations are the limit
    # tolerance_change: scipy's ftol as LogisticRegression sets it; stopping there is converged
    opt = torch.optim.LBFGS([theta], lr=1, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tol,
                            tolerance_change=64 * float(np.finfo(float).eps), history_size=10,
                            line_search_fn="strong_wolfe")
    opt.step(closure)
    state = opt.state[theta]
    if state.get("n_iter", 0) >= max_iter or state.get("func_evals", 0) >= max_eval:
        warnings.warn(f"linear probe: L-BFGS failed to converge after {state.get('n_iter', 0)} iterations; "
                      "raise max_iter.", ConvergenceWarning, stacklevel=4)
    theta = theta.detach()
    return TorchProbe(mean=mean, scale=scale, weight=theta[:, :d].contiguous(), bias=theta[:, d].contiguous())


def probe_accuracy_torch(X: torch.Tensor, codes: torch.Tensor, splits, *, n_classes: int, C: float,
                         max_iter: int) -> float:
    """Mean test accuracy over ``splits`` (pairs of train / test index arrays) of the probe fitted on
    each training part, all on X's device; only the final mean leaves it.

    Parameters
    ----------
    X : torch.Tensor, shape (N, d)
    codes : torch.Tensor of int64, shape (N,), on X's device
        Class codes 0..n_classes-1; every class is in every training part.
    splits : iterable of (numpy.ndarray, numpy.ndarray)
        Train and test indices (e.g. ``StratifiedKFold.split``).
    """
    scores = []
    for train, test in splits:
        train = torch.as_tensor(train, device=X.device)
        test = torch.as_tensor(test, device=X.device)
        probe = fit_probe(X[train], codes[train], n_classes=n_classes, C=C, max_iter=max_iter)
        scores.append((probe.predict(X[test]) == codes[test]).double().mean())
    return float(torch.stack(scores).mean())
