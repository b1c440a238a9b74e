"""layerscope's Panel app: views only; every number comes from :mod:`lab`.

Serve it with ``panel serve app`` (http://localhost:5006/app), or use the
components inline in JupyterLab::

    import app
    from app import LayerScope
    app.extension()                      # offline: JS and CSS from the installed packages
    LayerScope()                         # or pn.ipywidget(LayerScope()) (VS Code, Colab, Voilà)
    app.EmbeddingView.from_arrays(coords, labels, images=images)   # any (N, 2) layout, up to 100k points

Submodules load lazily so that Bokeh's directory-app loader (which executes
this file at server start) does not import the whole app twice.
"""
from __future__ import annotations

import importlib

__all__ = ["LayerScope", "ConfigPanel", "EmbeddingView", "LiveView", "RunControl", "RunsPanel", "extension"]

_EXPORTS = {
    "LayerScope": "app.layerscope",
    "ConfigPanel": "app.config_panel",
    "EmbeddingView": "app.embedding",
    "LiveView": "app.live",
    "RunControl": "app.runner",
    "RunsPanel": "app.runs_panel",
    "extension": "app.resources",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'app' has no attribute {name!r}")


def __dir__():
    return __all__
