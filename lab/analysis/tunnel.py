"""The tunnel: deep layers that compress while seen accuracy stays saturated and unseen separability falls.

Masarczyk et al. (NeurIPS 2023, arXiv 2305.19753, "The tunnel effect") find that the deeper layers of an
over-parameterized network compress its representations (their numerical rank falls) while in-distribution
accuracy is already saturated, and that these layers hurt transfer to other data; Harun et al. (NeurIPS 2024,
arXiv 2405.15018) find that more training classes, higher resolution and augmentation shorten or remove it.
The definition measured here is in METRICS.md ("Tunnel").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from lab import catalogue
from lab.analysis._tables import aggregate_seeds, layer_order
from lab.analysis.separation_law import _distinct, _unpack
from lab.analysis.summary import complete_evaluations, generalization

__all__ = ["Tunnel", "tunnel", "TUNNEL_TOLERANCE", "TUNNEL_PROBE", "TUNNEL_RANK"]

TUNNEL_TOLERANCE = 0.02
"""How far (absolute, accuracy in [0, 1]) below its best over the layers the seen probe accuracy may be in a
tunnel layer: 2 percentage points."""
TUNNEL_PROBE = "ncc_accuracy"
"""The default seen held-out probe: nearest-class-centre accuracy, measured at every epoch (kNN accuracy is
measured on the seen held-out images only at epoch 0, as the transferability baseline)."""
TUNNEL_RANK = "numerical_rank"
"""The compression measure: the mean numerical rank of the class feature matrices."""


@dataclass(frozen=True)
class Tunnel:
    """The tunnel of one run at one epoch (seed means), over its distinct layers (a tap identical to a deeper
    tap counted once, as the deeper).

    Attributes
    ----------
    epoch : int
    best_layer : str
        The unseen classes' best layer: g's layer (:func:`lab.analysis.generalization`; ties to the deeper).
    best_index : int
        Its index among the distinct layers, 0 = the first.
    n_layers : int
        The distinct layers.
    relative_depth : float
        ``best_index / (n_layers - 1)`` in [0, 1]; 1 = the last layer.
    share : float
        In [0, 1]: the share of the ``n_after`` layers after the best that are ``tunnel_layers``; 0 when the best
        layer is the last.
    n_after : int
        The layers after the best: ``n_layers - 1 - best_index``.
    tunnel_layers : tuple of str
        The layers after the best where, against the layer before, unseen g falls and the numerical rank falls,
        while the seen probe accuracy is within ``tolerance`` of its best over all layers.
    probe, rank_split : str
        The seen probe metric and the split whose numerical rank was read.
    """

    epoch: int
    best_layer: str
    best_index: int
    n_layers: int
    relative_depth: float
    share: float
    n_after: int
    tunnel_layers: tuple[str, ...]
    probe: str = TUNNEL_PROBE
    rank_split: str = "seen"


def tunnel(run, *, epoch: int | None = None, layers: Iterable | None = None,
           aliases: Mapping[str, str] | None = None, probe: str = TUNNEL_PROBE,
           tolerance: float = TUNNEL_TOLERANCE, rank_split: str = "seen") -> Tunnel:
    """The unseen classes' best layer's relative depth and the tunnel after it (METRICS.md, "Tunnel").

    Parameters
    ----------
    run : lab.store.RunRecord or pandas.DataFrame
        A stored run's record (its ``meta["layers"]`` and ``meta["layer_aliases"]`` are read), or its long
        metrics table (seed, epoch, layer, split, metric, value) with ``aliases`` passed.
    epoch : int, optional
        The evaluation; None: the last epoch at which every distinct layer has unseen g, the seen probe and the
        numerical rank (for every seed counted).
    layers : the run's layers, input -> output (names or ``meta["layers"]``); None: the record's or the table's
    aliases : ``{tap: deeper tap}`` of identical features; required with a table (``{}`` for none)
    probe : str
        The seen held-out probe accuracy (higher is better, in [0, 1]); default :data:`TUNNEL_PROBE`.
    tolerance : float
        :data:`TUNNEL_TOLERANCE`: how far below its best the probe may be in a tunnel layer (absolute).
    rank_split : str
        The split whose numerical rank is read ("seen": held-out; "train": the training sample).

    Returns
    -------
    Tunnel

    Raises
    ------
    ValueError
        When the run lacks one of the three measures at every layer, the epoch has not all three, or the run
        has fewer than 2 distinct layers.

    References
    ----------
    Masarczyk et al., "The tunnel effect: building data representations in deep neural networks",
    NeurIPS 2023, arXiv 2305.19753. Harun et al., "What variables affect out-of-distribution generalization in
    pretrained models?", NeurIPS 2024, arXiv 2405.15018.
    """
    metrics, layers, aliases = _unpack(run, layers, aliases, "tunnel")
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be an accuracy difference in [0, 1). Got {tolerance!r} instead.")
    if metrics is None or len(metrics) == 0:
        raise ValueError("tunnel: the run has no metrics yet; wait for its first evaluation.")
    distinct = _distinct(layer_order(layers, metrics), aliases)
    if len(distinct) < 2:
        raise ValueError(f"tunnel needs at least 2 distinct layers to place the best one; the run has "
                         f"{len(distinct)} ({distinct}). Measure more layers.")
    wanted = {"g": (catalogue.g_metric(), "unseen"), "probe": (probe, "seen"), "rank": (TUNNEL_RANK, rank_split)}
    rows, epochs = {}, None
    for key, (metric, split) in wanted.items():
        rows[key] = complete_evaluations(metrics, distinct, metric=metric, split=split)
        if not len(rows[key]):
            raise ValueError(f"tunnel reads {metric} on the {split} images at every layer, and the run has no "
                             f"complete evaluation of it; add {metric!r} to the run's metrics.")
        have = set(rows[key]["epoch"].astype(int))
        epochs = have if epochs is None else epochs & have
    if epoch is None:
        if not epochs:
            raise ValueError("tunnel: no epoch has unseen g, the seen probe and the numerical rank at every layer.")
        epoch = max(epochs)
    elif int(epoch) not in epochs:
        raise ValueError(f"tunnel: epoch {epoch} lacks unseen g, {probe} or {TUNNEL_RANK} at some layer; epochs "
                         f"with all three: {sorted(epochs)}.")
    epoch = int(epoch)
    curves = {key: _curve(part[part["epoch"] == epoch], distinct) for key, part in rows.items()}  # (L,) each

    best = generalization(metrics, layers=layers, aliases=aliases)
    best = best[best["epoch"] == epoch]
    if best.empty:
        raise ValueError(f"tunnel: unseen g is undefined (NaN) at every layer at epoch {epoch}.")
    best_layer = str(best.iloc[0]["layer"])
    b, n = distinct.index(best_layer), len(distinct)
    g, acc, rank = curves["g"], curves["probe"], curves["rank"]
    # NaN compares False: a layer whose measure is undefined is not counted in the tunnel
    with np.errstate(invalid="ignore"):
        saturated = acc >= np.nanmax(acc) - tolerance if np.isfinite(acc).any() else np.zeros(n, dtype=bool)
        inside = [j for j in range(b + 1, n) if g[j] < g[j - 1] and rank[j] < rank[j - 1] and saturated[j]]
    n_after = n - 1 - b
    return Tunnel(epoch=epoch, best_layer=best_layer, best_index=b, n_layers=n, relative_depth=b / (n - 1),
                  share=len(inside) / n_after if n_after else 0.0, n_after=n_after,
                  tunnel_layers=tuple(distinct[j] for j in inside), probe=probe, rank_split=rank_split)


def _curve(rows: pd.DataFrame, distinct: list[str]) -> np.ndarray:
    """Seed mean of one metric per distinct layer, in depth order (NaN where undefined)."""
    agg = aggregate_seeds(rows.assign(layer=rows["layer"].astype(str)), by=("layer",))
    return agg.set_index("layer")["mean"].reindex(distinct).to_numpy(dtype=float)
