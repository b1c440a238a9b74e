"""Every use the app makes of a private part of Panel, Bokeh or jupyter_bokeh, in one place.

Each read or patch below names the upstream behaviour it works around. The rest of the app calls the functions
here, never the private names. Checked against panel 1.9.4, bokeh 3.9.2 and jupyter_bokeh 4.1.0:
``tests/app/test_upstream_contract.py`` pins those versions and checks that every name used here still exists
with the signature and behaviour relied on; on an upgrade it fails and says what to check again.

JupyterLab 4.4+ sends comm messages to kernel subshells (ipykernel 7), so Panel's and jupyter_bokeh's handlers may
run on another thread than the one that flushes a run's updates. JupyterLab's public switch ``commsOverSubshells``
turns that off; ``make lab`` and environment.yml install an override that does (``jupyter-config/``, see
docs/development.md), and the JupyterLab browser test runs with it off and on. The comm handlers' document lock
(:func:`wrap_comm_handlers`) is only needed where it is on; it stays so that the app still works there.
"""
from __future__ import annotations

import contextlib
import functools
import threading

__all__ = ["unblocked", "notebook_doc", "widget_models", "register_notebook_view", "unregister_notebook_view",
           "apply_notebook_msg", "connected_pages", "walk_if_changed", "wrap_comm_handlers", "quiet_poll",
           "one_recompute", "defer_notebook_recomputes", "rewrite_stylesheet_urls", "SKIP_CSS_VISUALS",
           "BOKEHJS_PATCH_CLOCK", "BOKEHJS_RECOMPUTE_NOW"]

_MARK = "_layerscope_patched"       # on our wrappers: installing twice wraps once
_RECOMPUTE = threading.local()      # .pending: {id: DocumentModelManager} while a render defers its walks


# ---------------------------------------------------------------------- reads
def unblocked(doc) -> bool:
    """Whether this thread may change the served ``doc`` now, unscheduled (Panel's ``state._unblocked``: Panel has
    no public form of the test it makes before every change of a served document)."""
    import panel as pn

    return pn.state._unblocked(doc)


def notebook_doc(ref: str):
    """The document of the notebook view ``ref`` (Panel keeps ``ref -> (viewable, root, doc, comm)`` in
    ``state._views`` and offers no accessor; its comm handler reads it too); None when there is none."""
    from panel.io.state import state

    view = state._views.get(ref)
    return view[2] if view else None


def widget_models(widget) -> list:
    """The Bokeh models of every rendering of a Panel ``widget`` or pane (``Reactive._models``:
    ``ref -> (model, parent)``; Panel offers no public list of a component's models across renderings)."""
    return [model for model, _parent in list(widget._models.values())]


# ---------------------------------------------------------------------- a notebook view, as Panel's display makes it
# The tests drive the notebook path without a kernel or a browser: they register a view the way Panel's notebook
# display does and hand its comm handler a message, as the browser would. Panel offers neither publicly.
def register_notebook_view(ref: str, viewable, root, doc, comm) -> None:
    """Register the notebook view ``ref`` as Panel's notebook display does (``state._views``)."""
    from panel.io.state import state

    state._views[ref] = (viewable, root, doc, comm)


def unregister_notebook_view(ref: str) -> None:
    """Forget the notebook view ``ref`` (nothing when it is not registered)."""
    from panel.io.state import state

    state._views.pop(ref, None)


def connected_pages() -> dict:
    """Panel's table of the served documents a browser page has connected to (``state._connected``: Panel sends
    a document's held events only once its page is connected); the tests mark a document connected in it."""
    from panel.io.state import state

    return state._connected


def apply_notebook_msg(viewable, ref: str, manager, msg: dict) -> None:
    """Apply a browser's comm message to notebook view ``ref`` through Panel's handler
    (``MimeRenderMixin._on_msg``, with this module's patches when installed)."""
    from panel.viewable import MimeRenderMixin

    MimeRenderMixin._on_msg(viewable, ref, manager, msg)


def quiet_poll(callback, period_ms: int):
    """``pn.state.add_periodic_callback(callback, period_ms)``, but run in the background: it does not raise Panel's
    ``state.busy``. Every periodic callback raises it (``PeriodicCallback._periodic_callback``), and the template's
    busy indicator sends every page of the server two patches (its spinner on, then off) per call; BokehJS drops
    the models a replaced plot left behind only 30 s after its last patch (``Document.recompute_timeout``), so a
    poll every 5 s kept every dead model in the page. Panel's own ``background=True`` (its busy cleanup uses it) is
    a keyword of the constructor only, not of ``add_periodic_callback``; the attribute it sets is set here."""
    import panel as pn

    callback_ = pn.state.add_periodic_callback(callback, period=period_ms, start=False)
    callback_._background = True
    callback_.start()
    return callback_


# ---------------------------------------------------------------------- Bokeh's model manager
@contextlib.contextmanager
def walk_if_changed(doc):
    """Bokeh's ``doc.models.freeze()``, but the walk at its end only when the block may have added or dropped a model.

    Bokeh walks every model of the document when a freeze ends (``DocumentModelManager.recompute``), whether or not
    the block touched the model graph; a live view's flush that only sends new data to existing plots would walk the
    whole app. A block can change the graph only through what Bokeh itself routes through the manager: a change of a
    property whose old or new value holds a model calls ``invalidate`` (``Model.trigger``), and a root added or
    dropped, or a layout's children set by Panel (``panel.io.document.freeze_doc``), enters a freeze of its own. Either
    marks the block as changed; otherwise the models are the ones the last walk found, and the walk is skipped.
    Works around: the unconditional walk of bokeh 3.9's ``_pop_freeze`` (no public way to freeze without it)."""
    models = getattr(doc, "models", None)
    if models is None or models._freeze_count:      # no document, or already frozen: its freeze walks at its end
        yield
        return
    changed = False
    manager = type(models)

    def invalidate():                               # frozen, Bokeh's own would only defer the walk
        nonlocal changed
        changed = True

    def push_freeze():
        nonlocal changed
        changed = True
        manager._push_freeze(models)

    models.invalidate, models._push_freeze = invalidate, push_freeze
    models._freeze_count += 1
    try:
        yield
    finally:
        del models.invalidate, models._push_freeze
        models._freeze_count -= 1
        if changed and models._freeze_count == 0:
            models.recompute()


# ---------------------------------------------------------------------- comm handlers (notebooks)
class _FilteredManager:
    """Panel's comm manager, whose assembled patches pass through ``keep`` (it edits them in place) before Panel's
    ``_on_msg`` applies them: the one step between a browser's message and the document Panel exposes."""

    def __init__(self, manager, keep):
        self._manager, self._keep = manager, keep

    def assemble(self, msg):
        patch = self._manager.assemble(msg)
        self._keep(patch)
        return patch


def wrap_comm_handlers(receiving, filter_patch, on_send) -> None:
    """Wrap the notebook comm handlers of Panel and jupyter_bokeh (idempotent; before any view is displayed, since
    handlers bind then).

    ``receiving(doc)``: a context manager held while either library applies a browser's message to ``doc`` (the
    document's lock: with ``commsOverSubshells`` on, JupyterLab delivers these on a subshell thread while the
    kernel's main thread flushes a run's updates; and the mark that tells the browser's changes from the kernel's).
    ``filter_patch(patch)``: edits a browser's patch before Panel applies it (Panel's notebook view echoes every
    change the kernel made back to it, without the ``sync`` check a served session makes: panel 1.9).
    ``on_send(msg)``: sees every patch Panel pushes to a notebook's browser (``panel.io.notebook.send``), which
    has no public hook.
    """
    from panel.viewable import MimeRenderMixin

    original = MimeRenderMixin._on_msg
    if not getattr(original, _MARK, False):
        @functools.wraps(original)
        def _on_msg(self, ref, manager, msg):
            with receiving(notebook_doc(ref)):
                return original(self, ref, _FilteredManager(manager, filter_patch), msg)

        setattr(_on_msg, _MARK, True)
        MimeRenderMixin._on_msg = _on_msg

    import panel.io.notebook as notebook

    send = notebook.send
    if not getattr(send, _MARK, False):
        @functools.wraps(send)
        def _send(comm, msg):
            on_send(msg)
            return send(comm, msg)

        setattr(_send, _MARK, True)
        notebook.send = _send

    try:
        from jupyter_bokeh.widgets import BokehModel
    except ImportError:          # the ipywidgets route is optional
        return
    handle = BokehModel._handle_msg
    if not getattr(handle, _MARK, False):
        @functools.wraps(handle)
        def _handle_msg(self, msg):     # jupyter_bokeh applies the browser's message on the receiving thread
            with receiving(getattr(getattr(self, "_model", None), "document", None)):
                return handle(self, msg)

        setattr(_handle_msg, _MARK, True)
        BokehModel._handle_msg = _handle_msg


# ---------------------------------------------------------------------- notebook rendering
@contextlib.contextmanager
def one_recompute():
    """Defer the calling thread's document recomputations until the block ends; then one per document
    (needs :func:`defer_notebook_recomputes`)."""
    if getattr(_RECOMPUTE, "pending", None) is not None:    # nested: the outermost block recomputes
        yield
        return
    _RECOMPUTE.pending = pending = {}
    try:
        yield
    finally:
        _RECOMPUTE.pending = None
        for manager in pending.values():
            manager.invalidate()


def defer_notebook_recomputes() -> None:
    """Make Panel's notebook rendering recompute each document once (idempotent; :func:`app.extension`).

    Works around: with inline resources panel 1.9's ``_repr_mimebundle_`` swaps every UI model's stylesheets after
    the models joined their document (``patch_inline_stylesheets``); each swap makes Bokeh walk the whole document
    (``DocumentModelManager.invalidate``), quadratic in the models: ``LayerScope()`` showed in 34 s on 2 cores,
    3.2 s with one walk. Bokeh's ``models.freeze()`` would do, but Panel makes the document inside the call, so
    ``invalidate`` defers on the rendering thread only (other threads' documents stay current)."""
    from bokeh.document.models import DocumentModelManager
    from panel.viewable import Viewable

    invalidate = DocumentModelManager.invalidate
    if not getattr(invalidate, _MARK, False):
        @functools.wraps(invalidate)
        def deferring(self):
            pending = getattr(_RECOMPUTE, "pending", None)
            if pending is None:
                return invalidate(self)
            pending[id(self)] = self

        setattr(deferring, _MARK, True)
        DocumentModelManager.invalidate = deferring
    render = Viewable._repr_mimebundle_
    if not getattr(render, _MARK, False):
        @functools.wraps(render)
        def batched(self, *args, **kwargs):
            with one_recompute():
                return render(self, *args, **kwargs)

        setattr(batched, _MARK, True)
        Viewable._repr_mimebundle_ = batched


# ---------------------------------------------------------------------- stylesheets (offline)
def rewrite_stylesheet_urls(rewrite) -> None:
    """Serialize every ``bokeh.models.ImportedStyleSheet`` with ``rewrite(url)`` in place of its URL where that
    returns one (None: the URL stays); ``rewrite=None`` removes the hook.

    Works around: panel 1.9 leaves its components' CSS as CDN links (``cdn.holoviz.org``) for every model made
    after a notebook's first render, even with ``inline=True``; every document message serializes through
    ``to_serializable`` (the first render, later patches, the ipywidgets route), and no public hook reaches them all.
    """
    from bokeh.models import ImportedStyleSheet

    if "to_serializable" in ImportedStyleSheet.__dict__:
        del ImportedStyleSheet.to_serializable              # back to the inherited Model method
    if rewrite is None:
        return
    original = ImportedStyleSheet.to_serializable

    def to_serializable(self, serializer):
        rep = original(self, serializer)
        attributes = rep.get("attributes") or {}
        local = rewrite(attributes.get("url"))
        if local is not None:
            attributes["url"] = local
        return rep

    ImportedStyleSheet.to_serializable = to_serializable


# ---------------------------------------------------------------------- BokehJS (in the browser)
# Works around: BokehJS 3.9 asks getComputedStyle for every visual property it paints (``_get_css_value`` of
# ``core/visuals/visual``'s VisualProperties), though no stylesheet sets one: bokeh/bokeh#15286 (open; PR #15205
# caches the lookups, in no release yet). :mod:`app.base._css_visuals` sends it to served pages and notebooks.
SKIP_CSS_VISUALS = """
(() => {
  const skip = () => {
    const bokeh = window.Bokeh;
    if (bokeh == null || typeof bokeh.require !== "function") return false;
    let visual;
    try { visual = bokeh.require("core/visuals/visual"); } catch (err) { return true; }  // another BokehJS
    const proto = visual && visual.VisualProperties && visual.VisualProperties.prototype;
    if (proto && typeof proto._get_css_value === "function" && !proto._get_css_value.layerscope) {
      const answer = function () { return ""; };
      answer.layerscope = true;
      proto._get_css_value = answer;
    }
    window.__layerscopeCssVisuals = Boolean(proto && proto._get_css_value.layerscope);
    return true;
  };
  if (!skip()) {                                   // a notebook: BokehJS may still be loading
    const timer = setInterval(() => { if (skip()) clearInterval(timer); }, 50);
    setTimeout(() => clearInterval(timer), 120000);
  }
})();
"""
"""Answers BokehJS's CSS lookup at once; idempotent; sets ``window.__layerscopeCssVisuals`` (true once the lookups are skipped)."""


# ---------------------------------------------------------------------- BokehJS, read by the page-growth measure
BOKEHJS_PATCH_CLOCK = """() => {
  // count the patches the server sends the page, and when the last one came (apply_json_patch is BokehJS's one
  // entry for a server's PATCH-DOC; each call restarts the document's wait before it drops dead models)
  const doc = Bokeh.documents[0];
  if (doc.__patchClock) return;
  const apply = doc.apply_json_patch.bind(doc);
  window.__patches = 0;
  window.__lastPatch = performance.now();
  doc.apply_json_patch = (...args) => { window.__patches++; window.__lastPatch = performance.now();
                                        return apply(...args); };
  doc.__patchClock = true;
}"""
"""JavaScript for ``page.evaluate``: from now on, ``window.__patches`` counts the page's patches and
``window.__lastPatch`` is when the last came (``performance.now()``)."""

BOKEHJS_RECOMPUTE_NOW = """() => { Bokeh.documents[0]._recompute_all_models();
                                  return Bokeh.documents[0].all_models.size; }"""
"""JavaScript for ``page.evaluate``: what BokehJS's document does once ``recompute_timeout`` (30 s) has passed with
no patch (``Document._recompute_all_models``: drop every model no root references), done now; the models left.
A measure that has seen the page receive no patch for longer than every periodic callback's period learns what
the page holds once quiet without waiting the 30 s out."""
