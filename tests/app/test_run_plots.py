"""The live view's plots (:class:`app.live._plots.RunPlots`): a run's streams and plots replace the last run's, the
counts it answers are what the view's probe reports, and a reset leaves nothing of the last run."""
from __future__ import annotations

import holoviews as hv
import panel as pn
import pytest
from bokeh.document import Document

hv.extension("bokeh")

from tests.fixtures.live_runs import LAYERS, synthetic_run  # noqa: E402

PROBE_KEYS = ["status", "run_id", "events", "layers", "metric_layers", "heatmap_cells", "projection_points",
              "layout_layer", "follow_best", "picked", "best_layer", "epochs_done", "message", "notice", "stage",
              "redraws", "doc_models"]
"""What the browser tests and docs/states.py read from the page's probe element, in its order."""


@pytest.fixture
def live():
    from app.live import LiveView

    view = LiveView()
    pn.Row(view, width=1000).get_root(Document())
    return view


def _curve_panes(live) -> list:
    return [o for o in live.plots.curves_box.objects if isinstance(o, pn.pane.HoloViews)]


def test_a_second_run_replaces_the_streams_and_plots_of_the_first(live):
    live.consume(list(synthetic_run("r1", epochs=1)))
    first_streams, first_curves = dict(live.streams), _curve_panes(live)
    first_heatmap = live.plots.heatmap_pane.object
    assert len(first_curves) == 5 and isinstance(first_heatmap, hv.DynamicMap)
    live.consume(list(synthetic_run("r2", epochs=1)))
    assert live.streams is live.plots.streams and set(live.streams) == set(first_streams)
    assert not {id(s) for s in live.streams.values()} & {id(s) for s in first_streams.values()}
    curves = _curve_panes(live)
    assert len(curves) == 5 and not {id(p) for p in curves} & {id(p) for p in first_curves}      # replaced, not stacked
    assert live.plots.heatmap_pane.object is not first_heatmap
    assert live.plots.heatmap_pane.object.streams == [live.streams["heatmap"]]
    assert live.probe()["run_id"] == "r2" and live.plots.details.visible


def test_the_probe_reports_the_plots_counts_under_its_keys(live):
    assert list(live.probe()) == PROBE_KEYS
    assert live.plots.counts() == {"metric_layers": 0, "heatmap_cells": 0, "projection_points": 0}
    live.consume(list(synthetic_run(epochs=1)))
    counts = live.plots.counts()
    assert counts["metric_layers"] == len(LAYERS) and counts["heatmap_cells"] == len(LAYERS) * 2
    probe = live.probe()
    assert list(probe) == PROBE_KEYS and {k: probe[k] for k in counts} == counts
    assert probe["projection_points"] == live.embedding.n_points == 30 and probe["layout_layer"] == "block2"


def test_a_reset_leaves_nothing_of_the_last_run(live):
    live.consume(list(synthetic_run(epochs=1)))
    live.reset("Waiting for the next run")
    assert live.streams == {} and not live.plots.details.visible and live.plots.heatmap_pane.object is None
    placeholder, = live.plots.curves_box.objects
    assert "Waiting for the next run" in placeholder.object
    assert live.plots.counts() == {"metric_layers": 0, "heatmap_cells": 0, "projection_points": 0}
    live.set_message("Queued behind another run")                   # no plots yet: the placeholder says it too
    assert "Queued behind another run" in placeholder.object
