"""Attach layerscope to any training loop: :class:`Monitor`, and callbacks for trainers that own the loop.

::

    with lab.Monitor(model, unseen=(images, labels)) as mon:
        for epoch in range(3):
            train_one_epoch(model)
            mon.evaluate(epoch)

:class:`HFTrainerCallback` (Hugging Face ``transformers.Trainer``) and :class:`LightningCallback` (PyTorch
Lightning, when installed) call ``evaluate`` for a loop they run; they load on first use, so importing
``lab.monitor`` imports neither library.
"""
from __future__ import annotations

from lab.lazy import lazy_exports

__all__ = ["Monitor", "MonitorClosedError", "HFTrainerCallback", "LightningCallback"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Monitor": ".monitor:Monitor",
    "MonitorClosedError": ".monitor:MonitorClosedError",
    "HFTrainerCallback": ".adapters:HFTrainerCallback",
    "LightningCallback": ".adapters:LightningCallback",
})
