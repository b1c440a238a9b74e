"""What :class:`lab.config.RunConfig`'s declared checks are made of, beside the kinds of value of :mod:`lab._params`:
how ``keep_embeddings`` typed as text is read, and the predicates and words of the rules that relate one field to
another (a strategy that trains nothing given epochs, projection layers that are not measured, LiDAR asked for on
one side only)."""
from __future__ import annotations

import re

from lab import catalogue
from lab._params import Text, either, is_int

__all__ = ["DEVICE_RE", "KEEP_WORDS", "KEEP_EXPECTED", "NAMES", "read_epochs", "strategy_of", "strategies_that",
           "shared_classes", "unknown_projection_layers", "lidar_disagreement"]

DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
KEEP_WORDS = ("last", "all")
KEEP_EXPECTED = "keep_embeddings must be {expected}. Got {value} instead."
NAMES = Text(desc="non-empty strings", strip=False)


def read_epochs(value):
    """``keep_embeddings`` as the command line and the app's form send it: a word, or epochs as text
    (``"0, 5"``); a list of epochs is kept sorted."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in KEEP_WORDS:
            return word
        parts = [p for p in re.split(r"[\s,;]+", word.strip("[]() ")) if p]
        if parts and all(re.fullmatch(r"\d+", p) for p in parts):
            value = [int(p) for p in parts]
    if isinstance(value, (list, tuple)) and all(is_int(e) and e >= 0 for e in value):
        return tuple(sorted(value))
    return value


def strategy_of(config):
    """The catalogue's strategy of ``config``."""
    return catalogue.STRATEGIES[config.strategy]


def strategies_that(attribute: str) -> str:
    """The strategies with ``attribute`` set, as the words of a message ("a or b")."""
    return either(n for n, s in catalogue.STRATEGIES.items() if getattr(s, attribute))


def shared_classes(config) -> list[str]:
    if config.seen is None or config.unseen is None:
        return []
    return sorted(set(config.seen) & set(config.unseen))


def unknown_projection_layers(config) -> list[str]:
    if config.projection_layers is None or config.layers is None:
        return []
    return [p for p in config.projection_layers if p not in config.layers]


def lidar_disagreement(config) -> str:
    return (f"lidar_views={config.lidar_views} and metrics {'' if 'lidar' in config.metrics else 'without '}'lidar' "
            "disagree: LiDAR is measured on lidar_views >= 2 augmented views of each unseen image; add 'lidar' to "
            "metrics and set lidar_views (e.g. 4), or neither.")
