"""One layer's inputs, checked once, and the work its metrics share, each piece computed once.

Every metric in :data:`lab.catalogue.METRICS` is computed by a function ``f(layer, **options)``
(the entry's ``function``) that reads what it needs from a :class:`LayerContext`:

- ``layer.checked``: X and y validated once (:func:`._checks._check_inputs`), class codes and counts;
- ``layer.neighbors(name)``: one blocked neighbour pass serving every kNN request the metrics made
  in their ``check`` (:meth:`LayerContext.want_neighbors`);
- ``layer.shared(key, build)``: any other piece several metrics read (the class statistics of
  nc1, cdnv, nc2 and ncc), built on first use and kept;
- ``layer.X_numpy()``: one host copy of X for scikit-learn; ``layer.constant``: whether the layer is dead.

:func:`prepare` checks every requested metric before any is computed; :func:`evaluate` computes one.
:func:`lab.metrics.compute_layer` runs both over the requested metrics; :func:`measure` is the same for
one metric, which is what each public function (``lab.metrics.nc1(X, y)``, ...) does.
"""
from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import torch

from lab import catalogue

from ._checks import (
    _as_features, _check_backend, _check_folds, _check_inputs, _check_per_class, _check_protocol, _Checked,
    _is_constant, _on_device, _reject_constant,
)
from ._neighbors import _neighbor_graphs

__all__ = ["LayerContext", "prepare", "evaluate", "measure", "columns", "resolve", "option_default"]


class LayerContext:
    """The inputs of one layer's metrics and the work they share, computed lazily and once.

    Parameters
    ----------
    X : torch.Tensor or numpy.ndarray, shape (N, d)
    y : array-like of int, shape (N,), or None when no metric needs labels
    protocol : {"default", "paper"}
    backend : {"auto", "sklearn", "torch"}
        Where k-means and the probe run (``lab.metrics.BACKENDS``).
    return_samples : bool
        Keep what each sample contributed (:meth:`keep_sample`) for the bootstrap.
    inputs : mapping, optional
        Inputs other than X and y that an entry's ``needs`` names (e.g. a trained head's weights),
        by that name.
    """

    def __init__(self, X, y, *, protocol: str = "default", backend: str = "auto", return_samples: bool = False,
                 inputs: Mapping[str, Any] | None = None):
        self.protocol = _check_protocol(protocol)
        self.backend = _check_backend(backend)
        self.return_samples = return_samples
        self.samples: dict[str, np.ndarray] = {}
        self._X, self._y = X, y
        self._inputs = dict(inputs or {})
        self._requests: dict[str, tuple] = {}
        self._graphs: dict | None = None
        self._shared: dict[str, Any] = {}

    # -- the inputs
    @functools.cached_property
    def checked(self) -> _Checked:
        """X and y validated (:func:`._checks._check_inputs`), with dense class codes and counts."""
        return _check_inputs(self._X, self._y)

    @functools.cached_property
    def X(self) -> torch.Tensor:
        """The validated features (N, d) on their device; labels are not read (label-free metrics)."""
        return self.checked.X if "checked" in self.__dict__ else _as_features(self._X)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    def input(self, name: str):
        """An input other than X and y that an entry's ``needs`` names (KeyError when not given)."""
        return self._inputs[name]

    def has_input(self, name: str) -> bool:
        return name in self._inputs

    # -- requirements a metric states in its check
    def require_per_class(self, need: int, because: str) -> None:
        """Raise ValueError unless every class has ``need`` samples (``because`` names the metric)."""
        _check_per_class(self.checked.labels, self.checked.counts, need, because)

    def require_folds(self, folds) -> None:
        """Raise ValueError unless stratified ``folds``-fold cross-validation fits every class."""
        _check_folds(folds, self.checked.labels, self.checked.counts)

    # -- shared work
    def want_neighbors(self, name: str, request: tuple) -> None:
        """Ask for ``name``'s neighbours, served by the one pass :meth:`neighbors` makes for every request.

        ``request`` is ``(metric, k, mode)`` or ``("cosine", k, "weighted", temperature)`` as
        ``lab.metrics._neighbors._neighbor_graphs`` takes it; called from a metric's check, before any
        metric is computed.
        """
        if self._graphs is not None:
            raise RuntimeError(f"neighbours for {name!r} were asked for after the neighbour pass ran.")
        self._requests[name] = request

    def neighbors(self, name: str):
        """The answer to ``name``'s neighbour request; the first call makes the pass for all of them."""
        if self._graphs is None:
            c = self.checked
            self._graphs = _neighbor_graphs(c.X, self._requests, codes=c.codes, n_classes=c.n_classes)
        return self._graphs[name]

    def neighbor_request(self, name: str) -> tuple:
        """The request ``name`` made (:meth:`want_neighbors`), e.g. to read its resolved k."""
        return self._requests[name]

    def shared(self, key: str, build: Callable[[LayerContext], Any]):
        """``build(self)``, computed on the first call for ``key`` and kept for the next ones."""
        if key not in self._shared:
            self._shared[key] = build(self)
        return self._shared[key]

    @functools.cached_property
    def constant(self) -> bool:
        """Whether every sample is identical (a dead layer)."""
        return _is_constant(self.X)

    def reject_constant(self, metric: str) -> None:
        """Raise DegenerateFeaturesError for ``metric`` when the layer is constant."""
        _reject_constant(self.X, metric, constant=self.constant)

    @property
    def on_device(self) -> bool:
        """Whether k-means and the probe run in torch on X's device (else scikit-learn on a host copy)."""
        return _on_device(self.checked, self.backend)

    def X_numpy(self) -> np.ndarray:
        """X as a CPU numpy array, copied from the device at most once per layer."""
        return self.shared("X_numpy", lambda layer: layer.checked.X_numpy())

    def keep_sample(self, name: str, values) -> None:
        """Keep what each sample contributed to ``name`` (N,) when the caller asked for samples."""
        if self.return_samples:       # N values, not features, cross to the host
            self.samples[name] = values.cpu().numpy() if hasattr(values, "cpu") else np.asarray(values)


@functools.lru_cache(maxsize=None)
def resolve(path: str) -> Callable:
    """The function a catalogue entry names as ``"module:function"``, imported on first use."""
    module, _, name = path.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"the catalogue names the function {path!r}, which does not exist ({exc}).") from exc


def option_default(metric: str, option: str):
    """The default of ``option`` of ``metric``, as :data:`lab.catalogue.METRICS` gives it."""
    return catalogue.METRICS[metric].options[option]


def columns(info: catalogue.MetricInfo, repeats: int) -> tuple[str, ...]:
    """The result columns of one metric: its name, plus ``<name>_std`` when repeated."""
    return (info.name, f"{info.name}_std") if info.repeatable and repeats > 1 else (info.name,)


def prepare(layer: LayerContext, requested: Iterable[tuple[catalogue.MetricInfo, Mapping]]) -> None:
    """Check the inputs and every requested metric's options before any metric is computed.

    Validates X and y once (X alone when no metric needs labels), each metric's samples per class,
    then runs each entry's ``check`` with its options, which also asks for the neighbours it will read.
    """
    requested = list(requested)
    if any("labels" in info.needs for info, _ in requested):
        layer.checked
    else:
        layer.X
    for info, options in requested:
        missing = [need for need in info.needs if need != "labels" and not layer.has_input(need)]
        if missing:
            raise ValueError(f"{info.name} needs {', '.join(map(repr, missing))} besides the features and labels; "
                             "none was given for this layer.")
        if info.per_class > 1:
            layer.require_per_class(info.per_class, info.name)
        if info.check:
            resolve(info.check)(layer, **options)


def evaluate(layer: LayerContext, info: catalogue.MetricInfo, options: Mapping, repeats: int = 1) -> dict[str, float]:
    """One prepared metric's columns (:func:`columns`); DegenerateFeaturesError when it is undefined."""
    function = resolve(info.function)
    if not info.repeatable:
        return {info.name: float(function(layer, **options))}
    values = [float(function(layer, **options, repeat=r)) for r in range(repeats)]
    out = {info.name: float(np.mean(values))}
    if repeats > 1:
        out[f"{info.name}_std"] = float(np.std(values, ddof=1))
    return out


def measure(name: str, X, y, *, protocol: str = "default", backend: str = "auto", **options) -> float:
    """One metric of X and y, as its public function gives it: checked, computed, raising when undefined."""
    info = catalogue.METRICS[name]
    layer = LayerContext(X, y, protocol=protocol, backend=backend)
    options = {**info.options, **options}
    prepare(layer, [(info, options)])
    return evaluate(layer, info, options)[name]
