"""What every browser test's server does: start a server process, wait until its page answers, and on exit
stop it, keep its log in ``test-artifacts/`` and fail on a traceback from our own code; and the page's probe
element (a view's Python state, read back as JSON)."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def with_repo_on_path(env: dict | None = None) -> dict:
    """This environment plus ``env``, with the repository first on ``PYTHONPATH`` (the server imports app/ and lab/)."""
    return dict(os.environ, **(env or {}), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


@contextlib.contextmanager
def serve(cmd: list[str], url: str, *, log_path: Path, artifact: str, what: str, timeout: float,
          env: dict, cwd: Path = ROOT, tracebacks_from: tuple[str, ...] = ("app", "lab"), wait: bool = True):
    """Run ``cmd`` (its output to ``log_path``) until ``url`` answers 200, fail if it exits first or takes over
    ``timeout`` seconds (``what`` names it); yield the process. ``wait=False``: yield at once, the process with a
    ``wait_up()`` method that waits as above (the caller works while the server starts). On exit stop it, copy its
    log to ``test-artifacts/<artifact>`` and fail on a traceback line from a folder of ``tracebacks_from``."""
    log = open(log_path, "w+")
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout

    def wait_up() -> None:
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"{what} exited with {proc.returncode}:\n{log.read()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=60) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"{what} did not answer within {timeout:.0f} s")
            time.sleep(0.5)

    proc.wait_up = wait_up
    if wait:
        wait_up()
    try:
        yield proc
    finally:                        # the log is kept whatever happened in the block
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.seek(0)
        text = log.read()
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / artifact).write_text(text)
    folders = [str(ROOT / name) for name in tracebacks_from]
    ours = [line for line in text.splitlines()
            if line.strip().startswith("File ") and any(folder in line for folder in folders)]
    assert not ours, f"the server logged a traceback from {', '.join(tracebacks_from)}; see test-artifacts/{artifact}"


def probe(page, selector: str = ".ls-probe") -> dict:
    """The JSON state in the first ``selector`` element's ``data-probe``; {} before it is written."""
    raw = page.locator(selector).first.get_attribute("data-probe")
    return json.loads(raw) if raw else {}


def choose_preset(page, name: str) -> None:
    """Pick the sidebar's preset ``name`` and apply it."""
    page.locator(".ls-preset select").select_option(name)
    page.locator(".ls-apply-preset button").click()
    page.wait_for_timeout(500)


def wait_probe(page, check, timeout: float, what: str, selector: str = ".ls-probe", poll_ms: int = 250) -> dict:
    """The probe's state once ``check(state)`` holds; an AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    state = {}
    while time.monotonic() < deadline:
        state = probe(page, selector)
        if check(state):
            return state
        page.wait_for_timeout(poll_ms)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last probe: {state}")
