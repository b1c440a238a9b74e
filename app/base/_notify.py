"""Toast notifications for the current session (no-op outside a served page)."""
from __future__ import annotations

import panel as pn


def notify(kind: str, message: str, duration: int = 6000) -> None:
    """Show ``message`` as a ``kind`` ("success", "info", "warning", "error") toast."""
    notifications = pn.state.notifications
    if notifications is not None:
        getattr(notifications, kind)(message, duration=duration)
