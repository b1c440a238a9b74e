"""The per-image record (issue 35): each unseen image's kNN vote, class-centre margin and k-means cluster
per layer, stored per evaluation; the image table (arrival layer, forgetting) and the selection report.

References are independent: scikit-learn's leave-one-out 1-NN and normalized_mutual_info_score, numpy
class means and distances, and hand-made right/wrong tables.
"""
from __future__ import annotations

import shutil
import warnings
from functools import partial

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import normalized_mutual_info_score
from sklearn.model_selection import LeaveOneOut, cross_val_predict
from sklearn.neighbors import KNeighborsClassifier

from lab import analysis
from lab.errors import NoImageRecordError, user_message
from lab.metrics import compute_layer
from tests.fixtures.blobs import blobs as gaussian_blobs

LAYERS = ("a", "b", "c")


blobs = partial(gaussian_blobs, n_per_class=(12, 10, 9, 11), d=6, spread=1.5)   # four classes of unequal sizes


def numpy_margins(X, y):
    classes = np.unique(y)
    mu = np.stack([X[y == k].mean(axis=0) for k in classes])                        # (K, d)
    dist = np.linalg.norm(X[:, None, :] - mu[None], axis=2)                           # (N, K)
    own = dist[np.arange(len(y)), np.searchsorted(classes, y)]
    dist[np.arange(len(y)), np.searchsorted(classes, y)] = np.inf
    centre = np.linalg.norm(mu[:, None] - mu[None], axis=2)
    return (dist.min(axis=1) - own) / centre[np.triu_indices(len(classes), 1)].mean()


def numpy_cdnv(X, y, classes):
    mu = {k: X[y == k].mean(axis=0) for k in classes}
    var = {k: ((X[y == k] - mu[k]) ** 2).sum(axis=1).mean() for k in classes}
    return np.mean([(var[i] + var[j]) / (2 * np.sum((mu[i] - mu[j]) ** 2))
                    for n, i in enumerate(classes) for j in classes[n + 1:]])


# -- the per-image samples the evaluation computes ----------------------------------------------------------
def test_margins_and_class_pairs_match_numpy_and_the_ncc_rule():
    X, y = blobs(seed=0)
    values, samples = compute_layer(X, y, metrics=("knn_accuracy", "ncc_accuracy", "cdnv"), return_samples=True,
                                    return_margins=True)
    np.testing.assert_allclose(samples["margin"], numpy_margins(X, y), rtol=1e-12, atol=1e-12)
    # positive margin <=> the nearest class mean is its own: the NCC accuracy is the share of positive margins
    assert np.mean(samples["margin"] > 0) == values["ncc_accuracy"]
    pairs = samples["cdnv_pairs"]
    assert pairs.shape == (4, 4) and np.isnan(np.diag(pairs)).all() and np.allclose(pairs, pairs.T, equal_nan=True)
    assert pairs[np.triu_indices(4, 1)].mean() == pytest.approx(values["cdnv"], rel=1e-12)
    some = [0, 2, 3]
    assert numpy_cdnv(X, y, some) == pytest.approx(pairs[np.ix_(some, some)][np.triu_indices(3, 1)].mean())
    # without return_margins nothing changes for the bootstrap's callers
    assert set(compute_layer(X, y, metrics=("knn_accuracy",), return_samples=True)[1]) == {"knn_accuracy"}


def test_knn_votes_are_scikit_learns_leave_one_out_1nn():
    X, y = blobs(seed=1)
    _, samples = compute_layer(X, y, metrics=("knn_accuracy",), return_samples=True)
    predicted = cross_val_predict(KNeighborsClassifier(n_neighbors=1), X, y, cv=LeaveOneOut())
    np.testing.assert_array_equal(samples["knn_accuracy"], predicted == y)


def test_margins_of_coinciding_class_means_are_nan_not_an_error():
    X = np.ones((12, 3))
    y = np.repeat([0, 1, 2], 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, samples = compute_layer(X, y, metrics=("knn_accuracy",), return_samples=True, return_margins=True)
    assert np.isnan(samples["margin"]).all() and np.isnan(samples["cdnv_pairs"]).all()


# -- arrival layer and forgetting on a hand-made table -------------------------------------------------------
def test_arrival_layer_and_forgetting_on_a_hand_made_table():
    T, F, NA = True, False, pd.NA
    right = pd.DataFrame([
        [F, F, F, F],      # never right: no arrival
        [T, T, T, T],      # right from the first layer
        [F, T, F, T],      # right at b, lost at c, back at d: arrives at d
        [T, T, T, F],      # right until the final layer: no arrival, forgotten (best layer b)
        [F, T, T, T],      # arrives at b
        [NA, T, T, T],     # no vote at a counts as not right: arrives at b
    ], columns=["a", "b", "c", "d"], dtype="boolean")
    got = analysis.image_answers(right, best_layer="b")
    assert got["arrival_layer"].tolist() == [None, "a", "d", None, "b", "b"]
    assert got["n_right"].tolist() == [0, 4, 2, 3, 3, 3]
    assert got["forgotten"].tolist() == [False, False, False, True, False, False]
    assert not analysis.image_answers(right, best_layer="d")["forgotten"].any()      # best = final: none forgotten
    assert analysis.image_answers(right)["forgotten"].isna().all()                   # best layer unknown


# -- the stored record, written with chosen values ----------------------------------------------------------
@pytest.fixture(scope="module")
def blob_layers():
    """Three layers of blobs and what one evaluation measures on them: (features {layer: X}, y, values, samples)."""
    y = blobs(seed=0)[1]
    features = {layer: blobs(seed=0, noise=s)[0] for layer, s in zip(LAYERS, (2.0, 0.6, 1.2))}
    values, samples = {}, {}
    for layer, X in features.items():
        values[layer], samples[layer] = compute_layer(X, y, metrics=("nmi", "knn_accuracy", "cdnv"),
                                                      return_samples=True, return_margins=True)
    return features, y, values, samples


@pytest.fixture
def written(store, blob_layers):
    """A run with two evaluations (seed 0, epochs 0 and 1) whose records hold ``blob_layers``'s samples, with the
    metric rows of those layers: (run_id, features {layer: X}, y, samples)."""
    from lab.config import RunConfig

    features, y, values, samples = blob_layers
    w = store.create(RunConfig(dataset="digits", backbone="mlp", epochs=1))
    w.update_meta(layers=list(LAYERS), split={"seen": ["s0"], "unseen": ["w", "x", "y", "z"]})
    for epoch in (0, 1):
        w.append_metrics([{"seed": 0, "epoch": epoch, "layer": layer, "split": "unseen", "metric": m, "value": v}
                          for layer in LAYERS for m, v in values[layer].items()])
        w.save_image_record(0, epoch, list(LAYERS), y, samples)
        w.append_training({"seed": 0, "epoch": epoch})
    w.finish("finished")
    return w.run_id, features, y, samples


def test_the_record_reads_back_what_was_written(store, written):
    run_id, features, y, samples = written
    rec = store.load(run_id)
    assert rec.image_record_keys().values.tolist() == [[0, 0], [0, 1]]
    got = rec.image_record()
    assert (got.seed, got.epoch, got.layers) == (0, 1, LAYERS)
    np.testing.assert_array_equal(got.labels, y)
    for i, layer in enumerate(LAYERS):
        np.testing.assert_array_equal(got.right[i], samples[layer]["knn_accuracy"])
        np.testing.assert_array_equal(got.cluster[i], samples[layer]["nmi"])
        np.testing.assert_array_equal(got.margin[i], samples[layer]["margin"].astype(np.float16))
        np.testing.assert_allclose(got.cdnv_pairs[i], samples[layer]["cdnv_pairs"], rtol=1e-7)
    assert got.voted.all()


def test_image_table_has_one_row_per_image_and_a_column_per_layer(store, written):
    run_id, _, y, samples = written
    table = analysis.image_table(run_id, store=store)
    assert len(table) == len(y) and table.index.name == "image"
    assert list(table.columns) == ["class", "label", "arrival_layer", "forgotten", "n_right", *LAYERS]
    assert table["class"].tolist() == [["w", "x", "y", "z"][k] for k in y]
    assert table["b"].tolist() == samples["b"]["knn_accuracy"].tolist()
    assert table.attrs["best_layer"] == analysis.latest_generalization(store.load(run_id).metrics,
                                                                       layers=list(LAYERS))["layer"]
    counts = analysis.arrival_counts(table)
    assert list(counts.index) == [*LAYERS, "never"] and counts.sum() == len(y)
    assert counts["never"] == (~table["c"]).sum() and counts["a"] == table[list(LAYERS)].all(axis=1).sum()
    margins = analysis.image_table(run_id, values="margin", store=store)
    assert margins["a"].to_numpy() == pytest.approx(samples["a"]["margin"], abs=2e-3)
    with pytest.raises(ValueError, match="values must be one of 'right', 'margin', 'cluster'; got 'votes'"):
        analysis.image_table(run_id, values="votes", store=store)


def test_selection_measures_match_independent_references(store, written):
    run_id, features, y, samples = written
    chosen = np.array([0, 3, 4, 7, 8, 11, 15, 16, 20, 23, 30])
    report = analysis.selection_report(run_id, chosen.tolist(), store=store)
    assert list(report.index) == list(LAYERS) and list(report.columns) == analysis.SELECTION_COLUMNS
    assert report.attrs["notes"] == []
    classes = sorted(set(y[chosen]))
    rec = store.load(run_id)
    metric = rec.metrics.set_index(["epoch", "layer", "metric"])["value"]
    for layer, X in features.items():
        row, s = report.loc[layer], samples[layer]
        assert row["n"] == chosen.size and row["n_classes"] == len(classes)
        assert row["share_right"] == pytest.approx(s["knn_accuracy"][chosen].mean())
        assert row["mean_margin"] == pytest.approx(s["margin"][chosen].mean(), abs=1e-3)
        assert row["nmi"] == pytest.approx(normalized_mutual_info_score(y[chosen], s["nmi"][chosen]), abs=1e-12)
        assert row["cdnv"] == pytest.approx(numpy_cdnv(X, y, classes), rel=1e-6)
        # on every image: the run's own numbers
        assert row["all_share_right"] == pytest.approx(metric[(1, layer, "knn_accuracy")], abs=1e-12)
        assert row["all_nmi"] == pytest.approx(metric[(1, layer, "nmi")], abs=1e-12)
        assert row["all_cdnv"] == pytest.approx(metric[(1, layer, "cdnv")], rel=1e-6)


@pytest.mark.parametrize("indices, note, measured", [
    ([], "the selection holds no image: no measure on it", ()),
    ([0, 0, 5, 5, 5], "3 repeated indices were counted once", ("share_right", "mean_margin", "nmi", "cdnv")),
    ([999, -1, 2], "2 of the selected indices (999, -1) are not positions among the 42 unseen images (0-41) "
                   "and were left out", ("share_right", "mean_margin")),
    ([1.5, 2], "the selection must hold image positions (integers 0-41); 1 is not (1.5): no measure on it", ()),
    ([True, False], "the selection must hold image positions", ()),
    ("0,1,2", "the selection must be a list of image positions (integers 0-41); got str: no measure on it", ()),
    (None, "got NoneType: no measure on it", ()),
])
def test_bad_selections_say_which_measure_they_cannot_give(store, written, indices, note, measured):
    run_id = written[0]
    report = analysis.selection_report(run_id, indices, store=store)
    assert any(note in n for n in report.attrs["notes"]), report.attrs["notes"]
    for column in ("share_right", "mean_margin", "nmi", "cdnv"):
        assert report[column].notna().all() == (column in measured), column
    assert report["all_nmi"].notna().all()                         # the all-image curve is always there


def test_a_view_can_report_on_a_record_it_holds(store, written):
    run_id = written[0]
    record = store.load(run_id).image_record()
    held = analysis.selection_measures(record, [1, 2, 10], class_names=["w", "x", "y", "z"])   # classes 1, 0, 3
    report = analysis.selection_report(run_id, [1, 2, 10], store=store)
    pd.testing.assert_frame_equal(held, report)
    assert report.attrs == {**held.attrs, "run_id": run_id} and held.attrs["classes"] == ["w", "x", "z"]


def test_a_record_or_a_store_path_serves_as_well_as_the_id(store, written):
    run_id = written[0]
    rec = store.load(run_id)
    table = analysis.image_table(run_id, store=store)
    pd.testing.assert_frame_equal(analysis.image_table(rec), table)              # the run as a record
    pd.testing.assert_frame_equal(analysis.image_table(run_id, store=store.root), table)   # the store as a path
    report = analysis.selection_report(rec, [1, 2, 9])
    pd.testing.assert_frame_equal(report, analysis.selection_report(run_id, [1, 2, 9], store=store))
    assert report.attrs["run_id"] == run_id
    assert analysis.has_image_record(rec) and analysis.image_record_problem(rec) is None


def test_a_one_class_selection_gives_no_nmi_or_cdnv(store, written):
    run_id, _, y, _ = written
    report = analysis.selection_report(run_id, np.flatnonzero(y == 2), store=store)
    assert report.attrs["notes"] == ["the selection holds one class (y): NMI and CDNV need at least two classes"]
    assert report[["nmi", "cdnv"]].isna().all().all() and report["share_right"].notna().all()


def test_an_old_run_without_the_record_says_so_in_one_line(store, make_run):
    run_id = make_run()
    problem = analysis.image_record_problem(run_id, store=store)
    assert "has no per-image record: it was recorded without it; run it again" in problem
    assert not analysis.has_image_record(run_id, store=store)
    for call in (lambda: analysis.image_table(run_id, store=store),
                 lambda: analysis.selection_report(run_id, [0], store=store)):
        with pytest.raises(NoImageRecordError) as info:
            call()
        assert str(info.value) == problem and user_message(info.value) == problem and "\n" not in problem


def test_a_run_without_knn_accuracy_says_the_record_needs_it(store, make_run):
    run_id = make_run(metrics=("nmi", "cdnv"))
    assert "did not measure knn_accuracy" in analysis.image_record_problem(run_id, store=store)


def test_a_run_still_in_its_first_evaluation_says_the_record_comes_with_it(store, make_run):
    run_id = make_run(status=None)                                 # "running", this process alive
    assert "has not finished an evaluation yet" in analysis.image_record_problem(run_id, store=store)


def test_a_missing_seed_or_epoch_names_what_is_recorded(store, written):
    run_id = written[0]
    assert analysis.image_record_problem(run_id, epoch=5, store=store) == (
        f"run {run_id!r} has no per-image record for seed 0 at epoch 5 (recorded epochs: [0, 1])")
    assert "recorded for seeds [0]" in analysis.image_record_problem(run_id, seed=3, store=store)


def test_a_damaged_record_part_leaves_the_rest_readable(store, written):
    run_id = written[0]
    latest = store.load(run_id).image_record().epoch
    part = sorted((store.path(run_id) / "tables" / "images").glob("s0-e0001-*.parquet"))[-1]
    part.write_bytes(part.read_bytes()[:100])                        # truncated mid-write
    rec = store.load(run_id)
    assert "partially damaged" in rec.damage and len(rec.metrics)    # the run still loads
    with pytest.warns(UserWarning, match="skipping the damaged per-image record"):
        table = analysis.image_table(run_id, store=store)            # the latest readable evaluation
    assert table.attrs["epoch"] == latest - 1
    with pytest.raises(NoImageRecordError, match="epoch 1 is damaged .*delete that file, or run it again"):
        analysis.selection_report(run_id, [0, 1], epoch=1, store=store)


def test_the_exported_notebook_rebuilds_a_selection_report(store, written):
    import ast

    import lab
    from lab.export import build_notebook

    run_id = written[0]
    nb = build_notebook([run_id], store=store, selection=[0, 3, 4, 7])
    [cell] = [c for c in nb.cells if "images" in c.metadata.get("tags", [])]
    assigned = {t.targets[0].id: t.value for t in ast.parse(cell.source).body if isinstance(t, ast.Assign)}
    assert ast.literal_eval(assigned["IMAGES_RUN"]) == run_id
    assert ast.literal_eval(assigned["SELECTION"]) == [0, 3, 4, 7]
    shown = []
    loaded = {"lab": lab, "store": store, "RUN_IDS": [run_id], "runs": {run_id: store.load(run_id)}}   # cell 2's
    exec(cell.source, {**loaded, "display": lambda *a: shown.extend(a)})
    expected = analysis.selection_report(run_id, [0, 3, 4, 7], store=store)
    report = next(s for s in shown if isinstance(s, pd.DataFrame) and "share_right" in s)
    pd.testing.assert_frame_equal(report, expected)
    with pytest.raises(ValueError, match="selection must be a list of image positions"):
        build_notebook([run_id], store=store, selection=["0; import os"])


# -- a real run --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tiny_run):
    store, run_id, _ = tiny_run
    return store, run_id, store.load(run_id)


def test_a_run_records_every_evaluation_and_agrees_with_its_metrics(tiny):
    store, run_id, rec = tiny
    assert rec.image_record_keys().values.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    n = rec.meta["n_images"]["unseen"]
    layers = [layer["name"] for layer in rec.meta["layers"]]
    for seed in (0, 1):
        table = analysis.image_table(run_id, seed=seed, store=store)
        assert len(table) == n and list(table.columns[5:]) == layers
        report = analysis.selection_report(run_id, range(n), seed=seed, store=store)
        metric = rec.metrics[(rec.metrics["seed"] == seed) & (rec.metrics["epoch"] == 1)
                             & (rec.metrics["split"] == "unseen")].set_index(["layer", "metric"])["value"]
        for layer in layers:
            # the stored votes are the ones the kNN accuracy counted; the clusters those of the NMI
            assert table[layer].mean() == pytest.approx(metric[(layer, "knn_accuracy")], abs=1e-12)
            assert report.loc[layer, "all_nmi"] == pytest.approx(metric[(layer, "nmi")], abs=1e-12)
            assert report.loc[layer, "all_cdnv"] == pytest.approx(metric[(layer, "cdnv")], rel=1e-6)
            assert report.loc[layer, "share_right"] == report.loc[layer, "all_share_right"]


def test_a_run_whose_record_folder_is_gone_reads_as_an_old_run(tiny, tmp_path):
    from lab.store import RunStore

    store, run_id, rec = tiny
    copy = RunStore(tmp_path / "copy")
    shutil.copytree(rec.path, copy.root / run_id)
    shutil.rmtree(copy.root / run_id / "tables" / "images")
    assert "has no per-image record: it was recorded without it" in analysis.image_record_problem(run_id, store=copy)
    assert copy.load(run_id).summary()["g"] == pytest.approx(rec.summary()["g"])


def test_a_run_without_knn_accuracy_stores_no_record(store, tiny_config, one_thread):
    from lab.runs import run

    events = list(run(tiny_config(epochs=0, metrics=("nmi", "cdnv"), projection="none"), store=store))
    assert events[-1].kind == "run_finished"
    rec = store.load(events[-1].run_id)
    assert not (rec.path / "tables" / "images").exists()
    assert "did not measure knn_accuracy" in rec.image_record_problem()
