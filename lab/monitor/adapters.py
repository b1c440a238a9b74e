"""Callbacks that call :meth:`lab.Monitor.evaluate` from a trainer that owns the loop.

- :class:`HFTrainerCallback`: Hugging Face ``transformers.Trainer``; evaluates before training (epoch 0) and
  after every epoch (``every="epoch"``; the run's epoch is the trainer's epoch) or every ``every`` optimizer
  steps (the run's epoch axis then counts steps), on the main process only (``state.is_world_process_zero``);
- :class:`LightningCallback`: PyTorch Lightning (``lightning`` or ``pytorch_lightning``, imported when the
  callback is built; neither is a dependency of lab); evaluates before training and after every training epoch,
  on global rank 0.

Both take the monitor of an open with-block::

    with lab.Monitor(model, unseen=(images, labels)) as mon:
        Trainer(model=model, args=args, train_dataset=train, callbacks=[HFTrainerCallback(mon)]).train()
"""
from __future__ import annotations

import math

from lab.monitor.monitor import Monitor

__all__ = ["HFTrainerCallback", "LightningCallback"]


def _check_monitor(monitor) -> Monitor:
    if not isinstance(monitor, Monitor):
        raise ValueError(f"monitor must be a lab.Monitor (opened with `with lab.Monitor(...) as mon:`). "
                         f"Got {type(monitor).__name__} instead.")
    return monitor


def _check_every(every):
    if every == "epoch":
        return every
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be 'epoch' or a positive number of steps. Got {every!r} instead.")
    return every


def _hf_base():
    try:
        from transformers import TrainerCallback
    except ImportError as exc:              # pragma: no cover - transformers is a dependency of lab
        raise ImportError("HFTrainerCallback needs the transformers package (pip install transformers).") from exc
    return TrainerCallback


class HFTrainerCallback(_hf_base()):
    """Evaluate a :class:`lab.Monitor` from a ``transformers.Trainer``.

    Parameters
    ----------
    monitor : lab.Monitor
        The monitor of the trainer's model (the same module object the trainer trains).
    every : "epoch" or int
        "epoch": at the start of training (epoch 0) and at the end of every epoch (epoch 1, 2, ...);
        an int N: at the start (step 0) and every N optimizer steps (the run's epochs are steps).
    """

    def __init__(self, monitor: Monitor, every="epoch"):
        self.monitor = _check_monitor(monitor)
        self.every = _check_every(every)

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.monitor.evaluate(int(state.global_step) if self.every != "epoch" else 0)
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.every == "epoch" and state.is_world_process_zero:
            self.monitor.evaluate(max(1, int(math.ceil(round(float(state.epoch or 0), 6)))))
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.every != "epoch" and state.is_world_process_zero and state.global_step % self.every == 0:
            self.monitor.evaluate(int(state.global_step))
        return control


def _lightning_base():
    try:
        import lightning.pytorch as pl
    except ImportError:
        try:
            import pytorch_lightning as pl
        except ImportError:
            return None
    return pl.Callback


def LightningCallback(monitor: Monitor, every: str = "epoch"):
    """A PyTorch Lightning ``Callback`` that evaluates ``monitor`` before training and after every training epoch
    (the run's epochs are Lightning's ``current_epoch + 1``), on global rank 0.

    Raises ImportError naming the package to install when neither ``lightning`` nor ``pytorch_lightning`` is
    installed.
    """
    _check_monitor(monitor)
    if every != "epoch":
        raise ValueError(f"LightningCallback evaluates every epoch; every must be 'epoch'. Got {every!r} instead.")
    base = _lightning_base()
    if base is None:
        raise ImportError("LightningCallback needs PyTorch Lightning: pip install lightning (or pytorch_lightning).")

    class _Callback(base):
        def on_train_start(self, trainer, pl_module):
            if trainer.is_global_zero:
                monitor.evaluate(0)

        def on_train_epoch_end(self, trainer, pl_module):
            if trainer.is_global_zero:
                monitor.evaluate(int(trainer.current_epoch) + 1)

    callback = _Callback()
    callback.monitor = monitor
    return callback
