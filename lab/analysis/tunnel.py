"""The tunnel: deep layers that compress while seen accuracy stays saturated and unseen separability falls.

Masarczyk et al. (NeurIPS 2023, arXiv 2305.19753, "The tunnel effect") find that the deeper layers of an
over-parameterized network compress its representations (their numerical rank falls) while in-distribution
accuracy is already saturated, and that these layers hurt transfer to other data; Harun et al. (NeurIPS 2024,
arXiv 2405.15018) find that more training classes, higher resolution and augmentation shorten or remove it.
The definition measured here is in METRICS.md ("Tunnel").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from lab import catalogue
from lab.analysis._tables import aggregate_seeds, layer_order
from lab.analysis.replicates import replicate_interval
from lab.analysis.separation_law import _distinct, _unpack
from lab.analysis.summary import complete_evaluations, generalization

__all__ = ["Tunnel", "tunnel", "group_tunnel", "TUNNEL_TOLERANCE", "TUNNEL_PROBE", "TUNNEL_RANK",
           "TUNNEL_QUANTITIES"]

TUNNEL_TOLERANCE = 0.02
"""How far (absolute, accuracy in [0, 1]) below its best over the layers the seen probe accuracy may be in a
tunnel layer: 2 percentage points."""
TUNNEL_PROBE = "ncc_accuracy"
"""The default seen held-out probe: nearest-class-centre accuracy, measured at every epoch (kNN accuracy is
measured on the seen held-out images only at epoch 0, as the transferability baseline)."""
TUNNEL_RANK = "numerical_rank"
"""The compression measure: the mean numerical rank of the class feature matrices."""
TUNNEL_QUANTITIES = ("relative_depth", "share", "n_tunnel", "probe_best")
"""The per-seed quantities :func:`group_tunnel` averages over a condition's seeds: the best layer's relative
depth, the tunnel share, the tunnel's length in layers and the seen probe's best accuracy over the layers."""


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
    probe_best : float
        The seen probe accuracy's best over the distinct layers (the saturation level the tolerance is read
        from; NaN where undefined at every layer).
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
    probe_best: float = float("nan")


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

    # g at this epoch only: its other epochs are not read (and cost most of the time over a study)
    best = generalization(metrics[metrics["epoch"].astype(int) == epoch], layers=layers, aliases=aliases)
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
                  tunnel_layers=tuple(distinct[j] for j in inside), probe=probe, rank_split=rank_split,
                  probe_best=float(np.nanmax(acc)) if np.isfinite(acc).any() else float("nan"))


def group_tunnel(groups: Mapping[str, Sequence[pd.DataFrame]], layers: Mapping[str, Iterable], *,
                 aliases: Mapping[str, Mapping] | None = None, epoch: int | None = None, probe: str = TUNNEL_PROBE,
                 tolerance: float = TUNNEL_TOLERANCE, rank_split: str = "seen") -> pd.DataFrame:
    """Per group (a study's condition), the tunnel of each seed and their mean with its 95 % interval over
    the seeds (seeds as replicates; METRICS.md, "Tunnel" and "Seeds as replicates").

    Each seed of each of a group's runs is read on its own by :func:`tunnel` (at ``epoch``, default its last
    complete evaluation); a seed lacking one of the three measures is left out, and n says how many were read.

    Parameters
    ----------
    groups : ``{group: [metrics table of each run]}``; a group's runs are pooled as seeds of one condition
    layers, aliases : ``{group: the runs' layers}`` and ``{group: their aliases}`` (``{}`` for a group without
        identical taps); every group needs its aliases, as for :func:`lab.analysis.group_separation_law`
    epoch, probe, tolerance, rank_split : as for :func:`tunnel`

    Returns
    -------
    pandas.DataFrame
        One row per group with at least one seed read: group, n (seeds read), n_layers (distinct layers; the
        largest when seeds differ), best_layer (the most frequent best layer; ties to the deeper) and
        best_layer_n (in how many seeds it was best), then for each of :data:`TUNNEL_QUANTITIES` ``q``: ``q``
        (mean over the seeds), ``q_std`` (ddof=1), ``q_low`` and ``q_high`` (the Student-t interval of
        :func:`lab.analysis.replicate_interval`; NaN with one seed).
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be an accuracy difference in [0, 1). Got {tolerance!r} instead.")
    columns = ["group", "n", "n_layers", "best_layer", "best_layer_n",
               *(f"{q}{part}" for q in TUNNEL_QUANTITIES for part in ("", "_std", "_low", "_high"))]
    rows = []
    for group, frames in groups.items():
        if aliases is None or group not in aliases:
            raise TypeError(f"group_tunnel: no aliases for group {group!r}. Pass aliases={{group: the runs' "
                            "meta['layer_aliases']}, {} for a group without identical taps; nothing is guessed.")
        found = [t for frame in frames for t in _seed_tunnels(frame, layers.get(group), aliases[group], epoch=epoch,
                                                                probe=probe, tolerance=tolerance,
                                                                rank_split=rank_split)]
        if not found:
            continue
        row = {"group": group, "n": len(found), "n_layers": max(t.n_layers for t in found)}
        # the most frequent best layer; among equally frequent ones the deeper, as g's ties go
        counts = {}
        for t in found:
            counts[t.best_layer] = (counts.get(t.best_layer, (0, t.best_index))[0] + 1, t.best_index)
        row["best_layer"], (row["best_layer_n"], _) = max(counts.items(), key=lambda kv: kv[1])
        for q in TUNNEL_QUANTITIES:
            values = [len(t.tunnel_layers) if q == "n_tunnel" else getattr(t, q) for t in found]
            stats = replicate_interval(values)
            row.update({q: stats["mean"], f"{q}_std": stats["std"], f"{q}_low": stats["low"],
                        f"{q}_high": stats["high"]})
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _seed_tunnels(frame: pd.DataFrame, layers, aliases, **options) -> list[Tunnel]:
    """The tunnel of each seed of one run's metrics table; a seed without the three measures is skipped."""
    if frame is None or not len(frame):
        return []
    g = catalogue.g_metric()
    read = {g, f"{g}_low", f"{g}_high", f"{g}_best_share", options["probe"], TUNNEL_RANK}
    frame = frame[frame["metric"].isin(read)]        # the rest of a run's table is not read (and costs time)
    seeds = frame["seed"].unique() if "seed" in frame else [None]
    out = []
    for seed in seeds:
        part = frame if seed is None else frame[frame["seed"] == seed]
        try:
            out.append(tunnel(part, layers=layers, aliases=aliases, **options))
        except ValueError:          # this seed lacks a measure or an evaluation: it is not counted in n
            continue
    return out


def _curve(rows: pd.DataFrame, distinct: list[str]) -> np.ndarray:
    """Seed mean of one metric per distinct layer, in depth order (NaN where undefined)."""
    agg = aggregate_seeds(rows.assign(layer=rows["layer"].astype(str)), by=("layer",))
    return agg.set_index("layer")["mean"].reindex(distinct).to_numpy(dtype=float)
