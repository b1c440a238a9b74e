"""Classifier-side neural-collapse measures against plain numpy transcriptions of METRICS.md,
on known geometries (a simplex ETF), under invariances, and on bad input."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from lab.metrics import DegenerateFeaturesError
from lab.metrics.classifier_collapse import (
    nc2_classifier, nc2_cosine_std, nc3_self_duality, nc4_ncc_disagreement, terminal_phase_epoch,
)


# ------------------------------------------------------------------- the definitions, literally

def ref_means(X, y):
    """Class means in sorted-label order and their centred versions (rows), float64."""
    X = np.asarray(X, dtype=np.float64)
    classes = np.unique(y)
    mu = np.stack([X[y == c].mean(axis=0) for c in classes])
    return classes, mu, mu - mu.mean(axis=0)


def cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def ref_nc2_classifier(W):
    W = np.asarray(W, dtype=np.float64)
    K = len(W)
    norms = [np.linalg.norm(w) for w in W]
    pairs = [abs(cos(W[k], W[j]) + 1 / (K - 1)) for k, j in itertools.combinations(range(K), 2)]
    return np.std(norms) / np.mean(norms), np.mean(pairs)


def ref_nc2_cosine_std(X, y):
    _, _, C = ref_means(X, y)
    return np.std([cos(C[k], C[j]) for k, j in itertools.combinations(range(len(C)), 2)])


def ref_nc3(X, y, W):
    _, _, C = ref_means(X, y)
    W = np.asarray(W, dtype=np.float64)
    return np.linalg.norm(W / np.linalg.norm(W) - C / np.linalg.norm(C)) ** 2


def ref_nc4(X, y, predicted_labels):
    classes, mu, _ = ref_means(X, y)
    X = np.asarray(X, dtype=np.float64)
    disagree = 0
    for x, p in zip(X, predicted_labels):
        nearest = classes[np.argmin([np.linalg.norm(x - m) for m in mu])]
        disagree += int(nearest != p)
    return disagree / len(X)


def random_case(K, *, dtype=np.float64, seed=0, d=12):
    """Overlapping Gaussian classes with non-contiguous labels, a random W and random logits."""
    rng = np.random.default_rng(seed)
    labels = np.sort(rng.choice(100, size=K, replace=False)) - 30
    n_k = rng.integers(1, 25, size=K)
    n_k[0] = 1                                   # a class with one training image
    y = np.repeat(labels, n_k)
    X = rng.normal(scale=1.5, size=(K, d))[np.searchsorted(labels, y)] + rng.normal(size=(len(y), d))
    order = rng.permutation(len(y))
    X, y = (X[order] + 3.0).astype(dtype), y[order]
    W = rng.normal(size=(K, d)).astype(dtype)
    logits = rng.normal(size=(len(y), K)).astype(dtype)
    return X, y, W, logits, labels


def as_input(a, as_tensor):
    return torch.from_numpy(a) if as_tensor else a


def simplex_etf(K, d, rng):
    """K vertices (rows) of a randomly rotated simplex ETF in d > K dimensions, norm sqrt(K/(K-1)) each."""
    E = np.sqrt(K / (K - 1)) * (np.eye(K) - 1.0 / K)                            # (K, K) rows sum to 0
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))                                # (d, d) random rotation
    return np.concatenate([E, np.zeros((K, d - K))], axis=1) @ Q                # (K, d)


def collapsed_case(K, seed=0):
    """Every image at its class's ETF vertex (plus a common offset): X, y, Mᵀ, the offset."""
    rng = np.random.default_rng(seed)
    d = K + 5
    V = 4.0 * simplex_etf(K, d, rng)                                             # (K, d) centred means
    offset = rng.normal(size=d)
    n_k = rng.integers(1, 6, size=K)
    y = np.repeat(np.arange(K) * 2 + 1, n_k)
    X = V[np.searchsorted(np.unique(y), y)] + offset
    order = rng.permutation(len(y))
    return X[order], y[order], V, offset


# ---------------------------------------------------------------- (1) against the transcriptions

CASES = [(K, dtype, as_tensor) for K in (2, 3, 10) for dtype in (np.float32, np.float64) for as_tensor in (False, True)]


@pytest.mark.parametrize("K, dtype, as_tensor", CASES)
def test_nc2_classifier_equals_definition(K, dtype, as_tensor):
    _, _, W, _, _ = random_case(K, dtype=dtype, seed=K)
    got = nc2_classifier(as_input(W, as_tensor))
    equinorm, equiangularity = ref_nc2_classifier(W)
    assert set(got) == {"nc2_classifier_equinorm", "nc2_classifier_equiangularity"}
    assert got["nc2_classifier_equinorm"] == pytest.approx(equinorm, rel=1e-10, abs=1e-12)
    assert got["nc2_classifier_equiangularity"] == pytest.approx(equiangularity, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("K, dtype, as_tensor", CASES)
def test_nc2_cosine_std_equals_definition(K, dtype, as_tensor):
    X, y, _, _, _ = random_case(K, dtype=dtype, seed=K + 1)
    got = nc2_cosine_std(as_input(X, as_tensor), y)
    assert got == pytest.approx(ref_nc2_cosine_std(X, y), rel=1e-9, abs=1e-12)
    if K == 2:
        assert got == pytest.approx(0.0, abs=1e-12)   # one pair, always at cos = -1
    else:
        assert got > 0.01


@pytest.mark.parametrize("K, dtype, as_tensor", CASES)
def test_nc3_self_duality_equals_definition(K, dtype, as_tensor):
    X, y, W, _, _ = random_case(K, dtype=dtype, seed=K + 2)
    got = nc3_self_duality(as_input(X, as_tensor), y, as_input(W, as_tensor))
    assert got == pytest.approx(ref_nc3(X, y, W), rel=1e-9)
    assert 0.0 < got < 4.0


@pytest.mark.parametrize("K, dtype, as_tensor", CASES)
def test_nc4_ncc_disagreement_equals_definition(K, dtype, as_tensor):
    X, y, _, logits, labels = random_case(K, dtype=dtype, seed=K + 3)
    from_logits = labels[logits.argmax(axis=1)]
    ref = ref_nc4(X, y, from_logits)
    assert nc4_ncc_disagreement(as_input(X, as_tensor), y, as_input(logits, as_tensor)) == ref
    assert nc4_ncc_disagreement(as_input(X, as_tensor), y, as_input(from_logits, as_tensor)) == ref
    assert 0.0 < ref < 1.0
    # the network agreeing with the nearest centre on all but three images
    classes, mu, _ = ref_means(X, y)
    ncc = classes[np.argmin(np.linalg.norm(X[:, None, :].astype(np.float64) - mu[None], axis=2), axis=1)]
    wrong = ncc.copy()
    wrong[:3] = np.where(ncc[:3] == classes[0], classes[1], classes[0])
    assert nc4_ncc_disagreement(as_input(X, as_tensor), y, wrong) == pytest.approx(3 / len(y))
    assert nc4_ncc_disagreement(as_input(X, as_tensor), y, ncc) == 0.0


def test_nc4_with_the_true_labels_is_the_ncc_error():
    from lab.metrics import ncc_accuracy

    for K in (2, 10):
        X, y, _, _, _ = random_case(K, seed=K + 4)
        assert nc4_ncc_disagreement(X, y, y) == pytest.approx(1.0 - ncc_accuracy(X, y), abs=1e-15)


# ------------------------------------------------------------------------------ (2) known cases

@pytest.mark.parametrize("K", [3, 5, 10])
def test_simplex_etf_with_self_dual_classifier_gives_zero(K):
    X, y, V, offset = collapsed_case(K, seed=K)
    W = V.copy()                                                                 # W = Mᵀ
    got = nc2_classifier(W)
    assert got["nc2_classifier_equinorm"] == pytest.approx(0.0, abs=1e-10)
    assert got["nc2_classifier_equiangularity"] == pytest.approx(0.0, abs=1e-10)
    assert nc2_cosine_std(X, y) == pytest.approx(0.0, abs=1e-10)
    assert nc3_self_duality(X, y, W) == pytest.approx(0.0, abs=1e-10)
    # the bias that cancels the common offset, as a trained head's would
    b = -W @ offset
    logits = X @ W.T + b
    assert nc4_ncc_disagreement(X, y, logits) == 0.0
    assert nc4_ncc_disagreement(X, y, np.unique(y)[logits.argmax(axis=1)]) == 0.0


@pytest.mark.parametrize("K", [3, 5, 10])
def test_self_duality_of_opposite_and_scaled_classifier(K):
    X, y, V, _ = collapsed_case(K, seed=K + 1)
    assert nc3_self_duality(X, y, -V) == pytest.approx(4.0, abs=1e-10)
    assert nc3_self_duality(X, y, 3.0 * V) == pytest.approx(0.0, abs=1e-10)
    assert nc3_self_duality(torch.from_numpy(X), y, torch.from_numpy(3.0 * V).float()) == pytest.approx(0.0, abs=1e-12)


def test_two_classes_are_defined():
    rng = np.random.default_rng(0)
    w = rng.normal(size=6)
    got = nc2_classifier(np.stack([w, -2.0 * w]))
    assert got["nc2_classifier_equiangularity"] == pytest.approx(0.0, abs=1e-12)   # cos = -1 = -1/(K-1)
    assert got["nc2_classifier_equinorm"] == pytest.approx(1 / 3)
    assert nc2_classifier(np.stack([w, w]))["nc2_classifier_equiangularity"] == pytest.approx(2.0)


def test_a_class_with_one_image_is_fine():
    X, y, W, logits, _ = random_case(4, seed=7)
    assert np.unique(y, return_counts=True)[1].min() == 1
    assert np.isfinite([nc2_cosine_std(X, y), nc3_self_duality(X, y, W), nc4_ncc_disagreement(X, y, logits)]).all()


# ------------------------------------------------------------------------------ (3) invariances

def test_permuting_samples_changes_nothing():
    X, y, W, logits, _ = random_case(5, seed=11)
    perm = np.random.default_rng(1).permutation(len(y))
    assert nc2_cosine_std(X[perm], y[perm]) == pytest.approx(nc2_cosine_std(X, y), rel=1e-12)
    assert nc3_self_duality(X[perm], y[perm], W) == pytest.approx(nc3_self_duality(X, y, W), rel=1e-12)
    assert nc4_ncc_disagreement(X[perm], y[perm], logits[perm]) == nc4_ncc_disagreement(X, y, logits)


def test_relabelling_classes_with_the_rows_of_w_changes_nothing():
    X, y, W, logits, labels = random_case(6, seed=12)
    new_labels = np.random.default_rng(2).permutation(len(labels)) * 7 + 100    # another order and values
    relabel = dict(zip(labels, new_labels))
    y2 = np.array([relabel[v] for v in y])
    # row / column k belongs to the k-th smallest label: move each class's row to its new rank
    rank = np.argsort(np.argsort(new_labels))                                    # old code -> new code
    W2 = np.empty_like(W)
    W2[rank] = W
    logits2 = np.empty_like(logits)
    logits2[:, rank] = logits
    assert nc2_cosine_std(X, y2) == pytest.approx(nc2_cosine_std(X, y), rel=1e-12)
    assert nc3_self_duality(X, y2, W2) == pytest.approx(nc3_self_duality(X, y, W), rel=1e-12)
    assert nc4_ncc_disagreement(X, y2, logits2) == nc4_ncc_disagreement(X, y, logits)
    predicted = labels[logits.argmax(axis=1)]
    assert nc4_ncc_disagreement(X, y2, np.array([relabel[v] for v in predicted])) == \
        nc4_ncc_disagreement(X, y, predicted)
    for key, value in nc2_classifier(W).items():
        assert nc2_classifier(W2)[key] == pytest.approx(value, rel=1e-12)


def test_scaling_changes_nothing():
    X, y, W, _, _ = random_case(4, seed=13)
    assert nc2_cosine_std(10.0 * X, y) == pytest.approx(nc2_cosine_std(X, y), rel=1e-12)
    assert nc3_self_duality(10.0 * X, y, 0.1 * W) == pytest.approx(nc3_self_duality(X, y, W), rel=1e-12)
    for key, value in nc2_classifier(W).items():
        assert nc2_classifier(5.0 * W)[key] == pytest.approx(value, rel=1e-12)


# ------------------------------------------------------------------------------- (4) bad input

def test_wrong_w_shape_says_what_was_expected():
    X, y, W, _, _ = random_case(4, seed=14, d=12)
    with pytest.raises(ValueError, match=r"shape \(K, d\) = \(4, 12\).*got \(12, 4\).*transposed: pass W\.T"):
        nc3_self_duality(X, y, W.T)
    with pytest.raises(ValueError, match=r"\(4, 12\).*got \(5, 12\).*rows of the classes in y"):
        nc3_self_duality(X, y, np.ones((5, 12)))
    with pytest.raises(ValueError, match=r"\(4, 12\).*got \(4, 11\).*columns are X's features"):
        nc3_self_duality(X, y, np.ones((4, 11)))
    with pytest.raises(ValueError, match=r"W must be 2-D.*got shape \(12,\).*without the bias"):
        nc2_classifier(W[0])
    with pytest.raises(ValueError, match=r"at least 2 rows.*got 1"):
        nc2_classifier(W[:1])


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_w_and_logits_are_rejected(bad):
    X, y, W, logits, _ = random_case(3, seed=15)
    W[1, 2] = bad
    with pytest.raises(ValueError, match=r"W contains non-finite values.*in 1 of 3 rows"):
        nc2_classifier(W)
    with pytest.raises(ValueError, match=r"W contains non-finite values"):
        nc3_self_duality(X, y, torch.from_numpy(W))
    logits[0, 0] = bad
    with pytest.raises(ValueError, match=r"logits contain non-finite values.*in 1 of"):
        nc4_ncc_disagreement(X, y, logits)
    X[0, 0] = bad
    with pytest.raises(ValueError, match=r"X contains non-finite values"):
        nc2_cosine_std(X, y)


def test_wrong_predictions_say_what_was_expected():
    X, y, _, logits, labels = random_case(3, seed=16)
    n = len(y)
    predicted = labels[logits.argmax(axis=1)]
    with pytest.raises(ValueError, match=rf"expected length {n}, got {n - 1}.*same images"):
        nc4_ncc_disagreement(X, y, predicted[1:])
    with pytest.raises(ValueError, match=rf"shape \(N, K\) = \({n}, 3\).*got \({n}, 4\)"):
        nc4_ncc_disagreement(X, y, np.ones((n, 4)))
    outside = predicted.copy()
    outside[5] = 999
    with pytest.raises(ValueError, match=r"labels of the classes in y.*got 999 \(1 of"):
        nc4_ncc_disagreement(X, y, outside)
    with pytest.raises(ValueError, match=r"integer class labels.*dtype float64.*as integers"):
        nc4_ncc_disagreement(X, y, predicted.astype(np.float64))
    with pytest.raises(ValueError, match=r"shape \(N,\) or logits of shape \(N, K\); got shape"):
        nc4_ncc_disagreement(X, y, logits[None])


def test_undefined_values_raise_degenerate_features_error():
    X, y, W, logits, _ = random_case(4, seed=17)
    W[2] = 0.0
    with pytest.raises(DegenerateFeaturesError, match=r"row 2 of W \(class 2\) has zero norm"):
        nc2_classifier(W)
    assert np.isfinite(nc3_self_duality(X, y, W))          # one zero row still normalises
    with pytest.raises(DegenerateFeaturesError, match=r"W is zero"):
        nc3_self_duality(X, y, np.zeros_like(W))
    same = np.ones_like(X)                                   # every class mean coincides
    with pytest.raises(DegenerateFeaturesError, match=r"nc2_cosine_std is undefined: all 4 class means coincide"):
        nc2_cosine_std(same, y)
    with pytest.raises(DegenerateFeaturesError, match=r"nc3_self_duality is undefined: all 4 class means"):
        nc3_self_duality(same, y, W + 1.0)
    with pytest.raises(DegenerateFeaturesError, match=r"nc4_ncc_disagreement is undefined"):
        nc4_ncc_disagreement(same, y, logits)


def test_a_class_mean_at_the_global_mean_makes_cosines_undefined():
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(DegenerateFeaturesError, match=r"class 7.*equals the global mean"):
        nc2_cosine_std(X, np.array([3, 5, 7]))


# ------------------------------------------------------------------- (5) torch and return types

def test_torch_on_cpu_returns_python_floats():
    X, y, W, logits, _ = random_case(4, seed=18)
    Xt, Wt, Lt = torch.from_numpy(X).float(), torch.from_numpy(W).float(), torch.from_numpy(logits)
    assert Xt.device.type == "cpu"
    values = [*nc2_classifier(Wt).values(), nc2_cosine_std(Xt, torch.from_numpy(y)),
              nc3_self_duality(Xt, y, Wt), nc4_ncc_disagreement(Xt, y, Lt),
              nc4_ncc_disagreement(Xt, y, torch.from_numpy(logits.argmax(axis=1)) * 0 + int(y[0]))]
    assert all(type(v) is float for v in values)
    W_grad = Wt.clone().requires_grad_(True)                   # a head's parameter works as it is
    assert type(nc3_self_duality(Xt, y, W_grad)) is float


# ---------------------------------------------------------------------------- terminal phase

def test_terminal_phase_epoch():
    assert terminal_phase_epoch([None, 0.5, 0.9, 1.0, 1.0]) == 3
    assert terminal_phase_epoch({4: 1.0, 2: 1.0, 1: 0.3}) == 2
    assert terminal_phase_epoch([0.1, 1 - 1e-13]) == 1                # 1 up to rounding
    assert terminal_phase_epoch([0.1, 1 - 1e-9]) is None
    assert terminal_phase_epoch(np.array([0.2, np.float32(1.0)])) == 1
    assert terminal_phase_epoch({0: float("nan"), 1: 0.99}) is None
    assert terminal_phase_epoch([]) is None
    assert type(terminal_phase_epoch({np.int64(5): 1.0})) is int


def test_terminal_phase_epoch_rejects_bad_values():
    with pytest.raises(ValueError, match=r"fractions in \[0, 1\]; got 100.0 at epoch 2.*percentages by 100"):
        terminal_phase_epoch([0.5, 0.9, 100.0])
    with pytest.raises(ValueError, match=r"epochs must be integers; got 1.5"):
        terminal_phase_epoch({1.5: 1.0})
    with pytest.raises(ValueError, match=r"numbers in \[0, 1\]; got '1.0'"):
        terminal_phase_epoch(["1.0"])
    with pytest.raises(ValueError, match=r"mapping epoch → accuracy or a sequence.*got float"):
        terminal_phase_epoch(1.0)
