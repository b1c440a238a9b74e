"""How the live view draws each stream's data: the DynamicMap callbacks of its plots.

Each callback turns one stream's payload (:mod:`app.live._streams`) into a HoloViews element with the
app's plot builders, read against the run the view shows at the time it draws (the view's model changes
with each run, hence the callable).
"""
from __future__ import annotations

from typing import Callable

from app.base import plots
from app.compare import similarity_plots

from ._model import RunModel
from ._panes import CURVE_WIDTH

__all__ = ["LiveRenderers"]


class LiveRenderers:
    """The live view's renderers, bound to ``model``: a callable returning the run model shown now."""

    def __init__(self, model: Callable[[], RunModel]):
        self._model = model

    def curves(self, data, metric, splits):
        m = self._model()
        return plots.metric_curves(data, metric=metric, splits=splits, layers=list(m.layers),
                                   n_epochs=m.n_epochs, band=len(m.seeds) > 1,
                                   interval="low" in data, width=CURVE_WIDTH, responsive=True,
                                   epochs=m.curve_epochs(), axis=m.axis)

    def heatmap(self, data):
        m = self._model()
        return plots.heatmap(data["frame"], metric=data["metric"], split=data["split"],
                             layers=list(m.layers), width=plots.HEATMAP_WIDTH, responsive=True, axis=m.axis)

    def training(self, data, which, seeds):
        return plots.training_curves(data, seeds=seeds, which=which, width=280, responsive=True,
                                     axis=self._model().axis)

    def utilization(self, data, layers):
        return plots.utilization_bars(data, layers=layers, width=360, responsive=True, axis=self._model().axis)

    def cka(self, data, layers):
        m = self._model()
        return similarity_plots.initial_curves(data, layers=layers, n_epochs=m.n_epochs, width=360,
                                               responsive=True, epochs=m.curve_epochs(), axis=m.axis)
