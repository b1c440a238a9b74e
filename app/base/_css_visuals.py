"""Plots that paint without asking the page's CSS for every line and fill: BokehJS's CSS lookup, answered at once.

BokehJS 3 lets a stylesheet restyle a glyph through CSS custom properties (``--bk-line-color`` and the like).
To allow it, every visual property it reads while painting (each line's color, alpha, width, join, cap, dash;
each fill's and text's) first asks ``getComputedStyle(el).getPropertyValue(...)``; in a page of many plots and
widgets each ask can force the browser to recompute the page's styles. No stylesheet of Bokeh, Panel, HoloViews
or this app defines such a property (``tests/app/test_css_visuals.py`` checks), so every ask answers "", and the
asking cost the state walk's Chromium renderer 40 % of its CPU (``benchmarks/results/css_visuals.txt``, with
``benchmarks/css_visuals.py``). :data:`SKIP_CSS_VISUALS` makes the ask answer "" without the lookup on
layerscope's pages; the models' own values then paint, as they did. Upstream: bokeh/bokeh#15286 (open);
PR #15205 caches the lookups, in no release yet (3.9.2 is the newest). Where BokehJS lacks the method
(another version), the script changes nothing. The script replaces BokehJS's private method, so it lives in
:mod:`app.base._upstream_panel`.
"""
from __future__ import annotations

from ._upstream_panel import SKIP_CSS_VISUALS

__all__ = ["SKIP_CSS_VISUALS", "skip_css_visuals", "skip_css_visuals_in_notebook"]



def skip_css_visuals(doc) -> None:
    """Run :data:`SKIP_CSS_VISUALS` in the browser of the served session ``doc`` once its page is ready;
    nothing outside a served session (a notebook gets it from :func:`skip_css_visuals_in_notebook`)."""
    if doc is None or getattr(doc, "session_context", None) is None:
        return
    from bokeh.models import CustomJS

    doc.js_on_event("document_ready", CustomJS(code=SKIP_CSS_VISUALS))


def skip_css_visuals_in_notebook() -> None:
    """Send :data:`SKIP_CSS_VISUALS` to the notebook's page the way Panel sends BokehJS (HoloViz's loader mime
    type, which JupyterLab's pyviz extension runs; plain JavaScript for the classic notebook)."""
    from IPython.display import publish_display_data

    publish_display_data({"application/javascript": SKIP_CSS_VISUALS,
                          "application/vnd.holoviews_load.v0+json": SKIP_CSS_VISUALS})
