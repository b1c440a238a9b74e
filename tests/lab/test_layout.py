"""The house by its parts: no module over 500 lines, lab never imports the UI stack, and the public entry
points of the moved parts still import (no import cycles: tests/lab/test_import_cycles.py)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.fixtures.import_graph import imports, modules

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500
UI = ("panel", "bokeh", "holoviews", "hvplot", "app")


def test_no_module_over_500_lines():
    files = [*(ROOT / "lab").rglob("*.py"), *(ROOT / "app").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"),
             *(ROOT / "notebooks").glob("*.py")]
    long = {str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_lab_never_imports_the_ui_stack():
    bad = {}
    for name, path in modules("lab").items():
        for node in imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if not getattr(node, "level", 0) and any(n.split(".")[0] in UI for n in names):
                bad.setdefault(name, []).extend(names)
    assert bad == {}


@pytest.mark.parametrize("module, names", [
    ("lab.cli", ["main", "build_parser"]),
    ("lab.__main__", ["main"]),
    ("lab.study", ["Study", "figures", "load_study", "study_status", "find_study", "local_cluster"]),
    ("lab.export", ["to_notebook", "study_to_notebook", "execute_notebook", "notebook_summary", "py_literal"]),
    ("lab.export.tables", ["generalization_table", "run_labels"]),
    ("lab.analysis", ["generalization", "latest_generalization", "layer_curve", "aggregate_seeds", "bootstrap",
                      "confidence_text", "rank_correlation", "accuracy_vs_g", "transfer_vs_g", "run_summary"]),
    ("lab.projection", ["pca_layout", "umap_layout", "knn_graph", "warm_up", "is_warm", "Projector"]),
])
def test_public_entry_points_import(module, names):
    mod = importlib.import_module(module)
    missing = [n for n in names if not hasattr(mod, n)]
    assert missing == []
