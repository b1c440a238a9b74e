"""Fine-tuning strategies on the seen classes, behind one interface.

A strategy decides which backbone weights train; every strategy trains a fresh
linear classifier (``head``) on the pre-logits features, except "none":

========  ===================================================================  ==========================
name      trains                                                               reference
========  ===================================================================  ==========================
none      nothing (the backbone as loaded is evaluated)                        —
linear    the head (linear probe)                                              —
full      every backbone weight + head (AdamW, lr 2e-4)                        Dyballa et al.; Gerritz et al.
layer     one block + head ("Layer FT")                                        Li, Liu et al. (NC transfer)
scl       one block + head, and a skip connection from the block's pooled      Li, Liu et al. (NC transfer)
          output (zero-padded) to the pre-logits features ("SCL FT")
========  ===================================================================  ==========================

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

More strategies plug in with :func:`register_strategy`.

The module also holds the label-noise corruption (Wang & Yang:
:func:`corrupt_labels`) and the exact, reversible layer re-initialisation used by
the contribution analysis (:func:`reinitialized`).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np
import torch
# Here, with no model on the stack: the first optimizer's import of it leaves a frame cycle pinning its callers until gc.
import torch._dynamo  # noqa: F401
from torch import nn
from torch.nn import functional as F

from lab._cancel import Cancelled
from lab.device import autocast, autocast_dtype, to_channels_last
from lab.features import pool_tap_output   # the one pooling: SCL's skip sees what extraction measures
from lab.backbones import first_tensor

__all__ = [
    "Strategy", "STRATEGIES", "register_strategy", "get_strategy", "FineTuner", "prepare",
    "resolve_block", "pool_tap_output", "combine_skip", "corrupt_labels", "reinitialized", "Cancelled",
]


@dataclass(frozen=True)
class Strategy:
    """A fine-tuning strategy.

    Attributes
    ----------
    name : str
    trains : bool
        False for "none": no head, no optimizer, no epochs.
    needs_block : bool
        Layer FT / SCL FT train one chosen block.
    skip : bool
        SCL FT: add the chosen block's pooled output to the pre-logits features.
    select : callable
        ``select(backbone, block_module) -> iterable of nn.Module`` whose parameters train
        (besides the head).
    description : str
    """

    name: str
    trains: bool
    needs_block: bool
    skip: bool
    select: Callable
    description: str = ""


STRATEGIES: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> None:
    """Add (or replace) a strategy; ``RunConfig`` accepts only names in :data:`lab.config.STRATEGIES`."""
    if not isinstance(strategy, Strategy):
        raise ValueError(f"register_strategy takes a Strategy. Got {type(strategy).__name__} instead.")
    STRATEGIES[strategy.name] = strategy


for _s in (
    Strategy("none", False, False, False, lambda bb, block: (), "evaluate the backbone as loaded"),
    Strategy("linear", True, False, False, lambda bb, block: (), "frozen backbone, train a linear head"),
    Strategy("full", True, False, False, lambda bb, block: (bb.model,), "train every weight and the head"),
    Strategy("layer", True, True, False, lambda bb, block: (block,), "train one block and the head (Layer FT)"),
    Strategy("scl", True, True, True, lambda bb, block: (block,),
             "train one block, a skip connection to the pre-logits and the head (SCL FT)"),
):
    register_strategy(_s)


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(
            f"strategy must be one of {', '.join(map(repr, STRATEGIES))}. Got {name!r} instead."
        ) from None


def resolve_block(bb, block: str | int) -> tuple[str, nn.Module]:
    """The (tap name, module) that ``block`` names: a tap name or an index into ``bb.block_modules()``.

    Raises ValueError listing the valid names and the index range.
    """
    blocks = bb.block_modules()   # [(tap, module)], input -> output
    names = [name for name, _ in blocks]
    if isinstance(block, (int, np.integer)) and not isinstance(block, bool):
        i = int(block)
        if not -len(blocks) <= i < len(blocks):
            raise ValueError(
                f"block index {i} is out of range ({-len(blocks)} to {len(blocks) - 1}) for {bb.name}; "
                f"its blocks are {', '.join(names)}."
            )
        return blocks[i]
    if isinstance(block, str) and block.lstrip("-").isdigit():
        return resolve_block(bb, int(block))
    for name, module in blocks:
        if name == block:
            return name, module
    raise ValueError(f"block {block!r} is not a trainable block of {bb.name}; choose one of {', '.join(names)} "
                     f"or an index from {-len(blocks)} to {len(blocks) - 1}.")


class _Classifier(nn.Module):
    """backbone (pre-logits) [+ zero-padded pooled block output] -> linear head.

    The block output is captured by a forward hook registered only while this
    module's own forward runs, so feature extraction elsewhere is unaffected.
    """

    def __init__(self, bb, head: nn.Linear, skip_tap=None, skip_module: nn.Module | None = None):
        super().__init__()
        self.backbone = bb.model
        self.head = head
        self._pre_logits = bb.pre_logits
        self.skip_tap = skip_tap
        # Not registered as a submodule: the block already belongs to ``backbone`` (no duplicate
        # entries in state_dict / parameters).
        self._skip = [skip_module] if skip_module is not None else []
        self._captured: torch.Tensor | None = None

    @property
    def skip_module(self) -> nn.Module | None:
        return self._skip[0] if self._skip else None

    def _capture(self, module, args, output):
        self._captured = first_tensor(output)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """What the head sees: (N, D) pre-logits, plus the SCL skip when enabled."""
        if self.skip_module is None:
            return self._pre_logits(x)                                                  # (N, D)
        handle = self.skip_module.register_forward_hook(self._capture)
        try:
            pre = self._pre_logits(x)                                                   # (N, D)
            skip = self._captured
        finally:
            handle.remove()
            self._captured = None
        return combine_skip(pre, pool_tap_output(skip, self.skip_tap))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))                                              # (N, K)


def combine_skip(pre_logits: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """SCL feature: pre-logits (N, D) + block features (N, C) zero-padded to D channels (C <= D)."""
    d, c = pre_logits.shape[1], block.shape[1]
    if c > d:
        raise ValueError(f"the SCL skip needs the block's width ({c}) to be at most the pre-logits width ({d}).")
    if c < d:
        block = F.pad(block, (0, d - c))                                                # (N, D)
    return pre_logits + block


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


def corrupt_labels(targets, fraction: float, n_classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Replace exactly ``round(fraction * n)`` labels by a different, uniformly drawn class.

    Wang & Yang's label-noise setting. Seeded (``numpy.random.default_rng(seed)``).

    Returns
    -------
    noisy : ndarray (n,) int64
        The training labels to use (a new array; ``targets`` is not modified).
    corrupted : ndarray (m,) int64
        Sorted indices of the corrupted samples, m = round(fraction * n).
    """
    clean = np.asarray(targets, dtype=np.int64)
    n = clean.shape[0]
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be between 0.0 and 1.0. Got {fraction!r} instead.")
    m = int(round(fraction * n))
    noisy = clean.copy()
    if m == 0:
        return noisy, np.zeros(0, dtype=np.int64)
    if n_classes < 2:
        raise ValueError(f"label noise needs at least 2 classes. Got {n_classes}.")
    rng = np.random.default_rng(seed)
    corrupted = np.sort(rng.choice(n, size=m, replace=False)).astype(np.int64)
    shift = rng.integers(1, n_classes, size=m)                  # never 0: the label always changes
    noisy[corrupted] = (clean[corrupted] + shift) % n_classes
    return noisy, corrupted


@contextlib.contextmanager
def reinitialized(module: nn.Module, initial_state: dict[str, torch.Tensor]) -> Iterator[nn.Module]:
    """Temporarily set ``module``'s parameters and buffers to ``initial_state``; restore exactly after.

    ``initial_state`` is ``module.state_dict()`` as captured at epoch 0. Values are
    copied in place (tensor identities, and so optimizer references, are kept), and
    the current values are restored bit for bit in ``finally``.
    """
    current = module.state_dict()
    missing = set(current) - set(initial_state)
    if missing:
        raise ValueError(f"initial_state lacks {sorted(missing)[:3]} of this module; capture it with "
                         f"module.state_dict() at epoch 0.")
    saved = {k: v.detach().clone() for k, v in current.items()}
    try:
        with torch.no_grad():
            for k, v in current.items():
                v.copy_(initial_state[k].to(v.device, v.dtype))
        yield module
    finally:
        with torch.no_grad():
            for k, v in current.items():
                v.copy_(saved[k])
