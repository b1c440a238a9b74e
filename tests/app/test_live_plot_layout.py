"""How the live view's plots are laid out: whole titles, y axes that follow the data (and are not linked to
another tab's), and plots that grow with the page. The layer player's choices are tested in
``tests/app/test_live_picker.py``, the plots' widths in a browser in ``tests/browser/shared_servers/test_app_browser.py``.
"""
from __future__ import annotations

from pathlib import Path

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import pytest
from bokeh.document import Document
from bokeh.models import Plot

from app import plots
from app.base._upstream_panel import widget_models
from lab import events as ev
from tests.fixtures.live_runs import LAYERS, synthetic_run

hv.extension("bokeh")

_BOLD = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")
_TOOLBAR_PX = 60          # the collapsed toolbar ("⋮" and the logo) beside the title, with margins


def _title_px(text: str) -> float:
    """Width of a title line in Bokeh's 11 pt bold title font, measured with DejaVu Sans Bold (wider than the
    browsers' Helvetica, so a line that fits here fits there); 9 px a character without the font."""
    if not _BOLD.exists():
        return 9.0 * len(text)
    from PIL import ImageFont

    return ImageFont.truetype(str(_BOLD), 15).getlength(text)      # 11 pt = 14.7 px


def _frame(rows, *, split="unseen"):
    """A curves frame (as app.live._streams.curves_data gives it) from (epoch, layer, mean, std, low, high)."""
    frame = pd.DataFrame(rows, columns=["epoch", "layer", "mean", "std", "low", "high"])
    return frame.assign(split=split)


def _bokeh_y(element) -> tuple[float, float]:
    y = hv.renderer("bokeh").get_plot(element).state.y_range
    return y.start, y.end


# ------------------------------------------------------------------ 1. titles
@pytest.mark.parametrize("interval", [False, True])
def test_every_curve_title_line_fits_beside_the_toolbar_at_the_least_width(interval):
    from app.live._panes import CURVE_WIDTH
    from lab.catalogue import curve_specs

    for metric, splits in curve_specs():
        frame = _frame([(0, name, 0.5, np.nan, 0.4, 0.6) for name in LAYERS])
        overlay = plots.metric_curves(pd.concat([frame.assign(split=s) for s in splits]), metric=metric,
                                      splits=splits, layers=list(LAYERS), n_epochs=2, interval=interval,
                                      width=CURVE_WIDTH, responsive=True)
        title = overlay.opts.get().kwargs["title"]
        head, key = title.split("\n")
        # the first line is what the JupyterLab test's markers and readers look for, e.g. "NMI (unseen)"
        label = ("log10 " if metric in plots.LOG_METRICS else "") + plots.metric_label(metric)
        assert head == f"{label} ({' & '.join(splits)})"
        assert ("95 % bootstrap" in key) == interval
        assert ("seen dashed" in key) == (len(splits) > 1)
        for line in (head, key):
            assert _title_px(line) <= CURVE_WIDTH - _TOOLBAR_PX, (metric, line)
    # the one-line title this replaces was cut at the same width
    assert _title_px("kNN accuracy (unseen) · dotted: 95 % bootstrap") > CURVE_WIDTH - _TOOLBAR_PX


# ------------------------------------------------------------------ 2. y ranges
def test_value_range_spans_the_finite_values_with_a_small_padding():
    lo, hi = plots.value_range(np.array([0.4, np.nan, 0.6]), np.array([0.35]), np.array([0.7, np.inf]))
    assert (lo, hi) == pytest.approx((0.35 - 0.021, 0.7 + 0.021))            # 6 % of the span 0.35
    assert plots.value_range(np.array([0.5])) == pytest.approx((0.47, 0.53))  # one value: ± 6 % of it,
    assert plots.value_range(np.array([0.0])) == pytest.approx((-0.01, 0.01))  # at least ± 0.01
    assert plots.value_range(np.array([np.nan]), np.zeros(0)) == (None, None)  # nothing drawn: HoloViews decides


def test_the_curves_y_axis_follows_the_values_and_the_bands_not_0_to_1():
    rows = [(0, "stem", 0.42, np.nan, np.nan, np.nan), (0, "block1", 0.50, np.nan, np.nan, np.nan),
            (1, "stem", 0.45, 0.02, 0.38, 0.52), (1, "block1", 0.55, 0.03, 0.47, 0.66)]
    frame = _frame(rows)
    layers = ["stem", "block1"]
    plain = plots.metric_curves(frame, metric="nmi", splits=("unseen",), layers=layers, n_epochs=1)
    assert _bokeh_y(plain) == pytest.approx(plots.value_range(np.array([0.42, 0.66 - 0.11])))   # epochs 0 and 1
    banded = plots.metric_curves(frame, metric="nmi", splits=("unseen",), layers=layers, n_epochs=1,
                                 interval=True, band=True)
    # the bootstrap interval of the latest epoch (0.38 to 0.66) lies beyond its lines and the std band
    assert _bokeh_y(banded) == pytest.approx(plots.value_range(np.array([0.38, 0.66])))
    log = plots.metric_curves(frame.assign(mean=frame["mean"] * 100), metric="nc1", splits=("unseen",),
                              layers=layers, n_epochs=1)
    assert _bokeh_y(log) == pytest.approx(plots.value_range(np.log10([42.0, 55.0])))            # log10 values


def _confidence(events):
    """``events`` with each evaluation's bootstrap rows after its last layer, as the engine sends them."""
    out = []
    for e in events:
        out.append(e)
        if e.kind == ev.LayerMetrics.kind and e.split == "seen" and e.layer == LAYERS[-1]:
            for layer in LAYERS:
                nmi = next(x.values["nmi"] for x in out if x.kind == ev.LayerMetrics.kind and x.split == "unseen"
                           and x.layer == layer and x.epoch == e.epoch)
                out.append(ev.LayerConfidence(e.run_id, seed=e.seed, epoch=e.epoch, layer=layer,
                                              values={"nmi_low": nmi - 0.05, "nmi_high": nmi + 0.08}))
    return out


def test_the_live_nmi_axis_is_its_own_beside_the_compare_tabs_nmi_plot(tmp_path):
    """Panel linked the live NMI plot's y axis to the Compare tab's empty NMI plot (same dimension name): 0-1."""
    import lab.store
    from app.layerscope import LayerScope

    app = LayerScope(store=lab.store.RunStore(tmp_path / "runs"))
    root = app.__panel__().get_root(Document())

    def figures_on_show():
        return {f.title.text.split("\n")[0]: f for f in root.references() if isinstance(f, Plot) and f.title}

    app.active_tab = 1                  # the Compare tab's plots are made when it is first shown
    figures = figures_on_show()
    app.active_tab = 0
    app.live.consume(_confidence(synthetic_run(epochs=2)))
    figures.update(figures_on_show())
    nmi = figures["NMI (unseen)"]
    data = app.live.streams["curves:nmi"].data
    assert data["low"].notna().all()
    latest = data[data["epoch"] == data["epoch"].max()]          # every epoch's line, the latest epoch's band
    expected = plots.value_range(data["mean"], latest["low"], latest["high"])
    assert (nmi.y_range.start, nmi.y_range.end) == pytest.approx(expected)
    assert expected[0] > 0.1 and expected[1] < 0.7
    compare = figures["Select runs in the table to overlay their curves"]
    assert nmi.y_range is not compare.y_range


# ------------------------------------------------------------------ 4. widths
def test_the_live_plots_and_the_layout_grow_with_the_page():
    from app.live._panes import CURVE_WIDTH
    from app.live.view import LiveView

    live = LiveView()
    root = pn.Row(live, width=1000)
    root.get_root(Document())
    live.consume(list(synthetic_run(epochs=1)))
    curves = [o for o in live.plots.curves_box.objects if isinstance(o, pn.pane.HoloViews)]
    assert len(curves) == 5
    # after the curves, empty cells of their width: a plot alone in the last row keeps the width of those above
    fillers = live.plots.curves_box.objects[len(curves):]
    assert fillers and all(isinstance(f, pn.Spacer) and f.styles == curves[0].styles for f in fillers)
    panes = [*curves, live.plots.heatmap_pane, *live.training.panes.objects, live.training.utilization,
             live.training.cka, live.embedding._panels[0].pane]
    assert all(isinstance(p, pn.pane.HoloViews) for p in panes)
    for pane in panes:
        assert pane.sizing_mode == "stretch_width" and not pane.linked_axes, pane
        model, = widget_models(pane)
        assert model.sizing_mode == "stretch_width", pane
    curve = curves[0]
    assert curve.min_width == CURVE_WIDTH
    model, = widget_models(curve)
    figure = model.children[0] if hasattr(model, "children") else model
    assert figure.sizing_mode == "stretch_width" and figure.min_width == CURVE_WIDTH


# ------------------------------------------------------------------ 5. every plot inside Bokeh layouts
def _plots_behind_reactive_html(root) -> tuple[list, list]:
    """The Bokeh plots under ``root`` and those of them reached only through a ReactiveHTML model (pn.FlexBox):
    BokehJS lays a plot out only through an unbroken chain of Bokeh layouts (bokeh#13384), so nested two
    computed layouts below the page's root such a plot kept a 0 x 0 frame, a blank canvas."""
    from bokeh.model.util import visit_immediate_value_references
    from panel.models.reactive_html import ReactiveHTML

    found, clear, stack, seen = [], set(), [(root, False)], set()
    while stack:
        model, hidden = stack.pop()
        if (model.id, hidden) in seen:
            continue
        seen.add((model.id, hidden))
        if isinstance(model, Plot):
            found.append(model)
            if not hidden:
                clear.add(model.id)
            continue                        # a plot's own parts hold no other plot
        hidden = hidden or isinstance(model, ReactiveHTML)
        for name in model.properties_with_refs():
            visit_immediate_value_references(getattr(model, name), lambda m, h=hidden: stack.append((m, h)))
    plots_ = list({p.id: p for p in found}.values())
    return plots_, [p for p in plots_ if p.id not in clear]


def _wrap_rows(obj) -> list:
    """The layouts under ``obj`` laid out as wrapping rows (:func:`app.base.wrap_row`)."""
    return [c for c in obj.select(pn.Column) if (c.styles or {}).get("flex-wrap") == "wrap"]


def test_every_plot_of_the_live_view_and_its_collapse_card_sits_in_bokeh_layouts():
    """No plot behind a pn.FlexBox (ReactiveHTML): the curves, heatmap, layout, training, utilization and CKA, the
    collapse panels, the simplex and the separation law. Each item of a wrapping row says its own flex (else
    BokehJS gives it its height as its width)."""
    from app.live.view import LiveView

    live = LiveView()
    page = pn.Column(pn.Column(live, sizing_mode="stretch_width"), sizing_mode="stretch_width")   # as in a tab
    root = page.get_root(Document())
    live.consume(list(synthetic_run(collapse=True, epochs=2)))
    live.collapse.collapsed = False
    live.collapse.simplex_split = "unseen"          # three classes: their plane too
    found, behind = _plots_behind_reactive_html(root)
    titles = [p.title.text.split("\n")[0] if p.title else type(p).__name__ for p in found]
    assert len(found) >= 20 and any("NC1" in t for t in titles) and any("layer ×" in t for t in titles), titles
    assert not behind, [p.title.text if p.title else p for p in behind]
    rows = _wrap_rows(live.__panel__())
    assert rows
    for row in rows:
        for item in row.objects:
            assert "flex" in (item.styles or {}), (row, item)
