"""A run that :class:`lab.Monitor` counted in optimizer steps (``unit="step"``, meta ``axis: "step"``) is exported
with its unit: where the notebook names the axis (its text, its tables' columns, its plots' axis labels, titles and
tooltips) it says step, never epoch. The cells run in this process (no kernel: an executed export costs 10 s+)."""
from __future__ import annotations

import ast
import re

import pandas as pd
import pytest

from lab.export import build_notebook, tables

pytestmark = pytest.mark.slow            # a real Monitor run, and the notebook's plots drawn with Bokeh

_EPOCH = re.compile(r"\bepochs?\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def notebook(monitored_run):
    store, run_id = monitored_run
    return store, run_id, build_notebook(run_id, store=store)


def test_step_run_axis(monitored_run):
    store, run_id = monitored_run
    record = store.load(run_id)
    assert tables.run_axis(record) == "step" and tables.runs_axis([record]) == "step"


def test_the_notebook_text_names_steps(notebook):
    store, run_id, nb = notebook
    markdown = [cell.source for cell in nb.cells if cell.cell_type == "markdown"]
    prose = [re.sub(r"`[^`]*`", "", line) for text in markdown for line in text.splitlines()]   # not `EPOCH`
    assert [line for line in prose if _EPOCH.search(line)] == []
    text = "\n".join(markdown).replace("\\", "")             # markdown escapes: \( \-
    last = store.load(run_id).summary()["epoch"]
    assert f"(unseen NMI, step {last}, 1 seed)" in text
    assert f"counted in steps, the last evaluated at step {last}" in text
    assert "## Layer × step" in text and "last evaluated step" in text


def _run_cell(source: str, namespace: dict):
    """Execute a code cell in ``namespace`` and return the value of its last line when that is an expression
    (what a notebook would show)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace) if last is not None else None


def _labels(obj) -> list[str]:
    """The axis labels, titles and tooltip names of ``obj`` drawn with Bokeh."""
    import holoviews as hv
    from bokeh.models import Axis, HoverTool, Title

    out = []
    for model in hv.renderer("bokeh").get_plot(obj).state.references():
        if isinstance(model, Axis) and model.axis_label:
            out.append(str(model.axis_label))
        elif isinstance(model, Title) and model.text:
            out.append(str(model.text))
        elif isinstance(model, HoverTool) and isinstance(model.tooltips, list):
            out += [str(name) for name, _field in model.tooltips]
    return out


def test_the_notebook_tables_and_plots_name_steps(notebook, capsys):
    import holoviews as hv

    _store, run_id, nb = notebook
    shown, namespace = [], {}
    for cell in nb.cells:
        if cell.cell_type != "code" or {"explorer", "reproduce"} & set(cell.metadata.get("tags", [])):
            continue                      # the explorer needs a kernel's comms; the last cell re-trains
        value = _run_cell(cell.source, namespace)
        namespace["display"] = lambda *objs, **_kw: shown.extend(objs)     # after SETUP's IPython import
        if value is not None:
            shown.append(value)
    frames = [obj for obj in shown if isinstance(obj, pd.DataFrame)]
    figures = [obj for obj in shown if isinstance(obj, hv.core.Dimensioned)]
    # status, per-layer, generalization, law (two), selection report and agreement tables: the axis is "step"
    with_axis = [frame for frame in frames if "step" in frame.columns]
    assert len(with_axis) >= 6, [list(frame.columns) for frame in frames]
    assert not [list(frame.columns) for frame in frames if "epoch" in frame.columns]
    # the layer x step heatmap, g per step, the law's r against step, the 2-D layout, CKA to the first evaluation
    assert len(figures) >= 5, figures
    labels = [label for figure in figures for label in _labels(figure)]
    assert not [label for label in labels if _EPOCH.search(label)], labels
    last = namespace["runs"][run_id].summary()["epoch"]
    for wanted in ("step", "g per step (no seen accuracy stored)", "r against step", "CKA to the first evaluation"):
        assert any(wanted in label for label in labels), (wanted, labels)
    assert any(f"step {last}:" in label for label in labels), labels          # the layout's title
    printed = capsys.readouterr().out
    assert not _EPOCH.search(printed), printed
    assert f"step {last}: " in printed                                        # the answer per image
