"""The names a run resolves, checked up front without loading anything.

A name is otherwise resolved only when a run (or a study's worker) loads it; checking first turns a
typo into one line naming the value and the closest valid names, before any model, data or cluster.
"""
from __future__ import annotations

__all__ = ["check_names"]


def check_names(cfg, *, store=None) -> None:
    """Resolve the names of RunConfig ``cfg``: its dataset (:func:`lab.data.check_name`), its backbone
    (:func:`lab.backbones.check_name`: no model is built) and its checkpoint (a file that exists, or
    ``run:ID[/SEED]`` with weights in ``store``, then the default store: :func:`lab.backbones.check_checkpoint`).

    Raises
    ------
    lab.errors.UnknownNameError
        For the first name that cannot load here (``kind`` "dataset", "backbone" or "checkpoint");
        a ValueError, so every caller that reports bad input reports it.
    """
    from lab.backbones import check_checkpoint, check_name as check_backbone
    from lab.data import check_name as check_dataset
    from lab.store.lookup import open_store

    check_dataset(cfg.dataset)
    check_backbone(cfg.backbone)
    if cfg.checkpoint is not None:
        # store=False (a run not recorded) still finds run: weights in the default store
        check_checkpoint(cfg.checkpoint, store=open_store(None if store is False else store))
