"""Heavy things shared by every browser session of one server process.

Everything else in the app is per session. What lives here is explicit,
thread-safe and cheap to hold:

- :class:`DeviceLocks` — one lock per compute device, so two runs (from two
  sessions) never train on the same device at once; the second one queues.
- :class:`DatasetCache` — datasets loaded for class lists and hover thumbnails
  (a small LRU; loading glyphs or digits once per process, not per session).
- :func:`warm_up` — compile umap's numba kernels once, in the background, when
  the server starts (``app/app_hooks.py``), so the first UMAP of the first run
  is not delayed by JIT compilation.
- :func:`extension` — the notebook set-up (JupyterLab, VS Code, Colab, Voilà):
  Panel's extension with every JavaScript and CSS file taken from the installed
  packages, never from a CDN (see :func:`offline_stylesheets`).

:func:`shared` returns the process-wide :class:`Resources` instance.
"""
from __future__ import annotations

import base64
import collections
import contextlib
import functools
import logging
import mimetypes
import re
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DeviceLocks", "DatasetCache", "Resources", "shared", "warm_up", "extension", "offline_stylesheets",
           "local_stylesheet_url"]

_log = logging.getLogger(__name__)


class DeviceLocks:
    """One :class:`threading.Lock` per physical device ("cpu", "cuda:0", ...).

    Names are keyed by :func:`lab.device.device_key`: "cuda" is the current GPU ("cuda:0"), "auto"
    what it resolves to, so two spellings of one GPU never let two runs share it.
    """

    def __init__(self):
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._holders: dict[str, str] = {}

    def _lock(self, device: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(device, threading.Lock())

    def holder(self, device: str) -> str | None:
        """A label of the run holding ``device`` (None when free)."""
        from lab.device import device_key

        with self._guard:
            return self._holders.get(device_key(device))

    @contextmanager
    def hold_all(self, devices, label: str = "a run", *, should_stop=None, on_wait=None, poll: float = 0.2):
        """Hold every device of ``devices`` for the block (a study's local workers), taken in one
        order so that two holders of overlapping sets cannot deadlock; yields like :meth:`hold`."""
        from lab.device import device_key

        with contextlib.ExitStack() as stack:
            for device in sorted({device_key(d) for d in devices}):
                if not stack.enter_context(self.hold(device, label, should_stop=should_stop, on_wait=on_wait,
                                                     poll=poll)):
                    yield False
                    return
            yield True

    @contextmanager
    def hold(self, device: str, label: str = "a run", *, should_stop=None, on_wait=None, poll: float = 0.2):
        """Hold ``device`` for the block; wait (polling ``should_stop``) while another run has it.

        Yields True when the device was acquired, False when ``should_stop()``
        became true while waiting (the block should then do nothing).
        ``on_wait(holder_label)`` is called once when the caller has to queue.
        """
        from lab.device import device_key

        device = device_key(device)
        lock = self._lock(device)
        acquired = lock.acquire(blocking=False)
        if not acquired:
            if on_wait is not None:
                on_wait(self.holder(device) or "another run")
            while not acquired:
                if should_stop is not None and should_stop():
                    break
                acquired = lock.acquire(timeout=poll)
        if acquired:
            with self._guard:
                self._holders[device] = label
        try:
            yield acquired
        finally:
            if acquired:
                with self._guard:
                    self._holders.pop(device, None)
                lock.release()


class DatasetCache:
    """A small thread-safe LRU of loaded datasets keyed by their spec."""

    def __init__(self, maxsize: int = 4):
        self._maxsize = maxsize
        self._guard = threading.Lock()
        self._items: collections.OrderedDict[str, object] = collections.OrderedDict()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, spec: str):
        """``lab.data.load(spec)``, loaded once per process; errors propagate (ValueError etc.)."""
        with self._guard:
            if spec in self._items:
                self._items.move_to_end(spec)
                return self._items[spec]
            loading = self._loading.setdefault(spec, threading.Lock())
        with loading:   # one loader per spec; others wait for it
            with self._guard:
                if spec in self._items:
                    return self._items[spec]
            import lab.data

            dataset = lab.data.load(spec)
            with self._guard:
                self._items[spec] = dataset
                while len(self._items) > self._maxsize:
                    self._items.popitem(last=False)
                self._loading.pop(spec, None)
            return dataset

    def clear(self):
        with self._guard:
            self._items.clear()


class Resources:
    """The process-wide shared resources (see the module docstring)."""

    def __init__(self):
        self.devices = DeviceLocks()
        self.datasets = DatasetCache()
        self._warm_guard = threading.Lock()
        self._warm_started = False

    def warm_up(self, background: bool = True) -> None:
        """Start umap's JIT warm-up once per process (``lab.projection.warm_up`` runs it in its own thread)."""
        with self._warm_guard:
            if self._warm_started and background:
                return
            self._warm_started = True
        try:
            import lab.projection as projection
        except ImportError as exc:  # a missing optional piece only costs speed later
            _log.warning("umap warm-up skipped: %s", exc)
            return
        fn = getattr(projection, "warm_up", None)
        if fn is not None:
            fn(wait=not background)

    @property
    def warm_status(self) -> str:
        """"done", "running", "not started" (for the status line)."""
        if not self._warm_started:
            return "not started"
        try:
            import lab.projection as projection
        except ImportError:
            return "unavailable"
        return "done" if getattr(projection, "is_warm", lambda: True)() else "running"


_SHARED = Resources()


def shared() -> Resources:
    """The one :class:`Resources` of this server process."""
    return _SHARED


def warm_up(background: bool = True) -> None:
    """Start the process-wide umap warm-up (idempotent)."""
    _SHARED.warm_up(background=background)


# ---------------------------------------------------------------------- notebooks, offline
# Panel inlines its JavaScript with ``inline=True``, but the CSS of its components stays
# ``ImportedStyleSheet(url="https://cdn.holoviz.org/panel/<version>/dist/...")`` for
# every model made after the first render (and for all of them on the ipywidgets route).
# Without a network that leaves widgets unstyled. The files are in the installed panel
# package: we send them as ``data:`` URLs instead, with the fonts and images they
# reference inlined too (a ``data:`` stylesheet cannot resolve relative URLs).

_CSS_URL = re.compile(r"""url\(\s*(['"]?)([^'")]+)\1\s*\)""")
_INLINED_ASSETS = {".woff2", ".woff", ".svg", ".png", ".gif", ".jpg", ".jpeg"}   # not .ttf/.eot: browsers pick woff2
_OFFLINE = {"on": False}
_OFFLINE_GUARD = threading.Lock()


def _dist_file(url: str) -> Path | None:
    """The installed file a Panel resource URL points at (CDN or server-relative), None if none."""
    from panel.io.resources import CDN_DIST, DIST_DIR, LOCAL_DIST

    path = url.split("?")[0].split("#")[0]
    for prefix in (CDN_DIST, LOCAL_DIST, "/" + LOCAL_DIST, "./" + LOCAL_DIST):
        if path.startswith(prefix):
            candidate = (Path(DIST_DIR) / path[len(prefix):]).resolve()
            if candidate.is_file() and Path(DIST_DIR).resolve() in candidate.parents:
                return candidate
    return None


def _data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


@functools.lru_cache(maxsize=256)
def _css_data_url(path: Path) -> str:
    css = path.read_text(encoding="utf-8")

    def inline(match: re.Match) -> str:
        ref = match.group(2).strip()
        if ref.startswith(("data:", "#", "http:", "https:")):
            return match.group(0)
        target = (path.parent / ref.split("?")[0].split("#")[0]).resolve()
        if target.suffix.lower() not in _INLINED_ASSETS or not target.is_file():
            return match.group(0)
        mime = {".woff2": "font/woff2", ".woff": "font/woff", ".svg": "image/svg+xml"}.get(
            target.suffix.lower()) or mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return f'url("{_data_url(target.read_bytes(), mime)}")'

    return _data_url(_CSS_URL.sub(inline, css).encode("utf-8"), "text/css")


def local_stylesheet_url(url: str) -> str | None:
    """A ``data:`` URL with the content of the Panel stylesheet ``url`` from the installed package.

    Returns None when ``url`` is not one of Panel's own files (it is then left alone).
    """
    if not isinstance(url, str) or url.startswith("data:"):
        return None
    path = _dist_file(url)
    return _css_data_url(path) if path is not None and path.suffix == ".css" else None


def offline_stylesheets(enable: bool = True) -> None:
    """From now on, send Panel's stylesheets to the browser as ``data:`` URLs, never CDN links (idempotent).

    Hooks the serialization of ``bokeh.models.ImportedStyleSheet`` (in :mod:`app.base._upstream_panel`): every
    document message (first render, later patches, the ipywidgets route) goes through it.
    ``enable=False`` removes the hook.
    """
    from ._upstream_panel import rewrite_stylesheet_urls

    with _OFFLINE_GUARD:
        if _OFFLINE["on"] != bool(enable):
            rewrite_stylesheet_urls(local_stylesheet_url if enable else None)
            _OFFLINE["on"] = bool(enable)


def extension(*extensions: str, comms: str | None = None, **params) -> None:
    """Set up a notebook for layerscope: ``pn.extension`` with every resource from the installed packages.

    Call it once, before showing ``LayerScope()`` or a ``LiveView``::

        import app
        app.extension()                     # JupyterLab, classic notebook
        app.extension(comms="ipywidgets")   # VS Code, Colab, Voilà: everything renders as an ipywidget

    Parameters
    ----------
    *extensions : str
        More Panel extensions to load ("tabulator" is always loaded).
    comms : str, optional
        Panel's comms ("default", "ipywidgets", "vscode", "colab"); None keeps Panel's choice.
    **params
        Passed to ``pn.extension`` (``inline`` is always True).
    """
    import holoviews as hv
    import holoviews.plotting.bokeh  # noqa: F401  (Panel then loads HoloViews' bokeh backend, inline too)
    import panel as pn

    from ._doclock import install as install_doc_locks
    from ._upstream_panel import defer_notebook_recomputes

    install_doc_locks()             # before any view is displayed (see app.base._doclock)
    defer_notebook_recomputes()     # LayerScope() shows in seconds, not a minute (app.base._upstream_panel)
    offline_stylesheets()
    hv.extension.inline = True      # a later hv.extension (e.g. `import hvplot.pandas`) must not fetch a CDN
    params["inline"] = True
    if comms is not None:
        params["comms"] = comms
    pn.extension("tabulator", *[e for e in extensions if e != "tabulator"], **params)
    from IPython import get_ipython

    if get_ipython() is not None:
        from ._css_visuals import skip_css_visuals_in_notebook

        skip_css_visuals_in_notebook()      # the plots paint without a CSS lookup per line (app.base._css_visuals)
