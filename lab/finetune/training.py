"""Training one strategy on one backbone: :class:`FineTuner` (built by :func:`prepare`).

In every strategy the backbone runs in train mode while training, so batch-norm
statistics update on the downstream (seen-class) data even where weights are
frozen, as the neural-collapse transfer paper does for all methods. Training batches
are pixels; :meth:`FineTuner.train_step` applies the backbone's own normalization
(``bb.normalize``), the same one :func:`lab.features.extract` applies. Frozen
weights are excluded from the optimizer (``requires_grad=False``), so they stay
bit-identical. Training is seeded and deterministic on CPU.

Mixed precision as in extraction (:func:`lab.device.autocast_dtype`): by default bfloat16 autocast
on CUDA, float16 with a loss scaler (``torch.amp.GradScaler``) on GPUs without bfloat16, and
float32 on CPU and MPS, so CPU training is bit-identical to training without autocast. The
weights and the optimizer state stay float32 in every case. CNNs train channels_last on CUDA.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

import torch
# Here, with no model on the stack: the first optimizer's import of it leaves a frame cycle pinning its callers until gc.
import torch._dynamo  # noqa: F401
from torch import nn
from torch.nn import functional as F

from lab._cancel import Cancelled
from lab.catalogue import Strategy
from lab.device import autocast, autocast_dtype, to_channels_last
from lab.finetune.strategies import _Classifier, combine_skip, get_strategy, resolve_block

__all__ = ["FineTuner", "prepare"]


class FineTuner:
    """One strategy applied to one backbone: the classifier, the optimizer, training and prediction.

    Build it with :func:`prepare`. Attributes: ``strategy`` (:class:`Strategy`),
    ``model`` (backbone + head), ``head``, ``block`` (tap name or None),
    ``n_trainable``, ``n_total``, ``trainable_fraction``.
    """

    def __init__(self, bb, strategy: Strategy, n_classes: int, *, block=None, lr: float | None = None,
                 weight_decay: float = 0.0, optimizer: str = "adamw", seed: int = 0, precision: str = "auto"):
        self.bb = bb
        self.strategy = strategy
        self.n_classes = int(n_classes)
        self.block = None
        block_module = None
        if strategy.needs_block:
            if block is None:
                raise ValueError(f"strategy {strategy.name!r} needs a block (tap name or index).")
            self.block, block_module = resolve_block(bb, block)
        device = bb.device
        # The head is initialised from the run's seed, independently of how the backbone was built.
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        head = nn.Linear(bb.num_features, max(self.n_classes, 1)).to(device)
        torch.random.set_rng_state(gen_state)
        skip_tap = bb.tap(self.block) if strategy.skip else None
        if skip_tap is not None and skip_tap.dim > bb.num_features:
            raise ValueError(
                f"SCL FT adds block {self.block!r} ({skip_tap.dim} channels) to the pre-logits features "
                f"({bb.num_features}), which needs the block to be no wider; choose an earlier block."
            )
        self.model = _Classifier(bb, head, skip_tap, block_module if strategy.skip else None)
        self.head = head
        # Freeze everything, then unfreeze what the strategy trains.
        for p in bb.model.parameters():
            p.requires_grad_(False)
        for module in strategy.select(bb, block_module):
            for p in module.parameters():
                p.requires_grad_(True)
        for p in head.parameters():
            p.requires_grad_(strategy.trains)
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.n_trainable = sum(p.numel() for p in self.trainable)
        self.n_total = sum(p.numel() for p in self.model.parameters())
        self.optimizer = None
        if strategy.trains:
            if lr is None:
                raise ValueError("lr is required for a training strategy.")
            if optimizer == "adamw":
                self.optimizer = torch.optim.AdamW(self.trainable, lr=lr, weight_decay=weight_decay)
            elif optimizer == "sgd":
                self.optimizer = torch.optim.SGD(self.trainable, lr=lr, momentum=0.9, weight_decay=weight_decay)
            else:
                raise ValueError(f"optimizer must be 'adamw' or 'sgd'. Got {optimizer!r} instead.")

        self.scheduler = None
        self.amp_dtype = autocast_dtype(device, precision)     # None: float32
        # float16's narrow range underflows small gradients: scale the loss (bfloat16 needs no scaler).
        self.scaler = (torch.amp.GradScaler(device.type)
                       if self.amp_dtype == torch.float16 and self.optimizer is not None else None)
        self.channels_last = to_channels_last(bb)

    def schedule(self, kind: str, total_steps: int) -> None:
        """Set the learning-rate schedule over ``total_steps`` optimizer steps (all epochs):
        "cosine" (linear warm-up over the first 5 %, cosine decay to 0 at the last step) or
        "constant". :meth:`train_step` advances it."""
        if self.optimizer is None or kind == "constant":
            self.scheduler = None
            return
        if kind != "cosine":
            raise ValueError(f"lr_schedule must be 'cosine' or 'constant'. Got {kind!r} instead.")
        total = max(int(total_steps), 1)
        warm = max(1, total // 20)

        def factor(step: int) -> float:
            if step < warm:
                return (step + 1) / warm
            return 0.5 * (1 + math.cos(math.pi * min(step - warm, total - warm) / max(total - warm, 1)))

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    @property
    def trainable_fraction(self) -> float:
        """Trained parameters / all parameters of backbone + head (0 for "none")."""
        return self.n_trainable / self.n_total if self.n_total else 0.0

    def trainable_names(self) -> list[str]:
        """Names (in ``model``) of the parameters that train."""
        return [n for n, p in self.model.named_parameters() if p.requires_grad]

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
        """One optimizer step on a batch of pixels ``x`` (uint8, or float in [0, 1], as lab
        datasets yield them; the backbone's normalization is applied here) and labels ``y``;
        returns (mean loss, number correct).

        Call with the model in train mode (:meth:`train_epoch` and the run engine do).
        The forward runs under the fine-tuner's autocast (``amp_dtype``; the loss in float32).
        Raises ValueError when the loss is not finite (training diverged), before the step.
        """
        loss, stats = self._forward(x, y)
        value, right = stats.tolist()             # one host sync for both numbers
        self._check_finite(value)
        self._update(loss)
        return value, int(right)

    def _forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss of a batch, and (2,) [loss, number correct] on the device (no host sync)."""
        if self.optimizer is None:
            raise ValueError(f"strategy {self.strategy.name!r} does not train.")
        device = self.bb.device
        x = self.bb.normalize(x.to(device, non_blocking=True))                          # (B, C, H, W) model input
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        with autocast(device, self.amp_dtype):
            logits = self.model(x)                                                      # (B, K)
        loss = F.cross_entropy(logits.float(), y)
        stats = torch.stack([loss.detach(), (logits.detach().argmax(1) == y).sum().to(loss.dtype)])   # (2,)
        return loss, stats

    def _check_finite(self, value: float) -> None:
        if not math.isfinite(value):
            raise ValueError(
                f"training diverged: the loss became {value}. Lower lr "
                f"(now {self.optimizer.param_groups[0]['lr']:g}) or check the data."
            )

    def _update(self, loss: torch.Tensor) -> None:
        """Backward, optimizer (and loss-scaler, scheduler) step."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)      # skipped when the scaled gradients overflowed
            self.scaler.update()
        if self.scheduler is not None:
            self.scheduler.step()

    def train_epoch(self, batches: Iterable, *, should_stop: Callable[[], bool] | None = None,
                    progress: Callable[[int, int | None], None] | None = None) -> dict:
        """One pass over ``batches`` of (x, y); returns {"loss", "accuracy", "n"} (means over samples).

        The whole backbone is in train mode (batch-norm statistics update on this
        data even in frozen blocks).

        Each batch's loss is read one step late: after the next batch's step is launched, from a
        copy started as soon as the loss was computed. On a GPU that read then never waits for the
        device to drain (reading it at once would leave the GPU idle while the host prepares the next
        batch); the sums are the same, in the same order, as :meth:`train_step`'s. A diverging loss
        therefore fails one step after it appears (the model is unusable by then either way).

        Parameters
        ----------
        batches : iterable of (x (B, C, H, W), y (B,))
        should_stop : callable, optional
            Checked before every batch; when it returns True, :class:`lab.Cancelled` is raised.
        progress : callable, optional
            ``progress(done, total)`` once a batch's loss is read, in batches (``total`` is None when
            ``batches`` has no length). A batch whose loss is not finite is not reported, so the last
            ``done`` is the index of the failing batch.
        """
        if self.optimizer is None:
            raise ValueError(f"strategy {self.strategy.name!r} does not train.")
        total = len(batches) if hasattr(batches, "__len__") else None
        self.model.train()
        total_loss, correct, n = 0.0, 0, 0
        pending = None                 # (batch index, batch size, host copy of its stats, copy done event)

        def settle() -> None:
            nonlocal total_loss, correct, n, pending
            i, size, host, copied = pending
            pending = None
            if copied is not None:
                copied.synchronize()           # this batch's copy only, not the steps queued after it
            value, right = host.tolist()
            self._check_finite(value)
            total_loss += value * size
            correct += int(right)
            n += size
            if progress is not None:
                progress(i + 1, total)

        try:
            for i, (x, y) in enumerate(batches):
                if should_stop is not None and should_stop():
                    if pending is not None:
                        settle()
                    raise Cancelled(f"training cancelled after {i} of {total if total is not None else '?'} batches")
                loss, stats = self._forward(x, y)
                host, copied = _to_host(stats)
                self._update(loss)
                del loss
                if pending is not None:
                    settle()
                pending = (i, len(y), host, copied)
            if pending is not None:
                settle()
        finally:
            self.model.eval()
        if n == 0:
            raise ValueError("the training data yielded no batches; check the seen classes and held-out fraction.")
        return {"loss": total_loss / n, "accuracy": correct / n, "n": n}

    def logits_from_features(self, pre_logits: torch.Tensor, block: torch.Tensor | None = None) -> torch.Tensor:
        """Head logits (N, K) from extracted pre-logits (and, for SCL, the pooled block features)."""
        feats = pre_logits
        if self.strategy.skip:
            if block is None:
                raise ValueError("SCL needs the block's pooled features to compute logits.")
            feats = combine_skip(pre_logits, block)
        with torch.no_grad():
            return self.head(feats.to(self.head.weight.device, self.head.weight.dtype))

    def score(self, logits: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """(mean cross-entropy loss, accuracy) of logits (N, K) against labels (N,)."""
        y = y.to(logits.device).long()
        loss = float(F.cross_entropy(logits, y))
        acc = float((logits.argmax(1) == y).float().mean())
        return loss, acc

    def close(self) -> None:
        """Release references (hooks are only registered during forward, so nothing else to undo)."""
        self.model._skip = []


def _to_host(values: torch.Tensor) -> tuple[torch.Tensor, "torch.cuda.Event | None"]:
    """A host copy of ``values`` and, on CUDA, the event that marks it done (the copy runs in the
    background into pinned memory); on other devices the copy is immediate and the event None."""
    if not values.is_cuda:
        return values.to("cpu"), None
    host = values.to("cpu", non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    return host, copied


def prepare(bb, n_classes: int, strategy: str = "full", *, block=None, lr: float | None = None,
            weight_decay: float = 0.0, optimizer: str = "adamw", seed: int = 0,
            precision: str = "auto") -> FineTuner:
    """Set up ``strategy`` on backbone ``bb`` for ``n_classes`` seen classes.

    Freezes what the strategy does not train, creates the head (seeded) and the
    optimizer. ``precision`` is the training forward's autocast (:func:`lab.device.autocast_dtype`:
    "auto" = bfloat16 or float16 on CUDA, float32 elsewhere). Returns a :class:`FineTuner`.
    """
    return FineTuner(bb, get_strategy(strategy), n_classes, block=block, lr=lr,
                     weight_decay=weight_decay, optimizer=optimizer, seed=seed, precision=precision)
