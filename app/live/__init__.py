"""The live view: one run watched epoch by epoch, and the Run/Stop control that starts it.

:class:`LiveView` draws a run's events (metric curves, heatmaps, the verdict, the embedding explorer
at any layer) from its event model (``_model``); its ``RunPlots`` (``_plots``) owns the plots and the streams
that feed them, ``_streams`` says what each stream carries,
``_status`` writes the status line and messages, ``_picker`` chooses the explorer's layer and epoch.
:class:`RunControl` (``run_controls``) turns the Choose form's config into a run in a worker thread and
hands its events to a LiveView. :class:`WatchControl` (``watch_control``) has a LiveView follow a run that
another process writes (``LiveView.follow``, through ``_follow`` and :mod:`lab.runs.follow`).
"""
from app.base import lazy_exports

__all__ = ["LiveView", "RunControl", "WatchControl"]
__getattr__, __dir__ = lazy_exports(__name__, {"LiveView": ".view:LiveView", "RunControl": ".run_controls:RunControl",
                                               "WatchControl": ".watch_control:WatchControl"})
