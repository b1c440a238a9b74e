"""The study's tunnel figure (app.studies.tunnel_plot) draws lab.analysis.group_tunnel's rows as they are:
the mean over seeds at the point, the 95 % interval over seeds as the bars, n in the legend; and says so
when there is nothing to draw."""
from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
import pytest

from app.studies.tunnel_plot import TUNNEL_TITLE, tunnel_plot, tunnel_text
from lab.analysis import group_tunnel

hv.extension("bokeh")

LAYERS = ["l0", "l1", "l2", "l3"]
HOSTILE = "lr=<script>alert(1)</script>"


def _seed(seed, g, rank=(8.0, 6.0, 4.0, 2.0), probe=(0.9, 0.95, 0.95, 0.95)) -> pd.DataFrame:
    rows = []
    for metric, split, curve in (("nmi", "unseen", g), ("ncc_accuracy", "seen", probe),
                                 ("numerical_rank", "seen", rank)):
        rows += [{"seed": seed, "epoch": 1, "layer": layer, "split": split, "metric": metric, "value": v}
                 for layer, v in zip(LAYERS, curve)]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def figs():
    groups = {"deep": [_seed(0, [0.1, 0.2, 0.3, 0.4]), _seed(1, [0.1, 0.2, 0.5, 0.4]), _seed(2, [0.6, 0.5, 0.4, 0.3])],
              HOSTILE: [_seed(0, [0.6, 0.5, 0.4, 0.3])]}
    table = group_tunnel(groups, {g: LAYERS for g in groups}, aliases={g: {} for g in groups})
    return {"tunnel": table}


def _elements(obj, kind):
    return [el for el in obj.traverse(lambda x: x, [kind])]


def test_the_points_and_bars_are_group_tunnels_rows(figs):
    plot = tunnel_plot(figs)
    scatters = {el.label: el.dframe() for el in _elements(plot, hv.Scatter)}
    assert set(scatters) == {"deep (n=3)", "lr=\uff1cscript\uff1ealert(1)\uff1c/script\uff1e (n=1)"}
    row = figs["tunnel"].set_index("group").loc["deep"]
    point = scatters["deep (n=3)"].iloc[0]
    assert (point["relative_depth"], point["share"]) == pytest.approx((row["relative_depth"], row["share"]))
    bars = [el.dframe() for el in _elements(plot, hv.ErrorBars)]
    assert len(bars) == 2                                         # the one-seed condition has no interval
    vertical = next(b for b in bars if "share_down" in b)
    assert vertical["share"].iloc[0] - vertical["share_down"].iloc[0] == pytest.approx(row["share_low"])
    assert vertical["share"].iloc[0] + vertical["share_up"].iloc[0] == pytest.approx(row["share_high"])
    horizontal = next(b for b in bars if "depth_left" in b)
    assert (horizontal["relative_depth"].iloc[0] + horizontal["depth_right"].iloc[0]
            == pytest.approx(row["relative_depth_high"]))
    hv.render(plot, backend="bokeh")                              # it draws
    text = tunnel_text(figs)
    assert "- deep (n = 3): best unseen layer at relative depth" in text and "<script>" not in text
    assert f"{row['relative_depth']:.2f} (95 %: {row['relative_depth_low']:.2f} to " in text


def test_no_tunnel_rows_says_what_is_missing():
    empty = group_tunnel({}, {}, aliases={})
    for figs in ({}, {"tunnel": empty}):
        plot = tunnel_plot(figs)
        assert isinstance(plot, hv.Text) and plot.opts.get().kwargs["title"] == TUNNEL_TITLE
        assert "the numerical rank at every layer" in plot.text
        hv.render(plot, backend="bokeh")
        assert tunnel_text(figs) == ""
    assert list(empty.columns[:5]) == ["group", "n", "n_layers", "best_layer", "best_layer_n"]
    assert np.all([c in empty for c in ("share_low", "relative_depth_high")])


def test_every_condition_is_in_the_legend_however_many():
    from bokeh.models import Legend

    groups = {f"lr={i}": [_seed(0, [0.1, 0.2, 0.5, 0.4]), _seed(1, [0.6, 0.5, 0.4, 0.3])] for i in range(12)}
    figs = {"tunnel": group_tunnel(groups, {g: LAYERS for g in groups}, aliases={g: {} for g in groups})}
    figure = hv.render(tunnel_plot(figs), backend="bokeh")               # 12 conditions x 3 glyphs each
    labels = [item.label.value for legend in figure.select(type=Legend) for item in legend.items]
    assert labels == [f"lr={i} (n=2)" for i in range(12)]
    scatters = _elements(tunnel_plot(figs), hv.Scatter)
    styles = {(el.opts.get().kwargs["color"], el.opts.get().kwargs["marker"]) for el in scatters}
    assert len(styles) == 12                                          # no two conditions drawn alike
