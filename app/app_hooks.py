"""Bokeh server hooks of the directory app (``panel serve app``).

At server start: make the checkout importable, import the heavy libraries once
(so the first Run does not pay for them) and start umap's JIT warm-up in the
background (:func:`app.base.resources.warm_up`), then take what was imported out of the
garbage collector's walks (:func:`app.base.freeze_imports`). Datashader's kernels are compiled
only when a run whose layouts will be rasterized starts (the live view calls
:func:`app.explorer.warm_up_in_background` at its RunStarted).
"""
import logging
import sys
import threading
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)


def _preload():
    try:
        import lab.runs  # noqa: F401  (torch, timm, the engine)
        import lab.data  # noqa: F401
        import lab.metrics  # noqa: F401
        import app.layerscope  # noqa: F401  (Panel, HoloViews' Bokeh plotting: what every session imports)
        from app.base import freeze_imports
        from app.base.resources import warm_up

        warm_up()
        freeze_imports()        # every opening's collection then walks what sessions made, not the imports
    except Exception as exc:  # the app still works; the first run just starts slower
        logging.getLogger("layerscope").warning("preload failed: %s", exc)


def on_server_loaded(server_context):
    if _ROOT not in sys.path:
        sys.path.insert(0, _ROOT)
    threading.Thread(target=_preload, name="layerscope-preload", daemon=True).start()
