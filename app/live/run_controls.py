"""Run control: start the engine in a background thread per session, stop it, queue on a busy device.

:class:`RunControl` owns the Run / Stop buttons, the worker thread and its
:class:`lab.runs.CancelToken`. The worker iterates ``lab.run(config, store=...,
cancel=token)`` and hands every event to the :class:`~app.live.LiveView` through
``LiveView.push`` (thread-safe); it never touches a widget. Before starting it
takes the device from the process-wide :class:`~app.base.resources.DeviceLocks`, so a
second run (from another session) waits with a visible "queued" message.
"""
from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Callable

import panel as pn
import param

from lab import events as ev
from lab.device import check_device
from lab.runs.names import check_names
from lab.runs.projections import notices_to

from app.base import notify as _notify, shared

from ._thumbnails import load_thumbnails
from .view import LiveView

__all__ = ["RunControl", "readable_error"]

_log = logging.getLogger(__name__)


def readable_error(exc: BaseException) -> str:
    """One readable line for a user (:func:`lab.errors.user_message`): ValueError text as is,
    operating-system errors with the path and the fix, and for a genuine bug the file that keeps
    its traceback."""
    from lab.errors import user_message

    return user_message(exc)


class RunControl(pn.viewable.Viewer):
    """Run and Stop for one session; feeds a :class:`LiveView` from a worker thread.

    Parameters
    ----------
    live : LiveView
        The view fed with the run's events.
    make_config : callable
        ``() -> lab.RunConfig``; raises ValueError on bad choices (shown, not raised).
    store : lab.RunStore or None
        Where runs are stored (None: the default store).
    on_finished : callable, optional
        Called on the session thread when a run has ended (e.g. refresh the runs table).
    """

    running = param.Boolean(default=False, constant=True, doc="A run of this session is in flight.")
    run_id = param.String(default="", constant=True, doc="Id of the current (or last) run.")

    def __init__(self, live: LiveView, make_config: Callable, store=None,
                 on_finished: Callable | None = None, **params):
        super().__init__(**params)
        self.live = live
        self._make_config = make_config
        self._store = store
        if store is None:           # where lab.run records a run without one: the live view reads it there
            import lab.store

            store = lab.store.RunStore()
        live.store = store if store is not False else None      # False: the runs are not recorded
        self._on_finished = on_finished
        self._token = None
        self._thread: threading.Thread | None = None
        self._doc = None
        self.run_button = pn.widgets.Button(label="▶ Run", color="primary", width=110,
                                            css_classes=["ls-run"])
        self.stop_button = pn.widgets.Button(label="■ Stop", color="danger", width=110, disabled=True,
                                             css_classes=["ls-stop"])
        self.run_button.on_click(self.start)
        self.stop_button.on_click(self.stop)
        self._layout = pn.Row(self.run_button, self.stop_button, margin=(5, 0))

    # ------------------------------------------------------------------ session thread
    def start(self, *_events) -> bool:
        """Validate the choices and start the run in a worker thread; False (with a message) on bad input."""
        if self.running:
            _notify("warning", "A run is already in progress in this tab; stop it first.")
            return False
        try:
            cfg = self._make_config()
            check_names(cfg, store=self._store)   # a mistyped name is reported before anything loads
            check_device(cfg.device, cfg.precision)   # a GPU or precision this machine lacks, too
        except Exception as exc:  # bad choices: say so, keep the page alive
            message = readable_error(exc)
            self.live.set_message(f"Cannot start: {message}", status="idle", alert="danger")
            _notify("error", f"Cannot start the run: {message}", duration=10000)
            return False
        import lab.runs

        self.live.stop_following()          # this tab's own run replaces a run it was following
        self._doc = pn.state.curdoc
        self.live.reset("Starting… (loading data and backbone)")
        self.live.bind_document(self._doc)
        token = lab.runs.CancelToken()
        self._token = token
        with param.edit_constant(self):
            self.param.update(running=True, run_id="")
        self.run_button.disabled = True
        self.stop_button.param.update(disabled=False, label="■ Stop")
        if self._doc is not None and self._doc.session_context is not None:
            pn.state.on_session_destroyed(lambda _ctx, t=token: t.cancel())
        self._thread = threading.Thread(target=self._work, args=(cfg, token), daemon=True,
                                        name="layerscope-run")
        self._thread.start()
        return True

    def stop(self, *_events) -> None:
        """Ask the run to stop; the engine ends it with RunCancelled within a batch or two."""
        if self._token is not None:
            self._token.cancel()
            self.stop_button.param.update(disabled=True, label="Stopping…")
            self.live.set_message("Stopping… (the engine ends the run at its next checkpoint: the current "
                                  "batch or layer)", status="stopping")

    def _ended(self, run_id: str) -> None:
        self.live.settle()
        with param.edit_constant(self):
            self.param.update(running=False, run_id=run_id or self.run_id)
        self.run_button.disabled = False
        self.stop_button.param.update(disabled=True, label="■ Stop")
        status = self.live.model.status
        if status == "finished":
            _notify("success", f"Run {run_id} finished.", duration=4000)
        elif status == "failed":
            _notify("error", f"Run failed: {self.live.model.message}", duration=10000)
        elif status == "cancelled":
            _notify("warning", "Run cancelled; what was computed is kept.", duration=4000)
        if self._on_finished is not None:
            try:
                self._on_finished()
            except Exception:
                _log.exception("on_finished callback failed")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the worker thread ends (tests); True when it has."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    # ------------------------------------------------------------------ worker thread
    def _work(self, cfg, token) -> None:
        import lab.runs
        from lab.device import device_key

        push = self.live.push
        run_id = ""
        try:
            device = device_key(cfg.device)       # "cuda" and "cuda:0" are one GPU, one lock
            label = cfg.describe()

            def on_wait(holder: str) -> None:
                push(partial(self.live.set_message,
                             f"Queued: the {device} device is busy with another run ({holder}); "
                             "this run starts as soon as it is free. Stop cancels the wait.", "queued"))

            with shared().devices.hold(device, label, should_stop=lambda: token.cancelled,
                                       on_wait=on_wait) as acquired:
                if not acquired:
                    push(ev.RunCancelled(run_id="", message="cancelled while waiting for the device"))
                    return
                push(partial(self.live.set_message, "Starting… (loading data and backbone)", "starting"))
                started = time.monotonic()
                thumbnails_requested = False
                # the layouts' notices (cuML fell back to umap-learn) reach this session as a toast
                def toast(text: str) -> None:
                    push(partial(_notify, "warning", text, duration=10000))

                with notices_to(toast):
                    for event in lab.run(cfg, store=self._store, cancel=token):
                        if event.kind == ev.RunStarted.kind:
                            run_id = event.run_id
                        elif event.kind == ev.ProjectionReady.kind and not thumbnails_requested:
                            # after the first metrics, so that it does not compete with the run's start
                            thumbnails_requested = True
                            load_thumbnails(self.live, cfg)
                        elif event.kind == ev.ProjectionReady.kind and self.live.thumbnails is not None:
                            self.live.thumbnails.get(event.indices)   # render thumbnails here, not on the page thread
                        push(event)
                _log.info("run %s ended after %.1f s", run_id, time.monotonic() - started)
        except Exception as exc:  # the engine reports its own failures as RunFailed; this is the rest
            _log.exception("run failed outside the engine")
            push(ev.RunFailed(run_id=run_id, message=readable_error(exc)))
        finally:
            push(partial(self._ended, run_id))

    def __panel__(self):
        return self._layout
