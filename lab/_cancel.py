"""The one cancellation exception of layerscope (``lab.Cancelled``).

Torch-free and dependency-free, so that every layer can raise it: feature extraction
and fine-tuning raise it when their ``should_stop()`` turns true, and the run engine
when its :class:`lab.runs.CancelToken` is cancelled.
"""
from __future__ import annotations

__all__ = ["Cancelled"]


class Cancelled(Exception):
    """Work was stopped on request (``should_stop()`` returned True or a cancel token was set)."""
