"""Compare & export: the stored runs side by side, compared layer by layer, exported to notebooks.

:class:`RunsPanel` is the tab (the runs as a searchable table, overlaid curves, the embedding
explorer of a selected run, delete, notebook export); :mod:`app.compare.similarity_plots` draws
linear CKA between layers and runs, in the app and in exported notebooks
(``from app import similarity_plots``).
"""
from app.base import lazy_exports

__all__ = ["RunsPanel"]
__getattr__, __dir__ = lazy_exports(__name__, {"RunsPanel": ".runs_panel:RunsPanel"})
