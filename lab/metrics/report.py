"""Every metric of one layer, with shared work, and a per-layer table.

:func:`compute_layer` reads each requested metric's entry in :data:`lab.catalogue.METRICS` (its
function, options, check and needs) and computes them all from one layer context
(``lab.metrics._context``): the inputs validated once, one exact blocked neighbour pass for all kNN
variants (one Gram block per row block yields the Euclidean distances and the cosine similarities;
every variant takes what it needs from each row of it), one set of class statistics for nc1, cdnv,
nc2 and ncc, and, for k-means and the probe, one CPU copy of X (scikit-learn) or none at all (torch,
which "auto" picks for CUDA features: see ``separability.BACKENDS``). It names no metric: a new one
is a catalogue entry and its function. :func:`layer_report` runs it per layer and returns a DataFrame.

``DEFAULT_SEPARABILITY`` and ``DEFAULT_COLLAPSE`` (what a layer report measures when no metrics are named) and
``ALL_METRICS`` (every metric computed from features and labels alone) are asked of the live catalogue at each
read, like ``lab.catalogue.metric_names(...)``: a metric registered after import is in them.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from lab import catalogue as _catalogue

from ._checks import DegenerateFeaturesError, DegenerateLayerWarning, _check_backend, _check_protocol
from ._context import LayerContext, columns, evaluate, prepare
from .collapse import margin_samples

__all__ = ["DEFAULT_SEPARABILITY", "DEFAULT_COLLAPSE", "ALL_METRICS", "compute_layer", "layer_report"]

_LIVE_LISTS = {
    "DEFAULT_SEPARABILITY": lambda: _catalogue.metric_names(report=True, family="separability"),
    "DEFAULT_COLLAPSE": lambda: _catalogue.metric_names(report=True, family="collapse"),
    "ALL_METRICS": lambda: _catalogue.metric_names(where=lambda info: info.needs == ("labels",)),
}
"""The names these public lists answer, each a question to the live catalogue (its entries' ``report`` field
says what a layer report measures by default: the linear probe too, which a run leaves out for its cost; the
weighted kNN only on request). ``ALL_METRICS``: every metric computed from the features and their labels; the
classifier-side entries (family ``"classifier_collapse"``) also need ``head=``, and the label-free family
(``"label_free"``: no labels, ``y=None`` will do; ``lidar`` needs ``views=``) is named explicitly."""


def __getattr__(name: str):
    # PEP 562: asked at each read, so a metric registered after import is in the list (a copy would miss it)
    if name in _LIVE_LISTS:
        return _LIVE_LISTS[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_ALIASES = {"nc2": ("nc2_equinorm", "nc2_equiangularity")}



def _options() -> dict[str, dict]:
    """Options each metric accepts through ``params``, with their defaults: a view of the catalogue's entries
    (read at each call, so that a registered metric's options count)."""
    return {name: dict(info.options) for name, info in _catalogue.METRICS.items() if info.options}


def _resolve_metrics(metrics) -> tuple[str, ...]:
    if metrics is None:
        metrics = _catalogue.metric_names(report=True)
    if isinstance(metrics, str):
        metrics = (metrics,)
    out: list[str] = []
    for name in metrics:
        for m in _ALIASES.get(name, (name,)):
            if m not in _catalogue.METRICS:
                raise ValueError(
                    f"unknown metric {m!r}; valid names are {', '.join(_catalogue.METRICS)} (and 'nc2' for both "
                    "nc2 columns)."
                )
            if m not in out:
                out.append(m)
    if not out:
        raise ValueError(f"metrics must name at least one metric; valid names are {', '.join(_catalogue.METRICS)}.")
    return tuple(out)


def _resolve_params(params: Mapping | None, metrics: tuple[str, ...]) -> dict[str, dict]:
    params = dict(params or {})
    options = _options()
    resolved = {}
    for name, given in params.items():
        if name not in options:
            raise ValueError(
                f"params has options for {name!r}, which takes none; metrics with options are "
                f"{', '.join(options)}."
            )
        unknown = set(given) - set(options[name])
        if unknown:
            raise ValueError(
                f"unknown option(s) {sorted(unknown)} for {name!r}; valid options are {sorted(options[name])}."
            )
    for name in metrics:
        if name in options:
            resolved[name] = {**options[name], **params.get(name, {})}
    return resolved


def compute_layer(
    X,
    y,
    *,
    metrics: Iterable[str] | None = None,
    protocol: str = "default",
    repeats: int = 1,
    params: Mapping[str, Mapping] | None = None,
    layer: str | None = None,
    on_degenerate: str = "warn",
    return_samples: bool = False,
    return_margins: bool = False,
    backend: str = "auto",
    head=None,
    views=None,
) -> dict[str, float] | tuple[dict[str, float], dict[str, np.ndarray]]:
    """All requested metrics of one layer's features, sharing work between them.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
        One layer's pooled features, on any device (the work stays there, except k-means and
        the probe with the scikit-learn backend, which run on a CPU copy).
    y : array-like of int, shape (N,), or None
        The labels; None when no requested metric reads them (the label-free family,
        ``lab.catalogue.metric_names(family="label_free")``).
    metrics : iterable of str, optional
        Names from :data:`lab.catalogue.METRICS` (``"nc2"`` expands to both nc2 columns). None (default):
        ``lab.catalogue.metric_names(report=True)``, i.e. ``DEFAULT_SEPARABILITY + DEFAULT_COLLAPSE``.
    protocol : {"default", "paper"}
        ``"paper"``: nmi with one k-means++ run at random_state 42 (+ repeat index) and
        knn_purity with k = smallest class size, as the seed code.
    repeats : int
        nmi is computed with ``repeats`` k-means seeds (seed, seed + 1, ...; seed 0, or 42
        for the paper protocol) and reported as the mean, with ``"nmi_std"`` (sample std)
        when ``repeats > 1``. The other metrics are deterministic.
    params : mapping, optional
        Per-metric options, e.g. ``{"knn_accuracy": {"k": 5}, "linear_probe_accuracy":
        {"folds": 3}}``; see each metric's function for meaning.
    layer : str, optional
        Layer name used in error and warning messages.
    on_degenerate : {"warn", "raise"}
        A metric that is undefined for these features (:class:`DegenerateFeaturesError`,
        e.g. a constant layer) becomes NaN with a :class:`DegenerateLayerWarning` naming the
        layer and metric ("warn"), or raises ("raise").
    return_samples : bool
        Also return what each sample contributed, for the bootstrap of :func:`lab.analysis.bootstrap`:
        ``{"nmi": k-means cluster of each sample (N,) int64 (of the first repeat),
        "knn_accuracy": whether its leave-one-out vote was right (N,) bool}``, for those of the two
        that were measured and defined.
    return_margins : bool
        With ``return_samples``, the samples also hold what the per-image record needs from the class
        statistics (METRICS.md, "The answer per image"): ``"margin"``, each sample's nearest-class-centre
        margin (N,) float64, and ``"cdnv_pairs"``, the CDNV term of every class pair (K, K) float64 (NaN on
        the diagonal; classes in sorted label order); NaN where undefined (all class means coincide).
    backend : {"auto", "sklearn", "torch"}
        Implementation of k-means and the probe (``lab.metrics.separability.BACKENDS``): "auto" is torch on
        X's device for CUDA features, scikit-learn on a CPU copy otherwise.
    head : lab.metrics.Head, optional
        A trained classification head whose input X is: ``Head(W, logits)`` with W (K, d) its weight
        matrix (bias excluded, rows in sorted-label order of y) and logits (N, K) its outputs on the same
        images (a pair ``(W, logits)`` works too). The entries that need it (``needs`` names ``"head"``:
        the classifier-side collapse family) read it; asking for them without a head is a ValueError.
    views : torch.Tensor or numpy.ndarray, shape (n, q, d), optional
        This layer's pooled features of q augmented views of each of n images, for the entries that need
        ``"views"`` (``lidar``); asking for them without views is a ValueError.

    Returns
    -------
    dict of str to float
        One entry per metric, in the requested order (plus ``"nmi_std"`` when repeated); with
        ``return_samples``, the pair ``(values, samples)``.

    Raises
    ------
    ValueError
        Invalid input (message prefixed with the layer name when given), unknown metric
        or option names.
    """
    metrics = _resolve_metrics(metrics)
    _check_protocol(protocol)
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer; got {repeats!r}.")
    if on_degenerate not in ("warn", "raise"):
        raise ValueError(f"on_degenerate must be 'warn' or 'raise'; got {on_degenerate!r}.")
    _check_backend(backend)
    opts = _resolve_params(params, metrics)
    where = f"layer {layer!r}: " if layer is not None else ""
    requested = [(_catalogue.METRICS[name], opts.get(name, {})) for name in metrics]

    # -- validate once, every requested metric, before any is computed
    inputs = {name: value for name, value in (("head", head), ("views", views)) if value is not None}
    context = LayerContext(X, y, protocol=protocol, backend=backend, return_samples=return_samples,
                           inputs=inputs)
    try:
        prepare(context, requested)
    except DegenerateFeaturesError:
        raise
    except ValueError as exc:
        raise ValueError(f"{where}{exc}") from exc

    def degenerate(name: str, exc: DegenerateFeaturesError) -> float:
        if on_degenerate == "raise":
            raise DegenerateFeaturesError(f"{where}{exc}") from exc
        warnings.warn(f"{where}{name} set to NaN: {exc}", DegenerateLayerWarning, stacklevel=3)
        return float("nan")

    # -- each metric reads the shared work (neighbours, class statistics, host copy) from the context
    results: dict[str, float] = {}
    for info, options in requested:
        try:
            results.update(evaluate(context, info, options, repeats))
        except DegenerateFeaturesError as exc:
            value = degenerate(info.name, exc)
            results.update(dict.fromkeys(columns(info, repeats), value))
    if not return_samples:
        return results
    if return_margins:
        context.samples.update(margin_samples(context))
    return results, context.samples


def layer_report(
    features: Mapping[str, object],
    y,
    *,
    metrics: Iterable[str] | None = None,
    repeats: int = 1,
    protocol: str = "default",
    params: Mapping[str, Mapping] | None = None,
    on_degenerate: str = "warn",
    backend: str = "auto",
) -> pd.DataFrame:
    """Metrics of every layer, one row per layer.

    Parameters
    ----------
    features : mapping of str to torch.Tensor or numpy.ndarray
        Layer name → pooled features (N, d), e.g. a ``lab.features.FeatureSet``; every
        layer has the same N samples in the same order.
    y : array-like of int, shape (N,)
    metrics, repeats, protocol, params, on_degenerate, backend
        As in :func:`compute_layer`.

    Returns
    -------
    pandas.DataFrame
        Index ``layer`` (input order); one float column per metric in the requested order,
        plus ``nmi_std`` when ``repeats > 1``. A metric undefined for a layer is NaN and
        emits a :class:`DegenerateLayerWarning` naming the layer and metric (unless
        ``on_degenerate="raise"``).

    Raises
    ------
    ValueError
        Invalid input, with the offending layer named (e.g. non-finite features).
    """
    if not isinstance(features, Mapping) or not features:
        raise ValueError("features must be a non-empty mapping {layer name: features (N, d)}.")
    metrics = _resolve_metrics(metrics)
    rows = {
        str(name): compute_layer(X, y, metrics=metrics, protocol=protocol, repeats=repeats, params=params,
                                 layer=str(name), on_degenerate=on_degenerate, backend=backend)
        for name, X in features.items()
    }
    frame = pd.DataFrame.from_dict(rows, orient="index").astype(float)
    frame.index.name = "layer"
    return frame
