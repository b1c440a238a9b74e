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
