"""The one input checker every metric goes through, and the degenerate-input error.

Every metric's inputs go through :func:`_check_inputs` once, by way of the layer context
(:class:`lab.metrics._context.LayerContext`), which the public functions and
:func:`lab.metrics.compute_layer` build; per-metric needs (samples per class, folds) are checked
against the same class counts by :func:`_check_per_class` and :func:`_check_folds`.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["DegenerateFeaturesError", "DegenerateLayerWarning"]

BACKENDS = ("auto", "sklearn", "torch")
"""Implementations of k-means and the linear probe: "auto" (torch for features on a CUDA device,
scikit-learn otherwise), "sklearn" (a CPU copy, scikit-learn's exact numbers), "torch" (X's device)."""
# Rows per block when scanning X for non-finite values or constancy (bounded memory).
_SCAN_ELEMENTS = 1 << 24


class DegenerateFeaturesError(ValueError):
    """The metric is mathematically undefined for these features.

    Raised, for example, when every sample is identical (a dead layer: neighbours and
    clusters are arbitrary), when all class means coincide (``nc1``: Σ_B = 0), or when two
    class means coincide (``cdnv`` divides by their distance). :func:`lab.metrics.compute_layer`
    and :func:`lab.metrics.layer_report` turn it into NaN plus a
    :class:`DegenerateLayerWarning` unless asked to raise.
    """


class DegenerateLayerWarning(UserWarning):
    """A metric was undefined for one layer and was reported as NaN (the message says why)."""


@dataclass(frozen=True)
class _Checked:
    """Validated inputs: features on their device plus dense class codes."""

    X: torch.Tensor          # (N, d) floating, on the caller's device
    codes: torch.Tensor      # (N,) int64 on X.device, values 0..K-1 in sorted-label order
    labels: np.ndarray       # (K,) the original label values; codes index this
    counts: np.ndarray       # (K,) samples per class

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_classes(self) -> int:
        return int(len(self.labels))

    def codes_numpy(self) -> np.ndarray:
        return self.codes.cpu().numpy()

    def X_numpy(self) -> np.ndarray:
        """X as a CPU numpy array (no copy when it already is one)."""
        return self.X.detach().cpu().numpy()


def _as_features(X) -> torch.Tensor:
    """Return X as a 2-D floating tensor on its own device (numpy shares memory)."""
    if isinstance(X, np.ndarray):
        if X.dtype == object or not np.issubdtype(X.dtype, np.number):
            raise ValueError(f"X must hold numbers; got a numpy array of dtype {X.dtype}.")
        X = np.ascontiguousarray(X)
        X = torch.from_numpy(X if X.flags.writeable else X.copy())   # torch warns on read-only arrays
    elif not isinstance(X, torch.Tensor):
        raise ValueError(
            f"X must be a torch.Tensor or numpy array of shape (N, d); got {type(X).__name__}."
        )
    X = X.detach()
    if X.ndim != 2:
        raise ValueError(
            f"X must be 2-D (N samples, d features); got shape {tuple(X.shape)}. "
            "Pool or flatten the layer's features first."
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must have at least one sample and one feature; got shape {tuple(X.shape)}.")
    if X.dtype in (torch.float16, torch.bfloat16):
        X = X.float()   # half precision is too coarse for distances and variances
    elif not X.is_floating_point():
        X = X.to(torch.float32 if X.device.type == "mps" else torch.float64)   # MPS has no float64
    _check_finite(X)
    return X


def _check_finite(X: torch.Tensor) -> None:
    rows = max(1, _SCAN_ELEMENTS // X.shape[1])
    bad_rows = 0
    first = None
    for start in range(0, X.shape[0], rows):
        block = X[start:start + rows]
        # Fast path: min and max propagate NaN and show inf (one read-only reduction, ~30x
        # faster than isfinite on CPU); only a failing block is examined row by row.
        if bool(torch.isfinite(torch.stack(torch.aminmax(block))).all()):
            continue
        ok = torch.isfinite(block).all(dim=1)                                     # (B,)
        bad = (~ok).nonzero().flatten()
        bad_rows += int(bad.numel())
        if first is None and bad.numel():
            first = start + int(bad[0])
    if bad_rows:
        raise ValueError(
            f"X contains non-finite values (NaN or inf) in {bad_rows} of {X.shape[0]} samples "
            f"(first at row {first}). Check the layer's features: a diverged model or "
            "half-precision overflow produces these."
        )


def _as_labels(y, n: int) -> np.ndarray:
    if isinstance(y, torch.Tensor):
        y = y.detach().cpu().numpy()
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (N,) class labels; got shape {y.shape}.")
    if y.dtype == bool:
        y = y.astype(np.int64)
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must hold integer class labels; got dtype {y.dtype}.")
    if len(y) != n:
        raise ValueError(
            f"X and y must have the same number of samples; got X with {n} rows and y with {len(y)} labels."
        )
    return y


def _check_inputs(
    X,
    y,
    *,
    need_per_class: int = 1,
    need_for: str | None = None,
    k: int | None = None,
    include_self: bool = False,
    folds: int | None = None,
) -> _Checked:
    """Validate ``X`` (N, d) and ``y`` (N,) for a metric and return them checked.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
        Features; stays on its device. Half precision is promoted to float32, integers
        to float64.
    y : array-like of int, shape (N,)
        Class labels (any integers; mapped to dense codes in sorted order).
    need_per_class : int
        Minimum samples every class must have.
    need_for : str, optional
        Name of the metric that needs ``need_per_class`` (for the message).
    k : int, optional
        Number of neighbours to validate against N (leave-one-out: ``k <= N - 1``).
    include_self : bool
        Whether the sample counts as its own first neighbour (then ``k <= N``).
    folds : int, optional
        Stratified folds to validate against the smallest class.

    Raises
    ------
    ValueError
        On fewer than 2 classes, a class below ``need_per_class`` samples, non-finite
        values, mismatched lengths, or ``k`` / ``folds`` too large for the data.
    """
    X = _as_features(X)
    n = int(X.shape[0])
    y = _as_labels(y, n)
    labels, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    if len(labels) < 2:
        raise ValueError(
            f"y must contain at least 2 classes; got {len(labels)} (label {labels[0].item()!r}). "
            "These metrics compare classes: pass samples from two or more classes."
        )
    _check_per_class(labels, counts, need_per_class, need_for)
    if k is not None:
        _check_k(k, n, include_self=include_self)
    if folds is not None:
        _check_folds(folds, labels, counts)
    codes_t = torch.as_tensor(codes.astype(np.int64), device=X.device)
    return _Checked(X=X, codes=codes_t, labels=labels, counts=counts.astype(np.int64))


def _check_per_class(labels: np.ndarray, counts: np.ndarray, need: int, need_for: str | None) -> None:
    """Raise ValueError naming the smallest class when it has fewer than ``need`` samples."""
    smallest = int(np.argmin(counts))
    if counts[smallest] < need:
        what = need_for or "this metric"
        raise ValueError(
            f"{what} needs at least {need} samples per class; class "
            f"{labels[smallest].item()!r} has {int(counts[smallest])}. Drop that class or add samples."
        )


def _check_folds(folds, labels: np.ndarray, counts: np.ndarray) -> None:
    """Raise ValueError unless stratified ``folds``-fold cross-validation fits every class."""
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2; got {folds!r}.")
    smallest = int(np.argmin(counts))
    if folds > counts[smallest]:
        raise ValueError(
            f"folds={folds} is too large for the smallest class: class {labels[smallest].item()!r} has "
            f"{int(counts[smallest])} samples and stratified {folds}-fold cross-validation needs at "
            f"least {folds} per class. Use folds <= {int(counts[smallest])} or add samples."
        )


def _check_k(k, n: int, *, include_self: bool = False) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    if include_self:
        if k > n:
            raise ValueError(
                f"k={k} is too large for N={n} samples (each sample is its own first neighbour). "
                f"Use k <= {n}."
            )
    elif k > n - 1:
        raise ValueError(
            f"k={k} is too large for N={n} samples: leave-one-out leaves {n - 1} other samples "
            f"per query. Use k <= {n - 1}."
        )


@contextlib.contextmanager
def _single_thread_on_cpu(device: torch.device):
    """Run a loop of many small chunked torch ops on one intra-op thread (CPU only).

    Each op opens an OpenMP parallel region; when the cores are shared with other work a
    region waits for a descheduled thread. Measured on 2 busy cores, nc1 at N=2500,
    d=100,000: 30 s with 2 threads, 1.7 s with 1. The previous setting is restored.
    """
    if device.type != "cpu" or torch.get_num_threads() == 1:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _check_protocol(protocol: str) -> str:
    if protocol not in ("default", "paper"):
        raise ValueError(f"protocol must be 'default' or 'paper'; got {protocol!r} instead.")
    return protocol


def _check_backend(backend) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}; got {backend!r} instead.")
    return backend


def _on_device(c: _Checked, backend: str) -> bool:
    """Whether k-means and the probe run in torch on X's device (else scikit-learn on a CPU copy)."""
    return backend == "torch" or (backend == "auto" and c.X.device.type == "cuda")


def _is_constant(X: torch.Tensor) -> bool:
    """True when every row of X equals the first (a dead layer): every column's min == max."""
    rows = max(1, _SCAN_ELEMENTS // X.shape[1])
    lo, hi = X[0].clone(), X[0].clone()
    for start in range(0, X.shape[0], rows):
        b_lo, b_hi = torch.aminmax(X[start:start + rows], dim=0)
        torch.minimum(lo, b_lo, out=lo)
        torch.maximum(hi, b_hi, out=hi)
        if not bool((lo == hi).all()):
            return False
    return True


def _reject_constant(X: torch.Tensor, metric: str, *, constant: bool | None = None) -> None:
    if constant is None:
        constant = _is_constant(X)
    if constant:
        raise DegenerateFeaturesError(
            f"{metric} is undefined for constant features: all {X.shape[0]} samples are identical "
            "(a dead layer), so neighbours and clusters are arbitrary."
        )


def _check_pair(X, Y, *, min_samples: int, need_for: str, layer_x: str | None = None,
                layer_y: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate two feature sets of the *same* images (CKA): both (N, d) with equal N >= ``min_samples``.

    Returns both as floating tensors (on their own devices; :func:`_as_features` rules). ``Y`` may be
    None (then only X is checked and returned twice).
    """
    named_x = f"X ({layer_x})" if layer_x else "X"
    named_y = f"Y ({layer_y})" if layer_y else "Y"
    X = _as_features(X)
    Y = X if Y is None else _as_features(Y)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"{need_for} compares two representations of the same images, so {named_x} and {named_y} must have "
            f"the same number of rows (samples); got {X.shape[0]} and {Y.shape[0]}. Pass the features of the "
            "same images, in the same order."
        )
    if X.shape[0] < min_samples:
        fix = " or use the biased estimator (unbiased=False)" if min_samples == 4 else ""
        raise ValueError(
            f"{need_for} needs at least {min_samples} samples; got {X.shape[0]}. Pass more images{fix}."
        )
    return X, Y
