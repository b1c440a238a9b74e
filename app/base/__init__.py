"""What every view of the app shares; no tab of its own.

The notebook set-up :func:`extension` and the process-wide :func:`shared` resources (device locks,
dataset cache) live in :mod:`app.base.resources`; :mod:`app.base.plots` is the one plotting module
of the app and of every notebook (``from app import plots``). The private modules keep a session's
document safe from other threads (``_doclock``, ``_dispatch``, ``_redraw``), show notifications
(``_notify``), serve hover thumbnails (``_thumbs``) and hold the plots' shared style
(``_plot_style``). Importing this package loads no UI library; the plot module loads HoloViews.
"""
from .resources import extension, shared

__all__ = ["extension", "shared"]
