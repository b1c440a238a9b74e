"""What a stored run that is not a happy path says about what it lacks: true to how it ended."""
from __future__ import annotations

import pytest


def test_a_run_cancelled_before_its_first_evaluation_says_so_not_that_it_was_recorded_without(cancelled_run):
    from lab import analysis
    from lab.errors import NoImageRecordError

    store, run_id = cancelled_run
    rec = store.load(run_id)
    assert rec.status == "cancelled" and not rec.evaluated and rec.metrics.empty
    for problem in (rec.image_record_problem(), rec.class_means_problem,
                    analysis.image_record_problem(run_id, store=store)):
        assert problem.startswith(f"run {run_id!r} was cancelled before its first evaluation: it measured nothing")
        assert "recorded without" not in problem and "run it again" not in problem
    with pytest.raises(NoImageRecordError, match="before its first evaluation"):
        rec.image_record()


def test_an_evaluated_run_without_the_record_still_says_it_was_recorded_without_it(make_run, store):
    rec = store.load(make_run())
    assert rec.evaluated
    assert "it was recorded without it; run it again" in rec.image_record_problem()
    assert "it was recorded without them; run it again" in rec.class_means_problem
