"""What every view of the app shares; no tab of its own.

The notebook set-up :func:`extension` and the process-wide :func:`shared` resources (device locks,
dataset cache) live in :mod:`app.base.resources`; :mod:`app.base.plots` is the one plotting module
of the app and of every notebook (``from app import plots``). The views import what they share from
here: :class:`DocDispatcher` and :class:`RedrawQueue` keep a session's document safe from other
threads (``_dispatch``, ``_redraw``, with ``_doclock``; ``_share`` paces every session's redraws on the server's
one event loop, and gives a new page priority); ``_upstream_panel`` is the one module that touches Panel's, Bokeh's
and jupyter_bokeh's private parts (tests/app/test_upstream_contract.py; :func:`quiet_poll` polls without the
busy spinner's patches), :func:`skip_css_visuals` lets a served page's plots paint
without asking the page's CSS for every line (``_css_visuals``; :func:`extension` does it in a notebook),
:func:`notify` shows a notification (``_notify``), :func:`one_update` sends a browser-triggered handler's changes
as one update (``_dispatch``), :class:`ThumbnailSource` serves hover thumbnails
(``_thumbs``), :func:`wrap_row` lays items out side by side, wrapping, where plots may sit (``_wrap``; not
``pn.FlexBox``, which blanks the plots inside), and :func:`lazy_exports` gives a view's package names that
load on first use; ``_plot_style`` holds the plots' shared style. Importing this package loads no UI
library; the names that need Panel load it on first use, and the plot module loads HoloViews.
"""
from lab.lazy import lazy_exports

from .resources import extension, shared

__all__ = ["extension", "shared", "lazy_exports", "DocDispatcher", "RedrawQueue", "ThumbnailSource", "array_thumbnails",
           "notify", "one_update", "page_loading", "quiet_poll", "release_memory", "freeze_imports", "skip_css_visuals",
           "wrap_row", "KEEP_SIZE"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "DocDispatcher": "._dispatch:DocDispatcher", "RedrawQueue": "._redraw:RedrawQueue",
    "ThumbnailSource": "._thumbs:ThumbnailSource", "array_thumbnails": "._thumbs:array_thumbnails",
    "notify": "._notify:notify", "one_update": "._dispatch:one_update", "page_loading": "._share:page_loading",
    "skip_css_visuals": "._css_visuals:skip_css_visuals", "quiet_poll": "._upstream_panel:quiet_poll",
    "release_memory": "._memory:release_memory",
    "freeze_imports": "._memory:freeze_imports",
    "wrap_row": "._wrap:wrap_row", "KEEP_SIZE": "._wrap:KEEP_SIZE",
})
