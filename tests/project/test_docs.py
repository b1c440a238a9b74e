"""The docs site builds with ``mkdocs build --strict`` (as ``make docs`` does): a broken link, a
missing page or an API reference that does not resolve fails here, and so in CI."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},   # Material's banner about MkDocs 2
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    for page in ("index.html", "getting-started/index.html", "METRICS/index.html",
                 "reference/metrics/index.html", "reference/lab/index.html"):
        assert (site / page).is_file(), f"{page} missing from the built site"
    # the API reference is generated from the docstrings, not left empty
    metrics = (site / "reference/metrics/index.html").read_text()
    assert 'id="lab.metrics.nmi"' in metrics and "Dyballa" in metrics
    # offline: Material's Google Fonts are off
    assert "fonts.googleapis.com" not in (site / "index.html").read_text()
