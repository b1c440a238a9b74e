"""Growing the study that runs in the Studies tab: the composer shows it, "Add to running study" hands the grown
study to the panel's StudyController, and the runner's StudyUpdated / CellQueued / CellDropped events reshape the
cells' table. No cluster: the run's thread is replaced and the events are applied as the dispatcher would."""
from __future__ import annotations

import pytest

from lab import events as ev
from lab.study import Study

BASE = {"dataset": "digits", "backbone": "mlp:depth=2,width=16", "img_size": 16, "strategy": "full", "epochs": 1,
        "projection": "none", "unseen_per_class": 10, "seen_per_class": 6, "metrics": ["nmi"], "save_weights": False}


@pytest.fixture
def running(store, monkeypatch, tmp_path):
    """A Studies tab running study "grow" (seeds 0 and 1) with its composer open; the runner attached."""
    from app.studies.studies_panel import StudiesPanel

    monkeypatch.setenv("LAB_STUDIES_DIR", str(tmp_path / "specs"))
    monkeypatch.setattr(StudiesPanel, "_work", lambda self, *args: None)      # no cluster: the runner is faked
    panel = StudiesPanel(store)
    study = Study("grow", BASE, {"seeds": [[0], [1]]})
    panel.start(study)
    panel._control.attach(study, store)                 # as run_study does when it starts
    panel._set_table(study.status(store=store))         # as the first figures message does
    panel.toggle_composer()
    return panel, study


def test_the_composer_shows_the_running_study_and_offers_to_add_to_it(running):
    panel, study = running
    composer = panel.composer
    assert composer.growing and composer.launch_button.name == "Add to running study"
    assert composer.to_study().to_dict() == study.to_dict()
    panel._apply([{"kind": "done", "text": "Finished: 2 of 2 runs (0 from before), 0 failed, 3 s."}])
    assert not composer.growing and composer.launch_button.name == "Launch" and panel._control is None


def test_a_new_seed_goes_to_the_controller_and_its_cell_is_queued_in_the_table(running):
    panel, study = running
    control = panel._control
    panel.composer.seeds = "0, 1, 2"
    panel.composer.launch()
    grown, dropped = control.take()
    assert grown.to_dict() == study.extend(seeds=[2]).to_dict() and dropped == set()
    assert "Sent **grow** (3 cells)" in panel.message.object and panel.composer.message == panel.message.object
    new = grown.cells()[2]
    panel._apply([ev.StudyUpdated(total=3, queued=1, dropped=0), ev.CellQueued(new.index, key=new.key)])
    table = panel.table.value
    assert list(table["cell"]) == [1, 2, 3] and list(table["seeds"]) == ["[0]", "[1]", "[2]"]
    assert list(table["status"]) == ["pending", "pending", "queued"]
    assert panel.progress.max == 3 and panel.message.object.startswith("**grow** now has 3 cells: 1 queued")
    assert panel._labels[2] == new.label()


def test_a_removed_value_drops_its_cell_and_its_row(running):
    panel, study = running
    panel.composer.seeds = "1"
    panel.composer.launch()
    shrunk = panel._control.take()[0]
    assert shrunk.axes["seeds"] == [[1]]
    gone = study.cells()[0]
    panel._apply([ev.StudyUpdated(total=1, queued=0, dropped=1), ev.CellDropped(gone.index, key=gone.key)])
    table = panel.table.value
    assert list(table["cell"]) == [1] and list(table["seeds"]) == ["[1]"] and panel.progress.max == 1
    assert "1 dropped" in panel.message.object


def test_a_cell_dropped_by_key_stays_in_the_table_marked_dropped(running):
    panel, study = running
    cell = study.cells()[1]
    panel._apply([ev.CellDropped(cell.index, key=cell.key)])
    assert list(panel.table.value["status"]) == ["pending", "dropped"] and panel.progress.max == 1


def test_a_study_of_another_name_or_other_settings_is_refused_with_a_message(running):
    panel, _study = running
    composer = panel.composer
    composer.study_name = "other"
    composer.launch()
    assert panel.message.object.startswith("**Not added:** the running study is 'grow'; only a version of it")
    assert "Got study 'other' instead" in composer.message and panel._control.take() == (None, set())
    composer.study_name, composer.order = "grow", "shuffled"
    composer.launch()
    assert "only axis values can change while study 'grow' runs; its order changed" in panel.message.object
    composer.order = "grid"
    composer.add_axis("lr", "0.01, 0.1")
    composer.launch()
    assert "adds axis 'lr'" in panel.message.object and panel._control.take() == (None, set())


def test_the_controllers_refusal_is_shown_not_raised(running):
    panel, study = running
    panel._control.detach()                                  # the run ended before the update reached it
    text = panel.grow(study.extend(seeds=[2]))
    assert text.startswith("**Not added:** study 'grow' is no longer running") and panel.message.object == text
