"""The whole app as one component: choose (sidebar), run and watch, compare and export.

``LayerScope()`` renders inline in JupyterLab (after ``pn.extension("tabulator")``);
``LayerScope().template()`` is the served page (``app/main.py``).
"""
from __future__ import annotations

import panel as pn
import param
from panel.theme import fast

from .choose import ConfigPanel
from .collapse import CollapseView
from .compare import RunsPanel
from .live import LiveView, RunControl, WatchControl
from .base import page_loading, skip_css_visuals
from .live.watch_control import watched_settings_html
from .studies import StudiesPanel

__all__ = ["LayerScope"]

_ABOUT = """
### What you are looking at

* **Seen / unseen** — fine-tuning only sees the *seen* classes; the *unseen* classes measure what each layer
  learned that transfers (Dyballa et al. 2024; Gerritz et al. 2024).
* **NMI, kNN, linear probe** (unseen) — how well a layer separates classes it never trained on. The
  *generalization index* g is the best NMI over layers. Across architectures the papers found its layer is
  often not the last one, and that seen-class accuracy did not rank the backbones by g; one run shows
  where its own best layer is — the *Studies* tab compares many.
* **NC1, CDNV** (seen and unseen, log scale) — neural collapse: within-class spread against between-class
  distance; it falls layer by layer and epoch by epoch (Papyan et al.; Li, Liu et al.).
* **Layer utilization** — how far a layer's weights moved from their initial values (Wang & Yang).

Every run is stored (`$LAB_RUNS_DIR` or `./runs`) and can be exported to a notebook from *Compare & export*.
A run written by another process (`lab.Monitor` in your own training loop, `python -m lab run`, a study) is
listed under *Watch a running run* while it runs; *Watch* follows it here as each evaluation lands.
Runs started from this page stop when you press **Stop** or close the tab.
"""


class _OfflineFast(fast.Fast):
    """Panel's Fast design without its Google Fonts stylesheet: the page asks no other host for anything
    (offline, it waited on that request). Panel finds a design's own files by its class name, hence ``Fast``."""

    _resources = {kind: files for kind, files in fast.Fast._resources.items() if kind != "font"}


_OfflineFast.__name__ = "Fast"


class LayerScope(pn.viewable.Viewer):
    """Top-level component: one per browser session (or notebook cell).

    Parameters
    ----------
    store : lab.RunStore, optional
        The run store (default ``lab.RunStore()``: ``$LAB_RUNS_DIR`` or ``./runs``).
    """

    active_tab = param.Integer(default=0, doc="0: Run & watch, 1: Compare & export, 2: Studies, 3: About.")

    def __init__(self, store=None, **params):
        super().__init__(**params)
        page_loading(pn.state.curdoc)       # the other sessions' redraws make way until this page has rendered
        skip_css_visuals(pn.state.curdoc)   # its plots paint without a CSS lookup per line (app.base._css_visuals)
        if store is None:
            import lab.store

            store = lab.store.RunStore()
        self.store = store
        self.config = ConfigPanel(store=store)
        self.live = LiveView()
        self.runs = RunsPanel(store)
        self.studies = StudiesPanel(store, base_config=self.config.to_config)
        self.run_collapse = CollapseView()      # neural collapse of the first run selected in the runs' table
        self.runs.param.watch(self._show_collapse, "selected")
        self.control = RunControl(self.live, self.config.to_config, store=store, on_finished=self._run_ended)
        self.watcher = WatchControl(self.live, store)      # runs another process is writing
        # while a watched run is shown, the form's settings are not its own: the sidebar says whose they are
        self.watched_settings = pn.pane.HTML("", visible=False, sizing_mode="stretch_width",
                                             css_classes=["ls-watched-settings-pane"])
        self.live.param.watch(self._show_watched_settings, "status")
        self.runs.on_open = self.watch
        self.config.param.watch(self._apply_view, "view")
        self._apply_view()
        self._tabs = pn.Tabs(
            ("Run & watch", pn.Column(self.live, sizing_mode="stretch_width")),
            ("Compare & export", pn.Column(self.runs, self.run_collapse, sizing_mode="stretch_width")),
            ("Studies", self.studies),
            ("About", pn.pane.Markdown(_ABOUT, sizing_mode="stretch_width", max_width=900)),
            dynamic=True, sizing_mode="stretch_width",     # a tab's plots are made when it is first shown:
        )                                                   # half the page's models, its build and its JSON
        self._tabs.link(self, active="active_tab", bidirectional=True)

    def _apply_view(self, *_events) -> None:
        view = self.config.view or {}
        metric = view.get("heatmap_metric")
        if metric in self.live.param.heatmap_metric.objects:
            self.live.heatmap_metric = metric

    def _show_collapse(self, event) -> None:
        if not event.new:
            self.run_collapse.clear()
            return
        try:
            self.run_collapse.show_record(self.store.load(event.new[0]))
        except (KeyError, ValueError, OSError):     # a run gone or damaged: the runs' table says so
            self.run_collapse.clear()

    def watch(self, run_id: str) -> None:
        """Show stored run ``run_id`` in *Run & watch* and follow it while another process writes it (a
        :class:`lab.Monitor` in a training loop, ``python -m lab run``, a study); a finished run is replayed.

        Raises KeyError when the store has no such run."""
        self.live.follow(run_id, store=self.store)
        self.active_tab = 0
        self.watcher.refresh()

    def _show_watched_settings(self, *_events) -> None:
        text = watched_settings_html(self.live)
        self.watched_settings.param.update(object=text, visible=bool(text))

    def _run_ended(self) -> None:
        self.runs.refresh()
        self.config.refresh_runs()

    @property
    def sidebar(self) -> pn.Column:
        return pn.Column(self.control, self.watcher, self.watched_settings, self.config, sizing_mode="stretch_width")

    def template(self, title: str = "layerscope — which layer generalizes?"):
        """The served page: settings in the sidebar, the tabs in the main area."""
        template = pn.template.FastListTemplate(
            title=title, sidebar=[self.sidebar], main=[self._tabs], sidebar_width=380, design=_OfflineFast,
            accent="#08519c", header_background="#08306b", main_layout=None,
        )
        return template

    def __panel__(self):
        return pn.Row(pn.Column(self.sidebar, width=380), self._tabs, sizing_mode="stretch_width")
