"""The Studies tab's Summary picker: last epoch, best epoch by unseen g, or a given epoch, redraws the figures from
lab.study.figures(..., summary=...), also from the thread of a running study. A hand-written stored study
(tests/fixtures/summary_study.py: NMI peaks at epoch 1, is last measured at epoch 3); no cluster."""
from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
import pytest
import yaml

from app import study_plots
from lab import events as ev
from lab.export.markdown import escape_markdown
from lab.status import RunStatus
from lab.study import Study, StudyResult, figures, summary_text
from tests.fixtures.summary_study import LAYERS, LRS, nmi, stored_summary_study

hv.extension("bokeh")


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    return stored_summary_study(tmp_path_factory.mktemp("summary_panel"))


@pytest.fixture
def store(stored):
    return stored[1]


@pytest.fixture
def panel(stored, tmp_path, monkeypatch):
    from app.studies.studies_panel import StudiesPanel

    study, store = stored
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "summary.yaml").write_text(yaml.safe_dump(study.to_dict()))
    monkeypatch.setenv("LAB_STUDIES_DIR", str(tmp_path / "specs"))
    return StudiesPanel(store, spec="summary.yaml"), study


def _curve_means(panel, lr) -> list[float]:
    """The unseen NMI drawn for one condition, read from the plot's Curve (input -> output)."""
    curves = panel.plots["layers"].object.traverse(lambda x: x, [hv.Curve])
    curve = next(c for c in curves if c.label.startswith(f"lr={lr} "))
    return list(curve.dframe().sort_values("depth")["mean"])


def _expected(epoch, lr):
    return [np.mean([nmi(lr, s, epoch, i) for s in (0, 1)]) for i in range(len(LAYERS))]


def test_the_summary_picker_redraws_the_figures_at_the_epoch_it_names(panel, store):
    panel, study = panel
    assert panel.summary_select.value == "last" and not panel.epoch_input.visible
    assert set(panel.summary_select.options) == {"last epoch", "best epoch by unseen g", "epoch…"}
    assert "ls-study-summary" in panel.summary_select.css_classes and "ls-study-epoch" in panel.epoch_input.css_classes
    for lr in LRS:
        assert _curve_means(panel, lr) == pytest.approx(_expected(3, lr))
    # the legend carries n and the title says the summary and which interval the band is
    labels = {c.label for c in panel.plots["layers"].object.traverse(lambda x: x, [hv.Curve])}
    assert labels == {f"lr={lr} (n=2)" for lr in LRS}
    title = panel.plots["layers"].object.opts.get().kwargs["title"]
    assert title.startswith("Unseen NMI per layer") and "at the last epoch" in title
    assert "band: 95 % interval over seeds" in title

    panel.summary_select.value = "best"
    assert panel.current_summary() == "best" and panel._figs["summary"]["summary"] == "best"
    for lr in LRS:
        assert _curve_means(panel, lr) == pytest.approx(_expected(1, lr))
    assert "best epoch by unseen g" in panel.plots["layers"].object.opts.get().kwargs["title"]
    note = summary_text(panel._figs)
    assert "read at epoch 1 (4 runs)" in note and panel.summary_note.object == escape_markdown(note)
    pd.testing.assert_frame_equal(panel._figs["generalization"],
                                  figures(study, store=store, summary="best")["generalization"])

    panel.summary_select.value = "epoch"
    assert panel.epoch_input.visible and panel.current_summary() == 0
    panel.epoch_input.value = 2
    assert panel.current_summary() == 2
    for lr in LRS:
        assert _curve_means(panel, lr) == pytest.approx(_expected(2, lr))
    panel.epoch_input.value = 9                       # no run has it: the figures are empty and the note says why
    assert panel._figs["layers"].empty and "Left out: 4 runs" in summary_text(panel._figs)
    panel.summary_select.value = "last"
    assert not panel.epoch_input.visible and _curve_means(panel, LRS[0]) == pytest.approx(_expected(3, LRS[0]))


class _Landed(Study):
    """The stored study, whose run reports one cell landed and ends (the runner itself is tested in lab/study)."""

    def run(self, *args, on_event=None, **kwargs):
        on_event(ev.CellDone(0, run_id="r", status=RunStatus.FINISHED))
        return StudyResult(self.name, {}, [], {})


class _Collect:
    def __init__(self):
        self.items = []

    def push(self, item, urgent=False):
        self.items.append(item)


def test_a_running_study_draws_its_figures_at_the_summary_picked(panel, store):
    import threading

    panel, study = panel
    panel.summary_select.value = "best"
    dispatcher = _Collect()
    panel._work(_Landed.from_dict(study.to_dict()), threading.Event(), dispatcher)
    figs = next(m["figs"] for m in dispatcher.items if isinstance(m, dict) and m.get("kind") == "figures")
    assert figs["summary"]["summary"] == "best" and (figs["summary"]["epochs"]["epoch"] == 1).all()
    assert dispatcher.items[-1]["kind"] == "done"


def test_the_band_and_the_bars_are_the_intervals_over_seeds(stored):
    study, store = stored
    figs = figures(study, store=store, summary="best")
    bands = pd.concat(s.dframe().assign(group=s.label) for s in
                      study_plots.layer_depth_curves(figs).traverse(lambda x: x, [hv.Spread]))
    layers = figs["layers"].assign(group=lambda d: d["group"] + " (n=2)")
    merged = layers.merge(bands, on=["group", "depth"], suffixes=("", "_drawn"))
    assert len(merged) == len(layers) == 2 * len(LAYERS)
    np.testing.assert_allclose(merged["mean_drawn"] - merged["below"], merged["seed_low"])
    np.testing.assert_allclose(merged["mean_drawn"] + merged["above"], merged["seed_high"])
    gen = figs["generalization"]
    bars = [e.dframe() for e in study_plots.accuracy_vs_g(figs).traverse(lambda x: x, [hv.ErrorBars])]
    vertical = pd.concat(b for b in bars if "g_neg" in b)
    horizontal = pd.concat(b for b in bars if "acc_neg" in b)
    np.testing.assert_allclose(sorted(vertical["g"] - vertical["g_neg"]), sorted(gen["g_seed_low"]))
    np.testing.assert_allclose(sorted(vertical["g"] + vertical["g_pos"]), sorted(gen["g_seed_high"]))
    np.testing.assert_allclose(sorted(horizontal["heldout_accuracy"] - horizontal["acc_neg"]),
                               sorted(gen["heldout_seed_low"]))
    assert "bars: 95 % interval over seeds" in study_plots.accuracy_vs_g(figs).opts.get().kwargs["title"]
    for obj in (study_plots.layer_depth_curves(figs), study_plots.accuracy_vs_g(figs),
                study_plots.collapse_curves(figs)):
        hv.render(obj, backend="bokeh")
