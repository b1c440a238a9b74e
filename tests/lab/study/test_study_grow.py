"""A study's run order, growing and shrinking its axes, and its spec as YAML (no cluster: specs only)."""
from __future__ import annotations

from pathlib import Path

import pytest

from lab.study import Study
from lab.study.records import runs_by_cell, tag_run

REPO = Path(__file__).resolve().parents[3]
BASE = {"dataset": "digits", "backbone": "mlp:depth=2,width=16", "epochs": 1}
AXES = {"label_noise": [0.0, 0.1, 0.2], "lr": [0.1, 0.01, 0.001, 0.0001], "seeds": [[0], [1]]}


def _pairs(cells) -> set:
    return {(axis, repr(value)) for cell in cells for axis, value in cell.values.items()}


def test_the_shuffled_order_reaches_every_axis_value_first_and_keeps_grid_positions():
    grid = Study("g", BASE, AXES)
    assert grid.run_order() == grid.cells()                       # "grid": today's order
    study = Study("g", BASE, AXES, order="shuffled", order_seed=0)
    order = study.run_order()
    every = _pairs(study.cells())
    first = max(len(v) for v in AXES.values())                    # 4: the lr axis
    assert _pairs(order[:first]) == every
    assert _pairs(grid.run_order()[:first]) != every              # the grid's first cells do not
    # a permutation of the grid's cells, each still at its grid position with its key
    assert sorted(c.index for c in order) == list(range(24))
    assert [c.key for c in study.cells()] == [c.key for c in grid.cells()]
    assert all(study.cells()[c.index] is c for c in order)
    again = Study("g", BASE, AXES, order="shuffled", order_seed=0).run_order()
    other = Study("g", BASE, AXES, order="shuffled", order_seed=1).run_order()
    assert [c.index for c in again] == [c.index for c in order]
    assert [c.index for c in other] != [c.index for c in order]
    assert _pairs(other[:first]) == every


def test_a_bad_order_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"order must be one of 'grid', 'shuffled'. Got 'random' instead"):
        Study("g", BASE, AXES, order="random")
    with pytest.raises(ValueError, match=r"order_seed must be an integer >= 0. Got -1 instead"):
        Study("g", BASE, AXES, order="shuffled", order_seed=-1)


def test_order_round_trips_and_is_left_out_when_default(tmp_path):
    assert "order" not in Study("g", BASE, AXES).to_dict()
    study = Study("g", BASE, AXES, order="shuffled", order_seed=3)
    assert study.to_dict()["order"] == "shuffled" and study.to_dict()["order_seed"] == 3
    back = Study.from_dict(study.to_dict())
    assert (back.order, back.order_seed) == ("shuffled", 3)
    path = study.save(tmp_path / "g.yaml")
    back = Study.from_file(path)
    assert (back.order, back.order_seed) == ("shuffled", 3)
    assert [c.index for c in back.run_order()] == [c.index for c in study.run_order()]


def test_extend_adds_values_and_keeps_every_old_key():
    study = Study("g", BASE, AXES)
    grown = study.extend(lr=[0.5, 0.1], seeds=[2, 1])             # 0.1 and [1] are there already
    assert grown.name == "g"
    assert grown.axes["lr"] == [0.1, 0.01, 0.001, 0.0001, 0.5]
    assert grown.axes["seeds"] == [[0], [1], [2]]                 # a bare seed is a one-seed list
    assert len(grown.cells()) == 3 * 5 * 3
    assert {c.key for c in study.cells()} <= {c.key for c in grown.cells()}
    assert study.axes == AXES                                     # the study itself is unchanged
    assert grown.extend(lr=0.5).axes == grown.axes                # nothing new: the same axes


def test_extend_refuses_an_unknown_axis_naming_the_study_axes():
    with pytest.raises(ValueError, match=r"study 'g' has no axis 'epochs' to extend; its axes are 'label_noise', "
                                         r"'lr', 'seeds'"):
        Study("g", BASE, AXES).extend(epochs=[2])
    with pytest.raises(ValueError, match=r"axis 'lr' value #5 \(-1\) is not valid"):
        Study("g", BASE, AXES).extend(lr=[-1])


def test_without_drops_values_and_refuses_unknown_ones():
    study = Study("g", BASE, AXES)
    small = study.without(lr=[0.1, 0.01], seeds=1)
    assert small.axes["lr"] == [0.001, 0.0001] and small.axes["seeds"] == [[0]]
    assert {c.key for c in small.cells()} <= {c.key for c in study.cells()}
    with pytest.raises(ValueError, match=r"axis 'lr' has no value 0.5; its values are 0.1, 0.01, 0.001, 0.0001"):
        study.without(lr=[0.5])
    with pytest.raises(ValueError, match="would leave axis 'label_noise' empty"):
        study.without(label_noise=[0.0, 0.1, 0.2])
    with pytest.raises(ValueError, match="has no axis 'backbone' to remove values from"):
        study.without(backbone=["mlp"])


def test_stored_runs_are_still_found_after_extend_even_when_seeds_becomes_an_axis(make_run, store):
    study = Study("g", BASE, {"lr": [0.1, 0.01]})
    for cell in study.cells():
        run_id = make_run(target=store, **{k: v for k, v in cell.config.to_dict().items() if k != "layers"})
        tag_run(run_id, "g", cell.values, store=store)
    assert len(study.records(store=store)) == 2
    grown = study.extend(lr=[0.5], seeds=[1])
    assert grown.axes["seeds"] == [[0], [1]]                      # the base's seeds first
    found = runs_by_cell("g", store=store, axes=grown.axes)
    assert len(found) == 2 and set(found) <= {c.key for c in grown.cells()}
    assert len(grown.records(store=store)) == 2
    status = grown.status(store=store)
    assert (status["status"] == "finished").sum() == 2 and len(status) == 6


@pytest.mark.parametrize("spec", sorted((REPO / "studies").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_spec_reads_back_from_its_yaml(spec, tmp_path):
    study = Study.from_file(spec)
    text = study.to_yaml()
    copy = tmp_path / spec.name
    copy.write_text(text)
    back = Study.from_file(copy)
    assert back.to_dict() == study.to_dict()
    assert [c.key for c in back.cells()] == [c.key for c in study.cells()]
    assert [c.config for c in back.cells()] == [c.config for c in study.cells()]


def test_save_writes_in_one_rename_and_keeps_the_opening_comments(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("# what this study asks\n# and at what scale\nname: s\nbase: {dataset: digits, epochs: 1}\n"
                    "axes:\n  seeds: [[0], [1]]\n")
    Study.from_file(path).extend(seeds=[2]).save(path)
    text = path.read_text()
    assert text.startswith("# what this study asks\n# and at what scale\nname: s\n")
    assert "seeds: [[0], [1], [2]]" in text
    assert [p.name for p in tmp_path.iterdir()] == ["s.yaml"]     # no temporary file left
    assert len(Study.from_file(path).cells()) == 3


def test_cli_extend_writes_the_grown_spec_in_place_and_keeps_old_keys(tmp_path, capsys):
    from lab.cli.entry import main

    spec = tmp_path / "s.yaml"
    spec.write_text("# a tiny study\nname: s\nbase: {dataset: digits, backbone: 'mlp:depth=2,width=16', epochs: 1}\n"
                    "axes:\n  lr: [0.1]\n  seeds: [[0], [1]]\n")
    before = {c.key for c in Study.from_file(spec).cells()}
    assert main(["study", "extend", str(spec), "--add", "lr=[0.01, 0.1]", "--add", "seeds=2",
                 "--remove", "seeds=1"]) == 0
    out = capsys.readouterr().out
    assert f"study 's': 4 cells (2 before; 3 new, 1 removed), written to {spec}." in out
    grown = Study.from_file(spec)
    assert grown.axes == {"lr": [0.1, 0.01], "seeds": [[0], [2]]}
    assert spec.read_text().startswith("# a tiny study\nname: s\n")
    assert before - {c.key for c in grown.cells()} == {'{"lr": 0.1, "seeds": [1]}'}


@pytest.mark.parametrize("args, message", [
    (["--add", "seeds"], "--add takes AXIS=VALUE (e.g. --add seeds=3 or --add 'lr=[0.01, 0.1]'). Got 'seeds' instead."),
    (["--add", "epochs=3"], "study 's' has no axis 'epochs' to extend; its axes are 'lr', 'seeds'"),
    (["--add", "lr=[0.1"], "--add 'lr=[0.1': the value is not valid YAML"),
    ([], "give values to add or remove"),
    (["--remove", "lr=0.1"], "removing those values would leave axis 'lr' empty"),
])
def test_cli_extend_exits_2_with_one_line_and_leaves_the_file(tmp_path, capsys, args, message):
    from lab.cli.entry import main

    spec = tmp_path / "s.yaml"
    text = "name: s\nbase: {dataset: digits, epochs: 1}\naxes:\n  lr: [0.1]\n  seeds: [[0]]\n"
    spec.write_text(text)
    assert main(["study", "extend", str(spec), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert spec.read_text() == text
