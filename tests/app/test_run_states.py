"""The views of runs that are not happy paths (cancelled early, monitored loops): no false word, no empty axes."""
from __future__ import annotations

import html


def test_compare_layouts_of_a_run_cancelled_before_its_first_evaluation_say_why(cancelled_run):
    from app.compare import RunsPanel

    store, run_id = cancelled_run
    panel = RunsPanel(store)
    panel.select([run_id])
    note = html.unescape(panel._layout_note.object)
    assert f"run {run_id!r} was cancelled before its first evaluation" in note, note
    assert "run it with projection" not in note and "recorded without" not in note
