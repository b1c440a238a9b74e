"""The contract of :mod:`app.base._upstream_panel` with Panel, Bokeh, jupyter_bokeh (and ipywidgets under it), and of
the JupyterLab settings override that turns ``commsOverSubshells`` off.

Each private name the app reads or patches is checked here for what the patch relies on: that it exists, its
signature, and the behaviour the patch assumes. :data:`CHECKED` pins the versions these checks were made against;
an upgrade fails :func:`test_installed_versions_are_the_checked_ones` with what to check again, and the other tests
say which assumption broke.
"""
from __future__ import annotations

import inspect
import json
from importlib.metadata import version
from pathlib import Path

import pytest

from app.base import _upstream_panel as upstream
from tests.fixtures.paths import REPO

CHECKED = {"panel": "1.9.4", "bokeh": "3.9.2", "jupyter_bokeh": "4.1.0", "ipywidgets": "8.1.9",
           "ipykernel": "7.4.0", "jupyterlab": "4.6.6"}
"""The versions every check below was made against (``pip show``)."""

RECHECK = {
    "panel": "MimeRenderMixin._on_msg, panel.io.notebook.send, state._views, state._unblocked, state._connected, "
             "Widget._models, "
             "Viewable._repr_mimebundle_ (and whether panel now freezes or checks sync itself: then drop the patch)",
    "bokeh": "DocumentModelManager._freeze_count/_push_freeze/invalidate/recompute, ImportedStyleSheet.to_serializable",
    "jupyter_bokeh": "BokehModel._handle_msg (ipywidgets' Widget._handle_msg) and BokehModel._model",
    "ipywidgets": "Widget._handle_msg as the comm's message handler",
    "ipykernel": "whether comm handlers still run on subshell threads (app/base/_doclock.py)",
    "jupyterlab": "the commsOverSubshells setting of @jupyterlab/apputils-extension:kernels-settings and overrides.d",
}


def _params(func) -> list[str]:
    return list(inspect.signature(func).parameters)        # follows functools.wraps to the original


def _original(func):
    return getattr(func, "__wrapped__", func)


def test_installed_versions_are_the_checked_ones():
    changed = {name: version(name) for name in CHECKED if version(name) != CHECKED[name]}
    assert not changed, "\n".join(
        f"{name} is {now}, app/base/_upstream_panel.py was checked against {CHECKED[name]}: check again {RECHECK[name]};"
        f" then set CHECKED[{name!r}] in {Path(__file__).name}" for name, now in changed.items())


# ---------------------------------------------------------------------- Panel
def test_panel_on_msg_reads_its_view_and_applies_the_managers_patch():
    """``wrap_comm_handlers`` wraps ``MimeRenderMixin._on_msg(self, ref, manager, msg)``: it finds the document as
    ``state._views[ref][2]`` (``notebook_doc``) and filters the patch ``manager.assemble(msg)`` returns before
    Panel applies it to that document."""
    from bokeh.document import Document
    from panel.io.state import state
    from panel.viewable import MimeRenderMixin

    assert _params(MimeRenderMixin._on_msg) == ["self", "ref", "manager", "msg"]
    doc, ref, applied = Document(), "layerscope-contract-view", []

    class Patch:
        def apply_to_document(self, document, setter=None):
            applied.append(document)

    class Manager:
        def assemble(self, msg):
            return Patch()

    state._views[ref] = (None, None, doc, None)
    try:
        assert upstream.notebook_doc(ref) is doc
        _original(MimeRenderMixin._on_msg)(None, ref, Manager(), {"content": {"events": []}})
    finally:
        del state._views[ref]
    assert applied == [doc], "panel's _on_msg no longer applies manager.assemble(msg) to state._views[ref]'s document"


def test_panel_registers_every_rendered_root_in_state_views():
    import panel as pn
    from bokeh.document import Document
    from panel.io.state import state

    doc = Document()
    root = pn.pane.Markdown("x").get_root(doc)
    ref = root.ref["id"]
    try:
        view = state._views.get(ref)
        assert isinstance(view, tuple) and len(view) == 4 and view[1] is root, view
        assert upstream.notebook_doc(ref) is doc
    finally:
        state._views.pop(ref, None)


def test_panel_pushes_every_notebook_patch_through_the_module_level_send():
    """``wrap_comm_handlers`` replaces ``panel.io.notebook.send(comm, msg)``; Panel's ``push`` must look it up by
    name at call time, or the wrapper never sees a patch."""
    import panel.io.notebook as notebook

    assert _params(notebook.send) == ["comm", "msg"]
    assert "send" in notebook.push.__code__.co_names, "panel.io.notebook.push no longer calls send(comm, msg)"


def test_panel_unblocked_tells_the_current_documents_thread():
    from bokeh.document import Document
    from panel.io.state import set_curdoc, state

    assert _params(state._unblocked) == ["doc"]
    doc = Document()
    assert upstream.unblocked(doc) is False              # not the document being processed
    with set_curdoc(doc):
        assert upstream.unblocked(doc) is True


def test_panel_connected_pages_is_the_table_unblocked_reads_for_a_served_document():
    """``connected_pages()`` (``state._connected``): a served document counts as loaded once it is in it, which is
    what the tests mark to have Panel send a document's held events."""
    from weakref import WeakKeyDictionary

    from panel.io.state import state

    assert isinstance(upstream.connected_pages(), WeakKeyDictionary)
    assert upstream.connected_pages() is state._connected
    assert "_connected" in type(state)._unblocked.__code__.co_names, "state._unblocked no longer reads _connected"


def test_panel_notebook_view_helpers_register_and_forget_a_view():
    from bokeh.document import Document

    doc = Document()
    upstream.register_notebook_view("contract-view", None, None, doc, None)
    try:
        assert upstream.notebook_doc("contract-view") is doc
    finally:
        upstream.unregister_notebook_view("contract-view")
    assert upstream.notebook_doc("contract-view") is None


def test_panel_widget_models_lists_every_rendering():
    import panel as pn
    from bokeh.document import Document

    widget = pn.widgets.IntSlider(start=0, end=3)
    roots = [widget.get_root(Document()) for _ in range(2)]
    assert set(map(id, upstream.widget_models(widget))) == set(map(id, roots))
    assert all(isinstance(v, tuple) and len(v) == 2 for v in widget._models.values())


def test_panel_renders_a_notebook_view_through_repr_mimebundle():
    from panel.viewable import Viewable

    assert _params(Viewable._repr_mimebundle_) == ["self", "include", "exclude"]
    source = inspect.getsource(_original(Viewable._repr_mimebundle_))
    assert "patch_inline_stylesheets" in source, (
        "panel's _repr_mimebundle_ no longer swaps stylesheets after rendering: "
        "defer_notebook_recomputes may be unnecessary (measure LayerScope()'s display time)")


def _run_once(callback) -> None:
    """One call of a Panel periodic callback as its timer makes it (outside a session: no document)."""
    import asyncio

    asyncio.run(callback._periodic_callback())


def test_panel_periodic_callbacks_raise_busy_unless_in_the_background():
    """``quiet_poll`` sets ``PeriodicCallback._background`` (what the constructor's ``background=True`` sets): a
    periodic callback raises ``state.busy`` while it runs (the template's spinner, two patches per call), one in
    the background does not."""
    import panel as pn
    from panel.io.callbacks import PeriodicCallback

    assert PeriodicCallback(callback=lambda: None, background=True)._background is True
    assert PeriodicCallback(callback=lambda: None)._background is False
    seen = []
    loud = pn.state.add_periodic_callback(lambda: seen.append(pn.state.busy), period=10_000, start=False)
    loud.running = True
    _run_once(loud)
    quiet = upstream.quiet_poll(lambda: seen.append(pn.state.busy), period_ms=10_000)
    try:
        assert quiet._background is True and quiet.running
        _run_once(quiet)
    finally:
        quiet.stop()
        loud.stop()
    assert seen == [True, False], "panel's busy flag no longer follows PeriodicCallback._background: see quiet_poll"
    assert pn.state.busy is False


# ---------------------------------------------------------------------- Bokeh
def test_bokehjs_drops_unreferenced_models_only_after_its_recompute_timeout():
    """Why ``quiet_poll`` exists: BokehJS adds the models a patch brings and drops the unreferenced ones only in a
    recompute put off until ``recompute_timeout`` (30 s) after the last patch, each patch restarting the wait."""
    from bokeh.util.paths import bokehjs_path

    code = (Path(bokehjs_path()) / "js" / "bokeh.js").read_text(encoding="utf-8")
    assert "this._recompute_timeout = options.recompute_timeout ?? 30000;" in code, (
        "BokehJS's document no longer waits 30 s before dropping dead models: quiet_poll may be unnecessary "
        "(measure benchmarks/page_growth.py)")
    assert "this._cancel_recompute_all_models();\n                this._recompute_timer = setTimeout(" in code
    # BOKEHJS_RECOMPUTE_NOW calls the timer's function; BOKEHJS_PATCH_CLOCK wraps the one entry of a server patch
    assert "this._recompute_timer = setTimeout(() => {\n                    this._recompute_all_models();" in code
    assert "_recompute_all_models() {\n            this._cancel_recompute_all_models();" in code
    assert "        apply_json_patch(patch, buffers = new Map()) {" in code
    assert "this.document.apply_json_patch(message.content, message.buffers);" in code   # the PATCH-DOC handler


def test_bokeh_model_manager_freezes_through_the_names_walk_if_changed_replaces():
    from bokeh.document import Document
    from bokeh.document.models import DocumentModelManager
    from bokeh.models import Div

    for name in ("invalidate", "recompute", "_push_freeze", "_pop_freeze"):
        assert _params(getattr(DocumentModelManager, name)) == ["self"], name
    doc = Document()
    assert doc.models._freeze_count == 0
    with doc.models.freeze():
        assert doc.models._freeze_count == 1
    # walk_if_changed: a value sent walks nothing; a model added (through the instance's invalidate or
    # _push_freeze) is found by the one walk at the end
    div = Div(text="a")
    doc.add_root(div)
    walks = []
    original = DocumentModelManager.recompute
    DocumentModelManager.recompute = lambda self: (walks.append(self), original(self))[1]
    try:
        with upstream.walk_if_changed(doc):
            div.text = "b"
        assert walks == []
        with upstream.walk_if_changed(doc):
            doc.add_root(Div(text="c"))
            assert len(list(doc.models)) == 1, "bokeh walked the models inside the block"
        assert len(walks) == 1 and len(list(doc.models)) == 2
    finally:
        DocumentModelManager.recompute = original
    assert "invalidate" not in vars(doc.models) and "_push_freeze" not in vars(doc.models)


def test_bokeh_imported_stylesheet_serializes_its_url_through_the_inherited_method():
    """``rewrite_stylesheet_urls`` sets and deletes ``ImportedStyleSheet.to_serializable``: Bokeh must not define
    its own there (deleting it would remove Bokeh's), and the serialized form must carry ``attributes.url``."""
    from bokeh.core.serialization import Serializer
    from bokeh.models import ImportedStyleSheet

    from app.base.resources import _OFFLINE

    assert not _OFFLINE["on"] or "to_serializable" in vars(ImportedStyleSheet)
    original = ImportedStyleSheet.to_serializable if not _OFFLINE["on"] else ImportedStyleSheet.__mro__[1].to_serializable
    assert _params(original) == ["self", "serializer"]
    if not _OFFLINE["on"]:
        assert "to_serializable" not in vars(ImportedStyleSheet), "bokeh now defines ImportedStyleSheet.to_serializable"
    rep = original(ImportedStyleSheet(url="https://example.org/a.css"), Serializer(deferred=False))
    assert rep["attributes"]["url"] == "https://example.org/a.css"


def test_bokehjs_asks_its_css_lookup_that_skip_css_visuals_answers():
    """``SKIP_CSS_VISUALS`` replaces ``VisualProperties.prototype._get_css_value`` of BokehJS's
    ``core/visuals/visual``; the installed bundle must define that module and paint through that method."""
    from bokeh.util.paths import bokehjs_path

    code = (Path(bokehjs_path()) / "js" / "bokeh.min.js").read_text(encoding="utf-8")
    assert '"core/visuals/visual"' in code and 'this._get_css_value("line-color")' in code, (
        "BokehJS no longer asks _get_css_value while painting: app/base/_upstream_panel.py's SKIP_CSS_VISUALS "
        "may be unnecessary (bokeh/bokeh#15286)")
    assert "_get_css_value" in upstream.SKIP_CSS_VISUALS and '"core/visuals/visual"' in upstream.SKIP_CSS_VISUALS


# ---------------------------------------------------------------------- jupyter_bokeh / ipywidgets
def test_jupyter_bokeh_handles_comm_messages_through_handle_msg():
    """``wrap_comm_handlers`` wraps ``BokehModel._handle_msg``: ipywidgets registers it as the comm's handler
    (bound when the widget opens), and the wrapper finds the document as ``self._model.document``."""
    from bokeh.models import Div
    from ipywidgets import Widget
    from jupyter_bokeh.widgets import BokehModel

    assert "_handle_msg" in Widget._comm_changed.func.__code__.co_names, \
        "ipywidgets no longer registers _handle_msg as the comm's message handler"
    handler = _original(BokehModel._handle_msg)
    method = inspect.getclosurevars(handler).nonlocals.get("method", handler)   # under ipywidgets' _show_traceback
    assert list(inspect.signature(method).parameters) == ["self", "msg"]
    div = Div(text="a")
    widget = BokehModel(div)
    assert widget._model is div and div.document is not None


# ---------------------------------------------------------------------- JupyterLab's switch
def test_jupyterlab_applies_the_shipped_commsoversubshells_override(tmp_path):
    """The override ``make lab`` and environment.yml install (``overrides.d/layerscope.json`` in JupyterLab's
    application settings) turns ``commsOverSubshells`` off: its plugin, setting and value are JupyterLab's, and
    JupyterLab's settings reader applies it as the default."""
    import jupyterlab
    from jupyterlab_server.settings_utils import get_settings

    shipped = REPO / "jupyter-config" / "lab" / "settings" / "overrides.d" / "layerscope.json"
    (tmp_path / "overrides.d").mkdir()
    (tmp_path / "overrides.d" / "layerscope.json").write_text(shipped.read_text())
    schemas = Path(jupyterlab.__file__).parent / "schemas"
    plugin = "@jupyterlab/apputils-extension:kernels-settings"
    schema = json.loads((schemas / "@jupyterlab" / "apputils-extension" / "kernels-settings.json").read_text())
    options = [o["const"] for o in schema["properties"]["commsOverSubshells"]["oneOf"]]
    assert "disabled" in options and json.loads(shipped.read_text()) == {plugin: {"commsOverSubshells": "disabled"}}
    empty = tmp_path / "user"
    empty.mkdir()
    defaults = {}
    for name, app_settings in (("override", tmp_path), ("none", empty)):   # the override becomes the default
        settings, _warnings = get_settings(str(app_settings), str(schemas), str(empty), schema_name=plugin)
        defaults[name] = settings["schema"]["properties"]["commsOverSubshells"]["default"]
    assert defaults["override"] == "disabled", defaults
    assert defaults["none"] == "perCommTarget", "JupyterLab's default changed: is the override still needed?"


@pytest.mark.parametrize("path", ["Makefile", "environment.yml"])
def test_lab_installs_the_override(path):
    """``make lab`` and the conda environment both install ./jupyter-config, whose wheel carries the override into
    ``{sys.prefix}/share/jupyter/lab/settings/overrides.d/`` (an editable install writes no data files)."""
    text = (REPO / path).read_text()
    needle = {"Makefile": "-e '.[lab]' ./jupyter-config", "environment.yml": "- ./jupyter-config"}[path]
    assert needle in text, f"{path} no longer installs ./jupyter-config ({needle!r})"
    config = (REPO / "jupyter-config" / "pyproject.toml").read_text()
    assert '"share/jupyter/lab/settings/overrides.d" = ["lab/settings/overrides.d/layerscope.json"]' in config
