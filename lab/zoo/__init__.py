"""The offline glyph zoo: backbones pretrained on a source task disjoint from ``glyphs``.

Each model is ``NAME.safetensors`` (fp16 state dict of the whole timm model,
source classifier included) with a card ``NAME.json`` and a model card
``NAME.md`` in this folder. The recipe is :mod:`lab.zoo.recipe` (``python -m lab pretrain``);
``lab.backbones.load("zoo:NAME")`` loads a model. Reading cards is
:mod:`lab.backbones`' job (:func:`lab.backbones.zoo_card`); this module only
names the shipped folder and the card's fields.
"""
from __future__ import annotations

from pathlib import Path

# lab.backbones (torch) is imported by the two functions below, not here: the command line imports this
# package to build its `pretrain` parser, and `python -m lab runs list` must not wait seconds for torch.

__all__ = ["ZOO_DIR", "CARD_KEYS", "RECIPE_KEYS", "names", "card"]

ZOO_DIR = Path(__file__).parent
"""Folder of the shipped checkpoints and their cards (``$LAB_ZOO_DIR`` points the loader elsewhere)."""

CARD_KEYS = ("name", "architecture", "model_kwargs", "num_classes", "weights", "input_size", "mean", "std",
             "source", "recipe", "epochs", "source_accuracy", "seed")
"""Fields of every ``NAME.json`` card, first and in this order."""

RECIPE_KEYS = ("source_accuracies", "data", "disjoint_from_targets", "augment", "wall_seconds", "training", "history")
"""Fields that cards written by the current recipe add after :data:`CARD_KEYS`: the held-out accuracy
of each part of the source task (``font``, ``char``), the data (fonts, characters, pool, images, held-out
pairs, render time and cache key), what it shares with the ``glyphs`` targets (packages, families,
characters: nothing), the augmentation maxima, the wall time, the training settings and
the per-epoch history."""


def names() -> list[str]:
    """Names of the zoo models, sorted (:func:`lab.backbones.zoo_names`)."""
    from lab.backbones import zoo_names

    return zoo_names()


def card(name: str) -> dict:
    """The card of zoo model ``name``, with ``weights`` resolved to an absolute path string.

    Raises
    ------
    ValueError
        ``name`` is not in the zoo (the message lists the closest names), or its card or
        weights are damaged.
    """
    from lab.backbones import zoo_card

    data, weights = zoo_card(name)
    return {**data, "weights": str(weights)}

