"""How a run recorded by :class:`lab.Monitor` is recognised, without importing torch (the store, the CLI and
the app read it)."""
from __future__ import annotations

__all__ = ["MONITORED", "is_monitored"]

MONITORED = "monitor:"
"""How the dataset and backbone of a run recorded by :class:`lab.Monitor` begin (``"monitor:MLP"``)."""


def is_monitored(config) -> bool:
    """Whether a run's config (a :class:`lab.RunConfig` or its dict) was recorded by :class:`lab.Monitor`: the
    researcher's loop trained the model (its strategy reads "none": lab trained nothing) and numbered its
    evaluations (epochs or steps), so the run has no planned number of epochs."""
    backbone = config.get("backbone") if isinstance(config, dict) else getattr(config, "backbone", None)
    return isinstance(backbone, str) and backbone.startswith(MONITORED)
