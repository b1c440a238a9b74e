"""Watch a run that another process is writing: a monitored training loop, ``python -m lab run``, a study.

:class:`WatchControl` lists the store's running runs (:meth:`lab.RunStore.running`, which reads only their
meta and config files, so it can look every few seconds; the sessions of one server share what one of them read
less than a poll ago, so a class of visitors costs one look, not one each) and, on **Watch**, has the
:class:`~app.live.LiveView` follow the chosen one (:meth:`LiveView.follow`): the same curves, verdict,
heatmap and explorer as a run started here, updated as each evaluation lands.
"""
from __future__ import annotations

import html
import threading
import time
from pathlib import Path

import panel as pn
import param

from lab.status import RunStatus

from app.base import notify as _notify
from app.base import quiet_poll

from .view import LiveView

__all__ = ["WatchControl", "running_runs", "watched_settings_html"]

_SETTINGS = (("dataset", "dataset"), ("backbone", "backbone"), ("strategy", "strategy"), ("epochs", "epochs"),
             ("pooling", "pooling"), ("metrics", "metrics"))

_EMPTY = ("No run is being written now. A run appears here while it runs: <code>lab.Monitor</code> in a "
          "training loop, <code>python -m lab run</code>, a study's worker.")


def watched_settings_html(live: LiveView) -> str:
    """What the sidebar says while the live view shows a run it follows from the store: that run's own settings
    (read-only, from its config as the run recorded it), and that the form's settings are for the next run
    started here. "" while the view shows a run started here, or none."""
    run_id = live.followed
    if run_id is None:
        return ""
    m = live.model
    ours = m.run_id == run_id
    if ours and m.config:
        shown = _settings(m.config)
        if m.unseen:
            shown.append(("unseen classes", ", ".join(map(str, m.unseen))))
        shown.append(("seen classes", ", ".join(map(str, m.seen)) if m.seen else "none measured"))
        what = _configured(shown)
    elif ours and m.ended:
        # it ended before its RunStarted: no layers or classes were resolved; what it was given, the store keeps
        config = _stored_config(live.store, run_id)
        why = f"It {RunStatus.phrase_of(m.status)} before it started: it resolved no layers or classes. "
        what = why + (_configured(_settings(config, given=True)) if config else
                      "It recorded no settings, so there are none to show. ")
    else:
        what = "Reading its settings from the store… "
    return (f"<div class='ls-watched-settings' style='font-size:12px;background:#f4f7fb;padding:6px 8px;"
            f"border-radius:4px'><b>Watching run <code>{html.escape(run_id)}</code>.</b> {what}"
            f"The settings below are not this run's: they are for the next run you start here.</div>")


_LOOKS: dict[str, tuple[float, object]] = {}     # store folder -> (when, its running() table)
_LOOKS_GUARD = threading.Lock()


def running_runs(store, max_age: float = 0.0):
    """``store.running()``, or the table a session of this process read less than ``max_age`` seconds ago."""
    key = str(Path(store.root).resolve())
    with _LOOKS_GUARD:
        seen = _LOOKS.get(key)
    if seen is not None and time.monotonic() - seen[0] <= max_age:
        return seen[1]
    table = store.running()
    with _LOOKS_GUARD:
        _LOOKS[key] = (time.monotonic(), table)
    return table


def _settings(config: dict, given: bool = False) -> list[tuple[str, object]]:
    """(label, value) of the settings the sidebar lists; ``given``: also the layers named (a run that ended before
    it started never resolved them, so the list it was given is all there is)."""
    from lab.monitor import is_monitored

    keys = (*_SETTINGS, ("layers", "layers")) if given else _SETTINGS
    shown = [(label, config.get(key)) for key, label in keys if config.get(key) not in (None, "", [], ())]
    if is_monitored(config):            # a loop's own data and model: lab trained nothing, epochs are its own
        shown = [(label, value) for label, value in shown if label not in ("strategy", "epochs")]
    return shown


def _configured(shown) -> str:
    items = "".join(f"<li>{html.escape(label)}: <code>{html.escape(_setting(value))}</code></li>"
                    for label, value in shown)
    return f"It was configured with (read-only):<ul style='margin:4px 0 4px 16px;padding:0'>{items}</ul>"


def _stored_config(store, run_id: str) -> dict:
    """The config ``store`` keeps for ``run_id`` ({} when there is none or it cannot be read)."""
    if store is None:
        return {}
    try:
        config = store.load(run_id).config_dict
    except (KeyError, ValueError, OSError):
        return {}
    return config if isinstance(config, dict) else {}


def _setting(value) -> str:
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _label(row) -> str:
    name = row.name if isinstance(row.name, str) and row.name else row.backbone
    epochs = "" if row.epochs is None or row.epochs != row.epochs else f", epoch {int(row.epochs)}"
    return f"{name} · {row.run_id}{epochs}"


class WatchControl(pn.viewable.Viewer):
    """The sidebar's "Watch a running run": a list of the store's running runs and a Watch button.

    Parameters
    ----------
    live : LiveView
        The view that follows the chosen run.
    store : lab.RunStore
        The store listed.
    every : float
        Seconds between looks at the store for new running runs while the page is open (0: only on ↻).
    """

    runs = param.List(default=[], doc="Ids of the running runs listed, newest first.")

    def __init__(self, live: LiveView, store, every: float = 5.0, **params):
        super().__init__(**params)
        self.live, self.store = live, store
        self.select = pn.widgets.Select(label="Watch a running run", options={}, width=215,
                                        css_classes=["ls-watch-select"])
        self.watch_button = pn.widgets.Button(label="Watch", width=80, margin=(28, 5, 5, 5), disabled=True,
                                              css_classes=["ls-watch"])
        self.refresh_button = pn.widgets.Button(label="↻", width=36, margin=(28, 0, 5, 0))
        self.note = pn.pane.HTML(_EMPTY, margin=(0, 10), styles={"color": "#666", "font-size": "12px"},
                                 css_classes=["ls-watch-note"])
        self.watch_button.on_click(lambda _e: self.watch())
        self.refresh_button.on_click(lambda _e: self.refresh())
        self._layout = pn.Column(pn.Row(self.select, self.watch_button, self.refresh_button, margin=0), self.note,
                                 margin=(5, 0))
        self.refresh(max_age=0.8 * every)
        if every and pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            # quiet: a poll that raised the busy spinner would patch the page every few seconds (_upstream_panel)
            quiet_poll(lambda: self.refresh(max_age=0.8 * every), period_ms=int(every * 1000))

    def refresh(self, max_age: float = 0.0) -> None:
        """Look for running runs now (a run this view already shows is left out); ``max_age``: a list another
        session of this server read less than that many seconds ago will do (:func:`running_runs`)."""
        try:
            table = running_runs(self.store, max_age)
        except OSError as exc:
            self.note.object = html.escape(f"Cannot list the runs of {self.store.root}: {exc}")
            return
        shown = self.live.model.run_id
        rows = [row for row in table.itertuples(index=False) if row.run_id != shown or not self.live.following]
        options = {_label(row): row.run_id for row in rows}
        if options != self.select.options:
            keep = self.select.value if self.select.value in options.values() else None
            self.select.options = options
            self.select.value = keep if keep is not None else (next(iter(options.values())) if options else None)
        self.runs = [row.run_id for row in rows]
        self.watch_button.disabled = not options
        following = self.live.following
        if following:
            self.note.object = (f"Following run <code>{html.escape(following)}</code> as it is written."
                                + (f" {len(options)} other run(s) running." if options else ""))
        else:
            self.note.object = (f"{len(options)} run(s) being written now: pick one and press Watch."
                                if options else _EMPTY)

    def watch(self, run_id: str | None = None) -> bool:
        """Have the live view follow ``run_id`` (default: the one picked); False, with a message, when it
        cannot be read."""
        run_id = run_id or self.select.value
        if not run_id:
            return False
        try:
            self.live.follow(run_id, store=self.store)
        except (KeyError, ValueError, OSError) as exc:
            _notify("error", f"Cannot watch run {run_id}: {exc}", duration=8000)
            self.refresh()
            return False
        self.refresh()
        return True

    def __panel__(self):
        return self._layout
