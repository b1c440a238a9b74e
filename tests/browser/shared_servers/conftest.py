"""The browser tests that share one served app and one embedding page per session: ``make test`` hands this folder
to one worker whole (tests/scheduling.py ``ONE_WORKER``), so the suite starts each server once, not once per worker."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def app_server(chromium, free_port, tmp_path_factory):
    """One ``panel serve app`` for the browser tests that can share it (each starting one cost about 40 s of
    setup): on 127.0.0.1, a temporary run store (``runs``) and an empty specs folder on ``$LAB_STUDIES_DIR``
    (``studies``: a test writes its spec there before it opens its page). Stopped, its log kept in
    ``test-artifacts/server.log`` and checked for tracebacks from app/ and lab/, when the session ends."""
    import sys

    from served import serve, with_repo_on_path

    port = free_port()
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
def embedding_server(chromium, free_port, tiny_run, tmp_path_factory):
    """One ``panel serve tests/browser/embedding_page.py`` for the explorer's browser tests: its URL, the page
    drawing random blobs (``?n=``) or a stored run of ``$LAB_RUNS_DIR``, the session's tiny run's store
    (``?run=``). Stopped, its log kept in ``test-artifacts/embedding-server.log`` and checked for tracebacks
    from app/, when the session ends."""
    from embedding_server import serve_embedding_page

    store, _, _ = tiny_run
    with serve_embedding_page(free_port(), tmp_path_factory.mktemp("log") / "server.log", "embedding-server.log",
                              env={"LAB_RUNS_DIR": str(store.root)}) as url:
        yield url
