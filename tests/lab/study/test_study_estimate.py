"""A study's estimate: stored cells counted, new cells timed from comparable stored runs or the measured defaults."""
from __future__ import annotations

import pytest

from lab.study import DEFAULT_SECONDS, Study, estimate_line
from lab.study.estimates import RunTiming

BASE = {"dataset": "digits", "img_size": 32, "epochs": 2}
AXES = {"backbone": ["mlp:depth=2,width=16", "resnet18"], "seeds": [[0], [1]]}
MLP = AXES["backbone"][0]


def _timings(fixed: float, epoch_0: float, per_epoch: float, epochs: int = 2) -> dict:
    rows = [{"seed": 0, "epoch": e, "total": epoch_0 if e == 0 else per_epoch} for e in range(epochs + 1)]
    return {"run": {"total": fixed + sum(r["total"] for r in rows)}, "epochs": rows}


@pytest.fixture
def stored(make_run, store):
    """Two finished runs of the MLP at 32 px (one of them the study's cell backbone=MLP, seeds=[0]) and a failed one."""
    make_run(backbone=MLP, img_size=32, epochs=2, meta={
        "study": "e", "cell": {"backbone": MLP, "seeds": [0]}, "timings": _timings(2.0, 2.0, 3.0)})
    make_run(backbone=MLP, img_size=32, epochs=2, meta={"timings": _timings(4.0, 2.0, 5.0)})
    make_run(backbone=MLP, img_size=32, epochs=2, status="failed", meta={
        "study": "e", "cell": {"backbone": MLP, "seeds": [1]}, "timings": _timings(100.0, 100.0, 100.0)})
    return store


def test_stored_cells_cost_nothing_and_new_ones_use_comparable_runs_or_the_default(stored):
    table = Study("e", BASE, AXES).estimate(store=stored)
    assert list(table.columns) == ["index", "backbone", "seeds", "family", "stored", "seconds", "basis", "source"]
    rows = {(r.backbone, r.seeds): r for r in table.itertuples()}
    done = rows[(MLP, "[0]")]
    assert done.stored and done.seconds == 0 and done.basis == "stored"
    # the median of the two finished runs' parts (the failed one counts for neither): 3 + 1 * (2 + 2 * 4)
    new = rows[(MLP, "[1]")]
    assert not new.stored and new.basis == "runs" and new.seconds == pytest.approx(13.0)
    assert new.source == f"median of 2 stored runs of {MLP} on digits at 32 px, scaled by epochs and seeds"
    resnet = rows[("resnet18", "[0]")]
    assert resnet.family == "timm" and resnet.basis == "default"
    assert resnet.seconds == pytest.approx(DEFAULT_SECONDS["timm"].seconds(1, 2))
    assert resnet.source == "measured default for the timm family, scaled by epochs and seeds"
    total = 13.0 + 2 * DEFAULT_SECONDS["timm"].seconds(1, 2)
    assert estimate_line(table) == (f"4 cells · 1 already stored · about {round(total)} s (1 from stored runs' "
                                    f"timings, 2 from measured defaults for the timm family)")


def test_runs_at_another_size_are_not_comparable(stored):
    table = Study("e", {**BASE, "img_size": 16}, {"backbone": [MLP]}).estimate(store=stored)
    (row,) = table.itertuples()
    assert row.basis == "default" and row.family == "mlp"
    assert estimate_line(table) == ("1 cell · 0 already stored · about 1 s (1 from measured defaults for the mlp "
                                    "family)")


def test_the_table_follows_the_run_order_and_a_stored_study_has_nothing_left(stored):
    study = Study("e", BASE, AXES, order="shuffled", order_seed=2)
    table = study.estimate(store=stored)
    assert list(table["index"]) == [c.index for c in study.run_order()]
    one = Study("e", BASE, {"backbone": [MLP], "seeds": [[0]]}).estimate(store=stored)
    assert estimate_line(one) == "1 cell · 1 already stored · nothing left to run"


def test_the_three_parts_of_a_real_run_add_up_to_its_time(tiny_run):
    store, run_id, _ = tiny_run
    meta = store.load(run_id).meta
    timing = RunTiming.of(meta["timings"])
    assert timing.fixed >= 0 and timing.epoch_0 > 0 and timing.per_epoch > 0
    # 2 seeds x 1 epoch, as the run was
    assert timing.seconds(2, 1) == pytest.approx(meta["timings"]["run"]["total"], abs=1e-3)
    assert RunTiming.of({}) is None and RunTiming.of({"run": {"total": 1.0}, "epochs": []}) is None


def test_durations_read_in_minutes_and_hours():
    import pandas as pd

    def line(seconds):
        return estimate_line(pd.DataFrame([{"stored": False, "seconds": seconds, "basis": "runs", "family": "mlp"}]))

    assert "about 9 min" in line(9 * 60 + 10)
    assert "about 2 h 05 min" in line(125 * 60)
