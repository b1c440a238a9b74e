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

    from app.resources import local_stylesheet_url

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

    from app.resources import offline_stylesheets

    def rendered() -> str:
        doc = Document()
        with set_resource_mode("inline"):      # what a notebook render uses: CDN URLs for the CSS
            root = pn.Column(pn.widgets.Button(label="Run"), pn.pane.Markdown("x")).get_root(doc)
        if root not in doc.roots:
            doc.add_root(root)
        from bokeh.core.serialization import Serializer

        return json.dumps(Serializer(deferred=False).encode(root), default=str)   # as a render or patch does

    assert "https://cdn.holoviz.org" in rendered()
    offline_stylesheets()
    try:
        text = rendered()
        assert "https://cdn.holoviz.org" not in text and "data:text/css;base64," in text
    finally:
        offline_stylesheets(enable=False)
    assert "https://cdn.holoviz.org" in rendered()


def test_worker_updates_run_on_the_kernel_loop_thread():
    from app._dispatch import DocDispatcher

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
