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
