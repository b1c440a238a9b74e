"""The app in a notebook kernel: stylesheets from the installed panel package (never a CDN), and
worker-thread updates delivered on the kernel's event loop. (The real thing, in JupyterLab and
Chromium: tests/browser/test_jupyterlab.py.)"""
from __future__ import annotations

import asyncio
import base64
import json
import threading


def _decode(data_url: str) -> str:
    head, _, payload = data_url.partition(",")
    assert head == "data:text/css;base64"
    return base64.b64decode(payload).decode("utf-8")


def test_panel_css_urls_become_the_installed_files():
    from panel.io.resources import CDN_DIST, DIST_DIR

    from app.base.resources import local_stylesheet_url

    url = local_stylesheet_url(f"{CDN_DIST}css/button.css")
    assert _decode(url) == (DIST_DIR / "css" / "button.css").read_text(encoding="utf-8")
    served = local_stylesheet_url("static/extensions/panel/css/button.css?v=1")     # `panel serve` form
    assert served == url
    # relative assets are inlined too: a data: stylesheet cannot resolve "../assets/x.svg"
    loading = _decode(local_stylesheet_url(f"{CDN_DIST}css/loading.css?v=1"))
    assert "../assets/" in (DIST_DIR / "css" / "loading.css").read_text(encoding="utf-8")
    assert "../assets/" not in loading and "data:image/svg+xml;base64," in loading
    fonts = _decode(local_stylesheet_url(f"{CDN_DIST}bundled/font-awesome/css/all.min.css"))
    assert "data:font/woff2;base64," in fonts
    # not panel's own files: left alone
    assert local_stylesheet_url("https://example.org/x.css") is None
    assert local_stylesheet_url(f"{CDN_DIST}../../../etc/passwd") is None
    assert local_stylesheet_url(f"{CDN_DIST}css/no-such-file.css") is None


def test_serialized_documents_carry_no_cdn_stylesheet():
    import panel as pn
    from bokeh.document import Document
    from panel.io.resources import set_resource_mode

    from app.base.resources import _OFFLINE, offline_stylesheets

    def rendered() -> str:
        doc = Document()
        with set_resource_mode("inline"):      # what a notebook render uses: CDN URLs for the CSS
            root = pn.Column(pn.widgets.Button(label="Run"), pn.pane.Markdown("x")).get_root(doc)
        if root not in doc.roots:
            doc.add_root(root)
        from bokeh.core.serialization import Serializer

        return json.dumps(Serializer(deferred=False).encode(root), default=str)   # as a render or patch does

    was_on = _OFFLINE["on"]             # app.extension(), called by an earlier test of this process, turns it on
    offline_stylesheets(enable=False)
    try:
        assert "https://cdn.holoviz.org" in rendered()
        offline_stylesheets()
        text = rendered()
        assert "https://cdn.holoviz.org" not in text and "data:text/css;base64," in text
        offline_stylesheets(enable=False)
        assert "https://cdn.holoviz.org" in rendered()
    finally:
        offline_stylesheets(enable=was_on)


def test_worker_updates_run_on_the_kernel_loop_thread():
    from app.base._dispatch import DocDispatcher

    loop = asyncio.new_event_loop()
    try:
        applied, threads = [], set()

        def apply(batch):
            threads.add(threading.get_ident())
            applied.append(list(batch))

        dispatcher = DocDispatcher(apply, doc=None, min_interval=0.0, loop=loop)
        assert dispatcher.has_session
        worker = threading.Thread(target=lambda: [dispatcher.push(i) for i in range(50)])
        worker.start()
        worker.join()
        assert applied == []                    # nothing ran on the worker thread
        loop.run_until_complete(asyncio.sleep(0.2))
        assert [x for batch in applied for x in batch] == list(range(50))
        assert threads == {threading.get_ident()} and len(applied) < 50
        dispatcher.push("from a cell")          # the loop's own thread, not in a flush: shown at once
        assert applied[-1] == ["from a cell"]
    finally:
        loop.close()
    assert not dispatcher.has_session           # a closed loop (kernel gone): items are applied directly


def test_flushes_and_panel_comm_handlers_take_turns_on_a_notebook_document():
    """JupyterLab may deliver a view's comm messages on another kernel thread (a subshell) than
    the one whose loop flushes the run's updates: Panel's handler waits for a flush in progress."""
    from bokeh.document import Document

    from app.base._dispatch import DocDispatcher
    from app.base._doclock import install
    from app.base._upstream_panel import apply_notebook_msg, register_notebook_view, unregister_notebook_view

    install()
    doc, ref, order = Document(), "layerscope-test-view", []
    entered, release = threading.Event(), threading.Event()

    def apply(batch):
        entered.set()
        release.wait(10)
        order.append("flush")

    class Patch:
        def apply_to_document(self, document, setter=None):
            assert document is doc
            order.append("comm message")

    class Manager:
        def assemble(self, msg):
            return Patch()

    loop = asyncio.new_event_loop()
    kernel = threading.Thread(target=loop.run_forever, daemon=True)       # the thread that flushes
    kernel.start()
    register_notebook_view(ref, None, None, doc, None)
    try:
        async def make():             # on the loop's thread, as when a Run click is handled there
            return DocDispatcher(apply, doc=doc, min_interval=0.0, loop=loop)

        dispatcher = asyncio.run_coroutine_threadsafe(make(), loop).result(10)
        dispatcher.push("event")            # from this thread (the run's worker)
        assert entered.wait(10)
        subshell = threading.Thread(target=apply_notebook_msg, daemon=True,
                                    args=(None, ref, Manager(), {"content": {"events": []}}))
        subshell.start()
        subshell.join(0.5)
        assert subshell.is_alive()          # blocked while the flush changes the document
        release.set()
        subshell.join(10)
        assert order == ["flush", "comm message"]
    finally:
        release.set()
        unregister_notebook_view(ref)
        loop.call_soon_threadsafe(loop.stop)
        kernel.join(10)
        loop.close()
