"""Do the measures agree over a study? study_agreement against a hand computation with pandas and scipy on
synthetic runs: per measure, how often its best layer is NMI's, and its median Spearman with NMI."""
from __future__ import annotations

import pandas as pd
import pytest
from scipy.stats import spearmanr

from lab import analysis

LAYERS = ["a", "b", "c", "d"]
RUNS = [   # per run, per measure, the unseen value of each layer (one seed, one evaluation)
    {"nmi": [0.1, 0.4, 0.8, 0.3], "rankme": [2.0, 5.0, 9.0, 4.0], "twonn_id": [20.0, 9.0, 12.0, 30.0]},
    {"nmi": [0.2, 0.9, 0.5, 0.1], "rankme": [1.0, 3.0, 2.0, 8.0], "twonn_id": [40.0, 5.0, 6.0, 7.0]},
    {"nmi": [0.7, 0.6, 0.2, 0.1], "rankme": [6.0, 7.0, 1.0, 3.0], "twonn_id": [4.0, 8.0, 9.0, 3.0],
     "knn_accuracy": [0.9, 0.8, 0.7, 0.1]},
]


def _write(store, values, *, nmi=True):
    from lab.config import RunConfig

    w = store.create(RunConfig(dataset="digits", backbone="mlp", epochs=0, strategy="none"))
    w.update_meta(layers=LAYERS, layer_aliases={})
    w.append_metrics([{"seed": 0, "epoch": 0, "layer": layer, "split": "unseen", "metric": m, "value": v[i]}
                      for m, v in values.items() if nmi or m != "nmi" for i, layer in enumerate(LAYERS)])
    w.append_training({"seed": 0, "epoch": 0})
    w.finish("finished")
    return w.run_id


def _by_hand(runs) -> pd.DataFrame:
    rows = []
    for values in runs:
        frame = pd.DataFrame(values, index=LAYERS)
        best_nmi = frame["nmi"].idxmax()
        for measure in frame.columns.drop("nmi"):
            oriented = -frame[measure] if measure == "twonn_id" else frame[measure]
            rows.append({"measure": measure, "same": oriented.idxmax() == best_nmi,
                         "rho": spearmanr(oriented, frame["nmi"]).statistic})
    rows = pd.DataFrame(rows)
    return rows.groupby("measure").agg(n_runs=("same", "size"), same_best_layer=("same", "sum"),
                                       share_same=("same", "mean"), median_spearman=("rho", "median"))


def test_share_and_median_spearman_match_a_hand_computation(store):
    ids = [_write(store, values) for values in RUNS]
    table = analysis.study_agreement(ids, store=store)
    assert list(table.columns) == analysis.STUDY_AGREEMENT_COLUMNS
    assert list(table.index) == ["knn_accuracy", "rankme", "twonn_id"]          # metric_names(compared=True) order
    expected = _by_hand(RUNS)
    for measure, row in expected.iterrows():
        got = table.loc[measure]
        assert (got["n_runs"], got["same_best_layer"]) == (row["n_runs"], row["same_best_layer"]), measure
        assert got["share_same"] == pytest.approx(row["share_same"]), measure
        assert got["median_spearman"] == pytest.approx(row["median_spearman"]), measure
    assert table.loc["rankme", "share_same"] == pytest.approx(1 / 3)     # runs 2 and 3: d against b, b against a
    assert table.loc["knn_accuracy", ["n_runs", "n_spearman"]].tolist() == [1, 1]
    assert table.loc["rankme", "label"] == "RankMe"
    # records serve as well as ids
    pd.testing.assert_frame_equal(analysis.study_agreement([store.load(i) for i in ids]), table)


def test_a_run_without_nmi_is_left_out_with_a_note(store):
    ids = [_write(store, RUNS[0]), _write(store, RUNS[1], nmi=False)]
    table = analysis.study_agreement(ids, store=store)
    assert table.loc["rankme", "n_runs"] == 1
    assert any(ids[1] in note for note in table.attrs["notes"])
    empty = analysis.study_agreement([ids[1]], store=store)
    assert empty.empty and list(empty.columns) == analysis.STUDY_AGREEMENT_COLUMNS


def test_a_study_reads_its_finished_runs(store, monkeypatch):
    from lab.study import Study

    ids = [_write(store, values) for values in RUNS[:2]]
    study = Study("s", {"dataset": "digits", "backbone": "mlp"}, {"lr": [1e-3]})
    monkeypatch.setattr(Study, "records", lambda self, *, store=None, finished_only=True: [store.load(i) for i in ids])
    pd.testing.assert_frame_equal(analysis.study_agreement(study, store=store),
                                  analysis.study_agreement(ids, store=store))


def test_anything_else_is_refused_with_what_to_pass():
    with pytest.raises(ValueError, match="a lab.Study or a list of its runs"):
        analysis.study_agreement("run-id")


def test_a_finished_runs_table_is_computed_once_until_the_run_is_written_again(monkeypatch, make_run, store):
    """The Studies tab re-reads a running study as each cell lands: a finished run's table is reused."""
    import importlib
    import os

    module = importlib.import_module("lab.analysis.study_agreement")     # the package's name is the function

    rec = store.load(make_run())
    calls = []
    real = module.agreement_table
    monkeypatch.setattr(module, "agreement_table", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = module.study_agreement([rec])
    again = module.study_agreement([rec])
    assert len(calls) == 1 and again.equals(first)
    meta = rec.path / "meta.json"
    stat = meta.stat()
    os.utime(meta, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))      # the run written again
    module.study_agreement([rec])
    assert len(calls) == 2
