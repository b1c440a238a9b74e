"""The study composer: axes and seeds typed in, the study it shows, its estimate, its YAML saved and read back."""
from __future__ import annotations

import pytest

from app.studies import StudyComposer, shipped_specs
from lab.study import Study

MLP2, MLP3 = "mlp:depth=2,width=16", "mlp:depth=3,width=16"


@pytest.fixture
def composer(store, monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_STUDIES_DIR", str(tmp_path / "specs"))
    return StudyComposer(store)


def test_a_blank_study_grows_axis_by_axis_and_seeds_are_a_replicate_axis(composer):
    composer.study_name = "grid"
    composer.add_axis("backbone", f"{MLP2}, {MLP3}")
    composer.add_axis("lr", "0.01, 0.1")
    composer.seeds = "0, 1"
    study = composer.to_study()
    assert study.axes == {"backbone": [MLP2, MLP3], "lr": [0.01, 0.1], "seeds": [[0], [1]]}
    assert len(study.cells()) == 2 * 2 * 2
    assert composer.estimate.object.startswith("8 cells · 0 already stored · about ")
    assert "seeds" not in composer.axis_select.options and "backbone" in composer.axis_select.options
    composer.remove_axis("lr")
    assert len(composer.to_study().cells()) == 4 and "lr:" not in composer.preview.value


def test_the_estimate_line_counts_a_stored_cell(composer, make_run):
    composer.study_name = "e"
    composer.add_axis("backbone", MLP2)
    composer.seeds = "0, 1"
    make_run(backbone=MLP2, epochs=2, meta={"study": "e", "cell": {"backbone": MLP2, "seeds": [0]}})
    composer.seeds = "0, 1, 2"                        # any change re-reads the store
    assert composer.estimate.object.startswith("3 cells · 1 already stored · about ")


def test_a_saved_spec_reads_back_as_the_study_shown(composer, tmp_path):
    composer.study_name = "my grid"
    composer.add_axis("label_noise", "0.0, 0.2")
    composer.order = "shuffled"
    path = composer.save()
    assert path == tmp_path / "specs" / "my_grid.yaml" and "Saved" in composer.message
    assert path.read_text(encoding="utf-8") == composer.preview.value
    again = Study.from_file(path)
    assert again.to_dict() == composer.to_study().to_dict() and again.order == "shuffled"
    composer.source = "my_grid.yaml"                   # the spec started from may be saved over
    assert composer.save() == path
    composer.source = composer.param.source.objects[0]
    composer.study_name = "my grid"
    assert composer.save() is None and "not overwritten" in composer.message


def test_a_study_saved_here_is_saved_again_as_it_grows_but_not_by_another_composer(composer, store):
    composer.study_name = "growing"
    composer.add_axis("label_noise", "0.0, 0.2")
    path = composer.save()
    composer.follow(composer.to_study())               # launched: the composer shows the running study
    composer.seeds = "0, 1, 2"
    assert composer.save() == path and "replacing the version saved before" in composer.message
    assert Study.from_file(path).axes["seeds"] == [[0], [1], [2]]
    other = StudyComposer(store)
    other.study_name = "growing"
    assert other.save() is None and "not overwritten" in other.message
    assert Study.from_file(path).axes["seeds"] == [[0], [1], [2]]


def test_a_shipped_spec_is_reproduced_and_never_overwritten(composer, monkeypatch):
    spec = shipped_specs()["which_layer.yaml"]
    composer.source = "which_layer.yaml"
    study, shipped = composer.to_study(), Study.from_file(spec)
    assert [c.key for c in study.cells()] == [c.key for c in shipped.cells()]
    assert study.to_dict() == shipped.to_dict() and composer.seeds == "0, 1, 2"
    monkeypatch.delenv("LAB_STUDIES_DIR")
    composer.study_name = "which_layer"
    before = spec.read_text(encoding="utf-8")
    assert composer.save() is None and "is a shipped spec" in composer.message
    assert spec.read_text(encoding="utf-8") == before


def test_a_typo_in_a_backbone_shows_the_closest_names_and_no_study(composer):
    composer.axis_select.value = "backbone"
    composer.values_input.value = f"{MLP2}, glyph_resnt18"
    assert "glyph_resnt18" in composer.hint.object and "'glyph_resnet18'" in composer.hint.object
    composer.add_axis()
    with pytest.raises(ValueError, match="axis 'backbone': unknown backbone 'glyph_resnt18'; closest: 'glyph_resnet18'"):
        composer.to_study()
    assert composer.estimate.object.startswith("**Not a valid study:** axis 'backbone'")
    launched = []
    composer.on_launch = launched.append
    composer.launch()
    assert not launched and composer.message.startswith("**Not launched:**")


def test_bad_values_show_a_message_and_launch_hands_over_the_study(composer):
    composer.seeds = "zero"
    assert "seeds must be whole numbers" in composer.estimate.object
    composer.seeds = "[0, 1], [2, 3]"
    composer.add_axis("epochs", "1, -2")
    assert "axis 'epochs' value #2" in composer.estimate.object
    composer.add_axis("epochs", "1, 2")
    launched = []
    composer.on_launch = launched.append
    composer.launch()
    assert [s.axes for s in launched] == [{"epochs": [1, 2], "seeds": [[0, 1], [2, 3]]}]


def test_a_blank_study_starts_from_the_settings_given(store):
    from lab.config import RunConfig

    composer = StudyComposer(store, base_config=lambda: RunConfig(dataset="digits", backbone=MLP2, epochs=3))
    assert composer.to_study().base == {"dataset": "digits", "backbone": MLP2, "epochs": 3}


def test_the_studies_tab_opens_the_composer_and_launch_starts_the_composed_study(store, monkeypatch):
    from app.studies import StudiesPanel

    panel = StudiesPanel(store)
    started = []
    monkeypatch.setattr(panel, "_work", lambda study, *_: started.append(study))
    panel.new_button.clicks += 1
    assert panel._composer_box.visible and panel.composer is not None
    panel.composer.study_name = "from-the-page"
    panel.composer.add_axis("epochs", "1, 2")
    panel.composer.launch_button.clicks += 1
    assert [s.name for s in started] == ["from-the-page"] and panel.running
    assert panel.progress.max == 4


def test_the_backbones_this_machine_has_are_offered_while_the_axis_is_the_backbone(composer):
    assert composer.axis_select.value == "backbone"              # the first axis offered
    assert composer.offered.visible and "glyph_resnet18" in composer.offered.options
    composer.values_input.value = MLP2
    composer.offered.value = "glyph_resnet18"
    assert composer.values_input.value == f"{MLP2}, glyph_resnet18" and composer.offered.value == "(pick one to add)"
    composer.add_axis()
    assert composer.to_study().axes["backbone"] == [MLP2, "glyph_resnet18"]
    composer.axis_select.value = "lr"
    assert not composer.offered.visible
