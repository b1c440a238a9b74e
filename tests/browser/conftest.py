"""What every browser test needs: Debian's Chromium (never `playwright install`) and a free localhost port."""
from __future__ import annotations

import os
import shutil
import socket

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def free_port():
    """``free_port()``: a TCP port on 127.0.0.1 that nothing listens on now."""
    return _free_port


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of Debian's chromium; missing, the test skips (fails under CI=true, which must install it)."""
    path = shutil.which("chromium")
    if path is None:
        reason = "chromium is not installed (apt-get install chromium); the browser tests need it"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " and CI=true")
        pytest.skip(reason)
    pytest.importorskip("playwright.sync_api")
    return path


@pytest.fixture(scope="session")
def app_server(chromium, tmp_path_factory):
    """One ``panel serve app`` for the browser tests that can share it (each starting one cost about 40 s of
    setup): on 127.0.0.1, a temporary run store (``runs``) and an empty specs folder on ``$LAB_STUDIES_DIR``
    (``studies``: a test writes its spec there before it opens its page). Stopped, its log kept in
    ``test-artifacts/server.log`` and checked for tracebacks from app/ and lab/, when the session ends."""
    import sys

    from served import serve, with_repo_on_path

    port = _free_port()
    runs = tmp_path_factory.mktemp("runs")
    studies = tmp_path_factory.mktemp("studies")
    url = f"http://127.0.0.1:{port}/app"
    cmd = [sys.executable, "-m", "panel", "serve", "app", "--address", "127.0.0.1", "--port", str(port),
           "--allow-websocket-origin", f"127.0.0.1:{port}"]
    env = with_repo_on_path({"LAB_RUNS_DIR": str(runs), "LAB_STUDIES_DIR": str(studies)})
    env.pop("DASK_SCHEDULER_ADDRESS", None)          # the Studies tab runs on its own local cluster
    with serve(cmd, url, log_path=tmp_path_factory.mktemp("log") / "server.log", artifact="server.log",
               what="panel serve", timeout=240, env=env):
        yield {"url": url, "runs": runs, "studies": studies}



@pytest.fixture(scope="session")
def embedding_server(chromium, tiny_run, tmp_path_factory):
    """One ``panel serve tests/browser/embedding_page.py`` for the explorer's browser tests: its URL, the page
    drawing random blobs (``?n=``) or a stored run of ``$LAB_RUNS_DIR``, the session's tiny run's store
    (``?run=``). Stopped, its log kept in ``test-artifacts/embedding-server.log`` and checked for tracebacks
    from app/, when the session ends."""
    from embedding_server import serve_embedding_page

    store, _, _ = tiny_run
    with serve_embedding_page(_free_port(), tmp_path_factory.mktemp("log") / "server.log", "embedding-server.log",
                              env={"LAB_RUNS_DIR": str(store.root)}) as url:
        yield url
