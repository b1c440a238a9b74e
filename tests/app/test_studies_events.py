"""The Studies tab reads the study's typed events (lab.events.StudyEvent) beside its own messages."""
from __future__ import annotations

from lab import events as ev
from lab.status import RunStatus
from lab.store import RunStore


def test_the_studies_tab_shows_the_typed_study_events(tmp_path):
    from app.studies.studies_panel import StudiesPanel

    panel = StudiesPanel(RunStore(tmp_path / "runs"))
    panel._labels = {0: "seeds=[0]", 1: "seeds=[1]", 2: "seeds=[2]"}
    panel.progress.max = 3
    panel._apply([ev.StudyStarted(total=3, todo=2, skipped=1, workers=2, threads=1, devices=("cpu", "cpu")),
                  ev.CellStarted(0, run_id="r1", layers=3, pid=1),
                  ev.CellProgress(0, stage="train", done=2, total=5, epoch=1, seed=0),
                  ev.CellProgress(1, stage="extract", done=1, total=4, epoch=None, seed=1)])
    assert panel.message.object == "Running 2 run(s) on 2 local worker(s); 1 finished before."
    assert panel.progress.value == 1
    assert panel.running_lines.object == ("- cell 1 (seeds=[0]): epoch 1 train 2/5\n"
                                          "- cell 2 (seeds=[1]): extract 1/4")
    panel._apply([ev.CellDone(0, run_id="r1", status=RunStatus.FINISHED),
                  ev.CellFailed(1, message="KilledWorker"),
                  {"kind": "done", "text": "Finished: 1 of 3 runs (1 from before), 1 failed, 3 s."}])
    assert panel.progress.value == 3 and panel.running_lines.object == ""
    assert panel.message.object.startswith("Finished: 1 of 3 runs") and not panel.running
    panel._apply([ev.StudyStarted(total=3, todo=0, skipped=3)])      # nothing left to run: no workers started
    assert panel.message.object == "Running 0 run(s) on ? local worker(s); 3 finished before."
