"""What the explorer's browser tests share: ``panel serve tests/browser/embedding_page.py`` on 127.0.0.1 until
it answers, its log checked for tracebacks from app/ at the end, and the page's probe element (the view's
Python state, read back as JSON)."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def serve_embedding_page(port: int, log_path: Path, artifact: str, env: dict | None = None):
    """Serve the test page on ``port`` (``env``: extra environment) and yield its URL; on exit stop the
    server, copy its log to ``test-artifacts/<artifact>`` and fail on a traceback from app/."""
    env = dict(os.environ, **(env or {}), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = open(log_path, "w+")
    proc = subprocess.Popen([sys.executable, "-m", "panel", "serve", "tests/browser/embedding_page.py",
                             "--address", "127.0.0.1", "--port", str(port),
                             "--allow-websocket-origin", f"127.0.0.1:{port}"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/embedding_page"
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            log.seek(0)
            pytest.fail(f"panel serve exited with {proc.returncode}:\n{log.read()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "?n=10", timeout=60) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("panel serve did not answer within 120 s")
        time.sleep(1)
    yield url
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.seek(0)
    text = log.read()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / artifact).write_text(text)
    ours = [line for line in text.splitlines() if line.strip().startswith("File ") and str(ROOT / "app") in line]
    assert not ours, f"the server logged a traceback from app/; see test-artifacts/{artifact}"


def probe(page) -> dict:
    raw = page.locator(".ls-embedding-probe").first.get_attribute("data-probe")
    return json.loads(raw) if raw else {}


def wait_probe(page, check, timeout: float, what: str) -> dict:
    deadline = time.monotonic() + timeout
    state = {}
    while time.monotonic() < deadline:
        state = probe(page)
        if check(state):
            return state
        page.wait_for_timeout(200)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last probe: {state}")
