"""Do the measures agree? (issue 35): the best layer by each measure of one evaluation, its bootstrap share
and the rank correlation of its layer ordering with NMI's, against hand-written runs and scipy."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from lab import analysis, catalogue

LAYERS = ["a", "b", "c", "d", "e"]
UNSEEN = {   # per measure, the value of each layer at the last epoch (two seeds: +-0.01)
    "nmi": [0.1, 0.5, 0.7, 0.6, 0.2],
    "knn_accuracy": [0.2, 0.3, 0.9, 0.95, 0.1],
    "ncc_accuracy": [0.3, 0.6, 0.6, 0.5, 0.4],          # a tie: the deeper layer
    "nc1": [5.0, 2.0, 1.0, 0.5, 3.0],                   # lower is better
}
LOGME = [-1.0, -0.5, -0.7, -0.9, -0.2]                  # seen images, epoch 0 only


@pytest.fixture
def run(store):
    from lab.config import RunConfig

    w = store.create(RunConfig(dataset="digits", backbone="mlp", epochs=1, seeds=(0, 1)))
    w.update_meta(layers=LAYERS, layer_aliases={})
    for seed, shift in ((0, -0.01), (1, 0.01)):
        for epoch in (0, 1):
            rows = [{"seed": seed, "epoch": epoch, "layer": layer, "split": "unseen", "metric": m,
                     "value": v[i] + shift - (0.3 if epoch == 0 else 0.0)}
                    for m, v in UNSEEN.items() for i, layer in enumerate(LAYERS)]
            rows += [{"seed": seed, "epoch": epoch, "layer": layer, "split": "unseen", "metric": "nmi_best_share",
                      "value": 0.8 if layer == "c" else 0.05} for layer in LAYERS]
            if epoch == 0:
                rows += [{"seed": seed, "epoch": 0, "layer": layer, "split": "seen", "metric": "logme",
                          "value": LOGME[i]} for i, layer in enumerate(LAYERS)]
            w.append_metrics(rows)
            w.append_training({"seed": seed, "epoch": epoch})
    w.finish("finished")
    return w.run_id


def test_one_row_per_measure_the_run_computed(store, run):
    table = analysis.measure_agreement(run, measures=(*catalogue.metric_names(compared=True), "nc1"), store=store)
    assert list(table.index) == ["nmi", "knn_accuracy", "ncc_accuracy", "logme", "nc1"]
    assert list(table.columns) == analysis.AGREEMENT_COLUMNS
    assert table["best_layer"].to_dict() == {"nmi": "c", "knn_accuracy": "d", "ncc_accuracy": "c", "logme": "e",
                                             "nc1": "d"}
    assert table.loc["nmi", "value"] == pytest.approx(0.7) and table.loc["nc1", "value"] == pytest.approx(0.5)
    assert table.loc["logme", ["split", "epoch"]].tolist() == ["seen", 0]
    assert table.loc["nmi", ["split", "epoch"]].tolist() == ["unseen", 1]
    assert table.loc["nmi", "best_share"] == pytest.approx(0.8) and np.isnan(table.loc["ncc_accuracy", "best_share"])
    for measure, values in {**UNSEEN, "logme": LOGME}.items():
        sign = -1 if measure == "nc1" else 1                       # orderings compared best-first
        expected = spearmanr(sign * np.asarray(values), UNSEEN["nmi"]).statistic
        assert table.loc[measure, "spearman"] == pytest.approx(expected), measure
    assert table.loc["nmi", "spearman"] == pytest.approx(1.0) and (table["n_layers"] == 5).all()
    assert any("linear_probe_accuracy" in note for note in table.attrs["notes"])


def test_the_nmi_row_is_g(store, run):
    rec = store.load(run)
    gen = analysis.latest_generalization(rec.metrics, layers=LAYERS)
    row = analysis.measure_agreement(run, store=store).loc["nmi"]
    assert (row["best_layer"], row["value"], row["best_share"]) == (gen["layer"], gen["g"], gen["best_share"])
    earlier = analysis.measure_agreement(run, epoch=0, store=store)
    assert earlier.loc["nmi", "epoch"] == 0 and earlier.loc["logme", "epoch"] == 0


def test_a_record_serves_as_the_run(store, run):
    table = analysis.measure_agreement(run, store=store)
    pd.testing.assert_frame_equal(analysis.measure_agreement(store.load(run)), table)


def test_identical_taps_count_once_and_report_the_deeper_tap(store, make_run):
    run_id = make_run(layers=("a", "b", "c", "d"), nmi=lambda seed, epoch, i: [0.2, 0.9, 0.9, 0.4][i],
                      meta={"layer_aliases": {"b": "c"}})
    row = analysis.measure_agreement(run_id, store=store).loc["nmi"]
    assert row["best_layer"] == "c" and row["n_layers"] == 3


def test_a_tiny_run_agrees_with_generalization(tiny_run):
    store, run_id, _ = tiny_run
    rec = store.load(run_id)
    table = analysis.measure_agreement(run_id, store=store)
    assert list(table.index) == ["nmi", "knn_accuracy"]              # what TINY measures of the five
    assert table.loc["nmi", "best_layer"] == rec.summary()["best_layer"]
    assert table.loc["nmi", "best_share"] == pytest.approx(rec.summary()["best_share"])


LABEL_FREE = {   # unseen images, no label read: the value of each layer at the last epoch
    "rankme": [3.0, 8.0, 9.0, 7.0, 2.0],                # higher is better
    "alpha_req": [0.3, 0.9, 1.3, 2.0, 3.0],             # closest to 1 is best: b
    "twonn_id": [30.0, 12.0, 10.0, 11.0, 25.0],         # lower is better
    "lidar": [1.0, 2.0, 3.0, 4.0, 5.0],                 # higher is better
}


@pytest.fixture
def label_free_run(store):
    from lab.config import RunConfig

    w = store.create(RunConfig(dataset="digits", backbone="mlp", epochs=1, seeds=(0, 1), lidar_views=2,
                               metrics=("nmi", "rankme", "alpha_req", "twonn_id", "lidar")))
    w.update_meta(layers=LAYERS, layer_aliases={})
    for seed, shift in ((0, -0.01), (1, 0.01)):
        for epoch in (0, 1):
            w.append_metrics([{"seed": seed, "epoch": epoch, "layer": layer, "split": "unseen", "metric": m,
                               "value": v[i] + shift + (0.0 if epoch == 1 else 0.5)}
                              for m, v in {"nmi": UNSEEN["nmi"], **LABEL_FREE}.items()
                              for i, layer in enumerate(LAYERS)])
            w.append_training({"seed": seed, "epoch": epoch})
    w.finish("finished")
    return w.run_id


def test_the_label_free_rows_follow_their_literature_direction(store, label_free_run):
    table = analysis.measure_agreement(label_free_run, store=store)
    assert list(table.index) == ["nmi", "rankme", "alpha_req", "twonn_id", "lidar"]
    assert table["best_layer"].to_dict() == {"nmi": "c", "rankme": "c", "alpha_req": "b", "twonn_id": "c",
                                             "lidar": "e"}
    assert (table["split"] == "unseen").all() and (table["epoch"] == 1).all()
    # the value is the measure's own seed mean at its best layer (alpha-ReQ's, not its distance to 1)
    assert table["value"].drop("nmi").to_dict() == pytest.approx({"rankme": 9.0, "alpha_req": 0.9,
                                                                  "twonn_id": 10.0, "lidar": 5.0})
    assert table["best_share"].drop("nmi").isna().all()                  # no bootstrap for them
    oriented = {"rankme": np.asarray(LABEL_FREE["rankme"]), "lidar": np.asarray(LABEL_FREE["lidar"]),
                "twonn_id": -np.asarray(LABEL_FREE["twonn_id"]),
                "alpha_req": -np.abs(np.asarray(LABEL_FREE["alpha_req"]) - 1.0)}
    for measure, values in oriented.items():
        assert table.loc[measure, "spearman"] == pytest.approx(spearmanr(values, UNSEEN["nmi"]).statistic), measure
    assert table.loc["alpha_req", "label"] == "α-ReQ"


def test_label_free_rows_at_an_earlier_epoch_and_without_nmi(store, label_free_run):
    earlier = analysis.measure_agreement(label_free_run, epoch=0, store=store)
    assert earlier.loc["rankme", "epoch"] == 0 and earlier.loc["rankme", "value"] == pytest.approx(9.5)
    alone = analysis.measure_agreement(label_free_run, measures=("rankme", "twonn_id"), store=store)
    assert list(alone.index) == ["rankme", "twonn_id"] and alone["spearman"].isna().all()
    assert any("no rank correlation with NMI" in note for note in alone.attrs["notes"])
