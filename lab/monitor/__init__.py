"""Attach layerscope to any training loop: :class:`Monitor`, and callbacks for trainers that own the loop.

::

    with lab.Monitor(model, unseen=(images, labels)) as mon:
        for epoch in range(3):
            train_one_epoch(model)
            mon.evaluate(epoch)

:class:`HFTrainerCallback` (Hugging Face ``transformers.Trainer``) and :class:`LightningCallback` (PyTorch
Lightning, when installed) call ``evaluate`` for a loop they run; they load on first use, so importing
``lab.monitor`` imports neither library. How a monitored run is recognised (:func:`is_monitored`) lives here,
torch-free: the store, the CLI and the app read it.
"""
from __future__ import annotations

from lab.lazy import lazy_exports

__all__ = ["Monitor", "MonitorClosedError", "HFTrainerCallback", "LightningCallback", "MONITORED", "is_monitored"]

MONITORED = "monitor:"
"""How the dataset and backbone of a run recorded by :class:`Monitor` begin (``"monitor:MLP"``)."""


def is_monitored(config) -> bool:
    """Whether a run's config (a :class:`lab.RunConfig` or its dict) was recorded by :class:`Monitor`: the
    researcher's loop trained the model (its strategy reads "none": lab trained nothing) and numbered its
    evaluations (epochs or steps), so the run has no planned number of epochs."""
    backbone = config.get("backbone") if isinstance(config, dict) else getattr(config, "backbone", None)
    return isinstance(backbone, str) and backbone.startswith(MONITORED)


__getattr__, __dir__ = lazy_exports(__name__, {
    "Monitor": ".monitor:Monitor",
    "MonitorClosedError": ".monitor:MonitorClosedError",
    "HFTrainerCallback": ".adapters:HFTrainerCallback",
    "LightningCallback": ".adapters:LightningCallback",
})
