"""Image thumbnails (PNG data URIs) for hover tooltips, cached per image index."""
from __future__ import annotations

import threading
from typing import Callable, Sequence

__all__ = ["ThumbnailSource", "array_thumbnails"]


class ThumbnailSource:
    """Data-URI thumbnails of one evaluation dataset, by image index; thread-safe cache.

    Parameters
    ----------
    render : callable
        ``render(index) -> "data:image/png;base64,..."`` (e.g. ``dataset.thumbnail``).
    size : int
        Passed as ``size=`` to ``render`` when it accepts it.
    """

    def __init__(self, render: Callable[..., str], size: int = 32):
        self._render = render
        self._size = size
        self._cache: dict[int, str] = {}
        self._guard = threading.Lock()

    def get(self, indices: Sequence[int]) -> list[str]:
        """Thumbnails for ``indices`` ("" for an index that cannot be rendered)."""
        out = []
        for i in indices:
            i = int(i)
            with self._guard:
                uri = self._cache.get(i)
            if uri is None:
                uri = self._render_one(i)
                with self._guard:
                    self._cache[i] = uri
            out.append(uri)
        return out

    def _render_one(self, index: int) -> str:
        try:
            try:
                return self._render(index, size=self._size)
            except TypeError:
                return self._render(index)
        except Exception:   # a broken image must not break the plot
            return ""


def array_thumbnails(images, size: int = 32) -> ThumbnailSource:
    """A :class:`ThumbnailSource` of stored pictures, uint8 (N, h, w, C) (:meth:`lab.store.RunRecord.thumbnails`):
    image ``i`` as a PNG data URI, its longest side ``size`` pixels."""
    from lab.data import png_data_uri

    def render(index: int, size: int = size) -> str:
        return png_data_uri(images[int(index)], size)

    return ThumbnailSource(render, size=size)
