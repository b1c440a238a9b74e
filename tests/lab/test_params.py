"""The declared-constraint validator (lab._params) on its own: interval ends, options read when checking,
lists judged by their entries, rules with their messages, and the order a field's checks run in."""
from __future__ import annotations

import math

import pytest

from lab._params import (Boolean, Convert, Hidden, Interval, ListOf, Options, Pattern, Rule, Text, normalised,
                         validate)


@pytest.mark.parametrize("closed, desc, at_left, at_right", [
    ("left", "an integer in [0, 5)", True, False),
    ("right", "an integer in (0, 5]", False, True),
    ("both", "an integer in [0, 5]", True, True),
    ("neither", "an integer in (0, 5)", False, False),
])
def test_an_intervals_ends_belong_to_it_as_closed_says(closed, desc, at_left, at_right):
    interval = Interval(int, 0, 5, closed=closed)
    assert interval.desc == desc
    assert (interval.holds(0), interval.holds(5)) == (at_left, at_right)
    assert interval.holds(3) and not interval.holds(-1) and not interval.holds(6)
    with pytest.raises(ValueError) as caught:
        validate({"n": 9}, {"n": [interval]})
    assert str(caught.value) == f"n must be {desc}. Got 9 instead."


def test_an_open_ended_interval_says_its_one_bound():
    assert Interval(int, 2, None).desc == "an integer >= 2"
    assert Interval(float, 0, None, closed="neither").desc == "a number > 0"
    assert Interval(float, None, 1, closed="right").desc == "a number <= 1"
    assert Interval(float, None, 1, closed="neither").desc == "a number < 1"
    assert Interval(int, None, None).desc == "an integer"


def test_intervals_take_no_bools_and_real_ones_no_infinity_or_nan():
    ints, reals = Interval(int, 0, None), Interval(float, 0, None)
    assert not ints.holds(True) and not ints.holds(2.0) and ints.holds(2)
    assert reals.holds(2) and reals.holds(0.5) and not reals.holds(False)
    assert not reals.holds(math.inf) and not reals.holds(math.nan) and not reals.holds("1")


def test_a_wrong_interval_is_refused_when_declared():
    with pytest.raises(ValueError, match=r"right end 0 is below its left end 1; swap them"):
        Interval(int, 1, 0)
    with pytest.raises(ValueError, match=r"closed must be one of 'left', 'right', 'both', 'neither'\. Got 'open'"):
        Interval(int, 0, 1, closed="open")
    with pytest.raises(ValueError, match=r"kind must be int or float"):
        Interval(complex, 0, 1)


def test_options_are_read_when_checking_not_when_declared():
    registry = {"a": 1}
    table = {"pick": [Options(lambda: registry)]}
    with pytest.raises(ValueError, match=r"^pick must be one of 'a'\. Got 'b' instead\.$"):
        validate({"pick": "b"}, table)
    registry["b"] = 2                                      # registered after the table was built
    validate({"pick": "b"}, table)
    with pytest.raises(ValueError, match=r"pick must be one of 'a', 'b'\. Got \['a'\] instead\."):
        validate({"pick": ["a"]}, table)                   # unhashable: not a choice, not a TypeError


def test_none_is_said_where_allowed_and_hidden_where_a_rule_decides():
    table = {"size": [Interval(int, 8, None), None]}
    validate({"size": None}, table)
    with pytest.raises(ValueError, match=r"^size must be an integer >= 8 or None\. Got 4 instead\.$"):
        validate({"size": 4}, table)
    hidden = {"block": [Text(desc="a tap name"), Interval(int, None, None, desc="an integer index"), Hidden(None)]}
    validate({"block": None}, hidden)
    with pytest.raises(ValueError, match=r"^block must be a tap name or an integer index\. Got 1\.5 instead\.$"):
        validate({"block": 1.5}, hidden)


def test_lists_are_judged_entry_by_entry():
    table = {"tags": [ListOf(Text(strip=False)), None]}
    assert normalised({"tags": ["a", "b"]}, table) == {"tags": ("a", "b")}
    assert normalised({"tags": ("a",)}, table) == {}
    for value, message in [
        ((), r"^tags must not be an empty list; use None for the default\.$"),
        (("a", ""), r"^tags must contain non-empty strings\. Got '' instead\.$"),
        (("b", "a", "b", "a"), r"^tags lists 'a', 'b' more than once\.$"),
        ("a", r"^tags must be a list, got the string 'a'; write \['a'\] for one entry\.$"),
        (3, r"^tags must be a list or None\. Got int 3 instead\.$"),
    ]:
        with pytest.raises(ValueError, match=message):
            validate({"tags": value}, table)
    seeds = {"seeds": [ListOf(Interval(int, 0, None), one=True, bad="seeds must be integers >= 0. Got {bad} instead.")]}
    assert normalised({"seeds": 3}, seeds) == {"seeds": (3,)}
    with pytest.raises(ValueError, match=r"^seeds must be integers >= 0\. Got True instead\.$"):
        validate({"seeds": (0, True)}, seeds)


def test_a_list_among_other_kinds_names_the_whole_field_in_its_messages():
    table = {"keep": [Options(("last", "all"), desc="'last', 'all'"),
                      ListOf(Interval(int, 0, None), desc="a list of epochs", bad="{name} must be {expected}. "
                             "Got {value} instead.")]}
    with pytest.raises(ValueError, match=r"^keep must be 'last', 'all' or a list of epochs\. Got 'x' instead\.$"):
        validate({"keep": "x"}, table)
    with pytest.raises(ValueError, match=r"^keep must be 'last', 'all' or a list of epochs\. Got \[0, -1\] instead\.$"):
        validate({"keep": (0, -1)}, table)


def test_a_rule_checks_the_whole_config_with_its_message_after_or_before_the_kind():
    table = {"lo": [Interval(int, 0, None)],
             "hi": [Interval(int, 0, None), Rule(lambda v: v["hi"] >= v["lo"],
                                                 lambda v: f"hi={v['hi']} is below lo={v['lo']}; raise hi.")]}
    validate({"lo": 1, "hi": 2}, table)
    with pytest.raises(ValueError, match=r"^hi=1 is below lo=2; raise hi\.$"):
        validate({"lo": 2, "hi": 1}, table)
    with pytest.raises(ValueError, match=r"^hi must be an integer >= 0\. Got -1 instead\.$"):
        validate({"lo": 0, "hi": -1}, table)               # the kind first: the rule may rely on it
    first = {"block": [Rule(lambda v: v["block"] is None, "block is not used here; remove it."), Text()]}
    with pytest.raises(ValueError, match=r"^block is not used here; remove it\.$"):
        validate({"block": 1.5}, first)                    # a rule listed before the kinds runs before them


def test_fields_are_checked_in_table_order_and_converted_first():
    table = {"a": [Boolean()], "b": [Pattern(r"cuda(:\d+)?", desc="'cuda' or 'cuda:N'")],
             "c": [Convert(str.lower), Options(("x", "y"))]}
    with pytest.raises(ValueError, match=r"^a must be true or false\. Got 1 instead\."):
        validate({"a": 1, "b": "gpu", "c": "z"}, table)
    with pytest.raises(ValueError, match=r"^b must be 'cuda' or 'cuda:N'\. Got 'gpu' instead\."):
        validate({"a": True, "b": "gpu", "c": "z"}, table)
    validate({"a": True, "b": " CUDA:1 ", "c": "x"}, table)
    assert normalised({"a": True, "b": "cuda", "c": "X"}, table) == {"c": "x"}
