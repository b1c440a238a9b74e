"""The law of equi-separation in the run summary (lab.analysis.latest_separation_law, run_summary's
``separation_law``) and per condition of a study (group_separation_law), checked against numpy on hand-made
tables and on a real stored run."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from lab import analysis

LAYERS = ["fc1", "fc2", "fc3", "fc4"]


def _rows(ratio: float, *, seed=0, epoch=0, split="train", start=2.0, layers=LAYERS) -> list[dict]:
    """One evaluation's NC1 rows, an exact geometric sequence with ``ratio`` per layer."""
    return [{"seed": seed, "epoch": epoch, "layer": layer, "split": split, "metric": "nc1",
             "value": start * ratio ** i} for i, layer in enumerate(layers)]


def _table(rows) -> pd.DataFrame:
    return pd.DataFrame([r for part in rows for r in part])


def test_each_split_at_its_last_epoch_with_the_seeds_mean_and_spread():
    ratios = {("train", 0): 0.5, ("train", 1): 0.6, ("seen", 0): 0.7, ("seen", 1): 0.8,
              ("unseen", 0): 1.3, ("unseen", 1): 1.5}
    rows = [_rows(0.99, seed=s, epoch=0, split=sp) for sp in ("train", "seen", "unseen") for s in (0, 1)]
    rows += [_rows(q, seed=s, epoch=2, split=sp) for (sp, s), q in ratios.items()]
    law = analysis.latest_separation_law(_table(rows), layers=LAYERS, aliases={})
    assert list(law) == ["train", "seen", "unseen"]
    for split in law:
        both = np.array([ratios[(split, 0)], ratios[(split, 1)]])
        entry = law[split]
        assert set(entry) == set(analysis.LATEST_LAW_KEYS)
        assert entry["epoch"] == 2 and entry["n_seeds"] == 2 and entry["n_layers"] == 4 and entry["reason"] is None
        assert entry["ratio"] == pytest.approx(both.mean(), rel=1e-9)
        assert entry["ratio_std"] == pytest.approx(both.std(ddof=1), rel=1e-9)
        assert entry["slope"] == pytest.approx(np.log10(both).mean(), rel=1e-9)
        assert entry["r"] == pytest.approx(-1.0 if split != "unseen" else 1.0, abs=1e-9)
        assert entry["r_std"] == pytest.approx(0.0, abs=1e-9)


def test_a_split_measured_less_often_reports_its_own_last_epoch():
    rows = [_rows(0.5, epoch=1, split="train"), _rows(0.9, epoch=1, split="unseen"),
            _rows(1.2, epoch=3, split="unseen")]
    law = analysis.latest_separation_law(_table(rows), layers=LAYERS, aliases={})
    assert (law["train"]["epoch"], law["unseen"]["epoch"]) == (1, 3)
    assert law["unseen"]["ratio"] == pytest.approx(1.2, rel=1e-9)
    assert law["train"]["ratio_std"] is None and law["train"]["r_std"] is None      # one seed: no spread


def test_absent_law_is_none_with_the_reason_and_json_keeps_it():
    layers = ["fc1", "fc2", "pre_logits"]
    rows = [_rows(0.5, split=sp, layers=layers) for sp in ("train", "unseen")]
    law = analysis.latest_separation_law(_table(rows), layers=layers, aliases={"fc2": "pre_logits"})
    for entry in law.values():
        assert entry["ratio"] is None and entry["r"] is None and entry["n_layers"] == 2 and entry["n_seeds"] == 0
        assert entry["reason"].startswith("no law: 2 layer(s)")
    assert json.loads(json.dumps(law, allow_nan=False)) == law


def test_a_seed_without_the_law_is_named_and_left_out_of_the_mean():
    rows = [_rows(0.5, seed=0, epoch=1), _rows(0.7, seed=1, epoch=1)]
    table = _table(rows)
    table.loc[(table["seed"] == 1) & table["layer"].isin(["fc2", "fc3"]), "value"] = np.nan
    law = analysis.latest_separation_law(table, layers=LAYERS, aliases={})["train"]
    assert law["ratio"] == pytest.approx(0.5, rel=1e-9) and law["n_seeds"] == 1 and law["n_layers"] == 4
    assert law["reason"].startswith("seed 1: no law: 2 layer(s)") and "fc2 (nan), fc3 (nan)" in law["reason"]


def test_no_nc1_is_no_law_and_the_run_summary_carries_it():
    nmi = pd.DataFrame({"seed": 0, "epoch": 0, "layer": LAYERS, "split": "unseen", "metric": "nmi",
                        "value": [0.1, 0.2, 0.3, 0.4]})
    assert analysis.latest_separation_law(nmi, layers=LAYERS, aliases={}) is None
    assert analysis.run_summary(nmi, layers=LAYERS)["separation_law"] is None
    both = pd.concat([nmi, _table([_rows(0.5, split="unseen")])], ignore_index=True)
    summary = analysis.run_summary(both, layers=LAYERS)
    assert summary["separation_law"] == analysis.latest_separation_law(both, layers=LAYERS, aliases={})
    assert summary["separation_law"]["unseen"]["ratio"] == pytest.approx(0.5, rel=1e-9)


def test_per_condition_the_runs_are_pooled_as_seeds():
    a = [_table([_rows(0.5, seed=0, epoch=1)]), _table([_rows(0.6, seed=0, epoch=1)])]     # two runs, seed 0 each
    b = [_table([_rows(1.1, seed=0, epoch=1, split="unseen")])]
    table = analysis.group_separation_law({"lr=0.1": a, "lr=0.5": b}, {"lr=0.1": LAYERS, "lr=0.5": LAYERS},
                                            aliases={"lr=0.1": {}, "lr=0.5": {}})
    assert list(zip(table["group"], table["split"])) == [("lr=0.1", "train"), ("lr=0.5", "unseen")]
    first = table.iloc[0]
    assert first["n_seeds"] == 2 and first["ratio"] == pytest.approx(0.55, rel=1e-9)
    assert first["ratio_std"] == pytest.approx(np.std([0.5, 0.6], ddof=1), rel=1e-9)
    assert np.isnan(table.iloc[1]["ratio_std"]) and table.iloc[1]["r"] == pytest.approx(1.0, abs=1e-9)
    empty = analysis.group_separation_law({}, {})
    assert list(empty.columns) == ["group", "split", *analysis.LATEST_LAW_KEYS] and empty.empty


def test_a_real_run_reports_one_law_in_its_event_its_meta_and_its_record(tiny_run):
    store, run_id, events = tiny_run
    rec = store.load(run_id)
    expected = analysis.latest_separation_law(rec)
    assert set(expected) == {"train", "seen", "unseen"}
    # the tiny MLP's fc2 is pre_logits: two distinct layers, so no law, and the summary says why
    for entry in expected.values():
        assert entry["ratio"] is None and entry["reason"].startswith("no law: 2 layer(s)")
    assert events[-1].summary["separation_law"] == expected
    assert rec.summary()["separation_law"] == expected
    assert rec.meta["summary"]["separation_law"] == expected


def test_a_run_id_instead_of_its_record_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"Got str '2024-01-01-abc' instead; load a run id with lab.RunStore"):
        analysis.latest_separation_law("2024-01-01-abc")
