"""layerscope's Panel app: views only; every number comes from :mod:`lab`.

Serve it with ``panel serve app`` (http://localhost:5006/app), or use the
components inline in JupyterLab::

    import app
    from app import LayerScope
    app.extension()                      # offline: JS and CSS from the installed packages
    LayerScope()                         # or pn.ipywidget(LayerScope()) (VS Code, Colab, Voilà)
    app.EmbeddingView.from_arrays(coords, labels, images=images)   # any (N, 2) layout, up to 100k points

The app is one package per thing a user sees: ``choose`` (the Choose form), ``live`` (the live
view and Run/Stop), ``explorer`` (the embedding explorer), ``compare`` (Compare & export),
``studies`` (the Studies tab), on a small shared ``base``; ``layerscope`` composes them into tabs.
The names below are the public ones, wherever their module lives; so are the plot modules that
notebooks draw with (``from app import plots``, ``similarity_plots``, ``study_plots``), which
exported notebooks import by these names.

Submodules load lazily so that Bokeh's directory-app loader (which executes
this file at server start) does not import the whole app twice.
"""
from __future__ import annotations

import importlib

__all__ = ["LayerScope", "ConfigPanel", "EmbeddingView", "LiveView", "RunControl", "RunsPanel", "extension",
           "plots", "similarity_plots", "study_plots"]

_EXPORTS = {
    "LayerScope": "app.layerscope",
    "ConfigPanel": "app.choose",
    "EmbeddingView": "app.explorer",
    "LiveView": "app.live",
    "RunControl": "app.live",
    "RunsPanel": "app.compare",
    "extension": "app.base",
}
_MODULES = {
    "plots": "app.base.plots",
    "similarity_plots": "app.compare.similarity_plots",
    "study_plots": "app.studies.study_plots",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    raise AttributeError(f"module 'app' has no attribute {name!r}")


def __dir__():
    return __all__
