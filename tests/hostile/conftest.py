"""Fixtures of the hostile-input suite: the CLI in a subprocess with a private cache folder, image
folders of chosen class sizes, a store with intact runs to prove nothing earlier is lost, and
read-only folders that bite root too (``chattr +i``).

Each case asserts three things: the message names the problem and the fix, the exit status (or the
event / exception type), and that what was stored before is still whole.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private $XDG_CACHE_HOME: where tracebacks of genuine bugs go when the run folder cannot hold them."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


@pytest.fixture
def hcli(cache_dir):
    """``hcli(*args, cwd=None, env=None)``: ``python -m lab`` in a subprocess with PYTHONPATH set."""
    def run(*args, cwd=None, env=None):
        full = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                "XDG_CACHE_HOME": str(cache_dir), **(env or {})}
        return subprocess.run([sys.executable, "-m", "lab", *map(str, args)], capture_output=True, text=True,
                              cwd=cwd or REPO, env=full, timeout=600)

    return run


@pytest.fixture
def kept(make_run, store):
    """Two intact finished runs in ``store`` (ids); ``hostile_helpers.check_kept`` proves they still load whole."""
    return [make_run(name="keep-a", nmi=lambda s, e, i: 0.2 + 0.1 * i),
            make_run(name="keep-b", nmi=lambda s, e, i: 0.5 - 0.1 * i)]


@pytest.fixture
def image_folder(tmp_path):
    """``image_folder({"a": 5, "b": 1, ...}, name="imgs")``: one sub-folder of small PNGs per class."""
    from PIL import Image

    def make(sizes: dict[str, int], name: str = "imgs") -> Path:
        root = tmp_path / name
        rng = np.random.default_rng(0)
        for k, (cls, n) in enumerate(sizes.items()):
            (root / cls).mkdir(parents=True)
            for i in range(n):
                pixels = (rng.random((12, 12)) * 60 + 40 * k).astype(np.uint8)
                Image.fromarray(pixels, mode="L").save(root / cls / f"{i}.png")
        return root

    return make


def _chattr(flag: str, path: Path) -> bool:
    exe = shutil.which("chattr")
    if exe is None:
        return False
    return subprocess.run([exe, flag, str(path)], capture_output=True).returncode == 0


@pytest.fixture
def read_only():
    """``with read_only(path):`` makes ``path`` unwritable, for root too (``chattr +i``; for other users
    ``chmod a-w``); skips when neither is possible here."""
    @contextlib.contextmanager
    def guard(path: Path):
        if os.geteuid() == 0:
            if not _chattr("+i", path):
                pytest.skip("root ignores permissions and chattr +i is not supported on this file system")
            try:
                yield
            finally:
                _chattr("-i", path)
        else:
            mode = path.stat().st_mode
            path.chmod(0o555)
            try:
                yield
            finally:
                path.chmod(mode)

    return guard
