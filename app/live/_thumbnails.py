"""Hover thumbnails of a run's unseen evaluation images, loaded off the session's thread."""
from __future__ import annotations

import logging
import threading
from functools import partial

from app.base import ThumbnailSource

__all__ = ["load_thumbnails"]

_log = logging.getLogger(__name__)


def load_thumbnails(live, cfg) -> None:
    """Load, in a thread of its own, thumbnails of the run's unseen evaluation images (the indices of
    ProjectionReady) and hand them to ``live`` (a :class:`~app.live.LiveView`) through its ``push``."""
    def load():
        try:
            import lab.runs

            data = lab.runs.prepare_data(cfg)
            source = ThumbnailSource(data.unseen.thumbnail, size=32)
            source.get(range(len(data.unseen)))
        except Exception as exc:  # hover thumbnails are a nicety; the plot works without them
            _log.warning("no hover thumbnails: %s", exc)
            return
        live.push(partial(live.set_thumbnails, source))

    threading.Thread(target=load, daemon=True, name="layerscope-thumbnails").start()
