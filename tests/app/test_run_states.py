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


def test_the_overlay_says_a_selected_run_has_no_evaluations_instead_of_empty_axes(cancelled_run):
    from app.compare import RunsPanel

    store, run_id = cancelled_run
    panel = RunsPanel(store)
    panel.select([run_id])
    assert panel.selected == [run_id] and panel.compare_frame().empty
    note = html.unescape(panel._compare_note.object)
    assert panel._compare_note.visible and not panel._compare_pane.visible
    assert f"run {run_id!r} was cancelled before its first evaluation" in note and "has no evaluations" in note
    panel.select([])                                 # nothing selected: the empty plot asks for a selection again
    assert not panel._compare_note.visible and panel._compare_pane.visible
