"""A run's cost: where its time goes (meta.json "timings", `runs show`, the live status line) and how much
of it is stored (keep_embeddings: the last evaluation's embeddings, every epoch's layouts)."""
from __future__ import annotations

import numpy as np
import pytest

from lab.config import RunConfig
from lab.export import tables
from lab.runs import run
from lab.runs.timings import STAGES, Timings, describe
from tests.fixtures.configs import TINY

LAYERS = ["fc1", "fc2", "pre_logits"]


pytestmark = pytest.mark.usefixtures("one_thread")      # conftest: torch on one thread


def _run(store, **changes):
    events = list(run(RunConfig(**{**TINY, **changes}), store=store))
    assert events[-1].kind == "run_finished", events[-1]
    return events, store.load(events[0].run_id)


def test_nested_blocks_count_once_and_the_stages_add_up_to_the_wall_time():
    clock = Timings()
    clock.begin_epoch()
    with clock.timed("evaluate"):
        with clock.timed("extract"):
            sum(range(200_000))
        with clock.timed("bootstrap"):
            sum(range(100_000))
    row = clock.end_epoch(0, 3)
    assert clock.seconds["evaluate"] >= clock.seconds["extract"] + clock.seconds["bootstrap"]
    assert clock.own["evaluate"] == pytest.approx(
        clock.seconds["evaluate"] - clock.seconds["extract"] - clock.seconds["bootstrap"])
    assert (row["seed"], row["epoch"]) == (0, 3) and row["extract"] > 0 and row["metrics"] > 0   # bootstrap: metrics
    assert sum(row[s] for s in STAGES) == pytest.approx(row["total"], abs=1e-3)
    assert describe(row).startswith(f"{row['total']:.1f} s: ") and "extract" in describe(row)
    with pytest.raises(ValueError, match="timing key must be one of load, train, .* Got 'fit' instead."):
        with clock.timed("fit"):
            pass


def test_meta_json_holds_the_timings_of_the_run_and_of_every_epoch(store, capsys):
    events, rec = _run(store)
    timings = rec.meta["timings"]
    assert timings["stages"] == list(STAGES)
    rows = timings["epochs"]
    assert [(r["seed"], r["epoch"]) for r in rows] == [(0, 0), (0, 1), (0, 2)]
    for r in rows:
        assert sum(r[s] for s in STAGES) == pytest.approx(r["total"], abs=1e-3)
        assert r["extract"] > 0 and r["metrics"] > 0 and r["store"] > 0
    assert rows[0]["train"] == 0 and rows[1]["train"] > 0 and rows[2]["train"] > 0
    whole = timings["run"]
    assert events[-1].summary["timings"] == whole
    assert sum(whole[s] for s in STAGES) == pytest.approx(whole["total"], abs=1e-3)
    assert whole["train"] == pytest.approx(rows[1]["train"] + rows[2]["train"], abs=1e-3)
    # the event of each epoch carries the same row, and the training table the same train seconds
    finished = [e for e in events if e.kind == "epoch_finished"]
    assert [e.timings for e in finished] == rows
    assert rec.training["train_seconds"].tolist()[1:] == pytest.approx([rows[1]["train"], rows[2]["train"]], abs=1e-3)

    from lab.__main__ import main

    assert main(["runs", "show", rec.run_id, "--runs-dir", str(store.root)]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("timings: "))
    assert line.startswith(f"timings: {whole['total']:.1f} s: train ")
    table = out[out.index(line):].splitlines()[1].split()
    assert table == ["seed", "epoch", *STAGES, "total"]


def test_the_live_status_line_says_where_the_last_epoch_went():
    from app.live._status import status_html
    from app.live._model import RunModel
    from lab import events as ev

    model = RunModel()
    timings = {"train": 6.0, "extract": 2.0, "metrics": 1.0, "projection": 0.5, "store": 0.25, "other": 0.25,
               "total": 10.0}
    model.apply(ev.EpochFinished("r", seed=0, epoch=1, train_loss=0.5, train_accuracy=0.9, heldout_accuracy=0.8,
                                 seconds=9.7, timings=timings))
    model.apply(ev.Progress("r", stage="train", done=1, total=4, seed=0, epoch=2))
    text = status_html(model, "running")
    assert "last epoch 10.0 s: train 60%, extract 20%, metrics 10%, projection 5%, store 2%, other 2%" in text


def test_only_the_last_evaluation_keeps_its_embeddings_by_default_and_every_layout_stays(store):
    _, rec = _run(store)
    assert sorted(set(rec.embedding_keys()["epoch"])) == [2]
    assert set(rec.embedding_keys()["layer"]) == set(LAYERS)
    layouts = rec.projection_keys()
    assert sorted(set(layouts["epoch"])) == [0, 1, 2] and len(layouts) == 9
    assert not list((rec.path / "arrays" / "embeddings" / "s0").glob(".*"))        # nothing hidden left behind
    with pytest.raises(KeyError, match=r"did not keep the embeddings of epoch 0 \(seed 0\): keep_embeddings='last'"):
        rec.embeddings(0, 0, "fc1")
    with pytest.raises(ValueError, match=r"no embeddings at seed 0, epoch 0; stored epochs: \[2\]\. .*keep_embeddings"):
        tables.cka_matrix(rec, epoch=0)
    assert list(tables.cka_matrix(rec).index) == LAYERS                              # the last epoch works


def test_pinned_epochs_and_all_keep_their_embeddings(store):
    _, pinned = _run(store, keep_embeddings=[0])
    assert sorted(set(pinned.embedding_keys()["epoch"])) == [0, 2]
    assert tables.cka_matrix(pinned, epoch=0, other_epoch=2).shape == (3, 3)
    _, every = _run(store, keep_embeddings="all")
    assert sorted(set(every.embedding_keys()["epoch"])) == [0, 1, 2]


def test_a_run_stored_before_keep_embeddings_reads_as_before(store):
    config = RunConfig(**TINY).to_dict()
    del config["keep_embeddings"], config["projection_fit_points"]       # a config.json from before
    w = store.create(config)
    for epoch in (0, 1):
        w.save_embeddings(0, epoch, "fc1", np.ones((4, 3)), np.arange(4) % 2, np.arange(4))
    w.finish("finished")
    rec = store.load(w.run_id)
    assert rec.keep_embeddings == "all" and rec.embeddings(0, 0, "fc1")[0].shape == (4, 3)
    assert rec.missing_embeddings(0, 5) is None
