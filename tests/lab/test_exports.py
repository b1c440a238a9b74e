"""Every public name a package of lab or app declares in ``__all__`` resolves, and ``from lab import *`` and
``from app import *`` work; each check in a fresh process, so that no earlier import hides a missing name."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fixtures.paths import REPO

# Walks every package of lab and app (pkgutil), imports it and looks up each name of its __all__.
_WALK = """
import importlib, pkgutil, sys
bad = []
for top in ("lab", "app"):
    root = importlib.import_module(top)
    packages = [top] + [m.name for m in pkgutil.walk_packages(root.__path__, top + ".", onerror=bad.append) if m.ispkg]
    for name in packages:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            try:
                getattr(module, attr)
            except Exception as exc:
                bad.append(f"{name}.{attr}: {type(exc).__name__}: {exc}")
print("\\n".join(map(str, bad)))
sys.exit(1 if bad else 0)
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_every_name_in_every_all_of_lab_and_app_resolves():
    proc = _python(_WALK)
    assert proc.returncode == 0, f"names in __all__ that do not resolve:\n{proc.stdout}{proc.stderr[-3000:]}"


@pytest.mark.parametrize("package", ["lab", "app"])
def test_star_import_works(package):
    proc = _python(f"from {package} import *")
    assert proc.returncode == 0, proc.stderr[-3000:]
