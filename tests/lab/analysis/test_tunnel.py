"""lab.analysis.tunnel against hand-built per-layer curves whose answer is known (METRICS.md, "Tunnel")."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from lab.analysis import Tunnel, tunnel

LAYERS = ["l0", "l1", "l2", "l3", "l4", "l5"]
# best unseen layer l2; after it: l3, l4 fall in g and rank with the probe within 0.02 of its best (0.96);
# l5 falls in g but its probe (0.90) has left the plateau and its rank stays -> 2 of 3 layers
G = [0.2, 0.5, 0.6, 0.55, 0.5, 0.45]
PROBE = [0.5, 0.8, 0.95, 0.96, 0.95, 0.90]
RANK = [10.0, 9.0, 8.0, 6.0, 5.0, 5.0]


def _table(g, probe, rank, *, layers=LAYERS, epoch=3, spread=0.01) -> pd.DataFrame:
    """Two seeds whose mean is exactly the given curve (seed 0 at -spread, seed 1 at +spread)."""
    rows = []
    for seed, sign in ((0, -1), (1, 1)):
        for metric, split, curve in (("nmi", "unseen", g), ("ncc_accuracy", "seen", probe),
                                     ("numerical_rank", "seen", rank)):
            rows += [{"seed": seed, "epoch": epoch, "layer": name, "split": split, "metric": metric,
                      "value": v + sign * spread} for name, v in zip(layers, curve)]
    return pd.DataFrame(rows)


def _by_hand(g, probe, rank, tolerance=0.02):
    """The definition, written out on plain lists."""
    best = max(i for i, v in enumerate(g) if v == max(g))
    inside = [j for j in range(best + 1, len(g))
              if g[j] < g[j - 1] and rank[j] < rank[j - 1] and probe[j] >= max(probe) - tolerance]
    after = len(g) - 1 - best
    return best / (len(g) - 1), (len(inside) / after if after else 0.0), inside


def test_a_known_tunnel():
    t = tunnel(_table(G, PROBE, RANK), aliases={})
    assert isinstance(t, Tunnel)
    assert (t.epoch, t.best_layer, t.best_index, t.n_layers, t.n_after) == (3, "l2", 2, 6, 3)
    assert t.relative_depth == pytest.approx(0.4)
    assert t.share == pytest.approx(2 / 3)
    assert t.tunnel_layers == ("l3", "l4")
    depth, share, inside = _by_hand(G, PROBE, RANK)
    assert (t.relative_depth, t.share) == pytest.approx((depth, share))
    assert [LAYERS.index(x) for x in t.tunnel_layers] == inside


def test_no_tunnel_when_unseen_g_peaks_at_the_last_layer():
    t = tunnel(_table([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], PROBE, RANK), aliases={})
    assert (t.best_layer, t.relative_depth, t.share, t.n_after, t.tunnel_layers) == ("l5", 1.0, 0.0, 0, ())


def test_no_tunnel_when_the_rank_grows_after_the_best_layer():
    t = tunnel(_table(G, PROBE, [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]), aliases={})
    assert (t.best_index, t.share, t.tunnel_layers) == (2, 0.0, ())


def test_the_tolerance_decides_the_plateau():
    assert tunnel(_table(G, PROBE, RANK), aliases={}, tolerance=0.0).tunnel_layers == ("l3",)
    assert tunnel(_table(G, PROBE, RANK), aliases={}, tolerance=0.1).share == pytest.approx(2 / 3)  # l5: rank flat


def test_a_tap_identical_to_a_deeper_one_counts_once_and_a_record_gives_its_aliases():
    layers = LAYERS + ["pre_logits"]
    table = _table(G + [0.45], PROBE + [0.90], RANK + [5.0], layers=layers)
    t = tunnel(table, aliases={"l5": "pre_logits"})
    assert (t.n_layers, t.share) == (6, pytest.approx(2 / 3))
    record = SimpleNamespace(metrics=table, meta={"layers": [{"name": x} for x in layers],
                                                  "layer_aliases": {"l5": "pre_logits"}})
    assert tunnel(record) == t


def test_the_epoch_defaults_to_the_last_with_all_three_measures():
    early = _table([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], PROBE, RANK, epoch=0)
    later = _table(G, PROBE, RANK, epoch=3)
    both = pd.concat([early, later[later["metric"] != "numerical_rank"]], ignore_index=True)
    assert tunnel(both, aliases={}).epoch == 0
    with pytest.raises(ValueError, match=r"epoch 3 lacks .*epochs with all three: \[0\]"):
        tunnel(both, aliases={}, epoch=3)


def test_a_missing_measure_and_a_table_without_aliases_are_explained():
    table = _table(G, PROBE, RANK)
    with pytest.raises(ValueError, match=r"numerical_rank on the seen images .* add 'numerical_rank' to the run's"):
        tunnel(table[table["metric"] != "numerical_rank"], aliases={})
    with pytest.raises(TypeError, match="aliases="):
        tunnel(table)
    with pytest.raises(ValueError, match=r"tolerance must be .* Got 2 instead"):
        tunnel(table, aliases={}, tolerance=2)
    assert np.isfinite(tunnel(table, aliases={}).share)


def _seed_rows(seed, g, probe, rank, *, layers=LAYERS, epoch=3) -> pd.DataFrame:
    """One seed's table: exactly the given curves."""
    rows = []
    for metric, split, curve in (("nmi", "unseen", g), ("ncc_accuracy", "seen", probe),
                                 ("numerical_rank", "seen", rank)):
        rows += [{"seed": seed, "epoch": epoch, "layer": name, "split": split, "metric": metric, "value": v}
                 for name, v in zip(layers, curve)]
    return pd.DataFrame(rows)


# three seeds of one condition, each a different known tunnel (written out by _by_hand)
SEEDS = [
    (G, PROBE, RANK),                                                   # best l2, share 2/3
    ([0.2, 0.7, 0.6, 0.5, 0.4, 0.3], PROBE, [10.0, 9.0, 8.0, 6.0, 5.0, 4.0]),   # best l1, probe saturated from l2
    ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], PROBE, RANK),                      # best l5: no layer after it
]


def test_group_tunnel_against_numpy_over_seeds_as_replicates():
    from scipy import stats

    from lab.analysis import TUNNEL_QUANTITIES, group_tunnel

    runs = [_seed_rows(0, *SEEDS[0]), pd.concat([_seed_rows(1, *SEEDS[1]), _seed_rows(2, *SEEDS[2])])]
    one = [_seed_rows(5, *SEEDS[1])]
    table = group_tunnel({"three": runs, "one": one}, {"three": LAYERS, "one": LAYERS},
                         aliases={"three": {}, "one": {}})
    assert list(table["group"]) == ["three", "one"]
    row = table.set_index("group").loc["three"]
    hand = [_by_hand(*seed) for seed in SEEDS]                          # (depth, share, inside) per seed
    probe_best = [max(p) for _, p, _ in SEEDS]
    per_seed = {"relative_depth": [h[0] for h in hand], "share": [h[1] for h in hand],
                "n_tunnel": [len(h[2]) for h in hand], "probe_best": probe_best}
    assert set(per_seed) == set(TUNNEL_QUANTITIES)
    assert (row["n"], row["n_layers"]) == (3, 6)
    for q, values in per_seed.items():
        x = np.asarray(values, dtype=float)
        mean, std = x.mean(), x.std(ddof=1)
        assert row[q] == pytest.approx(mean) and row[f"{q}_std"] == pytest.approx(std)
        if std > 0:
            low, high = stats.t.interval(0.95, len(x) - 1, loc=mean, scale=stats.sem(x))
            assert (row[f"{q}_low"], row[f"{q}_high"]) == pytest.approx((low, high))
        else:
            assert row[f"{q}_low"] == pytest.approx(mean) and row[f"{q}_high"] == pytest.approx(mean)
    # each seed's best layer once: the deepest of the equally frequent ones
    assert (row["best_layer"], row["best_layer_n"]) == ("l5", 1)
    single = table.set_index("group").loc["one"]
    assert single["n"] == 1 and single["relative_depth"] == pytest.approx(hand[1][0])
    assert np.isnan(single["relative_depth_std"]) and np.isnan(single["share_low"])   # one seed: no spread


def test_group_tunnel_counts_only_the_seeds_it_could_read():
    from lab.analysis import group_tunnel

    no_rank = _seed_rows(1, *SEEDS[0])
    no_rank = no_rank[no_rank["metric"] != "numerical_rank"]
    table = group_tunnel({"a": [_seed_rows(0, *SEEDS[0]), no_rank], "none": [no_rank]},
                         {"a": LAYERS, "none": LAYERS}, aliases={"a": {}, "none": {}})
    assert list(table["group"]) == ["a"]                                # a group with no seed read: no row
    assert table.iloc[0]["n"] == 1 and (table.iloc[0]["best_layer"], table.iloc[0]["best_layer_n"]) == ("l2", 1)
    with pytest.raises(TypeError, match=r"group_tunnel: no aliases for group 'a'\. Pass aliases="):
        group_tunnel({"a": [_seed_rows(0, *SEEDS[0])]}, {"a": LAYERS})
    with pytest.raises(ValueError, match=r"tolerance must be an accuracy difference in \[0, 1\)\. Got 2 instead"):
        group_tunnel({"a": [_seed_rows(0, *SEEDS[0])]}, {"a": LAYERS}, aliases={"a": {}}, tolerance=2)
