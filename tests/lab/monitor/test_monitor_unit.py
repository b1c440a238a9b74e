"""lab.Monitor(unit=...): a plain loop says whether its evaluation numbers count epochs or optimizer steps."""
from __future__ import annotations

import pytest


def test_a_plain_loop_says_it_counts_steps_and_the_run_keeps_it(monitored_run):
    store, run_id = monitored_run
    rec = store.load(run_id)
    assert rec.meta["axis"] == "step"
    assert sorted(set(rec.metrics["epoch"])) == [0, 4, 8]


def test_the_unit_defaults_to_epoch_and_a_wrong_one_is_refused(tmp_path):
    import lab
    from tests.fixtures.small_loop import digits_split, small_mlp

    unseen, _, _ = digits_split()
    model = small_mlp()
    with pytest.raises(ValueError, match=r"unit must be 'epoch' or 'step'.*Got 'steps' instead"):
        lab.Monitor(model, unseen=unseen, store=False, unit="steps")
    store = lab.RunStore(tmp_path / "runs")
    with lab.Monitor(model, unseen=unseen, store=store, metrics=("nmi",)) as mon:
        pass
    assert store.load(mon.run_id).meta["axis"] == "epoch"
