"""Any module of a model as a tap: name lookup, one traced dummy forward, the same pooling rules.

The layer catalogue lists the blocks; a researcher may also want the attention or the MLP inside a block
(``blocks.7.attn``, ``blocks.7.mlp.fc1``). Any ``named_modules()`` name is a tap: its output is pooled by
the catalogue's rules, which need the output's kind and, for tokens, where the prefix tokens are. Those
come from the catalogue itself, not from the model's name: a module inherits the prefix and class-token
rule of the catalogue tap that encloses it (else the one that ran just before it) when it has as many
tokens; a feature map's layout is the enclosing tap's unless the spatial sides say otherwise.

Names are read in the catalogue's namespace (Hugging Face taps are named inside the transformers model,
``layers.1.attention``), and also relative to any module above it (``vit.layers.1.attention``,
``net.vit.layers.1.attention``). Private: :class:`lab.backbones.Backbone` calls it.
"""
from __future__ import annotations

import difflib

import torch
from torch import nn

from lab.backbones._taps import PRE_LOGITS, STEM, Tap, eval_mode, trace

__all__ = ["namespace", "find_module", "tappable", "describe_all", "unknown_layer"]

_PROBE_BATCH = 2
"""Images in the dummy forward: two, so an output whose first dimension is not the batch (attention over
windows) shows, and a class token that is the same for every image (before any attention) shows."""


def namespace(taps: list[Tap]) -> str:
    """The module-name prefix of the catalogue's tap names (``"net.vit."`` for Hugging Face, ``""`` for timm)."""
    for tap in taps:
        if tap.module_name and tap.name not in (STEM, PRE_LOGITS) and tap.module_name.endswith(tap.name):
            return tap.module_name[:len(tap.module_name) - len(tap.name)]
    return ""


def _prefixes(space: str) -> list[str]:
    """The namespace and every module above it: ``"net.vit."`` -> ``["net.vit.", "net.", ""]``."""
    parts = [p for p in space.split(".") if p]
    return [".".join(parts[:i]) + "." if i else "" for i in range(len(parts), -1, -1)]


def find_module(model: nn.Module, space: str, name: str) -> str | None:
    """The full module name ``name`` stands for (read in ``space``, then relative to each module above
    it), or None when it names no module. The model itself (``""``) is no tap: ``pre_logits`` is."""
    if not isinstance(name, str) or not name.strip():
        return None
    for prefix in _prefixes(space):
        try:
            model.get_submodule(prefix + name)
        except AttributeError:
            continue
        return prefix + name
    return None


def _short(space: str, full: str) -> str:
    return full[len(space):] if space and full.startswith(space) else full


def _probe_input(bb: Backbone) -> torch.Tensor:
    # Its own generator: resolving a tap must not move the run's random stream.
    gen = torch.Generator().manual_seed(0)
    return torch.randn((_PROBE_BATCH, *bb.input_size), generator=gen).to(bb.device)  # (2, C, H, W)


def _traced(bb: Backbone, watched: list[str], shapes_only: bool = False):
    """Trace ``forward_features`` with hooks on ``watched``; modules it never calls are traced again through
    ``forward_head(..., pre_logits=True)``. Returns (ends, calls, outputs, in_head) over both passes, the
    head's ends after every ``forward_features`` end."""
    model = bb.model
    x = _probe_input(bb)
    with eval_mode(model):   # batch norm must not update its statistics mid fine-tuning
        _, _, ends, calls, outputs = trace(model, watched, lambda: model.forward_features(x),
                                           shapes_only=shapes_only)
        missing = [n for n in watched if calls.get(n, 0) == 0]
        in_head: set[str] = set()
        if missing:
            offset = max(ends.values(), default=0)
            _, _, h_ends, h_calls, h_outputs = trace(
                model, missing, lambda: model.forward_head(model.forward_features(x), pre_logits=True),
                shapes_only=shapes_only)
            for name in h_calls:
                in_head.add(name)
                ends[name] = offset + h_ends[name]
                calls[name] = h_calls[name]
                if name in h_outputs:
                    outputs[name] = h_outputs[name]
    return ends, calls, outputs, in_head


def _problem(name: str, calls: int, out) -> str | None:
    """Why the module's output cannot be a tap, or None when it can."""
    if calls == 0:
        return "never runs in a forward pass (no output to tap)"
    if calls > 1:
        return f"runs {calls} times per forward (a shared module: no one output per image)"
    if out is None:
        return "returns no tensor"
    if out.dim() not in (2, 3, 4):
        return (f"outputs a {out.dim()}-d tensor of shape {tuple(out.shape)}; expected 2-d (vector), "
                f"3-d (tokens) or 4-d (map)")
    if out.shape[0] != _PROBE_BATCH:
        return (f"returns shape {tuple(out.shape)} for a batch of {_PROBE_BATCH} images: its first dimension "
                f"is not the batch (e.g. attention over windows), so it has no features per image")
    return None


def tappable(bb: Backbone) -> list[tuple[str, str]]:
    """(name in the catalogue's namespace, full module name) of every module whose output can be a tap, in
    registration order: it runs once per forward and returns a per-image tensor of 2 to 4 dimensions.
    One dummy forward."""
    space = namespace(bb.taps)
    above = {p.rstrip(".") for p in _prefixes(space)}
    names = [n for n, _ in bb.model.named_modules() if n not in above]
    _, calls, outputs, _ = _traced(bb, names, shapes_only=True)
    return [(_short(space, n), n) for n in names if _problem(n, calls.get(n, 0), outputs.get(n)) is None]


def _reference(bb: Backbone, full: str, ends: dict[str, int]) -> Tap:
    """The catalogue tap whose rules a module inherits: the innermost one enclosing it, else the last to
    finish before it, else the first."""
    taps = [t for t in bb.taps if t.module_name is not None]
    enclosing = [t for t in taps if full == t.module_name or full.startswith(t.module_name + ".")]
    if enclosing:
        return max(enclosing, key=lambda t: len(t.module_name))
    before = [t for t in taps if ends.get(t.module_name, 0) < ends[full]]
    return max(before, key=lambda t: ends[t.module_name]) if before else taps[0]


def _describe(name: str, full: str, out: torch.Tensor, ref: Tap, after_features: bool) -> Tap:
    shape = tuple(out.shape[1:])
    if out.dim() == 2:
        return Tap(name, full, "vector", shape[0], shape=shape, after_features=after_features)
    if out.dim() == 3:
        same = ref.kind == "tokens" and ref.shape[:1] == shape[:1]
        prefix = ref.prefix_tokens if same else 0
        # Before any attention the class token is one learned vector for every image: pool the rest there.
        cls = same and ref.cls_token and not torch.allclose(out[0, 0].float(), out[1, 0].float())
        return Tap(name, full, "tokens", shape[-1], prefix_tokens=prefix, cls_token=bool(cls), shape=shape,
                   after_features=after_features)
    layout = ref.layout if ref.kind == "map" else "NCHW"
    if ref.kind == "map":
        sides = ref.shape[1:] if ref.layout == "NCHW" else ref.shape[:2]
        if shape[1:] == sides and shape[:2] != sides:
            layout = "NCHW"
        elif shape[:2] == sides and shape[1:] != sides:
            layout = "NHWC"
    dim = shape[-1] if layout == "NHWC" else shape[0]
    return Tap(name, full, "map", dim, layout=layout, shape=shape, after_features=after_features)


def unknown_layer(bb: Backbone, name, label: str) -> str:
    """The message for a name that is neither a tap nor a module, with the closest valid names."""
    known = bb.layers + [n for n in bb.module_names() if n not in bb.layers]
    close = difflib.get_close_matches(str(name), known, n=5, cutoff=0.6)
    hint = f"closest: {', '.join(close)}" if close else "bb.module_names() lists them"
    return (f"{label} {name!r} is not a tap of {bb.name}; valid: {', '.join(bb.layers)}; nor is it a module of "
            f"{bb.name} ({hint}). Pass a catalogue tap or a name from bb.module_names().")


def describe_all(bb: Backbone, requests: dict[str, str], known: dict[str, str], label: str):
    """Describe the module taps ``requests`` ({tap name: full module name}) with one traced dummy forward
    that also watches the catalogue and the ``known`` module taps, so all of them can be put in one order.

    Returns (taps of the requests, order key of every catalogue tap and module tap: (end, 0 for the
    catalogue and 1 for a module, so a module that is a catalogue tap's own comes after it)).
    """
    catalogue = {t.name: t.module_name for t in bb.taps if t.module_name is not None}
    watched = list(dict.fromkeys([*catalogue.values(), *known.values(), *requests.values()]))
    ends, calls, outputs, in_head = _traced(bb, watched)
    taps = {}
    for name, full in requests.items():
        why = _problem(full, calls.get(full, 0), outputs.get(full))
        if why is not None:
            raise ValueError(f"{label} {name!r}: module {full!r} of {bb.name} {why}; tap one of its sub-modules "
                             f"or the block around it (bb.module_names() lists the modules that can be taps).")
        taps[name] = _describe(name, full, outputs[full], _reference(bb, full, ends), full in in_head)
    order = {name: (ends[full], 0) for name, full in catalogue.items()}
    order.update({name: (ends[full], 1) for name, full in {**known, **requests}.items()})
    order[PRE_LOGITS] = (float("inf"), 0)
    return taps, order
