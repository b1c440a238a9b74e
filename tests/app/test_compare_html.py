"""Compare & export: "Export selected → HTML" writes the selected runs into one page and offers it for download."""
from __future__ import annotations

import json
import re


def test_export_selected_to_html(tmp_path, make_run):
    import lab

    from app.compare.runs_panel import RunsPanel

    store = lab.RunStore(tmp_path / "runs")
    ids = [make_run(target=store, name="first"), make_run(target=store, name="second")]
    panel = RunsPanel(store)
    assert panel._export_html_button.disabled
    panel.select(ids)
    assert not panel._export_html_button.disabled
    path = panel.export_html()
    assert path.suffix == ".html" and panel._download.visible and panel._download.file == str(path)
    model = json.loads(re.search(r'id="ls-model">(.*?)</script>', path.read_text(encoding="utf-8"), re.S).group(1))
    assert sorted(run["run_id"] for run in model["runs"]) == sorted(ids)
    assert panel.message.startswith(f"Page ready: {path.name} (2 runs, ")

    panel.selected = ["no-such-run"]
    assert panel.export_html() is None and panel.message.startswith("Export failed")
    panel.selected = []
    assert panel.export_html() is None and panel.message == "Select one or more runs to export."
