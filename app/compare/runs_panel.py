"""Compare and export: the stored runs as a searchable table, overlaid curves, the layer x layer CKA of two
selected runs, the embedding explorer of a selected run, delete, notebook export."""
from __future__ import annotations

import datetime as _dt
import html
import re
import tempfile
from pathlib import Path

import holoviews as hv
import pandas as pd
import panel as pn
import param

from lab import catalogue
from lab.export import tables

from app.base import plots
from app.base import notify as _notify
from app.base import one_update
from app.explorer import StoredLayouts
from app.explorer.embedding import EmbeddingView

from . import similarity_plots

__all__ = ["RunsPanel", "compare_choices"]

_COMPARED_FAMILIES = ("separability", "collapse", "label_free")


def compare_choices() -> list[str]:
    """The metrics the Compare tab can overlay, asked of the catalogue when a panel is made (a metric registered
    after import is among them): the separability, collapse and label-free families, in display order."""
    return list(catalogue.metric_names(family=_COMPARED_FAMILIES))


_CKA_HINT = "<i>Select two runs to compare their layers by linear CKA.</i>"
_CKA_MEASURED = ("Linear CKA (unbiased) between every layer of the first run (rows) and of the second (columns), "
                 "on the unseen images both stored at their last epoch (first seed); 1 = the same features up to "
                 "rotation and scale.")

_TABLE_COLUMNS = ["name", "status", "dataset", "backbone", "strategy", "epochs", "best_layer", "g",
                  "heldout_accuracy", "seeds", "started", "run_id"]


def _no_curve(record, metric: str, split: str) -> str:
    """Why a selected run draws no curve of ``metric`` on ``split`` in the overlay, in one line."""
    from lab.errors import not_evaluated

    run = f"run {record.run_id!r}"
    if not record.evaluated:
        if record.status == "running":
            return f"{run} has no evaluations yet; its curve comes with the first"
        return not_evaluated(record.run_id, "evaluations to overlay", record.status)
    return f"{run} did not measure {metric} on its {split} images; pick another metric or split to overlay it"


class RunsPanel(pn.viewable.Viewer):
    """The run store as a table: search, sort, select to compare, delete, export to a notebook.

    Parameters
    ----------
    store : lab.RunStore
        The store listed (its ``list``, ``load``, ``compare``, ``delete``).
    """

    search = param.String(default="", doc="Case-insensitive text filter over the table's text columns.")
    selected = param.List(default=[], item_type=str, doc="Run ids selected in the table.")
    compare_metric = param.Selector(default=catalogue.g_metric(), objects=compare_choices(),
                                    doc="Metric overlaid for the selected runs (:func:`compare_choices`).")
    compare_split = param.Selector(default="unseen", objects=list(reversed(catalogue.SPLITS)),   # unseen first
                                   doc="Images the compared metric is measured on.")
    message = param.String(default="", doc="Last result of an action (delete, export).")

    def __init__(self, store, **params):
        super().__init__(**params)
        self.param.compare_metric.objects = compare_choices()       # the live catalogue's, not the import's
        self.store = store
        self._tmp = tempfile.TemporaryDirectory(prefix="layerscope-export-")
        self._table = pn.widgets.Tabulator(
            pd.DataFrame(columns=_TABLE_COLUMNS), selectable="checkbox", show_index=False, disabled=True,
            pagination="local", page_size=10, sizing_mode="stretch_width", layout="fit_data_table",
            titles={"heldout_accuracy": "seen acc.", "best_layer": "best layer", "g": "g (NMI)"},
            formatters={"g": {"type": "money", "precision": 3}, "heldout_accuracy": {"type": "money", "precision": 3}},
            css_classes=["ls-runs-table"],
        )
        self._table.add_filter(pn.bind(self._filter, search=self.param.search))
        self._table.param.watch(self._on_selection, "selection")
        search_w = pn.widgets.TextInput.from_param(self.param.search, label="Search runs",
                                                   placeholder="name, dataset, backbone, status…", width=300)
        refresh = pn.widgets.Button(label="↻ Refresh", width=100, margin=(28, 10, 10, 10))
        refresh.on_click(lambda _e: self.refresh())
        self._delete_button = pn.widgets.Button(label="Delete selected…", color="danger", width=150,
                                                disabled=True, css_classes=["ls-delete"])
        self._delete_button.on_click(self._ask_delete)
        self.on_open = None         # callable(run_id): show a run in Run & watch (LayerScope.watch)
        self._open_button = pn.widgets.Button(label="Open in Run & watch", width=170, disabled=True,
                                              css_classes=["ls-open-run"])
        self._open_button.on_click(lambda _e: self.open_selected())
        self._confirm_text = pn.pane.HTML("")
        self._confirm_yes = pn.widgets.Button(label="Yes, delete", color="danger", width=110,
                                              css_classes=["ls-delete-confirm"])
        self._confirm_no = pn.widgets.Button(label="Cancel", width=90)
        self._confirm_yes.on_click(self._do_delete)
        self._confirm_no.on_click(lambda _e: setattr(self._confirm_row, "visible", False))
        self._confirm_row = pn.Row(self._confirm_text, self._confirm_yes, self._confirm_no, visible=False,
                                   styles={"background": "#fff3f3", "border-radius": "4px"})
        self._export_button = pn.widgets.Button(label="Export selected → notebook", color="primary",
                                                width=250, disabled=True, css_classes=["ls-export"])
        self._export_button.on_click(self.export)
        self._export_html_button = pn.widgets.Button(label="Export selected → HTML", width=210, disabled=True,
                                                     css_classes=["ls-export-html"])
        self._export_html_button.on_click(self.export_html)
        self._download = pn.widgets.FileDownload(label="Download notebook", filename="layerscope.ipynb",
                                                 color="success", visible=False, width=420, embed=False,
                                                 auto=True, css_classes=["ls-download"])
        self._status = pn.pane.HTML("", sizing_mode="stretch_width")
        self._compare_pipe = hv.streams.Pipe(data={"frame": pd.DataFrame(), "metric": self.compare_metric,
                                                   "split": self.compare_split})
        self._compare_pane = pn.pane.HoloViews(
            hv.DynamicMap(self._render_compare, streams=[self._compare_pipe]), sizing_mode="fixed")
        # hidden as a whole: Panel fails to sync a HoloViews pane's own visible to its plot (Bokeh stylesheets)
        self._compare_box = pn.Column(self._compare_pane, margin=0)
        self.compare_missing: dict[str, str] = {}   # selected runs without a curve of the metric: why, one line each
        self._compare_note = pn.pane.HTML("", sizing_mode="stretch_width", visible=False,
                                          css_classes=["ls-compare-note"])
        self.param.watch(lambda _e: self._update_compare(), ["compare_metric", "compare_split", "selected"])
        # two selected runs layer by layer: linear CKA of their last-epoch stored embeddings of the same images
        self._cka_pane = pn.pane.HoloViews(None, sizing_mode="fixed", css_classes=["ls-cka"])
        self._cka_note = pn.pane.HTML(_CKA_HINT, sizing_mode="stretch_width")
        self.param.watch(lambda _e: self.show_cka(), "selected")
        # the layouts of one selected run (its best layer first); the selection links its layers and epochs
        self.embedding = EmbeddingView()
        self._layout_run = pn.widgets.Select(label="Layouts of run", options={}, width=420,
                                             css_classes=["ls-layout-run"])
        self._layout_note = pn.pane.HTML("<i>Select a run in the table to explore its unseen-image layouts.</i>",
                                         sizing_mode="stretch_width")
        # shown while it shows a run's layouts: else its player, "Colour by" and "Layer" would do nothing (the note
        # says why there is none)
        self._explorer = pn.Column(self.embedding, visible=False, margin=0, sizing_mode="stretch_width")
        self._layout_run.param.watch(lambda e: self.show_layouts(e.new), "value")
        self.param.watch(self._on_selected_layouts, "selected")
        self.param.watch(lambda e: setattr(self._status, "object", html.escape(e.new)), "message")
        self._layout = pn.Column(
            pn.Row(search_w, refresh),
            self._table,
            pn.Row(self._open_button, self._delete_button, self._export_button, self._export_html_button,
                   self._download),
            self._confirm_row,
            self._status,
            pn.Row(pn.widgets.Select.from_param(self.param.compare_metric, label="Compare metric", width=190),
                   pn.widgets.RadioButtonGroup.from_param(self.param.compare_split, margin=(28, 10, 10, 10))),
            self._compare_note,
            self._compare_box,
            self._cka_note,
            self._cka_pane,
            pn.Row(self._layout_run, self._layout_note, sizing_mode="stretch_width"),
            self._explorer,
            sizing_mode="stretch_width", css_classes=["ls-runs-panel"],
        )
        self.refresh()

    # ------------------------------------------------------------------ table
    @staticmethod
    def _filter(df: pd.DataFrame, search: str) -> pd.DataFrame:
        text = (search or "").strip().lower()
        if not text or df.empty:
            return df
        hay = df[["run_id", "name", "status", "dataset", "backbone", "strategy", "best_layer"]].astype(str)
        mask = hay.apply(lambda col: col.str.lower().str.contains(re.escape(text), regex=True)).any(axis=1)
        return df[mask]

    def refresh(self) -> None:
        """Reload the table from the store (keeps the selection where runs still exist)."""
        try:
            df = self.store.list()
        except Exception as exc:
            self.message = f"Could not read the run store {getattr(self.store, 'root', '')}: {exc}"
            return
        df = df.reindex(columns=_TABLE_COLUMNS)
        keep = [r for r in self.selected if r in set(df["run_id"])]
        self._table.value = df
        self._table.selection = [int(i) for i in df.index[df["run_id"].isin(keep)]]
        self.selected = keep

    def _on_selection(self, event) -> None:
        df = self._table.value
        ids = [str(df["run_id"].iloc[i]) for i in event.new if 0 <= i < len(df)]
        with one_update():          # the overlay, CKA and layouts of the new selection
            self.selected = ids
        self._delete_button.disabled = not ids
        self._export_button.disabled = not ids
        self._export_html_button.disabled = not ids
        self._open_button.disabled = len(ids) != 1
        self._download.visible = False
        self._confirm_row.visible = False

    def open_selected(self) -> bool:
        """Show the one selected run in Run & watch, following it while it is written (``on_open``)."""
        if len(self.selected) != 1 or self.on_open is None:
            return False
        try:
            with one_update():
                self.on_open(self.selected[0])
        except (KeyError, ValueError, OSError) as exc:
            self.message = f"Cannot open run {self.selected[0]}: {exc}"
            _notify("error", self.message, duration=8000)
            return False
        return True

    def select(self, run_ids: list[str]) -> None:
        """Select runs by id (as if ticked in the table)."""
        df = self._table.value
        self._table.selection = [int(i) for i in df.index[df["run_id"].isin(list(run_ids))]]

    # ------------------------------------------------------------------ compare
    def compare_frame(self) -> pd.DataFrame:
        """Per selected run: the metric's mean over seeds per layer at the run's last complete epoch."""
        ids = list(self.selected)
        self.compare_missing = {}
        if not ids:
            return pd.DataFrame(columns=["run", "layer", "layer_index", "value"])
        frames = []
        for run_id in ids:
            try:
                rec = self.store.load(run_id)
            except Exception as exc:
                self.message = f"Could not load run {run_id}: {exc}"
                continue
            label = plots.plot_text(f"{rec.name or run_id} ({rec.config_dict.get('backbone', '?')})")
            # the mean over seeds per layer at the last complete evaluation: lab.analysis via lab.export.tables
            curve = tables.curve_table({run_id: rec}, self.compare_metric, split=self.compare_split,
                                       labels={run_id: label})
            if not curve.empty:
                frames.append(curve.rename(columns={"mean": "value"})[["run", "layer", "layer_index", "value"]])
            else:
                self.compare_missing[run_id] = _no_curve(rec, self.compare_metric, self.compare_split)
        if not frames:
            return pd.DataFrame(columns=["run", "layer", "layer_index", "value"])
        return pd.concat(frames, ignore_index=True)

    def _update_compare(self) -> None:
        frame = self.compare_frame()
        self._compare_pipe.send({"frame": frame, "metric": self.compare_metric, "split": self.compare_split})
        # a plot with nothing to draw gives way to the sentence saying why
        self._compare_box.visible = bool(len(frame)) or not self.selected
        self._compare_note.param.update(
            object="<br>".join(f"<i>{html.escape(why)}</i>" for why in self.compare_missing.values()),
            visible=bool(self.compare_missing))

    def _render_compare(self, data):
        return plots.compare_curves(data["frame"], metric=data["metric"], split=data["split"])

    @property
    def compare_stream(self) -> hv.streams.Pipe:
        return self._compare_pipe

    # ------------------------------------------------------------------ CKA of two runs
    def show_cka(self) -> None:
        """The layer x layer CKA heatmap of the two selected runs (rows: the first), or a line saying why not."""
        self._cka_pane.object = None
        if len(self.selected) != 2:
            self._cka_note.object = _CKA_HINT
            return
        try:
            a, b = (self.store.load(run_id) for run_id in self.selected)
            table = tables.cka_matrix(a, other=b)
        except (ValueError, KeyError, OSError) as exc:  # no embeddings, or of different images
            self._cka_note.object = html.escape(f"No layer × layer CKA for these two runs: {exc}")
            return
        self._cka_pane.object = similarity_plots.run_heatmap(table, a, b)
        self._cka_note.object = (html.escape(_CKA_MEASURED) + " " + similarity_plots.undefined_text(table)).strip()

    # ------------------------------------------------------------------ layouts
    def _on_selected_layouts(self, event) -> None:
        labels = {}
        for run_id in event.new:
            row = self._table.value[self._table.value["run_id"] == run_id]
            name = str(row["name"].iloc[0]) if len(row) and pd.notna(row["name"].iloc[0]) else ""
            labels[f"{name} ({run_id})" if name else run_id] = run_id
        keep = self._layout_run.value if self._layout_run.value in event.new else None
        self._layout_run.param.update(options=labels, value=keep or (event.new[0] if event.new else None))
        if not event.new:
            self.show_layouts(None)

    def show_layouts(self, run_id: str | None) -> None:
        """Show the stored layouts of ``run_id`` (None: none) in :attr:`embedding`, at the run's best layer."""
        if run_id is None:
            self.embedding.clear()
            self._explorer.visible = False
            self._layout_note.object = "<i>Select a run in the table to explore its unseen-image layouts.</i>"
            return
        try:
            source = StoredLayouts(self.store.load(run_id), store=self.store)
            self._explorer.visible = True       # before its plots are made: BokehJS lays them out visible
            self.embedding.set_source(source)
        except (ValueError, KeyError, OSError) as exc:   # a run stored without layouts (projection: none), or gone
            self.embedding.clear()
            self._explorer.visible = False
            self._layout_note.object = html.escape(str(exc))
            return
        self._layout_note.object = ("<span style='color:#555'>The run's unseen images, laid out at each layer and "
                                    "epoch (first: its best layer). A lasso selection is highlighted at every "
                                    "layer; exported with this run, the notebook reports on it.</span>")

    # ------------------------------------------------------------------ delete
    def _ask_delete(self, *_events) -> None:
        n = len(self.selected)
        if not n:
            return
        names = ", ".join(self.selected[:3]) + (" …" if n > 3 else "")
        self._confirm_text.object = (f"<b>Delete {n} run{'s' if n > 1 else ''}?</b> "
                                     f"This removes {html.escape(names)} from disk.")
        self._confirm_row.visible = True

    def _do_delete(self, *_events) -> None:
        self.delete(list(self.selected))
        self._confirm_row.visible = False

    def delete(self, run_ids: list[str]) -> None:
        """Delete runs from the store (running ones are refused with a message)."""
        done, problems = [], []
        for run_id in run_ids:
            try:
                self.store.delete(run_id)
                done.append(run_id)
            except Exception as exc:
                problems.append(f"{run_id}: {exc}")
        self.message = (f"Deleted {len(done)} run(s)." if done else "") + (
            (" Not deleted: " + "; ".join(problems)) if problems else "")
        if problems:
            _notify("error", "Some runs were not deleted: " + "; ".join(problems), duration=10000)
        self.refresh()

    # ------------------------------------------------------------------ export
    def export(self, *_events) -> Path | None:
        """Write the selected runs to a notebook and offer it for download; None (with a message) on failure."""
        import lab.export

        ids = list(self.selected)
        selection = self._export_selection(ids) if ids else None
        path = self._export_file(ids, ".ipynb", lambda target: lab.export.to_notebook(
            ids, target, store=self.store, selection=selection))
        if path is not None:
            mark = (f"; its per-image cell reports on the explorer's {len(selection)} selected images"
                    if selection else "")
            self.message = f"Notebook ready: {path.name} ({len(ids)} run{'s' if len(ids) > 1 else ''}{mark})."
        return path

    def export_html(self, *_events) -> Path | None:
        """Write the selected runs into one self-contained HTML page (:func:`lab.export.to_html`: opens offline,
        players working, no server) and offer it for download; None (with a message) on failure."""
        import lab.export

        ids = list(self.selected)
        path = self._export_file(ids, ".html", lambda target: lab.export.to_html(ids, target, store=self.store))
        if path is not None:
            self.message = (f"Page ready: {path.name} ({len(ids)} run{'s' if len(ids) > 1 else ''}, "
                            f"{path.stat().st_size / 1e6:.1f} MB; opens in any browser, offline, with no server).")
        return path

    def _export_file(self, ids: list[str], suffix: str, write) -> Path | None:
        """``write(target)`` the runs ``ids`` to a timestamped ``suffix`` file and offer it for download; None with
        a message when no run is selected or the export fails."""
        if not ids:
            self.message = "Select one or more runs to export."
            return None
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        target = Path(self._tmp.name) / f"layerscope-{len(ids)}run{'s' if len(ids) > 1 else ''}-{stamp}{suffix}"
        try:
            path = Path(write(target))
        except Exception as exc:
            self.message = f"Export failed: {exc}"
            _notify("error", f"Export failed: {exc}", duration=10000)
            return None
        self._download.param.update(file=str(path), filename=path.name, label=f"⬇ Download {path.name}",
                                    visible=True)
        return path

    def _export_selection(self, ids: list[str]) -> list[int] | None:
        """The explorer's selection when the notebook's per-image cell reads the explorer's run (the first exported
        run with a per-image record, as lab.export picks it), else None (that cell then reports the forgotten)."""
        from lab import analysis

        shown = self._layout_run.value
        if not self.embedding.selection or shown not in ids:
            return None
        try:
            first = next((run_id for run_id in ids if analysis.has_image_record(run_id, store=self.store)), None)
        except (KeyError, ValueError, OSError):       # a run gone or damaged: the export itself says so
            return None
        return list(self.embedding.selection) if first == shown else None

    def __panel__(self):
        return self._layout
