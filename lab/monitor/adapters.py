"""Callbacks that call :meth:`lab.Monitor.evaluate` from a trainer that owns the loop.

- :class:`HFTrainerCallback`: Hugging Face ``transformers.Trainer``;
- :class:`LightningCallback`: PyTorch Lightning (``lightning`` or ``pytorch_lightning``, imported when the
  callback is built; ``pip install "layerscope[trainers]"`` installs Lightning and accelerate).

Both take the same arguments, ``(monitor, every=1, unit="epoch")``, and follow the same schedule: an evaluation before training (epoch or step 0), then one every ``every`` epochs (the run's epoch is the
trainer's epoch number, 1 after the first epoch) or every ``every`` optimizer steps (``unit="step"``: the run's
epoch is the global step), and one at the end of training when the last epoch or step was not a multiple of
``every``, so the final model is always measured. A number is evaluated once (gradient accumulation calls the batch
hooks several times per optimizer step), and only on the main process (global rank 0). The run's meta records the
axis: ``axis`` is ``"epoch"`` or ``"step"``, and ``callback`` holds the callback's name, ``every`` and ``unit``.

::

    with lab.Monitor(model, unseen=(images, labels)) as mon:
        Trainer(model=model, args=args, train_dataset=train, callbacks=[HFTrainerCallback(mon)]).train()
"""
from __future__ import annotations

import math
import os

from lab.monitor.monitor import UNITS, Monitor, MonitorClosedError

__all__ = ["HFTrainerCallback", "LightningCallback"]


def _check_monitor(monitor, who: str) -> Monitor:
    if not isinstance(monitor, Monitor):
        raise ValueError(f"{who}: monitor must be a lab.Monitor (opened with `with lab.Monitor(...) as mon:`). "
                         f"Got {type(monitor).__name__} instead.")
    if monitor.status == "closed":
        raise MonitorClosedError(f"{who}: the monitor's with-block already closed (run {monitor.run_id}); build the "
                                 f"callback inside `with lab.Monitor(model, unseen=...) as mon:` and train there.")
    return monitor


def _schedule(every, unit, who: str) -> tuple[int, str]:
    """``(every, unit)`` checked: every a positive int, unit "epoch" or "step"."""
    if unit not in UNITS:
        raise ValueError(f"{who}: unit must be 'epoch' or 'step' (optimizer steps). Got {unit!r} instead.")
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"{who}: every must be a positive int, the number of epochs or optimizer steps between "
                         f"evaluations (every=N, unit='epoch' or unit='step'). Got {every!r} instead.")
    return every, unit


class _Schedule:
    """When to evaluate: the one rule both callbacks follow (see the module's docstring)."""

    def __init__(self, monitor: Monitor, every: int, unit: str, who: str):
        self.monitor, self.every, self.unit, self.who = monitor, every, unit, who
        monitor._use_unit(unit)             # the run's axis, in its meta before the first evaluation
        self.last: int | None = None        # the last number evaluated
        self.position = 0                   # the trainer's epoch or step now
        self.pid = os.getpid()

    def begin(self, epoch: int, step: int, main: bool) -> None:
        self.position = epoch if self.unit == "epoch" else step
        if not main:
            return
        if os.getpid() != self.pid:
            raise RuntimeError(f"{self.who}: the trainer runs rank 0 in process {os.getpid()}, not in the process "
                               f"that opened the monitor ({self.pid}), so its evaluations would be lost (a forked "
                               f"or spawned launcher, e.g. Lightning's strategy='ddp_notebook'); use a launcher that "
                               f"trains rank 0 in this process: Lightning's strategy='ddp', torchrun or accelerate "
                               f"launch.")
        self._evaluate(self.position)
        self.monitor.ctx.recorder.update_meta(axis=self.unit, callback={"name": self.who, "every": self.every,
                                                                        "unit": self.unit})

    def epoch_end(self, epoch: int, main: bool) -> None:
        if self.unit == "epoch":
            self._reach(epoch, main)

    def step_end(self, step: int, main: bool) -> None:
        if self.unit == "step":
            self._reach(step, main)

    def end(self, main: bool) -> None:
        if main and (self.last is None or self.position > self.last):
            self._evaluate(self.position)           # the final model, off the every-N grid

    def _reach(self, n: int, main: bool) -> None:
        self.position = max(self.position, n)
        if main and n % self.every == 0 and (self.last is None or n > self.last):
            self._evaluate(n)

    def _evaluate(self, n: int) -> None:
        self.monitor.evaluate(n)
        self.last = n


def _hf_base():
    try:
        from transformers import TrainerCallback
    except ImportError as exc:              # pragma: no cover - transformers is a dependency of lab
        raise ImportError("HFTrainerCallback needs the transformers package (pip install transformers).") from exc
    return TrainerCallback


def _hf_epoch(state) -> int:
    """The trainer's epoch as an int: ``state.epoch`` is fractional (1.0 after the first epoch, 1.5 when
    ``max_steps`` stopped it halfway through the second: that partial epoch counts as epoch 2)."""
    return int(math.ceil(round(float(state.epoch or 0), 6)))


class HFTrainerCallback(_hf_base()):
    """Evaluate a :class:`lab.Monitor` from a ``transformers.Trainer``.

    Parameters
    ----------
    monitor : lab.Monitor
        The monitor of the trainer's model (the same module object the trainer trains), inside its with-block.
    every : int
        Evaluate every ``every`` epochs or optimizer steps, after one evaluation before training.
    unit : {"epoch", "step"}
        "epoch" (default): the run's epochs are the trainer's epochs (``ceil(state.epoch)``); "step": the run's
        epochs are ``state.global_step`` (optimizer steps, not gradient accumulation's micro-batches).

    It evaluates on the main process only (``state.is_world_process_zero``), and once more when training ends
    off the every-N grid, so the final model is measured.
    """

    def __init__(self, monitor: Monitor, every: int = 1, unit: str = "epoch"):
        self.every, self.unit = _schedule(every, unit, "HFTrainerCallback")
        self.monitor = _check_monitor(monitor, "HFTrainerCallback")
        self._schedule = _Schedule(self.monitor, self.every, self.unit, "HFTrainerCallback")

    def on_train_begin(self, args, state, control, **kwargs):
        epoch = int(math.floor(round(float(state.epoch or 0), 6)))
        self._schedule.begin(epoch, int(state.global_step), bool(state.is_world_process_zero))
        return control

    def on_step_end(self, args, state, control, **kwargs):
        self._schedule.step_end(int(state.global_step), bool(state.is_world_process_zero))
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        self._schedule.epoch_end(max(1, _hf_epoch(state)), bool(state.is_world_process_zero))
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self._schedule.end(bool(state.is_world_process_zero))
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


def LightningCallback(monitor: Monitor, every: int = 1, unit: str = "epoch"):
    """A PyTorch Lightning ``Callback`` that evaluates ``monitor`` before training and every ``every`` epochs
    or optimizer steps, on global rank 0 (``trainer.is_global_zero``).

    Parameters
    ----------
    monitor : lab.Monitor
        The monitor of the LightningModule's network (the module object it trains), inside its with-block.
    every : int
        Evaluate every ``every`` epochs or optimizer steps, after one evaluation before training.
    unit : {"epoch", "step"}
        "epoch" (default): the run's epochs are ``trainer.current_epoch + 1`` after each training epoch;
        "step": the run's epochs are ``trainer.global_step`` (optimizer steps: with ``accumulate_grad_batches``
        a step is evaluated once, however many batches it took).

    Training that ends off the every-N grid is evaluated once more at its last epoch or step, so the final model
    is measured. Under ``strategy="ddp"`` rank 0 is this process; ``"ddp_spawn"`` would pickle the callback into
    new processes, which is refused with a TypeError that says so. Raises ImportError naming the package to
    install when neither ``lightning`` nor ``pytorch_lightning`` is installed.
    """
    every, unit = _schedule(every, unit, "LightningCallback")
    _check_monitor(monitor, "LightningCallback")
    base = _lightning_base()
    if base is None:
        raise ImportError('LightningCallback needs PyTorch Lightning: pip install "layerscope[trainers]" '
                          '(or pip install lightning).')

    class LabMonitorCallback(base):
        def __init__(self):
            self.monitor, self.every, self.unit = monitor, every, unit
            self._schedule = _Schedule(monitor, every, unit, "LightningCallback")

        def on_train_start(self, trainer, pl_module):
            self._schedule.begin(int(trainer.current_epoch), int(trainer.global_step), bool(trainer.is_global_zero))

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self._schedule.step_end(int(trainer.global_step), bool(trainer.is_global_zero))

        def on_train_epoch_end(self, trainer, pl_module):
            self._schedule.epoch_end(int(trainer.current_epoch) + 1, bool(trainer.is_global_zero))

        def on_train_end(self, trainer, pl_module):
            self._schedule.end(bool(trainer.is_global_zero))

        def __reduce__(self):
            # ddp_spawn pickles the callbacks into new processes; the monitor's run lives in this one
            raise TypeError("LightningCallback cannot be sent to other processes (strategy='ddp_spawn' starts "
                            "rank 0 in a new process, away from the monitor's run): use "
                            "strategy='ddp', which trains rank 0 in this process, and open the monitor with "
                            "store=False on the other ranks (see docs/guide/monitor.md).")

    LabMonitorCallback.__qualname__ = "LightningCallback"
    return LabMonitorCallback()
