"""app.EmbeddingView: selection both ways, selected_frame, the highlight linked across layers, thumbnails,
100,000 points as one raster, stored runs, and one clear line per bad input.

Lasso, box and pointer events go through the same HoloViews streams the browser's tools feed
(``stream.event(...)``); the browser itself is exercised in tests/browser/shared_servers/test_embedding_browser.py.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("datashader")
hv = pytest.importorskip("holoviews")

from app.explorer._data import points_in_polygon  # noqa: E402
from app.explorer.embedding import EmbeddingView  # noqa: E402
from tests.fixtures.blobs import circle_layouts  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _bokeh():
    hv.extension("bokeh", logo=False)


def _images(n: int, size: int = 8) -> np.ndarray:
    return np.arange(n * size * size, dtype=np.int64).reshape(n, size, size).astype(np.uint8)


def _overlay(view, side: int = 0):
    """What one plot shows now: its first (every point) and last (the selection's fill) elements."""
    shown = list(view._panels[side].plot[()])
    return shown[0], shown[-1]


# ------------------------------------------------------------------ selection
def test_selection_round_trip_lasso_box_and_python():
    a, _, labels = circle_layouts(400)
    view = EmbeddingView.from_arrays(a, labels, names=["north", "west", "south", "east"])
    view.__panel__().get_root()
    p = view._panels[0]
    square = np.array([[5.0, -5.0], [15.0, -5.0], [15.0, 5.0], [5.0, 5.0]])     # around blob 0 at (10, 0)
    p.lasso.event(geometry=square)
    inside = np.flatnonzero((a[:, 0] >= 5) & (a[:, 0] <= 15) & (a[:, 1] >= -5) & (a[:, 1] <= 5))
    assert view.selection == inside.tolist() and len(inside) > 50
    assert f"{len(inside)} images selected" in view._selection_pane.object
    p.box.event(bounds=(-15.0, -5.0, -5.0, 5.0))                                 # blob 2 at (-10, 0)
    box = np.flatnonzero((a[:, 0] >= -15) & (a[:, 0] <= -5) & (np.abs(a[:, 1]) <= 5))
    assert view.selection == box.tolist()
    view.selection = [7, 3, 3]                     # from Python: sorted, duplicates dropped
    assert view.selection == [3, 7]
    assert "2 images selected" in view._selection_pane.object
    view.selection = []
    assert "No selection" in view._selection_pane.object


def test_selection_out_of_range_is_refused_with_the_range():
    a, _, labels = circle_layouts(50)
    view = EmbeddingView.from_arrays(a, labels)
    view.selection = [1, 2]
    with pytest.raises(ValueError, match=r"selection index 50 is out of range \(0 to 49\)"):
        view.selection = [3, 50]
    with pytest.raises(ValueError, match=r"selection index -1 is out of range \(0 to 49\)"):
        view.selection = [-1]
    with pytest.raises(ValueError, match="integer image indices"):
        view.selection = [0.5]
    assert view.selection == [1, 2]                # a refused selection leaves the last one


def test_points_in_polygon_matches_a_hand_count():
    triangle = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])    # inside: x, y >= 0 and x + y < 1
    xy = np.array([[0.2, 0.2], [0.8, 0.8], [0.5, 0.4], [1.5, 0.1], [0.4, 0.5], [-0.1, 0.5]])
    assert points_in_polygon(xy, triangle).tolist() == [True, False, True, False, True, False]


def test_selected_frame_has_one_row_per_selected_image():
    a, b, labels = circle_layouts(300)
    view = EmbeddingView.from_arrays({"a": a, "b": b}, labels, names=["n", "w", "s", "e"])
    view.selection = [10, 20, 30]
    frame = view.selected_frame()
    assert list(frame.columns) == ["index", "label", "class_name", "layer", "epoch", "x", "y"]
    assert frame["index"].tolist() == [10, 20, 30]
    assert frame["label"].tolist() == labels[[10, 20, 30]].tolist()
    assert frame["class_name"].tolist() == [["n", "w", "s", "e"][k] for k in labels[[10, 20, 30]]]
    np.testing.assert_allclose(frame[["x", "y"]].to_numpy(), a[[10, 20, 30]])
    assert set(frame["layer"]) == {"a"}
    np.testing.assert_allclose(view.selected_frame(layer="b")[["x", "y"]].to_numpy(), b[[10, 20, 30]])
    with pytest.raises(ValueError, match="layer 'c' has no layout here"):
        view.selected_frame(layer="c")
    view.selection = []
    assert view.selected_frame().empty


# ------------------------------------------------------------------ linked layers
def test_a_selection_at_one_layer_is_highlighted_at_the_other():
    a, b, labels = circle_layouts(500)
    view = EmbeddingView.from_arrays({"a": a, "b": b}, labels)
    view.side_by_side = True
    assert (view.layer, view.layer_b) == ("a", "b")        # side by side starts on the next layer
    view.__panel__().get_root()
    view._panels[0].box.event(bounds=(5.0, -5.0, 15.0, 5.0))             # blob 0 at layer a
    chosen = view.selection
    assert chosen and set(labels[chosen]) == {0}
    _, left = _overlay(view, 0)
    _, right = _overlay(view, 1)
    np.testing.assert_allclose(left.array(["x", "y"]), a[chosen])
    np.testing.assert_allclose(right.array(["x", "y"]), b[chosen])     # the same images where layer b puts them
    assert np.allclose(right.array(["x", "y"]).mean(axis=0), [0, 10], atol=1)   # blob 0 moved to (0, 10)
    view.layer_b = "a"                                                   # a layer change keeps the selection
    _, right = _overlay(view, 1)
    np.testing.assert_allclose(right.array(["x", "y"]), a[chosen])
    base, _ = _overlay(view, 0)
    assert base.opts.get().kwargs["alpha"] < 0.5                         # the rest fades while a selection is on


def test_linked_highlight_in_raster_mode_marks_the_selected_pixels():
    a, b, labels = circle_layouts(3000)
    view = EmbeddingView.from_arrays({"a": a, "b": b}, labels, rasterize_above=1000, side_by_side=True)
    view.__panel__().get_root()
    view.selection = np.flatnonzero(labels == 0).tolist()
    _, fill = _overlay(view, 1)
    pixels = fill.dframe()                                               # x, y, R, G, B, A per pixel
    lit = pixels[pixels["A"] > 0]
    assert len(lit) > 20
    lit_x, lit_y = lit["x"].to_numpy(), lit["y"].to_numpy()
    assert abs(lit_x.mean()) < 1.5 and abs(lit_y.mean() - 10) < 1.5      # around blob 0's place at layer b


# ------------------------------------------------------------------ thumbnails and hover
def test_from_arrays_with_images_shows_thumbnails_and_a_capped_grid():
    a, _, labels = circle_layouts(200)
    view = EmbeddingView.from_arrays(a, labels, images=_images(200), max_thumbnails=5)
    view.__panel__().get_root()
    x, y = a[17]
    view._panels[0].pointer.event(x=float(x), y=float(y))
    assert view.hovered == 17
    assert "data:image/png;base64," in view._hover_card.object and "image #17" in view._hover_card.object
    view.selection = list(range(12))
    grid = view._selection_pane.object
    assert "12 images selected" in grid and "showing the first 5" in grid
    assert grid.count("<img ") == 5


def test_from_arrays_without_images_names_the_point():
    a, _, labels = circle_layouts(200)
    view = EmbeddingView.from_arrays(a, labels, names=["n", "w", "s", "e"])
    view.__panel__().get_root()
    view.hovered = 5
    assert "(no image)" in view._hover_card.object and f"<b>{'nwse'[labels[5]]}</b>" in view._hover_card.object
    view.selection = [1, 2]
    assert "<img " not in view._selection_pane.object and "2 images selected" in view._selection_pane.object


def test_hover_on_a_raster_names_the_point_under_the_pointer():
    a, _, labels = circle_layouts(3000)
    view = EmbeddingView.from_arrays(a, labels, rasterize_above=1000)
    view.__panel__().get_root()
    x, y = a[0]
    view._panels[0].pointer.event(x=float(x), y=float(y))
    hit = view.hovered
    assert hit is not None
    # the pixel's point: within a pixel or two of the pointer (the raster is ~400 px over ~25 units)
    assert np.hypot(*(a[hit] - a[0])) < 0.3


# ------------------------------------------------------------------ 100,000 points
def test_the_rasterizer_warms_up_once_in_the_background_and_then_draws():
    from app.explorer import _plot as ep

    first, second = ep.warm_up_in_background(), ep.warm_up_in_background()
    assert first is second and first.daemon         # one thread per process, never holding the server up
    first.join(timeout=300)
    assert not first.is_alive()
    frame = ep.points_frame(np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([0, 1]), np.arange(2), ["a", "b"])
    rgb = ep.raster_base(frame, {"a": "#ff0000", "b": "#0000ff"}, x_range=(0.0, 1.0), y_range=(0.0, 1.0),
                         width=20, height=20, title="", dim=False)
    assert (rgb.data["A"].values > 0).any()          # the points were drawn


def test_100k_points_build_a_bokeh_model_of_one_image_not_100k_rows():
    from bokeh.models import ColumnDataSource, ImageRGBA

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 10, 100_000)
    coords = rng.normal(size=(10, 2))[labels] * 8 + rng.normal(size=(100_000, 2))
    view = EmbeddingView.from_arrays(coords, labels)
    model = view.__panel__().get_root()
    refs = list(model.references())
    assert any(isinstance(r, ImageRGBA) for r in refs)
    longest = max(len(next(iter(r.data.values()), [])) for r in refs if isinstance(r, ColumnDataSource))
    assert longest < 1000, f"a data source of {longest} rows reached the browser"
    assert "100,000 points" in view._info.object and "rasterized" in view._info.object


# ------------------------------------------------------------------ stored runs
@pytest.mark.slow
def test_stored_run_opens_at_its_best_layer(tiny_run):
    store, run_id, _ = tiny_run
    record = store.load(run_id)
    view = EmbeddingView(store=store, run_id=run_id)
    assert view.layer == record.summary()["best_layer"]
    view.__panel__().get_root()
    first = int(view._valid[0])
    view.selection = [first]
    frame = view.selected_frame(epoch=0)
    assert frame["index"].tolist() == [first] and frame["epoch"].tolist() == [0]
    with pytest.raises(ValueError, match="seed 7"):
        EmbeddingView(store=store, run_id=run_id, seed=7)


def test_a_run_counted_in_steps_reads_its_answers_at_a_step(monitored_run):
    """The per-image answers of a lab.Monitor run counted in optimizer steps name the step they read: the note, the
    arrival legend, the measures of a selection (they said epoch)."""
    import re

    store, run_id = monitored_run
    view = EmbeddingView(store=store, run_id=run_id)
    last = store.load(run_id).summary()["epoch"]
    view.color_by = "arrival layer"
    view.select_forgotten()
    bar = view._bar
    texts = [bar.note.object, bar.legend.object, view.measures._text.object]
    assert f"seed 0, step {last} (leave-one-out" in texts[0] and f"(step {last}):" in texts[1], texts
    assert f"at step {last}:" in texts[2], texts
    assert not [t for t in texts if re.search(r"\bepochs?\b", t)], texts


def test_a_run_without_a_layout_is_refused(make_run, store):
    run_id = make_run(projection="none")
    with pytest.raises(ValueError, match="was stored without its 2-D layouts"):
        EmbeddingView(store=store, run_id=run_id)
    with pytest.raises(ValueError, match="needs run_id="):
        EmbeddingView(store=store)


# ------------------------------------------------------------------ bad input: one clear line each
@pytest.mark.parametrize("coords, labels, images, message", [
    (np.zeros((10, 3)), np.zeros(10, int), None, r"coords must be an \(N, 2\) array of x, y; got shape \(10, 3\)"),
    (np.zeros(10), np.zeros(10, int), None, r"coords must be an \(N, 2\) array of x, y; got shape \(10,\)"),
    (np.zeros((10, 2)), np.zeros(9, int), None, r"labels must have one entry per point \(10\); got shape \(9,\)"),
    (np.zeros((10, 2)), np.zeros(10, int), np.zeros((9, 4, 4), np.uint8),
     r"images must hold one image per point \(10\); got 9"),
    (np.zeros((10, 2)), np.zeros(10, int), np.zeros((10, 4, 4)), "images must be uint8"),
    (np.array([[0.0, 0.0], [np.nan, 1.0], [2.0, 2.0]]), np.zeros(3, int), None,
     r"coords has 1 row with NaN or infinite x/y \(first: row 1\)"),
])
def test_bad_input_is_one_clear_line(coords, labels, images, message):
    with pytest.raises(ValueError, match=message) as info:
        EmbeddingView.from_arrays(coords, labels, images=images)
    assert "\n" not in str(info.value)


def test_layouts_of_other_lengths_and_unknown_label_names_are_refused():
    with pytest.raises(ValueError, match=r"coords\['b'\] has 4 rows; every layout needs one row per point \(5\)"):
        EmbeddingView.from_arrays({"a": np.zeros((5, 2)), "b": np.zeros((4, 2))}, np.zeros(5, int))
    with pytest.raises(ValueError, match="label 'dog' is not in names"):
        EmbeddingView.from_arrays(np.zeros((2, 2)), ["cat", "dog"], names=["cat"])
    frame = EmbeddingView.from_arrays(np.zeros((2, 2)), ["cat", "dog"]).selected_frame()
    assert isinstance(frame, pd.DataFrame) and frame.empty


def test_the_ipywidgets_route_wraps_the_view_and_keeps_the_selection_in_python():
    pytest.importorskip("ipywidgets")
    pytest.importorskip("jupyter_bokeh")
    import panel as pn

    a, _, labels = circle_layouts(300)
    view = EmbeddingView.from_arrays(a, labels)
    widget = pn.ipywidget(view)                    # what VS Code, Colab and Voila show (jupyter_bokeh)
    bundle = widget.get_state()["render_bundle"]   # the Bokeh document the widget sends to the front end
    assert '"docs_json"' in bundle and '"Figure"' in bundle and '"ColumnDataSource"' in bundle
    view._panels[0].box.event(bounds=(5.0, -5.0, 15.0, 5.0))
    inside = np.flatnonzero((a[:, 0] >= 5) & (a[:, 0] <= 15) & (np.abs(a[:, 1]) <= 5))
    assert view.selection == inside.tolist() and len(inside) > 20
