"""The shipped notebooks: built from notebooks/_build.py, stored without outputs, and each one
executes top to bottom in FAST mode (LAB_FAST=1) with its claim cells passing."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lab.export import execute_notebook

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
SHIPPED = ["01_quickstart.ipynb", "02_neural_collapse_across_layers.ipynb",
           "03_which_layer_generalizes.ipynb", "04_layer_utilization.ipynb", "05_studies.ipynb",
           "06_which_images.ipynb", "07_neural_collapse_lesson.ipynb", "08_attach_to_your_training.ipynb"]
# 08 shows the reader's own training loop, which lab.Monitor attaches to: its optimizer step is theirs, not lab's
OWN_LOOP = {"08_attach_to_your_training.ipynb"}


def test_notebooks_are_built_from_the_builder_and_stripped():
    res = subprocess.run([sys.executable, str(NOTEBOOKS / "_build.py"), "--check"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == SHIPPED
    for name in SHIPPED:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), f"{name} has outputs"
        source = "\n".join(c.source for c in code)
        assert 'os.environ.get("LAB_FAST", "0") == "1"' in source
        assert "import lab" in source
        # notebooks use the library; they never define models, metrics or training loops
        for forbidden in ("nn.Module", "register_forward_hook", "optimizer.step", "def nc1", "KMeans("):
            if forbidden == "optimizer.step" and name in OWN_LOOP:
                continue
            assert forbidden not in source, f"{name} re-implements the library ({forbidden})"
        assert any("claim" in c.metadata.get("tags", []) for c in code), f"{name} has no claim cell"


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_notebook_executes_in_fast_mode(name, tmp_path):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    execute_notebook(nb, tmp_path, timeout=600,
                     env={"LAB_FAST": "1", "LAB_RUNS_DIR": str(tmp_path / "runs")})
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    printed = "".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream")
    assert "FAST mode" in printed
    assert (tmp_path / "runs").is_dir() and any((tmp_path / "runs").iterdir()), "the notebook stored no run"
