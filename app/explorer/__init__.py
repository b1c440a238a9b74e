"""The embedding explorer: a 2-D layout of up to 100k points per layer, with hover thumbnails and a
lasso selection linked across layers and epochs.

:class:`EmbeddingView` is the component (``EmbeddingView.from_arrays`` for any (N, 2) layout, or a
run's stored or live layouts); ``_data`` checks and holds the layouts and finds lasso hits, ``_plot``
builds the Datashader and HoloViews elements.
"""
from app.base import lazy_exports

__all__ = ["EmbeddingView", "StoredLayouts", "no_layouts", "warm_up", "warm_up_in_background"]
__getattr__, __dir__ = lazy_exports(__name__, {"EmbeddingView": ".embedding:EmbeddingView",
                                               "StoredLayouts": "._data:StoredLayouts", "no_layouts": "._data:no_layouts",
                                               "warm_up": "._plot:warm_up",
                                               "warm_up_in_background": "._plot:warm_up_in_background"})
