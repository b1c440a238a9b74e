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
``studies`` (the Studies tab), ``collapse`` (the Neural collapse card), on a small shared ``base``; ``layerscope`` composes them into tabs.
The names below are the public ones, wherever their module lives; so are the plot modules that
notebooks draw with (``from app import plots``, ``similarity_plots``, ``study_plots``), which
exported notebooks import by these names.

Submodules load lazily so that Bokeh's directory-app loader (which executes
this file at server start) does not import the whole app twice.
"""
from __future__ import annotations

from lab.lazy import lazy_exports

__all__ = ["LayerScope", "ConfigPanel", "EmbeddingView", "CollapseView", "LiveView", "RunControl", "RunsPanel", "extension",
           "plots", "similarity_plots", "study_plots"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "LayerScope": "app.layerscope:LayerScope",
    "ConfigPanel": "app.choose:ConfigPanel",
    "EmbeddingView": "app.explorer:EmbeddingView",
    "CollapseView": "app.collapse:CollapseView",
    "LiveView": "app.live:LiveView",
    "RunControl": "app.live:RunControl",
    "RunsPanel": "app.compare:RunsPanel",
    "extension": "app.base:extension",
    "plots": "app.base.plots",
    "similarity_plots": "app.compare.similarity_plots",
    "study_plots": "app.studies.study_plots",
})
