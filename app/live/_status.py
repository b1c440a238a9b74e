"""The live view's text: its status line, its end-of-run message and its placeholders.

Plain functions of a :class:`~app.live._model.RunModel` that return HTML or Markdown; they state
what was measured and draw no conclusion.
"""
from __future__ import annotations

import html
import json
import math
import time

from lab.runs.timings import describe
from lab.status import RunStatus

from ._model import STAGE_LABELS, RunModel

__all__ = ["PLACEHOLDER", "UNMEASURED", "end_message", "ended_unmeasured", "fmt_seconds", "placeholder_html",
           "probe_html", "status_html", "under_way"]

_VIEW_PENDING = ("starting", "queued", "stopping")
"""The live view's own states around a run (no run statuses): started or queued here, or told to stop."""

PLACEHOLDER = ("<div style='color:#666;padding:24px 8px;font-size:14px'>"
               "Choose a preset (or your own settings) on the left and press <b>Run</b>. "
               "Curves, heatmap and the embedding map fill in here as every layer is measured.</div>")
"""What the view shows before its first run."""
UNMEASURED = "The run ended before any layer was measured: no curves, heatmap or layouts to draw."
"""What the view shows in place of the plots of a run that ended before measuring anything (the alert says why)."""


def under_way(status: str) -> bool:
    """The live view's ``status`` is of a run going on: running (:attr:`lab.RunStatus.active`), or the view's own
    starting, queued or stopping."""
    return status in _VIEW_PENDING or RunStatus.is_active(status)


def ended_unmeasured(model: RunModel) -> bool:
    """The run ended before any layer was measured: its plots would stay empty axes."""
    return model.ended and not len(model.metrics)


def fmt_seconds(seconds: float | None) -> str:
    """A duration as "42 s", "3 min 05 s" or "1 h 02 min"; "—" when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def placeholder_html(message: str) -> str:
    """``message`` in the place of the plots (escaped)."""
    return f"<div style='color:#666;padding:24px 8px'>{html.escape(message)}</div>"


def status_html(model: RunModel, status: str, message: str = "", *, pinned: bool = False) -> str:
    """The status line: the view's ``status``, the run, its stage and time left (or taken), where the
    last finished epoch's time went (:func:`lab.runs.timings.describe`), and ``message`` while nothing
    is measured (``pinned``: whatever the status, e.g. a refused Run after a cancelled run)."""
    m = model
    parts = [f"<b class='ls-run-status' data-status='{status}'>{status}</b>"]
    if m.run_id:
        parts.append(f"run <code>{html.escape(m.run_id)}</code>")
    p = m.progress
    if RunStatus.is_active(status) and p is not None and p.stage == "evaluate":      # a run followed from the store
        done = f"{m.epochs_done} evaluation{'s' if m.epochs_done != 1 else ''}"
        if m.open_ended:
            parts.append(f"{done} so far, the latest at {m.axis} {p.epoch} (as the training loop numbers them)")
        else:
            parts.append(f"{done} of {m.epochs_total}, the latest at epoch {p.epoch}/{m.n_epochs}"
                         + (f" (seed {p.seed})" if len(m.seeds) > 1 else ""))
        if m.epoch_timings:
            parts.append(f"last epoch {html.escape(describe(m.epoch_timings))}")
    elif (RunStatus.is_active(status) or status == "stopping") and p is not None:
        stage = STAGE_LABELS.get(p.stage, p.stage)
        where = []
        if p.seed is not None and len(m.seeds) > 1:
            where.append(f"seed {p.seed}")
        if p.epoch is not None:
            where.append(f"epoch {p.epoch}/{m.n_epochs}")
        parts.append(f"{stage} {p.done}/{p.total}" + (f" ({', '.join(where)})" if where else ""))
        eta = m.eta_seconds()
        if eta is not None:
            parts.append(f"about {fmt_seconds(eta)} left")
        if m.epoch_timings:
            parts.append(f"last epoch {html.escape(describe(m.epoch_timings))}")
    elif RunStatus.has_ended(status) and (m.seconds or (m.started_at and m.ended_at)):
        parts.append(f"after {fmt_seconds(m.seconds if m.seconds else m.ended_at - m.started_at)}")
    if message and (pinned or status in ("starting", "queued", "idle", "stopping")):
        parts.append(html.escape(message))
    return " &nbsp;·&nbsp; ".join(parts)


def end_message(model: RunModel) -> str:
    """Markdown for a failed, cancelled or interrupted run: why it ended and what of it was measured."""
    m = model
    if m.status == RunStatus.FAILED:
        head = f"**The run {RunStatus.FAILED.phrase}:** {m.message}"
    elif m.status == RunStatus.INTERRUPTED:
        head = f"**The run {RunStatus.INTERRUPTED.phrase}:** {m.message}."
    else:
        head = f"**Run cancelled** ({m.message or 'stopped'})."
    frame = m.metrics
    cells = frame[["epoch", "layer"]].drop_duplicates() if len(frame) else frame
    if not len(cells):
        return head + " Nothing had been measured yet."
    where = f" and stored in run `{m.run_id}`" if m.run_id else ""
    return (f"{head} What was computed stays visible{where}: {len(cells)} layer measurement(s) over "
            f"{cells['epoch'].nunique()} epoch(s), {m.epochs_done} completed evaluation(s).")


def probe_html(probe: dict) -> str:
    """A hidden element carrying ``probe`` (the view's counts) for the browser tests."""
    payload = html.escape(json.dumps(probe), quote=True)
    return f"<div class='ls-probe' data-probe=\"{payload}\" data-time='{time.time():.1f}'></div>"
