"""The pictures a page shows on hovering a layout's point: small PNG data URIs, each image once.

As the app's hover has them: the pictures the run kept (``RunRecord.thumbnails()``, a monitored loop's own
images), else the run's unseen images read again from its dataset when that dataset loads on this machine.
"""
from __future__ import annotations

from typing import Callable, Iterable

from lab.data.thumbnails import png_data_uri

__all__ = ["THUMBNAIL_SIZE", "layout_thumbnails"]

THUMBNAIL_SIZE = 48
"""The longest side of a hover picture, in pixels."""


def _source(record) -> tuple[Callable[[int], str], str] | None:
    """How to draw image ``i`` of the run's unseen sample, and where the pictures come from; None without any."""
    kept = record.thumbnails()
    if kept is not None:
        return (lambda i: png_data_uri(kept[int(i)], THUMBNAIL_SIZE)), "kept by the run"
    config = record.config
    if isinstance(config, dict):            # a config this version cannot read: no dataset to read again
        return None
    try:
        from lab.runs import prepare_data

        unseen = prepare_data(config).unseen
    except Exception:      # the dataset is not on this machine (or no longer loads): the points stay pictureless
        return None
    return (lambda i: unseen.thumbnail(int(i), size=THUMBNAIL_SIZE)), "read again from the run's dataset"


def layout_thumbnails(record, indices: Iterable[int]) -> dict | None:
    """``{"source": ..., "images": {index: data URI}}`` for the images ``indices`` of the run's layouts, or None
    when the run has no pictures to show here."""
    source = _source(record)
    if source is None:
        return None
    render, where = source
    images = {}
    for index in sorted({int(i) for i in indices}):
        try:
            images[str(index)] = render(index)
        except (IndexError, ValueError, OSError):   # an index past what the run kept: that point has no picture
            continue
    return {"source": where, "size": THUMBNAIL_SIZE, "images": images} if images else None
