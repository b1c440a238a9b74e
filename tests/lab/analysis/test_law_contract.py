"""What lab.analysis.separation_law takes (a record, or a table with its aliases by keyword; nothing guessed) and
what its reasons are (codes with their words, which the app reads instead of the prose)."""
from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pandas as pd
import pytest

from lab import analysis
from lab.analysis import LawCode, LawReason

LAYERS = [f"fc{i}" for i in range(1, 5)]


def _table(values, *, layers=LAYERS, seed=0, epoch=0, split="train") -> pd.DataFrame:
    return pd.DataFrame({"seed": seed, "epoch": epoch, "layer": list(layers), "split": split, "metric": "nc1",
                         "value": np.asarray(values, dtype=float)})


# ------------------------------------------------------------------------------------------- what it takes

@pytest.mark.parametrize("call", [analysis.separation_law, analysis.separation_law_points,
                                  analysis.separation_law_across_seeds, analysis.latest_separation_law])
def test_a_bare_table_is_refused_with_what_to_pass(call):
    with pytest.raises(TypeError, match=r"a metrics table needs aliases= by keyword, .*"
                                        r"pass aliases=record.meta.get\('layer_aliases'\) or \{\}"):
        call(_table([8.0, 4.0, 2.0, 1.0]), layers=LAYERS)
    with pytest.raises(TypeError, match=f"^{call.__name__}: "):         # the message names the call
        call(pd.DataFrame())


def test_something_neither_a_record_nor_a_table_is_refused():
    with pytest.raises(TypeError, match=r"Got list \[1, 2\] instead; load a run id with lab.RunStore"):
        analysis.separation_law([1, 2], aliases={})


def test_law_across_seeds_takes_only_the_fitted_table():
    per_seed = analysis.separation_law(_table([8.0, 4.0, 2.0, 1.0]), aliases={})
    assert analysis.law_across_seeds(per_seed)["ratio"].tolist() == pytest.approx([0.5])
    with pytest.raises(TypeError, match="law_across_seeds takes the table separation_law returned .* Got "
                                        r"\['epoch', 'layer', .*call separation_law_across_seeds"):
        analysis.law_across_seeds(_table([8.0, 4.0, 2.0, 1.0]))


def test_a_group_without_its_aliases_is_refused():
    with pytest.raises(TypeError, match=r"no aliases for group 'a'\. Pass aliases=\{group"):
        analysis.group_separation_law({"a": [_table([8.0, 4.0, 2.0, 1.0])]}, {"a": LAYERS}, aliases={"b": {}})


def test_the_lessons_metrics_with_its_aliases_count_8_layers_as_its_record_does(store, one_thread):
    """The lesson's MLP (8 hidden layers; fc8 and pre_logits are one tensor), measured at initialization only."""
    import lab
    from lab.lessons import SEPARATION_LAW_LESSON

    cfg = dataclasses.replace(SEPARATION_LAW_LESSON, epochs=0, seen_per_class=10, unseen_per_class=10,
                              train_sample_per_class=10, metrics=("nc1",))
    events = list(lab.run(cfg, store=store))
    assert events[-1].kind == "run_finished", events[-1]
    record = store.load(events[-1].run_id)
    aliases = record.meta["layer_aliases"]
    assert aliases == {"fc8": "pre_logits"}
    from_record = analysis.separation_law(record)
    from_table = analysis.separation_law(record.metrics, aliases=aliases)
    assert set(from_record["split"]) == {"train", "seen", "unseen"} and (from_record["n_layers"] == 8).all()
    pd.testing.assert_frame_equal(from_table, from_record)
    with pytest.raises(TypeError, match="MLP's last hidden layer and pre_logits count as two layers"):
        analysis.separation_law(record.metrics)                           # once it counted 9 here
    assert (analysis.separation_law(record.metrics, aliases={})["n_layers"] == 9).all()   # {}: no identical taps


# ------------------------------------------------------------------------------------------- its reasons

def _reason(values, layers=LAYERS) -> LawReason:
    """The reason of an evaluation (epoch 1) of ``layers`` in a run that measured fc1 to fc5 at epoch 0."""
    five = [*LAYERS, "fc5"]
    table = pd.concat([_table(np.ones(5), layers=five), _table(values, layers=layers, epoch=1)])
    law = analysis.separation_law(table, layers=five, aliases={})
    return law.loc[law["epoch"] == 1, "reason"].iloc[0]


def test_each_reason_says_its_code_with_its_words():
    few = _reason([1.0, 0.5], layers=LAYERS[:2])
    assert few.code is LawCode.TOO_FEW_LAYERS and few.codes == (LawCode.TOO_FEW_LAYERS, LawCode.NOT_MEASURED)
    assert few == "no law: " + few.words and few.words.startswith("2 layer(s) with a finite, positive NC1")
    assert few.words.endswith("(NC1 not measured at fc3, fc4, fc5)")

    left_out = _reason([8.0, np.nan, 2.0, 1.0, 0.5], layers=[*LAYERS, "fc5"])
    assert left_out.code is LawCode.NOT_FINITE and left_out.codes == (LawCode.NOT_FINITE,)
    assert left_out == left_out.words == "NC1 not finite and positive at fc2 (nan): left out"

    missing = _reason([8.0, 4.0, 2.0, 1.0])
    assert missing.code is LawCode.NOT_MEASURED and missing == missing.words == "NC1 not measured at fc5"

    flat = _reason([2.0, 2.0, 2.0, 2.0, 2.0], layers=[*LAYERS, "fc5"])
    assert flat.code is LawCode.R_UNDEFINED and flat == "NC1 is the same at every layer: r undefined"

    assert [c.value for c in LawCode] == ["too_few_layers", "not_finite", "not_measured", "r_undefined"]
    assert LawCode.TOO_FEW_LAYERS.words == "no law" and LawCode("r_undefined") is LawCode.R_UNDEFINED


def test_a_reason_keeps_its_codes_through_pickle_and_copy_and_is_json_as_words():
    import json

    reason = LawReason([(LawCode.TOO_FEW_LAYERS, "1 layer(s)"), (LawCode.NOT_MEASURED, "NC1 not measured at b")])
    for back in (pickle.loads(pickle.dumps(reason)), copy.deepcopy(reason)):
        assert back == reason and back.codes == reason.codes and back.words == reason.words
    assert json.loads(json.dumps({"reason": reason})) == {"reason": "no law: 1 layer(s) (NC1 not measured at b)"}
    with pytest.raises(ValueError, match="needs at least one"):
        LawReason([])
