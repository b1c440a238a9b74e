"""The embedding explorer: a 2-D layout of up to 100,000 images, their thumbnails, and a selection shared by layers.

:class:`EmbeddingView` shows the layout of the unseen images at one layer and epoch of a stored run (or of the
run the live view watches, or of any arrays). Above :attr:`~EmbeddingView.rasterize_above` points the plot is
rasterized on the server by Datashader, so that the browser gets one image per pan or zoom however many
points there are; below it each point is a glyph. Hovering a point names its class and image and shows the
image beside the plot. A lasso or box selection sets :attr:`~EmbeddingView.selection` (image indices), which
Python can set too; the same images are then highlighted at every layer and epoch, and in side-by-side mode at
two layers at once, so that one sees where a group of images from one layer goes in another.

For a run with a per-image record (docs/METRICS.md, "The answer per image") the points can be coloured by
arrival layer (:attr:`~EmbeddingView.color_by`), :meth:`~EmbeddingView.select_forgotten` selects the images the
final layer forgets, and every selection is measured per layer over all images (:attr:`~EmbeddingView.measures`;
:meth:`~EmbeddingView.selection_report` in Python), all from :mod:`lab.analysis`; without a record these
controls are off with the one-line reason.

Its data (checked arrays, stored and live layouts, lasso hits) come from :mod:`app.explorer._data`, its
elements from :mod:`app.explorer._plot`, the per-image answers from :mod:`app.explorer._answers_bar`.

Examples
--------
>>> view = EmbeddingView.from_arrays(coords, labels, images=images, names=class_names)   # doctest: +SKIP
>>> view.selection = [3, 17, 42]                                                      # doctest: +SKIP
>>> view.selected_frame()                       # index, label, class_name, layer, epoch, x, y  # doctest: +SKIP
>>> view = EmbeddingView(store=lab.RunStore(), run_id="2024-...", layer="layer3")    # doctest: +SKIP
>>> view.color_by = "arrival layer"; view.select_forgotten()                          # doctest: +SKIP
>>> view.selection_report()                     # lab.analysis.selection_report          # doctest: +SKIP
"""
from __future__ import annotations

from functools import partial

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from app.base import KEEP_SIZE, plots, wrap_row

from . import _plot as ep
from ._answers import NO_RUN
from ._answers_bar import AnswersBar
from ._data import ArrayLayouts, LiveLayouts, StoredLayouts, check_selection, neighbour_layer, points_in_box, \
    points_in_polygon
from ._hover_and_selection import hover_html, selection_html

__all__ = ["EmbeddingView"]

_HOVER_PX = 8          # plain points: the hovered point is the nearest one within this many pixels
# a plot's column: an equal share of the row, never narrower than its plot (a narrower page wraps it below)
_GROW = dict(sizing_mode="stretch_width", min_width=ep.PLOT_WIDTH + 10, styles={"flex": "1 1 0"})


class _Selection(param.List):
    """Image indices, checked against the view's images whenever they are set (out of range: refused)."""

    def __set__(self, obj, val):
        check = getattr(obj, "_check_selection", None)
        if check is not None:
            val = check(val)
        super().__set__(obj, val)


class EmbeddingView(pn.viewable.Viewer):
    """The layout of a run's unseen images (or of any arrays) with thumbnails, lasso selection and linked layers.

    Parameters
    ----------
    store : lab.RunStore, optional
        The store of ``run_id`` (default ``lab.RunStore()``).
    run_id : str, optional
        A stored run with 2-D layouts; without one the view is empty until :meth:`set_source` (the live view).
    layer, epoch, seed : optional
        What to show first: by default the run's best layer (:func:`lab.analysis`), its last epoch, and the
        first stored seed.
    """

    layer = param.Selector(default=None, objects=[], allow_None=True, doc="Layer of the (left) plot.")
    epoch = param.Integer(default=None, allow_None=True,
                          doc="Epoch of the (left) plot; None: the latest with a layout of the layer.")
    side_by_side = param.Boolean(default=False, doc="Show a second plot (layer_b, epoch_b) beside the first.")
    layer_b = param.Selector(default=None, objects=[], allow_None=True,
                             doc="Layer of the right plot in side-by-side mode (None: the first layer).")
    epoch_b = param.Integer(default=None, allow_None=True, doc="Epoch of the right plot; None: the latest.")
    selection = _Selection(default=[], item_type=int,
                           doc="Selected image indices (the run's unseen images; rows for from_arrays). The lasso "
                               "and box tools set it, Python may too; every plot highlights the same images.")
    hovered = param.Integer(default=None, allow_None=True,
                            doc="Image index of the point under the pointer (None: none yet).")
    rasterize_above = param.Integer(default=5000, bounds=(0, None),
                                    doc="Above this many points the plots are rasterized on the server "
                                        "(Datashader); at or below it every point is a glyph.")
    max_thumbnails = param.Integer(default=60, bounds=(1, 1000),
                                   doc="Most thumbnails the selection grid shows (its count says how many).")
    controls = param.Boolean(default=True, doc="Show the left plot's layer and epoch pickers (off when a host "
                                               "such as the live view sets layer and epoch itself).")
    color_by = param.Selector(default="class", objects=["class", "arrival layer"],
                              doc="Colour the points by class, or by arrival layer: the first layer from which an "
                                  "image's leave-one-out kNN vote is right at every later layer (lab.analysis."
                                  "image_table of the left plot's epoch; needs the run's per-image record).")

    def __init__(self, store=None, run_id=None, layer=None, epoch=None, seed=None, **params):
        self._source = None
        self._live = self._source_model = None
        self._valid = np.zeros(0, dtype=np.int64)     # sorted image indices (the selection's domain)
        self._rows_by_index = np.zeros(0, dtype=np.int64)
        self._hold = False
        super().__init__(**params)
        self._panels = [ep.PlotPanel(), ep.PlotPanel()]
        self._colors: dict[str, str] = {}
        self._classes: list[str] = []
        self._raster = False
        self._selection_stream = hv.streams.Params(self, ["selection"])
        self._epoch_w = pn.widgets.Select(label="Epoch", options=[], width=90)
        self._epoch_b_w = pn.widgets.Select(label="Epoch", options=[], width=90)
        self._layer_w = pn.widgets.Select.from_param(self.param.layer, label="Layer", width=200,
                                                     css_classes=["ls-embedding-layer"])
        self._layer_b_w = pn.widgets.Select.from_param(self.param.layer_b, label="Layer (right)", width=200)
        self._side_w = pn.widgets.Checkbox.from_param(self.param.side_by_side, label="side by side",
                                                      margin=(30, 10, 5, 10), css_classes=["ls-embedding-side"])
        self._clear_w = pn.widgets.Button(label="Clear selection", width=130, margin=(24, 10, 5, 10))
        self._clear_w.on_click(lambda _e: setattr(self, "selection", []))
        self._info = pn.pane.HTML("", margin=(28, 10, 5, 10), sizing_mode="stretch_width")
        self._hover_card = pn.pane.HTML(hover_html(None), width=170, margin=(40, 5, 5, 5), styles=KEEP_SIZE,
                                        css_classes=["ls-embedding-hover"])
        self._selection_pane = pn.pane.HTML(selection_html([], {}, [], 0), sizing_mode="stretch_width",
                                            css_classes=["ls-embedding-selection"])
        # the per-image answers of the left plot's evaluation: colour by arrival layer, select what the final
        # layer forgets, the measures of the selection
        self._bar = AnswersBar(self.param.color_by, self.select_forgotten)
        self.measures = self._bar.measures
        self.param.watch(self._on_color_by, "color_by")
        self._epoch_w.param.watch(partial(self._on_epoch_widget, side=0), "value")
        self._epoch_b_w.param.watch(partial(self._on_epoch_widget, side=1), "value")
        self.param.watch(lambda *_e: self._redraw(0), ["layer", "epoch"])
        self.param.watch(lambda *_e: self._redraw(1), ["layer_b", "epoch_b", "side_by_side"])
        self.param.watch(self._on_selection, "selection")
        self.param.watch(self._on_hovered, "hovered")
        self._controls_a = pn.Row(self._layer_w, self._epoch_w, visible=self.controls, margin=0)
        self.param.watch(lambda e: setattr(self._controls_a, "visible", e.new), "controls")
        self._right = pn.Column(pn.Row(self._layer_b_w, self._epoch_b_w, margin=0), self._panels[1].pane,
                                visible=self.side_by_side, margin=0, **_GROW)
        self.param.watch(lambda e: setattr(self._right, "visible", e.new), "side_by_side")
        self._layout = pn.Column(
            pn.Row(self._side_w, self._clear_w, self._info, sizing_mode="stretch_width"),
            self._bar.row,
            self._bar.legend,
            # the plots and the hover card in a row that wraps (app.base.wrap_row), not a pn.FlexBox: that is
            # ReactiveHTML, outside BokehJS's layouts, and under Compare's tab and runs panel (two layouts, for their
            # fixed plots) the plot kept a 0 x 0 frame, a blank canvas (bokeh#13384)
            wrap_row(pn.Column(self._controls_a, self._panels[0].pane, margin=0, **_GROW), self._right,
                     self._hover_card),
            self._selection_pane,
            self.measures,
            sizing_mode="stretch_width", css_classes=["ls-embedding"],
        )
        if run_id is not None:
            if store is None:
                import lab.store

                store = lab.store.RunStore()
            self.set_source(StoredLayouts(store.load(run_id), seed, store=store), layer=layer, epoch=epoch)
        elif store is not None:
            raise ValueError("EmbeddingView(store=...) needs run_id= too (a run id of that store); "
                             "or use EmbeddingView.from_arrays(coords, labels) for arrays.")

    # ------------------------------------------------------------------ constructors and sources
    @classmethod
    def from_arrays(cls, coords, labels, images=None, names=None, **params) -> "EmbeddingView":
        """A view of any layout: ``coords`` (N, 2), or ``{layer: (N, 2)}`` for several layouts of the same points.

        ``labels`` (N,) are class numbers (``names[label]`` their names) or names; ``images`` optional uint8
        (N, H, W) or (N, H, W, C), image ``i`` belonging to row ``i`` (the selection holds row numbers).
        """
        view = cls(**params)
        view.set_source(ArrayLayouts(coords, labels, images=images, names=names))
        return view

    @classmethod
    def for_live(cls, model, thumbnails, run=lambda: None, **params) -> "EmbeddingView":
        """A view of the layouts of a live run: ``model()`` its current RunModel, ``thumbnails()`` its source,
        ``run()`` its ``(store, run_id)`` (store None: unknown) for the per-image record."""
        view = cls(controls=False, **params)
        view._live = (model, thumbnails, run)
        return view

    def set_source(self, source, layer: str | None = None, epoch: int | None = None) -> None:
        """Show ``source`` (see :mod:`app.explorer._data`): selection cleared, plots rebuilt."""
        self._source = source
        indices = np.asarray(source.indices, dtype=np.int64)
        order = np.argsort(indices, kind="stable")
        self._valid, self._rows_by_index = indices[order], order
        self._classes = [plots.plot_text(c) for c in source.class_names]
        self._colors = plots.class_colors(source.class_names)
        self._raster = len(indices) > self.rasterize_above
        layers = source.layers()
        self._hold = True
        try:
            self.selection = []
            self.hovered = None
            self.param.layer.objects = layers
            self.param.layer_b.objects = layers
            first = layer if layer in layers else (source.default_layer if source.default_layer in layers
                                                   else (layers[-1] if layers else None))
            self.param.update(layer=first, epoch=epoch, layer_b=neighbour_layer(layers, first), epoch_b=None)
        finally:
            self._hold = False
        for side in (0, 1):
            self._build(side)
            self._redraw(side)
        mode = "rasterized on the server (Datashader)" if self._raster else "one glyph each"
        self._info.object = (f"<span style='color:#555'>{len(indices):,} points · {mode} · lasso or box-select "
                             f"to select; the selection is highlighted at every layer</span>")
        self._on_hovered()
        self._on_selection()

    def show(self, layer: str | None, epoch: int | None = None) -> None:
        """Show ``layer`` at ``epoch`` (None: latest) with the layouts the source has now (the live view calls
        this as layouts arrive); a live view's first layout sets the source."""
        live = self._live
        if live is not None and (self._source is None or self._source_model is not live[0]()):
            source = LiveLayouts(*live)
            self._source_model = live[0]()
            if not len(source.indices):
                return
            self.set_source(source, layer=layer, epoch=epoch)
            return
        if self._source is None:
            return
        layers = self._source.layers()
        self._hold = True
        try:
            self.param.layer.objects = layers
            self.param.layer_b.objects = layers
            self.param.update(layer=layer if layer in layers else self.layer, epoch=epoch)
        finally:
            self._hold = False
        self._redraw(0)
        self._redraw(1)

    def clear(self) -> None:
        """Forget the source (a new live run): the plots empty until the next :meth:`show`."""
        self._source = None
        self._source_model = None
        for p in self._panels:
            p.pane.object, p.key, p.frame, p.raster = None, None, None, None
        self._valid = self._rows_by_index = np.zeros(0, dtype=np.int64)
        self._info.object = ""
        self._bar.set(None, None)
        with param.discard_events(self):
            self.selection, self.hovered = [], None
        self._on_selection()
        self._on_hovered()

    def refresh_answers(self) -> None:
        """Read the per-image record of the evaluation shown again (the live view calls this when an evaluation
        completes: its record lands on disk then, after the layouts that showed it)."""
        p = self._panels[0]
        if self._source is not None and p.key is not None and self._bar.load(self._source, p.key[1], force=True):
            self._answers_changed()
            if self.color_by != "class":
                self._redraw(0)

    def select_forgotten(self) -> None:
        """Select the images the final layer forgets (right at the best layer, wrong at the final one) at the
        evaluation shown: ``forgotten`` of :func:`lab.analysis.image_table`."""
        if not self._bar.ok:
            raise ValueError(f"no per-image answers here: {self._bar.answers.problem if self._bar.answers else NO_RUN}")
        self.selection = self._bar.answers.forgotten()

    def selection_report(self):
        """:func:`lab.analysis.selection_report` of :attr:`selection` at the evaluation shown (the left plot's
        epoch, the layouts' seed): per layer the share right, mean margin, NMI and CDNV of the selection and of
        all images, ``attrs["notes"]`` saying what could not be given. Raises ValueError for a view of arrays
        and lab's NoImageRecordError (one line) for a run without the record."""
        from lab import analysis

        run = self._source.run() if self._source is not None else None
        if run is None or run[0] is None:
            reason = NO_RUN if run is None else "the store of this run is not known"
            raise ValueError(f"no selection report: {reason}")
        epoch = self._panels[0].key[1] if self._panels[0].key is not None else None
        return analysis.selection_report(run[1], list(self.selection), epoch, seed=self._source.seed, store=run[0])

    @property
    def n_points(self) -> int:
        """Points in the left plot now (0 while it shows nothing)."""
        p = self._panels[0]
        return 0 if p.frame is None or p.pane.object is None else len(p.frame)

    # ------------------------------------------------------------------ selection
    def _check_selection(self, values) -> list[int]:
        return check_selection(values, self._valid)

    def _rows(self, indices) -> np.ndarray:
        """Rows of the source (its layouts' order) of the image ``indices`` (all in the view)."""
        pos = np.searchsorted(self._valid, np.asarray(indices, dtype=np.int64))
        return self._rows_by_index[pos]

    def _select_rows(self, p: ep.PlotPanel, mask: np.ndarray) -> None:
        self.selection = p.frame["index"].to_numpy()[mask].tolist()

    def selected_frame(self, layer: str | None = None, epoch: int | None = None) -> pd.DataFrame:
        """The selected images at ``layer`` and ``epoch`` (default: the left plot's): one row each with
        index, label, class_name, layer, epoch, x, y."""
        columns = ["index", "label", "class_name", "layer", "epoch", "x", "y"]
        if self._source is None:
            return pd.DataFrame(columns=columns)
        layer = self.layer if layer is None else layer
        if layer not in self._source.layers():
            raise ValueError(f"layer {layer!r} has no layout here; layers with one: {self._source.layers()}.")
        epochs = self._source.epochs(layer)
        epoch = epochs[-1] if epoch is None and self.epoch not in epochs else (epoch if epoch is not None
                                                                                else self.epoch)
        if epoch not in epochs:
            raise ValueError(f"layer {layer!r} has no layout at epoch {epoch}; its epochs: {epochs}.")
        rows = self._rows(self.selection)
        coords = self._source.layout(layer, epoch).coords[rows]
        labels = self._source.labels[rows]
        names = np.asarray(self._source.class_names, dtype=object)
        return pd.DataFrame({"index": self._source.indices[rows], "label": labels, "class_name": names[labels],
                             "layer": layer, "epoch": int(epoch), "x": coords[:, 0], "y": coords[:, 1]},
                            columns=columns)

    # ------------------------------------------------------------------ plots
    def _build(self, side: int) -> None:
        """The DynamicMaps of one plot: the points (redrawn on pan and zoom when rasterized) and the selection."""
        p = self._panels[side]
        p.key = p.frame = p.raster = None
        p.pipe = hv.streams.Pipe(data=None)
        p.ranges, p.size = hv.streams.RangeXY(), hv.streams.PlotSize()
        sel = self._selection_stream
        if self._raster:
            streams = [p.pipe, p.ranges, p.size, sel]
            base = hv.DynamicMap(partial(self._render_base, p), streams=streams)
            high = hv.DynamicMap(partial(self._render_highlight, p), streams=streams)
        else:
            base = hv.DynamicMap(partial(self._render_base, p), streams=[p.pipe, sel])
            high = hv.DynamicMap(partial(self._render_highlight, p), streams=[p.pipe, sel])
            p.ranges.source = p.size.source = base       # read by the hover, never redraw plain points
        # kept on the panel: the browser's lasso, box and pointer arrive through them (tests send events too)
        p.lasso, p.box, p.pointer = hv.streams.Lasso(source=base), hv.streams.BoundsXY(source=base), \
            hv.streams.PointerXY(source=base)
        p.lasso.add_subscriber(partial(self._on_lasso, p))
        p.box.add_subscriber(partial(self._on_box, p))
        p.pointer.add_subscriber(partial(self._on_pointer, p))
        p.plot = base * high
        p.pane.object = None

    def _redraw(self, side: int) -> None:
        if self._hold or self._source is None or (side == 1 and not self.side_by_side):
            return
        p = self._panels[side]
        layer = self.layer if side == 0 else (self.layer_b or self.layer)
        wanted = self.epoch if side == 0 else self.epoch_b
        layout = self._source.layout(layer, wanted)
        widget = self._epoch_w if side == 0 else self._epoch_b_w
        epochs = self._source.epochs(layer)
        if layout is None:
            widget.options = []
            return
        epoch = wanted if wanted in epochs else epochs[-1]
        self._hold = True
        try:
            widget.param.update(options=epochs, value=epoch,
                                label=str(getattr(self._source, "axis", "epoch")).capitalize())
        finally:
            self._hold = False
        # the left plot's evaluation gives the per-image answers (read once per run, seed and epoch)
        # (without them the points keep their class colours, and the user's colour mode until they come)
        changed = side == 0 and self._bar.load(self._source, epoch)
        key = (layer, epoch, layout.method)
        p.frame = ep.points_frame(layout.coords, self._source.labels, self._source.indices, self._classes)
        by = self._by()
        if by != "class":
            p.frame["arrival"] = self._bar.arrival
        if key != p.key:
            p.ranges.reset()             # a new layout: start from its own extent, not the last zoom
            p.key = key
        p.pipe.send({"frame": p.frame, "title": plots.plot_title(layout.title, 40), "key": key, "by": by,
                     "colors": self._bar.colors if by != "class" else self._colors})
        if p.pane.object is None:
            p.pane.object = p.plot
        if changed:
            self._answers_changed()

    def _by(self) -> str:
        """The frame column the points are coloured by."""
        return "arrival" if self.color_by == "arrival layer" and self._bar.ok else "class"

    def _answers_changed(self) -> None:
        self._bar.show_legend(self._by() != "class")
        self._bar.measure(self.selection)
        if self.color_by != "class":           # arrival colours came or went: the right plot too
            self._redraw(1)

    def _on_color_by(self, *_events) -> None:
        if self._hold:
            return
        self._bar.show_legend(self._by() != "class")
        self._redraw(0)
        self._redraw(1)

    def _ranges(self, p: ep.PlotPanel, x_range, y_range):
        full_x, full_y = ep.extent(p.frame[["x", "y"]].to_numpy())
        return (tuple(x_range) if x_range else full_x), (tuple(y_range) if y_range else full_y)

    def _render_base(self, p: ep.PlotPanel, data, x_range=None, y_range=None, width=None, height=None, **_):
        dim, colors = bool(self.selection), dict(by=data["by"])
        if not self._raster:
            return ep.points_base(data["frame"], data["colors"], title=data["title"], dim=dim, **colors)
        x_range, y_range = self._ranges(p, x_range, y_range)
        p.raster = ep.raster_base(data["frame"], data["colors"], x_range=x_range, y_range=y_range,
                                  width=width or ep.FRAME_WIDTH, height=height or ep.FRAME_HEIGHT, title=data["title"],
                                  dim=dim, **colors)
        return p.raster

    def _render_highlight(self, p: ep.PlotPanel, data, x_range=None, y_range=None, width=None, height=None, **_):
        if data is None:
            data = {"frame": ep.points_frame(np.zeros((0, 2)), [], [], []), "by": "class", "colors": self._colors}
        frame, colors, by = data["frame"], data["colors"], data["by"]
        chosen = frame.iloc[self._rows(self.selection)] if self.selection and len(frame) else frame.iloc[:0]
        if not self._raster:
            return ep.points_highlight(chosen, colors, by=by)
        x_range, y_range = self._ranges(p, x_range, y_range)
        return ep.raster_highlight(chosen, colors, x_range=x_range, y_range=y_range, by=by,
                                   width=width or ep.FRAME_WIDTH, height=height or ep.FRAME_HEIGHT)

    # ------------------------------------------------------------------ events
    def _on_epoch_widget(self, event, side: int) -> None:
        if self._hold or event.new is None:
            return
        setattr(self, "epoch" if side == 0 else "epoch_b", int(event.new))

    def _on_lasso(self, p: ep.PlotPanel, geometry=None, **_):
        if geometry is not None and p.frame is not None and len(geometry) >= 3:
            self._select_rows(p, points_in_polygon(p.frame[["x", "y"]].to_numpy(), np.asarray(geometry)))

    def _on_box(self, p: ep.PlotPanel, bounds=None, **_):
        if bounds is not None and p.frame is not None:
            self._select_rows(p, points_in_box(p.frame[["x", "y"]].to_numpy(), bounds))

    def _on_pointer(self, p: ep.PlotPanel, x=None, y=None, **_):
        if x is None or y is None or p.frame is None:
            return
        row = ep.hovered_row(p.raster, x, y) if self._raster else self._nearest(p, x, y)
        if row is not None:
            self.hovered = int(p.frame["index"].iat[row])

    def _nearest(self, p: ep.PlotPanel, x: float, y: float) -> int | None:
        """The plain point nearest (x, y) within :data:`_HOVER_PX` pixels, on the plot's current scale."""
        xy = p.frame[["x", "y"]].to_numpy()
        if not len(xy):
            return None
        (x0, x1), (y0, y1) = self._ranges(p, p.ranges.x_range, p.ranges.y_range)
        sx, sy = (x1 - x0) / (p.size.width or ep.FRAME_WIDTH), (y1 - y0) / (p.size.height or ep.FRAME_HEIGHT)
        d2 = ((xy[:, 0] - x) / sx) ** 2 + ((xy[:, 1] - y) / sy) ** 2
        row = int(np.argmin(d2))
        return row if d2[row] <= _HOVER_PX ** 2 else None

    def _thumbnails(self, indices) -> list[str]:
        if not len(indices):       # a stored run's source reads its dataset at the first image asked for
            return []
        source = self._source.thumbnails if self._source is not None else None
        return source.get(indices) if source is not None else [""] * len(indices)

    def _on_hovered(self, *_events) -> None:
        i = self.hovered
        if i is None or self._source is None or not self._valid.size:
            self._hover_card.object = hover_html(None)
            return
        row = int(self._rows([i])[0])
        label = int(self._source.labels[row])
        self._hover_card.object = hover_html(i, self._classes[label], self._colors.get(self._classes[label]),
                                             self._thumbnails([i])[0])

    def _on_selection(self, *_events) -> None:
        chosen = list(self.selection)
        labels = self._source.labels[self._rows(chosen)] if chosen else np.zeros(0, dtype=np.int64)
        counts = {self._classes[k]: int(n) for k, n in zip(*np.unique(labels, return_counts=True))}
        shown = chosen[: self.max_thumbnails]
        names = [self._classes[int(k)] for k in labels[: len(shown)]]
        self._selection_pane.object = selection_html(
            list(zip(shown, names, self._thumbnails(shown))), counts, self._colors, len(chosen))
        self._bar.measure(chosen)

    def __panel__(self):
        return self._layout
