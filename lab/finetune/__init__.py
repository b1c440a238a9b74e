"""Fine-tuning strategies on the seen classes, behind one interface.

A strategy decides which backbone weights train; every strategy trains a fresh
linear classifier (``head``) on the pre-logits features, except "none":

========  ===================================================================  ==========================
name      trains                                                               reference
========  ===================================================================  ==========================
none      nothing (the backbone as loaded is evaluated)                        —
linear    the head (linear probe)                                              —
full      every backbone weight + head (AdamW, lr 2e-4)                        Dyballa et al.; Gerritz et al.
layer     one block + head ("Layer FT")                                        Li, Liu et al. (NC transfer)
scl       one block + head, and a skip connection from the block's pooled      Li, Liu et al. (NC transfer)
          output (zero-padded) to the pre-logits features ("SCL FT")
========  ===================================================================  ==========================

The strategies are the rows of one table, :data:`lab.catalogue.STRATEGIES` (re-exported here as
:data:`STRATEGIES`), which ``RunConfig`` and the app read too: :func:`register_strategy` adds one that
a run accepts.

- :mod:`lab.finetune.strategies`: looking a strategy up, the block it trains, the classifier it builds;
- :mod:`lab.finetune.training`: :class:`FineTuner` (built by :func:`prepare`): the optimizer, the
  learning-rate schedule, mixed precision and the training epoch;
- :mod:`lab.finetune.memorization`: Wang & Yang's label-noise corruption (:func:`corrupt_labels`) and the
  exact, reversible layer re-initialisation used by the contribution analysis (:func:`reinitialized`).
"""
from __future__ import annotations

from lab._cancel import Cancelled
from lab.catalogue import STRATEGIES, Strategy, register_strategy, unregister_strategy
from lab.features import pool_tap_output
from lab.finetune.memorization import corrupt_labels, reinitialized
from lab.finetune.strategies import combine_skip, get_strategy, resolve_block
from lab.finetune.training import FineTuner, prepare

__all__ = [
    "Strategy", "STRATEGIES", "register_strategy", "unregister_strategy", "get_strategy", "FineTuner", "prepare",
    "resolve_block", "pool_tap_output", "combine_skip", "corrupt_labels", "reinitialized", "Cancelled",
]
