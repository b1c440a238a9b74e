"""Classifier-side collapse of a prepared layer: the catalogue functions, the head input and the class Gram.

The catalogue's ``classifier_collapse`` entries (``docs/METRICS.md``, "Neural collapse on the training
set") need a trained head besides the features and labels: :class:`Head` carries its weight matrix W
(K, d) and its logits (N, K) on the same images, and :func:`lab.metrics.compute_layer` passes it to the
layer context as the input ``"head"``. The functions here read the class statistics the collapse family
shares (:func:`lab.metrics.collapse.class_stats`), so nc1, nc2, nc3 and nc4 of one layer make one pass
over the class means. :func:`class_gram` is the Gram matrix MᵀM of the centred class means that
``lab.analysis.simplex`` reads (the geometry of the means, stored by a run as ``ClassMeans``).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from ._checks import _check_inputs
from ._context import LayerContext
from ._docs import metric_doc
from .classifier_collapse import (
    _check_weights, _ncc_codes, _pair_cosines, _predicted_codes, _require_centred_nonzero, _require_nonzero_rows,
    _self_duality, nc2_classifier,
)
from .collapse import _ClassStats, class_stats

__all__ = ["Head", "as_head", "class_gram"]


class Head(NamedTuple):
    """A trained classification head as the classifier-side measures read it.

    Attributes
    ----------
    weight : torch.Tensor or numpy.ndarray, shape (K, d)
        The head's weight matrix (``nn.Linear.weight``, bias excluded), one row per class of y in
        sorted-label order; its columns are the features of X (the head's input).
    logits : torch.Tensor or numpy.ndarray, shape (N, K), or None
        The head's outputs (bias included) on the same N images, columns in the rows' order; needed by
        ``nc4_ncc_disagreement`` and ``head_accuracy``.
    """

    weight: Any
    logits: Any = None


def as_head(head) -> Head:
    """``head`` as a :class:`Head`: a Head, a pair ``(W, logits)`` or a mapping with ``"weight"`` and ``"logits"``."""
    if isinstance(head, Head):
        return head
    if isinstance(head, dict):
        unknown = sorted(set(head) - {"weight", "logits"})
        if "weight" not in head or unknown:
            raise ValueError(f"head must have the keys 'weight' (K, d) and 'logits' (N, K); got {sorted(head)}.")
        return Head(head["weight"], head.get("logits"))
    if isinstance(head, (tuple, list)) and len(head) == 2:
        return Head(*head)
    raise ValueError(
        "head must be a lab.metrics.Head, a pair (W, logits) or a dict {'weight': W, 'logits': logits}; "
        f"got {type(head).__name__}."
    )


def _weights(layer: LayerContext) -> torch.Tensor:
    """The head's W checked against the layer's classes and features: (K, d) on X's device."""
    return layer.shared("head_weight", lambda layer: _check_weights(as_head(layer.input("head")).weight,
                                                                    layer.checked))


def _network_codes(layer: LayerContext, metric: str) -> torch.Tensor:
    """The head's argmax as class codes (N,), from its logits."""
    logits = as_head(layer.input("head")).logits
    if logits is None:
        raise ValueError(f"{metric} needs the head's logits on the same images: pass head=Head(W, logits).")
    return layer.shared("head_codes", lambda layer: _predicted_codes(logits, layer.checked))


def check_head(layer: LayerContext) -> None:
    """Check the head against the layer before anything is computed (shape of W, of the logits)."""
    _weights(layer)
    if as_head(layer.input("head")).logits is not None:
        _network_codes(layer, "the head")


def _classifier_nc2(layer: LayerContext) -> dict[str, float]:
    def build(layer):
        W = _weights(layer)
        _require_nonzero_rows(W, layer.checked.labels, "nc2_classifier")
        return nc2_classifier(W)
    return layer.shared("nc2_classifier", build)


def nc2_cosine_std_of_layer(layer: LayerContext) -> float:
    """:func:`lab.metrics.nc2_cosine_std` of a prepared layer (catalogue function)."""
    stats = class_stats(layer)
    norms = _require_centred_nonzero(stats, "nc2_cosine_std")                        # (K,)
    return float(_pair_cosines(stats.gram, norms).std(correction=0))


def nc2_classifier_equinorm_of_layer(layer: LayerContext) -> float:
    """The equinorm of :func:`lab.metrics.nc2_classifier` of the layer's head (catalogue function)."""
    return _classifier_nc2(layer)["nc2_classifier_equinorm"]


def nc2_classifier_equiangularity_of_layer(layer: LayerContext) -> float:
    """The equiangularity of :func:`lab.metrics.nc2_classifier` of the layer's head (catalogue function)."""
    return _classifier_nc2(layer)["nc2_classifier_equiangularity"]


def nc3_self_duality_of_layer(layer: LayerContext) -> float:
    """:func:`lab.metrics.nc3_self_duality` of a prepared layer and its head (catalogue function)."""
    return _self_duality(class_stats(layer), _weights(layer))


def nc4_ncc_disagreement_of_layer(layer: LayerContext) -> float:
    """:func:`lab.metrics.nc4_ncc_disagreement` of a prepared layer and its head's logits (catalogue function)."""
    net = _network_codes(layer, "nc4_ncc_disagreement")
    stats = class_stats(layer)
    stats.require_distinct_means("nc4_ncc_disagreement")
    return float((_ncc_codes(stats) != net).double().mean())


def head_accuracy_of_layer(layer: LayerContext) -> float:
    """Share of the images whose head argmax is their label (catalogue function; ties go to the lowest class)."""
    net = _network_codes(layer, "head_accuracy")
    return float((net == layer.checked.codes.cpu()).double().mean())


@metric_doc
def class_gram(X, y) -> np.ndarray:
    """The Gram matrix MᵀM of the centred class means, M = [μ_1 − μ_G, …, μ_K − μ_G] (d × K).

    {X_y_two_classes}

    Returns
    -------
    numpy.ndarray, shape (K, K), float64
        Classes in sorted-label order; symmetric positive semi-definite, rows summing to 0 (the centred
        means sum to zero). ``lab.analysis.simplex`` turns it into cosines and a plane of the means.
    """
    return _ClassStats(_check_inputs(X, y)).gram.numpy().copy()                     # (K, K)

