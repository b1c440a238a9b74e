"""RunConfig: defaults, JSON round trip, and the promised validation messages."""
from __future__ import annotations

import dataclasses
import json

import pytest

from lab import catalogue
from lab.config import STRATEGIES, RunConfig


def test_defaults_are_the_embedded_default():
    cfg = RunConfig()
    assert (cfg.dataset, cfg.backbone, cfg.n_unseen, cfg.strategy) == ("glyphs", "resnet18", 5, "full")
    assert cfg.img_size is None and cfg.layers is None and cfg.seeds == (0,)
    assert cfg.metrics == catalogue.metric_names(default=True)
    assert cfg.n_epochs == 3 and cfg.learning_rate == 2e-4 and cfg.decay == 0.01


def test_json_round_trip_is_exact():
    cfg = RunConfig(name="x", seen=["a", "b"], unseen=["c", "d"], strategy="scl", block="layer3.0",
                    epochs=2, lr=1e-3, seeds=[0, 1, 2], layers=["stem", "pre_logits"],
                    projection_layers=["pre_logits"], label_noise=0.2, contribution=True, protocol="paper")
    text = cfg.to_json()
    assert RunConfig.from_json(text) == cfg
    data = json.loads(text)
    assert data["seeds"] == [0, 1, 2] and data["seen"] == ["a", "b"]      # lists in JSON
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    assert set(data) == set(RunConfig.field_names())


def test_resolved_settings_follow_strategy_and_optimizer():
    assert RunConfig(strategy="none").n_epochs == 0
    assert RunConfig(strategy="none").learning_rate is None
    assert RunConfig(strategy="linear").learning_rate == 1e-3
    assert RunConfig(strategy="full", optimizer="sgd").learning_rate == 0.01
    assert RunConfig(optimizer="sgd").decay == 5e-4
    assert RunConfig(lr=0.5, weight_decay=0.0).learning_rate == 0.5
    # None defaults survive a strategy change
    assert RunConfig(strategy="full").replace(strategy="none").n_epochs == 0


def test_seeds_accepts_one_int_and_describe_is_one_line():
    cfg = RunConfig(seeds=3)
    assert cfg.seeds == (3,)
    assert "\n" not in cfg.describe() and "resnet18" in cfg.describe()


def test_unknown_fields_are_named_with_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown RunConfig fields 'colour', 'speed'\. Allowed fields: name, "):
        RunConfig.from_dict({"colour": 1, "speed": 2, "dataset": "digits"})
    with pytest.raises(ValueError, match="unknown RunConfig field 'nope'"):
        RunConfig().replace(nope=1)


@pytest.mark.parametrize("fields, message", [
    ({"strategy": "fancy"},
     r"strategy must be one of 'none', 'linear', 'full', 'layer', 'scl'\. Got 'fancy' instead\."),
    ({"optimizer": "adam"}, r"optimizer must be one of 'adamw', 'sgd'\. Got 'adam' instead\."),
    ({"protocol": "papers"}, r"protocol must be one of 'default', 'paper'\. Got 'papers' instead\."),
    ({"projection": "tsne"}, r"projection must be one of 'umap', 'pca', 'none'\. Got 'tsne' instead\."),
    ({"pooling": "max"}, r"pooling must be one of 'auto', 'mean', 'flatten'\. Got 'max' instead\."),
    ({"strategy": "layer"}, r"block is required for strategy='layer': give a tap name"),
    ({"strategy": "full", "block": 2}, r"block is only used by strategy 'layer' or 'scl'"),
    ({"strategy": "scl", "block": 1.5}, r"block must be a tap name or an integer index\. Got 1\.5 instead\."),
    ({"strategy": "none", "epochs": 3}, r"epochs=3 has no effect with strategy='none'"),
    ({"epochs": -1}, r"epochs must be an integer >= 0 or None\. Got -1 instead\."),
    ({"epochs": 2.0}, r"epochs must be an integer >= 0 or None\. Got 2\.0 instead\."),
    ({"lr": 0}, r"lr must be a positive number or None\. Got 0 instead\."),
    ({"batch_size": 0}, r"batch_size must be an integer >= 1\. Got 0 instead\."),
    ({"batch_size": True}, r"batch_size must be an integer >= 1\. Got True instead\."),
    ({"weight_decay": -0.1}, r"weight_decay must be a number >= 0 or None"),
    ({"label_noise": 1.5}, r"label_noise must be a fraction between 0\.0 and 1\.0\. Got 1\.5 instead\."),
    ({"strategy": "none", "label_noise": 0.2}, r"label_noise only affects training"),
    ({"strategy": "none", "contribution": True}, r"contribution re-initialises layers"),
    ({"metrics": ["nmi", "accuracy"]}, r"metrics: unknown metric 'accuracy'\. Allowed: 'nmi', 'knn_accuracy'"),
    ({"metrics": []}, r"metrics must name at least one metric"),
    ({"metrics": ["nmi", "nmi"]}, r"metrics lists 'nmi' more than once"),
    ({"seeds": []}, r"seeds must list at least one seed"),
    ({"seeds": [0, 0]}, r"seeds must not repeat"),
    ({"seeds": [-1]}, r"seeds must be integers >= 0\. Got -1 instead\."),
    ({"device": "gpu"}, r"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'\. Got 'gpu' instead\."),
    ({"n_unseen": 1}, r"n_unseen must be an integer >= 2\. Got 1 instead\."),
    ({"unseen": ["a"]}, r"unseen needs at least 2 classes"),
    ({"seen": ["a", "b"], "unseen": ["b", "c"]}, r"seen and unseen must not share classes; both list 'b'\."),
    ({"seen": "abc"}, r"seen must be a list, got the string 'abc'"),
    ({"heldout_fraction": 1.0}, r"heldout_fraction must be a number in \(0, 1\)"),
    ({"pretrained": True, "checkpoint": "w.safetensors"}, r"pretrained=True and checkpoint are exclusive"),
    ({"pretrained": "yes"}, r"pretrained must be true or false\. Got 'yes' instead\."),
    ({"unseen_per_class": 1}, r"unseen_per_class must be an integer >= 2 or None\. Got 1 instead\."),
    ({"img_size": 4}, r"img_size must be an integer >= 8 or None\. Got 4 instead\."),
    ({"layers": ["stem"], "projection_layers": ["pre_logits"]},
     r"projection_layers must be a subset of layers; 'pre_logits' is not in layers \['stem'\]\."),
    ({"dataset": ""}, r"dataset must be a dataset spec such as 'glyphs' or 'digits'"),
    ({"precision": "bf16"},
     r"precision must be one of 'auto', 'float32', 'bfloat16', 'float16'\. Got 'bf16' instead\."),
])
def test_bad_values_fail_at_construction_naming_field_and_choices(fields, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**fields)
    with pytest.raises(ValueError, match=message):           # the same through JSON
        RunConfig.from_json(json.dumps(fields))


def test_config_is_frozen_and_replace_validates():
    cfg = RunConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.epochs = 5
    assert cfg.replace(epochs=5).epochs == 5
    with pytest.raises(ValueError, match="strategy must be one of"):
        cfg.replace(strategy="x")


def test_bad_json_is_a_value_error():
    with pytest.raises(ValueError, match="the RunConfig JSON could not be parsed"):
        RunConfig.from_json("{not json")
    with pytest.raises(ValueError, match="a RunConfig dict is expected. Got list instead"):
        RunConfig.from_dict([1, 2])


def test_one_strategy_table_for_the_config_fine_tuning_and_the_form():
    from lab import catalogue, finetune
    from lab.config import FIELD_CHOICES

    assert STRATEGIES is catalogue.STRATEGIES is finetune.STRATEGIES is FIELD_CHOICES["strategy"]
    assert list(STRATEGIES) == ["none", "linear", "full", "layer", "scl"]


def test_field_docs_describe_every_field_from_the_docstring():
    docs = RunConfig.field_docs()
    assert set(docs) == set(RunConfig.field_names())
    assert all(docs.values())
    assert docs["seen"] == docs["unseen"] and docs["seen"].startswith("Explicit class split.")
    assert docs["unseen_per_class"] == "Cap on unseen evaluation images per class (None = all)."


def test_names_and_choices_come_from_the_catalogue():
    from lab import config
    from lab.config import FIELD_CHOICES
    from lab.metrics import report

    assert STRATEGIES is catalogue.STRATEGIES and RunConfig().metrics == catalogue.metric_names(default=True)
    # no copies of the catalogue's lists: the metrics' choices are its live table
    assert not {"SEPARABILITY_METRICS", "COLLAPSE_METRICS", "TRANSFER_METRICS", "DEFAULT_METRICS"} & set(vars(config))
    assert FIELD_CHOICES["metrics"] is catalogue.METRICS and tuple(FIELD_CHOICES["metrics"]) == catalogue.metric_names()
    cfg = RunConfig(metrics=("nc1", "logme", "nmi", "rankme", "head_accuracy"))
    assert cfg.separability_metrics == ("nmi",) and cfg.collapse_metrics == ("nc1",)
    assert cfg.transfer_metrics == ("logme",) and cfg.classifier_metrics == ("head_accuracy",)
    # one question answers them all, in the order the config lists its metrics
    assert cfg.requested(family=("collapse", "separability")) == ("nc1", "nmi") and cfg.requested() == cfg.metrics
    assert cfg.requested(split="seen") == ("nc1", "logme", "rankme", "head_accuracy")
    assert cfg.seen_metrics(0) == ("nc1", "rankme", "logme", catalogue.TRANSFER_BASELINE)
    assert cfg.seen_metrics(1) == ("nc1", "rankme") and cfg.unseen_metrics == ("nc1", "nmi", "rankme")
    # compute_layer's ALL_METRICS: every entry computed from features and labels alone (the classifier-side
    # entries need a trained head; the label-free family reads no labels and is named explicitly)
    assert report.ALL_METRICS == catalogue.metric_names(where=lambda m: m.family not in ("classifier_collapse",
                                                                                          "label_free"))
    assert set(report.DEFAULT_SEPARABILITY) <= set(catalogue.metric_names(family="separability"))
    for name, choices in FIELD_CHOICES.items():
        if name != "metrics":
            with pytest.raises(ValueError, match=f"{name} must be one of {', '.join(map(repr, choices))}"):
                RunConfig(**{name: "no-such-choice"})


def test_every_field_declares_its_constraint_in_field_order():
    # the rules of a field read the fields above it, which the validator checks first
    assert list(RunConfig._constraints) == RunConfig.field_names()
    assert all(RunConfig._constraints.values())


def test_the_fixed_choices_are_the_constraints_options():
    from lab._params import ListOf, Options
    from lab.config import FIELD_CHOICES

    for name, choices in FIELD_CHOICES.items():
        declared = next(c for c in RunConfig._constraints[name] if isinstance(c, (Options, ListOf)))
        options = declared.item if isinstance(declared, ListOf) else declared
        assert options.choices == tuple(choices), name


def test_a_strategy_and_a_metric_registered_after_import_are_accepted():
    from lab import catalogue

    with pytest.raises(ValueError, match=r"strategy must be one of .*Got 'toy_full' instead"):
        RunConfig(strategy="toy_full")
    catalogue.register_strategy(dataclasses.replace(catalogue.STRATEGIES["full"], name="toy_full"))
    try:
        assert RunConfig(strategy="toy_full").n_epochs == 3
        with pytest.raises(ValueError, match=r"strategy must be one of 'none', .*'scl', 'toy_full'\. Got 'x'"):
            RunConfig(strategy="x")
    finally:
        catalogue.unregister_strategy("toy_full")
    toy = dataclasses.replace(catalogue.METRICS["knn_purity"], name="toy_config_metric", default=False, g=False,
                              per_image=None)
    catalogue.register_metric(toy)
    try:
        assert RunConfig(metrics=["nmi", toy.name]).metrics == ("nmi", toy.name)
        with pytest.raises(ValueError, match=r"metrics: unknown metric 'x'\. Allowed: 'nmi', .*'toy_config_metric'\."):
            RunConfig(metrics=["x"])
    finally:
        catalogue.unregister_metric(toy.name)
    with pytest.raises(ValueError, match="metrics: unknown metric 'toy_config_metric'"):
        RunConfig(metrics=[toy.name])


@pytest.mark.parametrize("value, kept", [
    (" LAST ", "last"), ("all", "all"), ("5, 0", (0, 5)), ("[0; 2]", (0, 2)), ([5, 0], (0, 5)), ((3,), (3,)),
])
def test_keep_embeddings_reads_words_and_epochs_as_text(value, kept):
    assert RunConfig(keep_embeddings=value).keep_embeddings == kept


@pytest.mark.parametrize("fields, message", [
    ({"keep_embeddings": "x"},
     r"^keep_embeddings must be 'last', 'all' or a list of epochs >= 0 such as \[0, 5\]\. Got 'x' instead\.$"),
    ({"keep_embeddings": [0, -1]}, r"^keep_embeddings must be .* such as \[0, 5\]\. Got \[0, -1\] instead\.$"),
    ({"keep_embeddings": []}, r"^keep_embeddings must be .* such as \[0, 5\]\. Got \[\] instead\.$"),
    ({"keep_embeddings": "0, 0"}, r"^keep_embeddings lists an epoch more than once\. Got \[0, 0\] instead\.$"),
    ({"lidar_views": 1}, r"^lidar_views must be 0 \(LiDAR off\) or an integer >= 2 \(views per unseen image\)\. "
                         r"Got 1 instead\.$"),
    ({"lidar_views": 2}, r"^lidar_views=2 and metrics without 'lidar' disagree: "),
    ({"seeds": [0, True]}, r"^seeds must be integers >= 0\. Got True instead\.$"),
    ({"seeds": [1, 1]}, r"^seeds must not repeat\. Got \[1, 1\]\.$"),
    ({"metrics": None}, r"^metrics must be a list\. Got NoneType None instead\.$"),
    ({"strategy": ["full"]}, r"^strategy must be one of .*\. Got \['full'\] instead\.$"),
    ({"heldout_fraction": float("nan")}, r"^heldout_fraction must be a number in \(0, 1\)\. Got nan instead\.$"),
    ({"lr": float("inf")}, r"^lr must be a positive number or None\. Got inf instead\.$"),
    ({"device": "cuda:x"}, r"^device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'\. Got 'cuda:x' instead\.$"),
    ({"strategy": "full", "block": 1.5}, r"^block is only used by strategy 'layer' or 'scl', but strategy='full'"),
])
def test_declared_constraints_give_whole_messages(fields, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**fields)
