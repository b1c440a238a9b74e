"""The order a study's cells run in: the grid's own, or a seeded order that reaches every axis value early.

A grid run in its own order (the last axis fastest) shows its first axis's first value for a long
time: the first hour of a study of 4 backbones x 5 noise levels x 3 seeds says nothing about the
last backbone. The "shuffled" order first picks cells that cover (axis, value) pairs no earlier cell
has, so after ``max(len(values))`` cells every value of every axis has a run on its way, then runs the
rest in a seeded random order. Only the run order changes: a cell's index (its grid position) and its
key stay as they are, so stored runs and figures do not move.
"""
from __future__ import annotations

import random
from typing import Sequence

from lab.study._keys import cell_key

__all__ = ["ORDERS", "check_order", "run_order"]

ORDERS = ("grid", "shuffled")
"""The run orders a study takes: the grid's own, or :func:`run_order`'s covering shuffle."""


def check_order(order: str, seed) -> tuple[str, int]:
    """``(order, seed)`` checked: ValueError naming the valid orders, or a seed that is no integer >= 0."""
    if order not in ORDERS:
        raise ValueError(f"a study's order must be one of {', '.join(map(repr, ORDERS))}. Got {order!r} instead; "
                         f"'grid' runs the cells in the grid's order, 'shuffled' reaches every axis value first.")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"a study's order_seed must be an integer >= 0. Got {seed!r} instead.")
    return order, seed


def run_order(cells: Sequence, order: str = "grid", seed: int = 0) -> list:
    """``cells`` (objects with a ``values`` mapping {axis: value}) in the order they should run.

    Parameters
    ----------
    cells : sequence of Cell
        The grid's cells in grid order.
    order : {"grid", "shuffled"}
        "grid" returns them as given. "shuffled" is greedy covering: repeatedly take the cell that
        covers the most (axis, value) pairs not yet covered, ties broken by a random order drawn from
        ``seed``; once every pair is covered, the rest follow in that random order. The first
        ``max(len(values))`` cells of a full grid cover every value of every axis (each step can
        cover one new value of every axis while some remain).
    seed : int
        Seeds the random order (the same seed, the same order).

    Returns
    -------
    list of Cell
        A permutation of ``cells``.
    """
    order, seed = check_order(order, seed)
    cells = list(cells)
    if order == "grid" or len(cells) < 2:
        return cells
    shuffled = list(cells)
    random.Random(seed).shuffle(shuffled)
    pairs = [{(axis, cell_key({"v": value})) for axis, value in cell.values.items()} for cell in shuffled]
    uncovered = set().union(*pairs)
    first, rest = [], list(range(len(shuffled)))
    while uncovered:
        # the earliest (in the random order) of the cells covering the most new pairs
        best = max(rest, key=lambda i: (len(pairs[i] & uncovered), -i))
        first.append(best)
        rest.remove(best)
        uncovered -= pairs[best]
    return [shuffled[i] for i in first + rest]
