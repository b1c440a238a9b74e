"""Multi-layer feature extraction: every requested layer in one forward pass per batch.

::

    bb = lab.backbones.load("resnet18", in_chans=1)
    feats = lab.features.extract(bb, ds, layers=bb.layers)   # {layer: Tensor (N, d)}, feats.labels

Images are pixels (uint8, or float in [0, 1] as lab datasets yield them) with 1 or
``bb.in_chans`` channels; :meth:`Backbone.normalize` turns every batch into the model's
input (its own mean/std, gray -> RGB where the model takes RGB). ``normalize=False``
passes batches that are model input already.

Each tap's output is pooled *inside* its forward hook, so only the pooled (N, d)
results are kept, never the full feature maps of all layers (METRICS.md, "Layer
features"):

- feature maps (N, C, H, W), or (N, H, W, C) for Swin: global average pooling -> (N, C);
- tokens (N, T, D): the class token where the model has one (ViT blocks), otherwise
  the mean over the non-prefix tokens (Swin-like, PVT-v2, and ViT's embedding);
- ``pooling="mean"``: always the mean (of non-prefix tokens; spatial for maps);
- ``pooling="flatten"``: the whole output flattened (NCHW order for maps), with a
  warning when the result exceeds :data:`FLATTEN_BUDGET_BYTES`;
- a module tap (any module of the model, ``layers=["blocks.7.attn"]``: :meth:`Backbone.resolve_layers`)
  is pooled by the same rules, its class token taken where the catalogue tap around it takes one;
- ``"pre_logits"`` is always ``model.forward_head(model.forward_features(x), pre_logits=True)``, the head
  run in float32 outside autocast on the float32 copy of ``forward_features``' output: like the
  hooks' pooling, so a tap whose pooled features *are* the pre-logits (a ResNet's last block) stays
  identical to them under bfloat16 (a bfloat16 head would round the pooled mean to 8 bits).

Hooks are registered in a context manager and removed in ``finally``, also when
the forward fails or the caller cancels. The model runs in eval mode under
``torch.no_grad()``, with autocast as ``precision`` says (by default bfloat16 on CUDA, or float16
where the GPU has no bfloat16; float32 on CPU and MPS: :func:`lab.device.autocast_dtype`); its
previous train/eval flags are restored afterwards. CNNs run channels_last on CUDA
(:func:`lab.device.channels_last`). A lab dataset is read through its ``eval_loader`` with pinned
batches (and worker processes for a memory-mapped folder) when the backbone is on CUDA; the
device running out of memory raises :class:`lab.device.DeviceOutOfMemoryError` naming the batch size.
The features stay on the backbone's device: the caller decides when they leave it. When ``pre_logits`` is not requested, the forward stops right
after the last requested tap. On CPU a batch is forwarded in passes of at most 64 images.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Callable, Iterable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from lab._cancel import Cancelled
from lab.backbones import PRE_LOGITS, Backbone, Tap, eval_mode, first_tensor
from lab.device import autocast, autocast_dtype, out_of_memory_hint, to_channels_last

__all__ = ["extract", "FeatureSet", "Cancelled", "pool_tap_output", "to_numpy", "POOLINGS", "FLATTEN_BUDGET_BYTES"]

POOLINGS = ("auto", "mean", "flatten")
FLATTEN_BUDGET_BYTES = 2 * 1024**3
"""Flattened features larger than this (all requested layers together) trigger a warning."""

# Most images per forward pass on CPU. Larger passes are no faster there (resnet18 @64, 1600
# images: 2.26 s in passes of 128, 2.13 s in passes of 64), and their largest maps outgrow what
# malloc reuses between passes: at 128 images the stem's 32 MiB maps were mapped (and page-
# faulted) afresh every batch while the previous batch's other buffers stayed resident, about
# twice the memory of one pass.
_CPU_PASS = 64


def to_numpy(x, dtype=None) -> np.ndarray:
    """``x`` as a numpy array: a tensor on any device is detached and copied to the host (bfloat16, which
    numpy lacks, as float32); anything else goes through ``np.asarray``.

    The one way features, labels and layouts leave torch for numpy in ``lab`` and ``app``: ``np.asarray``
    of a tensor fails on a GPU (no host memory) and for a tensor that requires grad.

    Parameters
    ----------
    x : torch.Tensor (any device, any dtype), numpy array, or array-like
    dtype : numpy dtype, optional
        The result's dtype (``np.asarray``'s rules).
    """
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        x = x.numpy()
    return np.asarray(x, dtype=dtype)


class FeatureSet(dict):
    """``{layer: Tensor (N, d) float32}`` in the requested order, plus ``labels``.

    Attributes
    ----------
    labels : torch.LongTensor or None
        (N,) labels on the same device as the features, or None when the data had none.
    pooling : str
        The pooling that produced the features.
    """

    def __init__(self, *args, labels: torch.Tensor | None = None, pooling: str = "auto", **kwargs):
        super().__init__(*args, **kwargs)
        self.labels = labels
        self.pooling = pooling

    @property
    def layers(self) -> list[str]:
        return list(self)

    def to(self, device) -> "FeatureSet":
        """A copy with every tensor (and the labels) on ``device``."""
        labels = None if self.labels is None else self.labels.to(device)
        return FeatureSet({k: v.to(device) for k, v in self.items()}, labels=labels, pooling=self.pooling)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {tuple(v.shape)}" for k, v in self.items())
        n = None if self.labels is None else len(self.labels)
        return f"FeatureSet({{{shapes}}}, labels={n})"


class _StopForward(Exception):
    """Raised inside the last requested tap's hook to skip the rest of the network."""


def pool_tap_output(out: torch.Tensor, tap: Tap, pooling: str = "auto") -> torch.Tensor:
    """Pool one tap's raw output to (B, d): the one pooling of extraction and of SCL fine-tuning.

    See the module docstring for the rules. The reduction stays in float32 even under
    autocast; it is differentiable (SCL FT feeds the pooled block to the head).
    """
    if tap.kind == "map":
        if out.dim() != 4:
            raise ValueError(f"tap {tap.name!r} was catalogued as a feature map but produced shape "
                             f"{tuple(out.shape)}; expected 4-d.")
        nhwc = tap.layout == "NHWC"
        if pooling == "flatten":
            return (out.permute(0, 3, 1, 2) if nhwc else out).flatten(1)  # (B, C*H*W)
        return out.mean(dim=(1, 2) if nhwc else (2, 3), dtype=torch.float32)  # (B, C)
    if tap.kind == "tokens":
        if pooling == "flatten":
            return out.flatten(1)  # (B, T*D)
        if pooling == "auto" and tap.cls_token:
            return out[:, 0]  # (B, D) class token
        return out[:, tap.prefix_tokens:].mean(dim=1, dtype=torch.float32)  # (B, D)
    return out.flatten(1)  # (B, D)


class _Sink:
    """Writes pooled batches into per-layer (N, d) float32 buffers on the device."""

    def __init__(self, names: list[str], total: int | None, device: torch.device, pooling: str):
        self.names, self.total, self.device, self.pooling = names, total, device, pooling
        self.buffers: dict[str, torch.Tensor] = {}
        self.chunks: dict[str, list[torch.Tensor]] = {name: [] for name in names}
        self.offset = 0
        self._warned = False

    def put(self, name: str, pooled: torch.Tensor) -> None:
        if self.total is None:
            self.chunks[name].append(pooled.detach().to(torch.float32).clone())
            return
        self._rows(name, pooled.shape[0], pooled.shape[1]).copy_(pooled)

    def pool(self, tap: Tap, out: torch.Tensor) -> None:
        """Pool one tap's output into its rows: a feature map's mean is written straight into the buffer
        (one kernel, no temporary and no copy: a GPU forward of a small batch waits on the host, which
        pays for every extra call per tap); everything else through :func:`pool_tap_output`."""
        if self.total is None or tap.kind != "map" or self.pooling == "flatten" or out.dim() != 4:
            self.put(tap.name, pool_tap_output(out, tap, self.pooling))
            return
        nhwc = tap.layout == "NHWC"
        rows = self._rows(tap.name, out.shape[0], out.shape[3] if nhwc else out.shape[1])
        torch.mean(out, dim=(1, 2) if nhwc else (2, 3), dtype=torch.float32, out=rows)   # (B, C)

    def _rows(self, name: str, batch: int, dim: int) -> torch.Tensor:
        """The (batch, dim) rows of ``name``'s buffer for the current batch (the buffer made on first use)."""
        buf = self.buffers.get(name)
        if buf is None:
            buf = self.buffers[name] = torch.empty((self.total, dim), dtype=torch.float32, device=self.device)
            self._check_budget()
        if self.offset + batch > self.total:
            raise ValueError(f"the data yielded more than the {self.total} images its length announced; "
                             f"pass a DataLoader with a sized dataset and drop_last=False.")
        return buf[self.offset:self.offset + batch]

    def _check_budget(self) -> None:
        if self.pooling != "flatten" or self._warned:
            return
        size = sum(b.numel() for b in self.buffers.values()) * 4
        if size > FLATTEN_BUDGET_BYTES:
            self._warned = True
            warnings.warn(f"pooling='flatten' holds {size / 1024**3:.1f} GiB of features so far (budget "
                          f"{FLATTEN_BUDGET_BYTES / 1024**3:.1f} GiB); use pooling='auto', fewer layers or "
                          f"fewer images.", ResourceWarning, stacklevel=4)

    def result(self, done: int) -> dict[str, torch.Tensor]:
        if self.total is None:
            out = {name: torch.cat(self.chunks[name]) for name in self.names}
            if self.pooling == "flatten" and not self._warned:
                size = sum(v.numel() for v in out.values()) * 4
                if size > FLATTEN_BUDGET_BYTES:
                    warnings.warn(f"pooling='flatten' produced {size / 1024**3:.1f} GiB of features (budget "
                                  f"{FLATTEN_BUDGET_BYTES / 1024**3:.1f} GiB).", ResourceWarning, stacklevel=3)
            return out
        return {name: self.buffers[name][:done] for name in self.names}


@contextlib.contextmanager
def _tap_hooks(bb: Backbone, taps: list[Tap], sink: _Sink, stop_after: str | None):
    """Forward hooks that pool each tap into ``sink``; always removed on exit."""
    handles = []

    def make(tap: Tap):
        def hook(module, args, output):
            sink.pool(tap, first_tensor(output))
            if tap.name == stop_after:
                raise _StopForward
        return hook

    try:
        for tap in taps:
            handles.append(bb.model.get_submodule(tap.module_name).register_forward_hook(make(tap)))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _forward(bb: Backbone, x: torch.Tensor, sink: _Sink, offset: int, want_pre: bool,
             amp: torch.dtype | None = None, want_head: bool | None = None) -> None:
    """One batch through the model (in passes of at most :data:`_CPU_PASS` images on CPU), under
    autocast to ``amp``; the hooks write its pooled taps into ``sink`` from row ``offset`` on. The head
    runs when ``want_head`` (default: ``want_pre``): for ``pre_logits`` or a module tap inside it."""
    want_head = want_pre if want_head is None else want_head
    step = _CPU_PASS if x.device.type == "cpu" else x.shape[0]
    for start in range(0, x.shape[0], step):
        sink.offset = offset + start
        try:
            with autocast(x.device, amp):
                feats = bb.model.forward_features(x[start:start + step])
            if want_head:
                pre = _pre_logits(bb.model, feats, amp)
                if want_pre:
                    sink.put(PRE_LOGITS, pre)
        except _StopForward:
            pass


def _pre_logits(model: torch.nn.Module, feats: torch.Tensor, amp: torch.dtype | None) -> torch.Tensor:
    """``forward_head(feats, pre_logits=True)``; after an autocast forward, in float32 with autocast off:
    the pooling of a CNN's last map then equals what its tap's hook computes in float32."""
    if amp is None:
        return model.forward_head(feats, pre_logits=True)
    with torch.autocast(feats.device.type, enabled=False):
        return model.forward_head(feats.float(), pre_logits=True)


def _split_batch(batch) -> tuple[torch.Tensor, torch.Tensor | None]:
    if torch.is_tensor(batch):
        return batch, None
    if isinstance(batch, (tuple, list)) and batch and torch.is_tensor(batch[0]):
        y = batch[1] if len(batch) > 1 else None
        return batch[0], (None if y is None else torch.as_tensor(y).long().reshape(-1))
    raise ValueError(f"each batch must be an image tensor (B, C, H, W) or a tuple (images, labels). "
                     f"Got {type(batch).__name__} instead.")


def _batches(data, batch_size: int, device: torch.device | None = None) -> tuple[Iterable, int | None]:
    """(iterable of batches, number of images or None) for every supported input; a lab dataset's
    loader pins its batches (and may use workers) for a CUDA ``device``."""
    if torch.is_tensor(data):
        if data.dim() != 4:
            raise ValueError(f"an image tensor must have shape (N, C, H, W). Got shape {tuple(data.shape)} instead.")
        return (data[i:i + batch_size] for i in range(0, len(data), batch_size)), len(data)
    if isinstance(data, DataLoader):
        total = None
        if data.batch_size is not None and not data.drop_last:
            try:
                total = len(data.sampler)
            except TypeError:
                total = None
        return data, total
    if callable(getattr(data, "eval_loader", None)):  # a lab.data Dataset: its deterministic eval transform
        options = data.loader_options(device) if callable(getattr(data, "loader_options", None)) else {}
        loader = data.eval_loader(batch_size, **options)
        return _batches(loader, batch_size) if isinstance(loader, DataLoader) else (loader, len(data))
    if isinstance(data, Dataset) or (hasattr(data, "__getitem__") and hasattr(data, "__len__")):
        return DataLoader(data, batch_size=batch_size, shuffle=False, num_workers=0), len(data)
    raise ValueError(f"data must be a lab dataset, a torch Dataset of (image, label), a DataLoader or an image "
                     f"tensor (N, C, H, W). Got {type(data).__name__} instead.")


def _resolve_layers(bb: Backbone, layers) -> list[str]:
    """The requested names, repeats dropped, each a catalogue tap or a module of the model."""
    if layers is None:
        return bb.layers
    if isinstance(layers, str):
        layers = [layers]
    names = list(dict.fromkeys(layers))
    if not names:
        raise ValueError(f"layers must name at least one tap of {bb.name}; valid: {', '.join(bb.layers)}")
    bb.resolve_layers(names)  # ValueError listing the valid taps and the closest modules
    return names


def extract(bb: Backbone, data, layers=None, pooling: str = "auto", batch_size: int = 64,
            progress: Callable[[int, int | None], None] | None = None,
            should_stop: Callable[[], bool] | None = None, normalize: bool = True,
            precision: str = "auto") -> FeatureSet:
    """Pooled features of several layers, in one forward pass per batch.

    Parameters
    ----------
    bb : lab.backbones.Backbone
    data : lab dataset, torch Dataset of (image, label), DataLoader, or Tensor (N, C, H, W)
        Pixels (uint8, or float in [0, 1]) with 1 or ``bb.in_chans`` channels. lab datasets
        are read through their deterministic ``eval_loader``; a torch Dataset is read in order.
    layers : list[str] or str, optional
        Tap names (default: all of ``bb.layers``), or any module of the model
        (``"blocks.7.attn"``, ``"blocks.7.mlp.fc1"``: :meth:`Backbone.resolve_layers`), pooled by the
        same rules. Unknown names raise ValueError listing the valid taps and the closest modules.
    pooling : {"auto", "mean", "flatten"}
        See the module docstring.
    batch_size : int
        Images per batch read from the data (ignored for a DataLoader, which has its own);
        on CPU a batch is forwarded in passes of at most 64 images.
    progress : callable, optional
        ``progress(done, total)`` after every batch, in images (``total`` is None
        when the data's length is unknown).
    should_stop : callable, optional
        Checked before every batch; when it returns True, :class:`lab.Cancelled` is raised.
    normalize : bool
        Apply ``bb.normalize`` to every batch (default). False: batches are model input
        already (``bb.in_chans`` channels, normalized).
    precision : {"auto", "float32", "bfloat16", "float16"}
        Autocast of the forward (:func:`lab.device.autocast_dtype`): "auto" is bfloat16 (or float16)
        on CUDA and float32 elsewhere; the pooled features are float32 in every case.

    Returns
    -------
    FeatureSet
        ``{layer: Tensor (N, d) float32 on bb.device}`` in the requested order, with
        ``.labels`` (LongTensor (N,) on bb.device, or None).
    """
    if not isinstance(bb, Backbone):
        raise ValueError(f"bb must be a lab.backbones.Backbone (from lab.backbones.load). Got {type(bb).__name__}.")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}. Got {pooling!r} instead.")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be a positive integer. Got {batch_size!r} instead.")
    names = _resolve_layers(bb, layers)
    amp = autocast_dtype(bb.device, precision)
    batches, total = _batches(data, int(batch_size), bb.device)
    if total == 0:
        raise ValueError("data holds no images; expected at least one.")

    want_pre = PRE_LOGITS in names
    hooked = [bb.tap(n) for n in bb.resolve_layers(names) if n != PRE_LOGITS]     # forward order
    want_head = want_pre or any(tap.after_features for tap in hooked)
    stop_after = None if want_pre or not hooked else hooked[-1].name
    model, device = bb.model, bb.device
    sink = _Sink(names, total, device, pooling)
    labels: list[torch.Tensor] = []
    has_labels = True
    done = 0
    nhwc = to_channels_last(bb)
    oom = out_of_memory_hint("feature extraction", "eval_batch_size (lab.features.extract's batch_size)",
                             getattr(batches, "batch_size", None) or batch_size, device)

    with oom, eval_mode(model), _tap_hooks(bb, hooked, sink, stop_after), torch.no_grad():
        for batch in batches:
            if should_stop is not None and should_stop():
                of = total if total is not None else "?"
                raise Cancelled(f"feature extraction cancelled after {done} of {of} images")
            x, y = _split_batch(batch)
            allowed = ({1, 3, bb.in_chans} if bb.in_chans == 1 else {1, bb.in_chans}) if normalize else {bb.in_chans}
            if x.dim() != 4 or x.shape[1] not in allowed:
                chans = x.shape[1] if x.dim() == 4 else "C"
                raise ValueError(f"{bb.name} expects images (B, {' or '.join(map(str, sorted(set(allowed))))}, H, W). "
                                 f"Got a batch of shape {tuple(x.shape)} instead; load the backbone with "
                                 f"in_chans={chans} or convert the images.")
            x = x.to(device, non_blocking=True)
            x = bb.normalize(x) if normalize else (x if x.is_floating_point() else x.float())
            if nhwc:
                x = x.contiguous(memory_format=torch.channels_last)
            _forward(bb, x, sink, done, want_pre, amp, want_head)
            if y is None:
                has_labels = False
            elif has_labels:
                labels.append(y)
            done += x.shape[0]
            if progress is not None:
                progress(done, total)
    if done == 0:
        raise ValueError("data holds no images; expected at least one.")
    if total is not None and done != total:
        raise ValueError(f"the data announced {total} images but yielded {done}.")
    out = sink.result(done)
    y_all = torch.cat(labels).to(device) if has_labels and labels else None
    return FeatureSet({name: out[name] for name in names}, labels=y_all, pooling=pooling)
