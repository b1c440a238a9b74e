"""What the explorer's browser tests share: ``panel serve tests/browser/embedding_page.py`` on 127.0.0.1 until
it answers, its log checked for tracebacks from app/ at the end, and the page's probe element (the view's
Python state, read back as JSON)."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import served
from served import ARTIFACTS  # noqa: F401  (the explorer's tests import it from here)

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def serve_embedding_page(port: int, log_path: Path, artifact: str, env: dict | None = None):
    """Serve the test page on ``port`` (``env``: extra environment) and yield its URL; on exit stop the
    server, copy its log to ``test-artifacts/<artifact>`` and fail on a traceback from app/."""
    url = f"http://127.0.0.1:{port}/embedding_page"
    cmd = [sys.executable, "-m", "panel", "serve", "tests/browser/embedding_page.py", "--address", "127.0.0.1",
           "--port", str(port), "--allow-websocket-origin", f"127.0.0.1:{port}"]
    with served.serve(cmd, url + "?n=10", log_path=log_path, artifact=artifact, what="panel serve", timeout=120,
                      env=served.with_repo_on_path(env), tracebacks_from=("app",)):
        yield url


def probe(page) -> dict:
    return served.probe(page, ".ls-embedding-probe")


def wait_probe(page, check, timeout: float, what: str) -> dict:
    return served.wait_probe(page, check, timeout, what, selector=".ls-embedding-probe", poll_ms=200)
