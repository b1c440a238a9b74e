"""The Studies tab shows whether the measures agree over the study's runs: lab.analysis.study_agreement as a
table (label-free measures marked), read from hand-written runs tagged as the study's cells."""
from __future__ import annotations

import holoviews as hv
import numpy as np
import pytest

from lab import analysis

hv.extension("bokeh")

LAYERS = ["a", "b", "c"]
CELLS = {0.001: {"nmi": [0.1, 0.8, 0.3], "rankme": [2.0, 9.0, 4.0], "twonn_id": [5.0, 9.0, 3.0]},
         0.01: {"nmi": [0.9, 0.2, 0.1], "rankme": [1.0, 3.0, 8.0], "twonn_id": [2.0, 4.0, 6.0]}}


@pytest.fixture
def study_dir(tmp_path, monkeypatch):
    from lab.config import RunConfig
    from lab.store import RunStore
    from lab.study.records import tag_run

    (tmp_path / "agree.yaml").write_text("name: agree\nbase: {dataset: digits, backbone: mlp, epochs: 1}\n"
                                         "axes: {lr: [0.001, 0.01]}\n")
    monkeypatch.setenv("LAB_STUDIES_DIR", str(tmp_path))
    store = RunStore(tmp_path / "runs")
    for lr, values in CELLS.items():
        w = store.create(RunConfig(dataset="digits", backbone="mlp", epochs=1, lr=lr))
        w.update_meta(layers=LAYERS, layer_aliases={})
        w.append_metrics([{"seed": 0, "epoch": 1, "layer": layer, "split": "unseen", "metric": m, "value": v[i]}
                          for m, v in values.items() for i, layer in enumerate(LAYERS)])
        w.append_training({"seed": 0, "epoch": 1})
        w.finish("finished")
        tag_run(w.run_id, "agree", {"lr": lr}, store=store)
    return store


def test_the_studies_tab_shows_the_agreement_table(study_dir):
    from app.studies.studies_panel import StudiesPanel

    panel = StudiesPanel(study_dir)
    panel.spec = "agree.yaml"
    layout = panel.__panel__()
    assert panel.agreement in layout.objects and panel.agreement_text in layout.objects
    expected = analysis.study_agreement(panel.study(), store=study_dir)
    shown = panel.agreement.value
    assert list(shown["label"]) == ["RankMe (no labels)", "TwoNN ID (no labels)"]
    assert shown["n_runs"].tolist() == [2, 2]
    # rankme: b = b in the first run, c against a in the second; twonn_id (lowest): c against b, a = a
    assert shown["same_best_layer"].tolist() == [1, 1] == expected["same_best_layer"].tolist()
    np.testing.assert_allclose(shown["median_spearman"], expected["median_spearman"])
    assert "how often its best layer" in panel.agreement_text.object


def test_an_empty_study_says_so():
    from app import study_plots

    assert study_plots.agreement_frame({}).empty
    assert "No finished run" in study_plots.agreement_text({})


def test_a_study_that_measured_no_transferability_says_so_once_not_in_a_box_too(study_dir):
    """The runs measured no logme or sfda: the sentence under the figure says so; the figure (a frame around the
    same sentence, cut at its ends) is not shown."""
    from app.studies.studies_panel import StudiesPanel

    panel = StudiesPanel(study_dir)
    panel.spec = "agree.yaml"
    assert "did not measure transferability scores" in panel.transfer_text.object
    assert not panel._transfer_box.visible and panel._transfer_box in panel.__panel__().objects


def test_a_study_of_one_condition_axis_has_no_heatmap_controls_that_do_nothing(study_dir):
    from app.studies.studies_panel import StudiesPanel

    panel = StudiesPanel(study_dir)
    panel.spec = "agree.yaml"                                  # one axis: lr
    assert not panel._grid_box.visible and panel._grid_note.visible
    assert panel._grid_note.object == "The condition heatmap needs a study of two condition axes; this one has one (lr)."


def test_a_measure_without_a_rank_correlation_shows_a_blank_not_nan():
    import pandas as pd

    from app import study_plots

    table = pd.DataFrame({"label": ["kNN accuracy"], "n_runs": [2], "same_best_layer": [0], "share_same": [0.0],
                          "median_spearman": [np.nan]}, index=["knn_accuracy"])
    assert study_plots.agreement_frame({"agreement": table})["median_spearman"].tolist() == [None]
