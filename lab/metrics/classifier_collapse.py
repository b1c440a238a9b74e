"""Classifier-side neural-collapse measures: the head's weights against the class means.

Definitions: ``docs/METRICS.md`` ("Neural collapse on the training set"), after Papyan,
Han & Donoho (2020), "Prevalence of neural collapse during the terminal phase of deep learning",
PNAS 117(40), Figs 2-7. ``X`` (N, d) is the input of the classification head on the training
sample, ``y`` (N,) its labels, ``W`` (K, d) the head's weight matrix (the bias is not part of it).

Class order: row k of ``W`` (and column k of logits) belongs to the k-th smallest label of ``y``,
the order :func:`lab.metrics._checks._check_inputs` gives the class codes. Class means, the
centred means M and their K × K Gram come from collapse.py's :class:`_ClassStats` (float64, one
blocked pass over X), so these measures and ``nc2`` share one computation of the means.
"""
from __future__ import annotations

import numpy as np
import torch

# terminal_phase_epoch is a pure function of accuracies: it lives with the run-table analysis, which
# lab.store reads without importing torch
from lab.analysis.neural_collapse import terminal_phase_epoch  # noqa: F401  (public here too)

from ._checks import DegenerateFeaturesError, _check_inputs, _Checked, _single_thread_on_cpu
from ._docs import metric_doc
from .collapse import _COINCIDE, _acc_dtype, _class_chunks, _ClassStats, _rows_per_block

__all__ = [
    "nc2_classifier", "nc2_cosine_std", "nc3_self_duality", "nc4_ncc_disagreement", "terminal_phase_epoch",
]

# An accuracy this close to 1 counts as 1: one computed as a mean of per-batch fractions can miss
# 1.0 by rounding alone.


# ----------------------------------------------------------------------------------------- checks

def _as_weights(W, *, device: torch.device | None = None) -> torch.Tensor:
    """W as a 2-D finite tensor in the accumulation dtype, on ``device`` (default: W's own device)."""
    if isinstance(W, torch.Tensor):
        W = W.detach()
    else:
        W = np.asarray(W)
        if W.dtype == object or not np.issubdtype(W.dtype, np.number):
            raise ValueError(
                f"W must hold numbers (the head's weight matrix, shape (K, d)); got an array of dtype {W.dtype}. "
                "Pass head.weight (a torch.Tensor) or a numeric numpy array."
            )
        if not (np.issubdtype(W.dtype, np.integer) or np.issubdtype(W.dtype, np.floating)):
            raise ValueError(f"W must hold real numbers; got an array of dtype {W.dtype}.")
        W = torch.from_numpy(np.array(W, dtype=np.float64))   # a copy: read-only or byte-swapped arrays are fine
    if W.ndim != 2:
        raise ValueError(
            f"W must be 2-D (K classes, d features); got shape {tuple(W.shape)}. "
            "Pass the head's weight matrix (nn.Linear.weight, out_features × in_features), without the bias."
        )
    device = W.device if device is None else device
    W = W.to(device=device, dtype=_acc_dtype(device))                                # (K, d)
    if not bool(torch.isfinite(W).all()):
        bad = int((~torch.isfinite(W)).any(dim=1).sum())
        raise ValueError(
            f"W contains non-finite values (NaN or inf) in {bad} of {W.shape[0]} rows. "
            "Check the classifier: a diverged training run produces these."
        )
    return W


def _check_weights(W, c: _Checked) -> torch.Tensor:
    """W checked against the classes and features of X: (K, d) on X's device, accumulation dtype."""
    W = _as_weights(W, device=c.X.device)                                            # (K', d')
    K, d = c.n_classes, c.d
    if tuple(W.shape) != (K, d):
        hint = " It looks transposed: pass W.T." if tuple(W.shape) == (d, K) else (
            " If the head has more outputs than y has classes, pass the rows of the classes in y, in "
            "sorted-label order." if W.shape[1] == d else
            " W must be the weight matrix of the layer fed by X (its columns are X's features).")
        raise ValueError(
            f"W must have shape (K, d) = ({K}, {d}): one row per class of y (in sorted-label order) and one "
            f"column per feature of X; got {tuple(W.shape)}.{hint}"
        )
    return W


def _predicted_codes(predicted, c: _Checked) -> torch.Tensor:
    """The network's predictions as class codes (N,) int64 on CPU (code k = the k-th smallest label)."""
    if isinstance(predicted, torch.Tensor):
        predicted = predicted.detach().cpu().numpy()
    predicted = np.asarray(predicted)
    n, K = c.n, c.n_classes
    if predicted.ndim == 1:
        if predicted.dtype == bool or not np.issubdtype(predicted.dtype, np.integer):
            raise ValueError(
                f"predicted must be integer class labels (N,) or logits (N, K); got a 1-D array of dtype "
                f"{predicted.dtype}. Pass the argmax labels as integers, or the (N, {K}) logits."
            )
        if len(predicted) != n:
            raise ValueError(
                f"predicted must have one label per row of X: expected length {n}, got {len(predicted)}. "
                "Pass the network's predictions for the same images, in the same order."
            )
        codes = np.searchsorted(c.labels, predicted).clip(0, K - 1)
        unknown = c.labels[codes] != predicted
        if unknown.any():
            raise ValueError(
                f"predicted must hold labels of the classes in y ({c.labels.tolist()}); got "
                f"{predicted[unknown][0].item()!r} ({int(unknown.sum())} of {n} predictions outside them). "
                "Map the network's outputs to the labels of y, or pass its (N, K) logits."
            )
        return torch.as_tensor(codes.astype(np.int64))
    if predicted.ndim == 2:
        if predicted.dtype == object or not np.issubdtype(predicted.dtype, np.number):
            raise ValueError(f"predicted logits must hold numbers; got an array of dtype {predicted.dtype}.")
        if predicted.shape != (n, K):
            raise ValueError(
                f"predicted logits must have shape (N, K) = ({n}, {K}): one row per row of X and one column "
                f"per class of y (in sorted-label order); got {predicted.shape}."
            )
        if not np.isfinite(predicted).all():
            bad = int((~np.isfinite(predicted)).any(axis=1).sum())
            raise ValueError(
                f"predicted logits contain non-finite values (NaN or inf) in {bad} of {n} rows. "
                "Check the classifier: a diverged training run produces these."
            )
        return torch.as_tensor(predicted.argmax(axis=1).astype(np.int64))   # ties: the lowest class
    raise ValueError(
        f"predicted must be integer class labels of shape (N,) or logits of shape (N, K); got shape "
        f"{predicted.shape}."
    )


def _require_nonzero_rows(W: torch.Tensor, labels: np.ndarray | None, metric: str) -> torch.Tensor:
    """Row norms (K,) float64 on CPU; DegenerateFeaturesError when a row is zero (relative to the largest)."""
    norms = torch.linalg.vector_norm(W, dim=1).cpu().double()                       # (K,) ‖w_k‖
    tol = _COINCIDE[W.dtype] * float(norms.max())
    zero = (norms <= tol).nonzero().flatten()
    if zero.numel():
        k = int(zero[0])
        which = f"class {labels[k].item()!r}" if labels is not None else f"class {k}"
        raise DegenerateFeaturesError(
            f"{metric} is undefined: row {k} of W ({which}) has zero norm"
            f"{'' if zero.numel() == 1 else f' (and {zero.numel() - 1} more rows)'}, so its angle to "
            "the other classifier rows is undefined (e.g. a head never trained on that class)."
        )
    return norms


def _require_centred_nonzero(stats: _ClassStats, metric: str) -> torch.Tensor:
    """Norms (K,) of the centred means μ_k − μ_G, float64 CPU; raises when one is zero."""
    stats.require_spread(metric)
    norms = stats.gram.diagonal().clamp_min(0.0).sqrt()                              # (K,) ‖μ_k − μ_G‖
    zero = (norms**2 <= stats.coincide_sq).nonzero().flatten()
    if zero.numel():
        raise DegenerateFeaturesError(
            f"{metric} is undefined: the mean of class {stats._label(int(zero[0]))!r} equals the global "
            "mean, so its angle to the other classes is undefined."
        )
    return norms


def _pair_cosines(gram: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """Cosines of the K(K−1)/2 unordered pairs k < k' (float64), from a Gram matrix and its row norms."""
    K = gram.shape[0]
    i, j = torch.triu_indices(K, K, offset=1)
    return gram[i, j] / (norms[i] * norms[j])                                        # (K(K−1)/2,)


# --------------------------------------------------------------------------------------- measures

def nc2_classifier(W) -> dict[str, float]:
    """NC2 on the classifier: equal norms and equal, maximal angles of the head's rows.

    equinorm = std_k ‖w_k‖ / mean_k ‖w_k‖ (population std); equiangularity = mean over the
    unordered pairs k < k' of |cos(w_k, w_k') + 1/(K − 1)|. Computed on W's device, the K × K
    Gram in float64 (float32 on MPS). With K = 2 classes equiangularity is |cos(w_1, w_2) + 1|:
    0 when the two rows point in opposite directions.

    Parameters
    ----------
    W : torch.Tensor or numpy.ndarray, shape (K, d)
        The head's weight matrix, one row per class (bias excluded); K ≥ 2.

    Returns
    -------
    dict
        ``{"nc2_classifier_equinorm": float ≥ 0 (at most sqrt(K − 1)),
        "nc2_classifier_equiangularity": float in [0, K/(K − 1)]}``; both 0 when the rows form a
        simplex equiangular tight frame. Invariant to scaling W and to permuting its rows.

    Raises
    ------
    ValueError
        When W is not 2-D, has fewer than 2 rows, or holds non-finite values.
    DegenerateFeaturesError
        When a row of W is zero (its angle to the others is undefined).

    References
    ----------
    Papyan, Han & Donoho (2020), PNAS 117(40), Figs 2 and 4 (classifier panels).
    """
    W = _as_weights(W)                                                               # (K, d)
    K = W.shape[0]
    if K < 2:
        raise ValueError(
            f"W must have at least 2 rows (one per class) for nc2_classifier; got {K}. "
            "Pass the weight matrix of a head with two or more classes."
        )
    norms = _require_nonzero_rows(W, None, "nc2_classifier")                         # (K,)
    gram = (W @ W.T).cpu().double()                                                  # (K, K) W Wᵀ
    cos = _pair_cosines(gram, norms)
    return {
        "nc2_classifier_equinorm": float(norms.std(correction=0) / norms.mean()),
        "nc2_classifier_equiangularity": float((cos + 1.0 / (K - 1)).abs().mean()),
    }


@metric_doc
def nc2_cosine_std(X, y) -> float:
    """NC2 on the means: spread of the angles between centred class means.

    Population std over the unordered pairs k < k' of cos(μ_k − μ_G, μ_k' − μ_G), μ_G the mean
    of the class means. Class means in float64 on X's device; a class with one image is fine.
    With K = 2 there is a single pair, so the value is 0 (its cosine is always −1).

    {X_y_two_classes}

    Returns
    -------
    float
        In [0, 1]; 0 when all pairs meet at the same angle (e.g. a simplex ETF). Invariant to
        scaling X, relabelling classes and reordering samples.

    {raises_degenerate}
        When all class means coincide, or one equals the global mean.

    References
    ----------
    Papyan, Han & Donoho (2020), PNAS 117(40), Fig. 3.
    """
    stats = _ClassStats(_check_inputs(X, y))
    norms = _require_centred_nonzero(stats, "nc2_cosine_std")                        # (K,)
    return float(_pair_cosines(stats.gram, norms).std(correction=0))


def nc3_self_duality(X, y, W) -> float:
    """NC3 self-duality: distance between the normalised classifier and the normalised centred means.

    ‖ W / ‖W‖_F − Mᵀ / ‖M‖_F ‖_F², M = [μ_1 − μ_G, …, μ_K − μ_G] (d × K). Row k of W belongs to
    the k-th smallest label of y. Computed on X's device in float64 (float32 on MPS) by direct
    differences, so values near 0 keep their precision.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
        The head's input on the training sample.
    y : array-like of int, shape (N,), K ≥ 2 classes
    W : torch.Tensor or numpy.ndarray, shape (K, d)
        The head's weight matrix (bias excluded), rows in sorted-label order.

    Returns
    -------
    float
        In [0, 4]; 0 when W is a positive multiple of Mᵀ, 4 when W is a negative multiple, 2 when
        they are orthogonal. Invariant to scaling X or W and to relabelling classes together with
        the rows of W.

    Raises
    ------
    ValueError
        When W's shape is not (K, d) or it holds non-finite values.
    DegenerateFeaturesError
        When W is zero or all class means coincide (a normalisation divides by zero).

    References
    ----------
    Papyan, Han & Donoho (2020), PNAS 117(40), Fig. 5.
    """
    c = _check_inputs(X, y)
    return _self_duality(_ClassStats(c), _check_weights(W, c))


def _self_duality(stats: _ClassStats, Wc: torch.Tensor) -> float:
    """:func:`nc3_self_duality` from the class statistics and a checked W (K, d)."""
    stats.require_spread("nc3_self_duality")
    w_norm = torch.linalg.matrix_norm(Wc)                                            # ‖W‖_F
    if float(w_norm) == 0.0:
        raise DegenerateFeaturesError(
            "nc3_self_duality is undefined: W is zero (‖W‖_F = 0), so it cannot be normalised."
        )
    Mt = stats.centred                                                               # (K, d) Mᵀ
    diff = Wc / w_norm - Mt / torch.linalg.matrix_norm(Mt)                           # (K, d)
    return float(torch.linalg.vector_norm(diff).square())


def _ncc_codes(stats: _ClassStats) -> torch.Tensor:
    """Nearest-class-centre code of every row of X, (N,) int64 on CPU, in X's row order.

    The distances :func:`lab.metrics.ncc_accuracy` compares, from the same formula (so
    ``nc4_ncc_disagreement(X, y, y) == 1 - ncc_accuracy(X, y)``): for an image of class k,
    ‖x − μ_j‖² = ‖x − μ_k‖² + ‖μ_k − μ_j‖² + 2 (x − μ_k)·(μ_k − μ_j), one (B, K) product per chunk
    instead of B·K·d direct differences, and without the cancellation of ‖x‖² − 2x·μ + ‖μ‖².
    Exact ties go to the lowest class.
    """
    c = stats.c
    out = torch.empty(c.n, dtype=torch.int64, device=c.X.device)                     # (N,)
    pair = stats.pair_sq.to(device=c.X.device, dtype=stats.dtype)                    # (K, K) ‖μ_k − μ_j‖²
    with _single_thread_on_cpu(c.X.device):
        for k, idx, Xk in _class_chunks(c, _rows_per_block(c.d)):
            D = Xk.to(stats.dtype, copy=True).sub_(stats.means[k])                   # (B, d) x − μ_k
            dsq = torch.linalg.vector_norm(D, dim=1).square_()                       # (B,)
            Z = D @ stats.centred.T                                                  # (B, K)
            # (x − μ_k)·(μ_k − μ_j) = Z[k] − Z[j], since μ_k − μ_j = (μ_k − μ_G) − (μ_j − μ_G)
            dist = dsq[:, None] + pair[k] + 2.0 * (Z[:, k:k + 1] - Z)               # (B, K)
            out[idx] = dist.argmin(dim=1)
    return out.cpu()


def nc4_ncc_disagreement(X, y, predicted) -> float:
    """NC4: share of the images the network and the nearest-class-centre rule classify differently.

    The nearest-class-centre prediction of image i is argmin_k ‖h_i − μ_k‖ (Euclidean), centres =
    class means of the same X and y, from the distances :func:`lab.metrics.ncc_accuracy` compares
    (so ``predicted = y`` gives ``1 − ncc_accuracy(X, y)``); exact distance ties go to the lowest
    class. Computed on X's device in float64 (float32 on MPS), in row chunks of bounded memory.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
        The head's input h on the training sample.
    y : array-like of int, shape (N,), K ≥ 2 classes
    predicted : array-like, shape (N,) or (N, K)
        The network's predictions: integer labels (each one of the labels of y), or the head's
        logits (bias included), whose argmax column k stands for the k-th smallest label of y
        (ties go to the lowest column).

    Returns
    -------
    float
        In [0, 1]; 0 when the network classifies every image like its nearest class centre.
        Invariant to reordering samples (with ``predicted``) and relabelling classes.

    Raises
    ------
    ValueError
        When ``predicted`` has the wrong length or shape, labels outside y's classes, or non-finite logits.
    DegenerateFeaturesError
        When two class means coincide (the nearest centre is ambiguous).

    References
    ----------
    Papyan, Han & Donoho (2020), PNAS 117(40), Fig. 7.
    """
    c = _check_inputs(X, y)
    net = _predicted_codes(predicted, c)                                             # (N,)
    stats = _ClassStats(c)
    stats.require_distinct_means("nc4_ncc_disagreement")
    return float((_ncc_codes(stats) != net).double().mean())


