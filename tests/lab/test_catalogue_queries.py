"""The catalogue answers questions over its live registry (no list is copied), and owns the split table."""
from __future__ import annotations

import pytest

from lab import catalogue
from lab.text import join_words


def test_metric_names_answers_each_question_in_display_order():
    assert catalogue.metric_names() == tuple(catalogue.METRICS)
    assert catalogue.metric_names(family="transferability") == ("logme", "sfda")
    assert catalogue.metric_names(family=("transferability", "separability"))[:2] == ("nmi", "knn_accuracy")
    assert catalogue.metric_names(per_image=True) == ("nmi", "knn_accuracy")
    assert catalogue.metric_names(compared=True, family="separability") == ("nmi", "knn_accuracy",
                                                                            "linear_probe_accuracy")
    assert "linear_probe_accuracy" not in catalogue.metric_names(default=True)
    assert "linear_probe_accuracy" in catalogue.metric_names(default=False)
    assert catalogue.metric_names(split="train", family="label_free") == ()
    assert catalogue.metric_names(curve=True) == tuple(name for name, _ in catalogue.curve_specs())
    assert catalogue.metric_names(where=lambda m: m.log_scale) == ("nc1", "cdnv", "nc3_self_duality")


def test_metric_names_refuses_an_unknown_family_or_split_and_says_the_choices():
    with pytest.raises(ValueError, match="family must be one of 'separability', .* Got 'separable' instead"):
        catalogue.metric_names(family="separable")
    with pytest.raises(ValueError, match="split must be one of 'train', 'seen', 'unseen'. Got 'test' instead"):
        catalogue.metric_names(split="test")


def test_the_removed_lists_say_which_question_to_ask():
    with pytest.raises(AttributeError, match=r"catalogue.SEPARABILITY_METRICS was removed.*"
                                             r"metric_names\(family=\"separability\"\)"):
        catalogue.SEPARABILITY_METRICS  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'NOT_A_NAME'"):
        catalogue.NOT_A_NAME  # noqa: B018


def test_the_g_and_law_metrics_are_roles_one_entry_holds():
    assert catalogue.g_metric() == "nmi" and catalogue.law_metric() == "nc1"
    with pytest.raises(ValueError, match="law=True, but the law's metric is 'nc1'"):
        catalogue.register_metric(catalogue.MetricInfo("other_law", "other", "collapse", False, law=True))
    assert "other_law" not in catalogue.METRICS


def test_one_split_table_names_orders_and_labels_the_splits():
    assert catalogue.SPLITS == ("train", "seen", "unseen")
    assert [s.order for s in catalogue.SPLIT_TABLE] == [0, 1, 2]
    assert [catalogue.split_label(s) for s in catalogue.SPLITS] == ["train sample", "held-out (seen)",
                                                                     "unseen classes"]
    assert [catalogue.split_label(s, "short_label") for s in catalogue.SPLITS] == ["train sample", "held-out",
                                                                                   "unseen classes"]
    assert [catalogue.split_label(s, "phrase") for s in catalogue.SPLITS] == ["training sample", "held-out",
                                                                              "unseen"]
    assert catalogue.split_label("heldout") == "heldout"                   # not a split: unchanged
    assert catalogue.split_order(["unseen", "other", "train", "unseen"]) == ["train", "unseen", "other"]
    assert catalogue.split_info("seen").label == "held-out (seen)"
    with pytest.raises(ValueError, match="split must be one of 'train', 'seen', 'unseen'. Got 'val' instead"):
        catalogue.split_info("val")
    with pytest.raises(ValueError, match="kind must be 'label', 'short_label' or 'phrase'. Got 'long'"):
        catalogue.split_label("seen", "long")
    # the held-out splits (never trained on) and those whose class means an evaluation records, in table order
    assert catalogue.held_out_splits() == ("seen", "unseen")
    assert catalogue.class_mean_splits() == ("train", "unseen")


def test_the_live_heatmap_offers_the_held_out_splits_unseen_first():
    from app.live.view import LiveView

    assert LiveView.param.heatmap_split.objects == list(reversed(catalogue.held_out_splits()))
    assert LiveView().heatmap_split == "unseen"


def test_join_words_lists_as_a_sentence_does():
    assert join_words([]) == "" and join_words(["a"]) == "a" and join_words(("a", "b")) == "a and b"
    assert join_words(iter(["train sample", "held-out", "unseen"])) == "train sample, held-out and unseen"


def test_metric_none_means_the_g_metric():
    import pandas as pd

    from lab import analysis
    from lab.events import Generalization

    rows = pd.DataFrame([{"seed": 0, "epoch": 0, "layer": layer, "split": "unseen", "metric": metric, "value": v}
                         for metric, values in (("nmi", (0.2, 0.6, 0.4)), ("knn_accuracy", (0.9, 0.1, 0.2)))
                         for layer, v in zip(("a", "b", "c"), values)])
    g = analysis.generalization(rows, layers=["a", "b", "c"])
    assert g["layer"].tolist() == ["b"] and g["g"].tolist() == [0.6]            # NMI's best, not kNN's
    assert analysis.layer_curve(rows, layers=["a", "b", "c"])["mean"].tolist() == [0.2, 0.6, 0.4]
    assert len(analysis.summary.complete_evaluations(rows, ["a", "b", "c"])) == 3
    assert Generalization("r", epoch=0, g=0.6, layer="b").metric == catalogue.g_metric() == "nmi"
    assert Generalization("r", epoch=0, g=0.9, layer="a", metric="knn_accuracy").metric == "knn_accuracy"
