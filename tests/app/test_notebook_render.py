"""app.base._upstream_panel.defer_notebook_recomputes: a view shown in a notebook recomputes its document's models once, and the
document ends with exactly the models its roots reach (what Bokeh's per-change recomputation gave)."""
from __future__ import annotations

import threading

import panel as pn
import pytest
from bokeh.document.models import DocumentModelManager

from app.base._upstream_panel import defer_notebook_recomputes as install, one_recompute, widget_models


@pytest.fixture(scope="module", autouse=True)
def inline_extension():
    """Inline resources, as app.extension() sets them (Panel then swaps every model's stylesheets after
    rendering), and the deferred recomputation it installs; Panel's setting restored after."""
    previous = pn.config.inline
    pn.extension(inline=True)
    install()
    yield
    pn.config.inline = previous


def _count_recomputes(monkeypatch) -> list:
    calls = []
    original = DocumentModelManager.recompute

    def counting(self):
        calls.append(self)
        return original(self)

    monkeypatch.setattr(DocumentModelManager, "recompute", counting)
    return calls


def _view():
    return pn.Column(*[pn.Row(pn.widgets.Button(label=f"b{i}"), pn.widgets.TextInput(value=str(i)))
                       for i in range(40)])


def test_showing_a_view_recomputes_each_document_once(monkeypatch):
    calls = _count_recomputes(monkeypatch)
    view = _view()
    bundle, _ = view._repr_mimebundle_()
    assert bundle and "application/vnd.holoviews_exec.v0+json" in bundle
    model, = widget_models(view)
    doc = model.document
    # 120 widgets had their stylesheets swapped: Panel alone walks the document 126 times (one per swap and
    # the few of building it); deferred, only the building's walks and one at the end remain
    assert len(calls) <= 8, len(calls)
    reachable = set()
    for root in doc.roots:
        reachable |= root.references()
    assert set(doc.models) == reachable


def test_other_threads_recompute_at_once_inside_the_block():
    from bokeh.document import Document
    from bokeh.models import Div

    doc = Document()
    doc.add_root(Div(text="a"))
    seen = {}

    def elsewhere():
        doc.add_root(Div(text="b"))                  # invalidates on this thread: recomputed now
        seen["models"] = len(list(doc.models))

    with one_recompute():
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
    assert seen["models"] == 2


def test_the_calling_thread_recomputes_when_the_block_ends():
    from bokeh.document import Document
    from bokeh.models import Div

    from bokeh.models import InlineStyleSheet

    doc = Document()
    div = Div(text="a")
    doc.add_root(div)
    with one_recompute():
        div.stylesheets = [InlineStyleSheet(css="p {}")]      # a new model referenced: the document changed
        inside = len(list(doc.models))
    assert inside == 1                              # deferred ...
    assert len(list(doc.models)) == 2               # ... and done once at the end
