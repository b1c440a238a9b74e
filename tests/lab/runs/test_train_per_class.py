"""``train_per_class``: the seen training set capped per class, deterministic in ``split_seed``."""
from __future__ import annotations

import json

import numpy as np
import pytest

from lab.config import RunConfig
from lab.runs.data import prepare_data


def _image_keys(ds) -> set[bytes]:
    return {ds[i][0].numpy().tobytes() for i in range(len(ds))}


def test_the_cap_gives_exactly_n_training_images_per_seen_class(tiny_config):
    data = prepare_data(tiny_config(train_per_class=10))
    counts = np.bincount(np.asarray(data.train.targets), minlength=len(data.split.seen))
    assert counts.tolist() == [10] * len(data.split.seen)
    full = prepare_data(tiny_config())
    assert len(data.heldout) == len(full.heldout)                         # the held-out sample is untouched
    assert _image_keys(data.train) <= _image_keys(full.train)             # drawn from the training partition
    assert len(data.train_sample) == 10 * len(data.split.seen)           # train sample of 20 from 10 -> 10


def test_the_same_split_seed_gives_the_same_images_and_a_smaller_cap_a_subset(tiny_config):
    a = prepare_data(tiny_config(train_per_class=10, seeds=(0,)))
    b = prepare_data(tiny_config(train_per_class=10, seeds=(5,)))         # run seeds do not matter
    assert _image_keys(a.train) == _image_keys(b.train)
    np.testing.assert_array_equal(a.train.targets, b.train.targets)
    assert _image_keys(prepare_data(tiny_config(train_per_class=4)).train) <= _image_keys(a.train)
    other = prepare_data(tiny_config(train_per_class=10, split_seed=1))
    assert _image_keys(other.train) != _image_keys(a.train)


def test_a_cap_larger_than_a_class_says_the_class_size_and_the_fix(tiny_config):
    with pytest.raises(ValueError, match=r"train_per_class=5000, but seen class '\d' has \d+ training images .*"
                                         r"lower train_per_class to at most \d+.*train_per_class=None"):
        prepare_data(tiny_config(train_per_class=5000))


@pytest.mark.parametrize("bad", [0, -3])
def test_a_cap_below_one_is_refused(tiny_config, bad):
    with pytest.raises(ValueError, match=rf"train_per_class must be an integer >= 1 or None\. Got {bad} instead\."):
        tiny_config(train_per_class=bad)


def test_a_config_stored_before_the_field_loads_with_all_training_images(tiny_config):
    old = tiny_config().to_dict()
    del old["train_per_class"]
    assert RunConfig.from_json(json.dumps(old)).train_per_class is None
    cfg = tiny_config(train_per_class=12)
    assert RunConfig.from_dict(cfg.to_dict()) == cfg


def test_describe_names_the_cap_only_when_set(tiny_config):
    assert "on 10/class" in tiny_config(train_per_class=10).describe()
    assert "/class" not in tiny_config().describe()
