"""Showing a view in a notebook in seconds: one model recomputation per document, not one per stylesheet.

With inline resources (:func:`app.extension`, which works offline) Panel's ``_repr_mimebundle_`` swaps
every UI model's imported stylesheets for inline ones after the models have joined their document
(panel 1.9, ``patch_inline_stylesheets``). Each swap changes a reference property, and Bokeh then walks
the whole document again (``DocumentModelManager.invalidate`` -> ``recompute``): quadratic in the number
of models. ``LayerScope()`` has about 350 UI models; measured on 2 cores, showing it took 34 s, of which
these walks took over 90 %, and 3.2 s with one walk per document at the end (same output, 2.36 MB).
Bokeh's own ``models.freeze()`` is the remedy, but Panel makes the document inside the call, so the
walks are deferred here around the call instead, for the calling thread only (a run's updates on other
threads keep their documents current).
"""
from __future__ import annotations

import contextlib
import functools
import threading

__all__ = ["one_recompute", "install"]

_MARK = "_layerscope_one_recompute"
_STATE = threading.local()


@contextlib.contextmanager
def one_recompute():
    """Defer the calling thread's document recomputations until the block ends; then one per document."""
    outer = getattr(_STATE, "pending", None)
    if outer is not None:                       # nested: the outermost block recomputes
        yield
        return
    _STATE.pending = pending = {}
    try:
        yield
    finally:
        _STATE.pending = None
        for manager in pending.values():
            manager.invalidate()


def _deferring(invalidate):
    @functools.wraps(invalidate)
    def wrapper(self):
        pending = getattr(_STATE, "pending", None)
        if pending is None:
            return invalidate(self)
        pending[id(self)] = self
    setattr(wrapper, _MARK, True)
    return wrapper


def _batched(render):
    @functools.wraps(render)
    def wrapper(self, *args, **kwargs):
        with one_recompute():
            return render(self, *args, **kwargs)
    setattr(wrapper, _MARK, True)
    return wrapper


def install() -> None:
    """Make Panel's notebook rendering recompute each document once (idempotent; :func:`app.extension`)."""
    from bokeh.document.models import DocumentModelManager
    from panel.viewable import Viewable

    if not getattr(DocumentModelManager.invalidate, _MARK, False):
        DocumentModelManager.invalidate = _deferring(DocumentModelManager.invalidate)
    if not getattr(Viewable._repr_mimebundle_, _MARK, False):
        Viewable._repr_mimebundle_ = _batched(Viewable._repr_mimebundle_)
