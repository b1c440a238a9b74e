"""The backbone object: a model on a device plus its layer catalogue (taps in ``_taps``)."""
from __future__ import annotations

import torch
from torch import nn

from lab.backbones._normalize import Normalization
from lab.backbones._taps import PRE_LOGITS, STEM, Tap, _ModuleGroup, owns_params


class Backbone:
    """A model on a device plus its layer catalogue. Build it with :func:`load`.

    Attributes
    ----------
    model : torch.nn.Module
        The timm model (also for zoo models), :class:`lab.backbones._mlp.MLP`, or a Hugging Face
        model behind timm's interface; in eval mode on ``device``.
    name : str
        The name it was loaded by.
    source : str
        ``"timm"``, ``"mlp"``, ``"hf"`` or ``"zoo"``.
    device : torch.device
    taps : list[Tap]
        Ordered input -> output; the last is ``pre_logits``.
    in_chans : int
        Input channels of the model (images with 1 channel are repeated to it).
    input_size : tuple[int, int, int]
        (C, H, W) of the dummy input used to build the catalogue.
    normalization : Normalization
        Mean/std (and, for zoo models, size) the model expects; :meth:`normalize` applies it.
    """

    def __init__(self, model: nn.Module, *, name: str, device: torch.device, taps: list[Tap],
                 stem_group, in_chans: int, input_size: tuple[int, int, int],
                 normalization: Normalization, source: str = "timm"):
        self.model = model
        self.name = name
        self.source = source
        self.normalization = normalization
        self.device = device
        self.taps = list(taps)
        self.in_chans = int(in_chans)
        self.input_size = tuple(input_size)
        self._stem_group = stem_group
        self._by_name = {tap.name: tap for tap in self.taps}
        self._module_taps: dict[str, Tap] = {}           # module taps described so far, by requested name
        self._order: dict[str, tuple] = {i.name: (k, 0) for k, i in enumerate(self.taps)}   # forward order keys
        self._module_names: list[tuple[str, str]] | None = None   # (name, full module name) of modules
                                                                   # that can be taps

    @property
    def layers(self) -> list[str]:
        """The catalogue's tap names, input -> output; the last is ``"pre_logits"``. Any other module of
        the model can be a tap as well (:meth:`resolve_layers`)."""
        return [tap.name for tap in self.taps]

    @property
    def num_features(self) -> int:
        """Width of the pre-logits features (what the classifier sees)."""
        return self._by_name[PRE_LOGITS].dim

    @property
    def img_size(self) -> int:
        """Image side used to build the catalogue (H of ``input_size``)."""
        return int(self.input_size[1])

    def tap(self, name: str) -> Tap:
        """The :class:`Tap` called ``name``: a catalogue tap, or any module of the model
        (:meth:`resolve_layers`); ValueError listing the valid taps and the closest modules otherwise."""
        from lab.backbones import _module_taps

        if isinstance(name, str) and name in self._by_name:
            return self._by_name[name]
        if isinstance(name, str) and name not in self._module_taps:
            self.resolve_layers([name])
        try:
            return self._module_taps[name]
        except (KeyError, TypeError):
            raise ValueError(_module_taps.unknown_layer(self, name, "layer")) from None

    def resolve_layers(self, names, *, field: str | None = None) -> list[str]:
        """``names`` in forward order: catalogue taps and any module of the model.

        A name that is no catalogue tap is read as a ``named_modules()`` name (in the catalogue's namespace:
        ``blocks.7.attn`` for timm, ``layers.1.attention`` for a Hugging Face model, also relative to any
        module above it). Its output is pooled by the catalogue's rules (:func:`lab.features.pool_tap_output`):
        a feature map's spatial mean, a class token where the tap around it takes one, else the token mean,
        a vector as it is; a tuple output gives its first tensor. The first call for new modules runs one
        traced dummy forward (the model in eval mode, hooks removed afterwards); later calls reuse it.

        Parameters
        ----------
        names : iterable of str
            Tap or module names; repeats are dropped.
        field : str, optional
            The config field the names come from; errors then start with ``"FIELD: 'NAME'"``.

        Returns
        -------
        list of str
            The names, input -> output (the order of their outputs in a forward pass; ``pre_logits`` last).

        Raises
        ------
        ValueError
            A name that is neither a tap nor a module (with the closest valid names), or a module whose
            output cannot be a tap: it never runs, runs several times, returns no tensor, or returns
            something that is not one row per image.
        """
        from lab.backbones import _module_taps

        label = f"{field}:" if field else "layer"
        names = list(dict.fromkeys(names))
        new = {}
        for name in names:
            if isinstance(name, str) and (name in self._by_name or name in self._module_taps):
                continue
            full = _module_taps.find_module(self.model, _module_taps.namespace(self.taps), name)
            if full is None:
                raise ValueError(_module_taps.unknown_layer(self, name, label))
            new[name] = full
        if new:
            known = {n: t.module_name for n, t in self._module_taps.items()}
            taps, order = _module_taps.describe_all(self, new, known, label)
            self._module_taps.update(taps)
            self._order = order
        return sorted(names, key=lambda n: self._order[n])

    def module_names(self) -> list[str]:
        """Every module whose output can be a tap (it runs once per forward and returns a tensor with one
        row per image), in the catalogue's namespace, in registration order; one dummy forward, cached."""
        return [short for short, _ in self._tappable()]

    def submodules(self, layer: str) -> list[str]:
        """The modules inside catalogue tap ``layer`` that can be taps (:meth:`module_names`), in
        registration order: a block's attention, MLP, norms, ...; the stem's modules for ``"stem"``;
        none for ``"pre_logits"``."""
        tap = self._by_name.get(layer) if isinstance(layer, str) else None
        if tap is None:
            raise ValueError(f"layer {layer!r} is not a tap of {self.name}; valid: {', '.join(self.layers)}")
        if tap.module_name is None:
            return []
        roots = [tap.module_name]
        if tap.name == STEM and self._stem_group is not None:
            roots += list(self._stem_group[0])
        return [short for short, full in self._tappable() if full != tap.module_name
                and any(full == root or full.startswith(root + ".") for root in roots)]

    def _tappable(self) -> list[tuple[str, str]]:
        from lab.backbones import _module_taps

        if self._module_names is None:
            self._module_names = _module_taps.tappable(self)
        return self._module_names

    def tap_module(self, name: str) -> nn.Module | None:
        """Module whose weights tap ``name`` reflects.

        A block tap gives the block; ``"stem"`` gives the stem's parametrised
        top-level modules (and top-level parameters such as ViT's ``pos_embed`` and
        ``cls_token``), grouped in one module that shares the model's parameters;
        ``"pre_logits"`` gives None (it reflects the whole network).
        """
        tap = self.tap(name)
        if tap.name == PRE_LOGITS:
            return None
        if name in self._module_taps:      # a module tap: the module, when it has weights of its own
            module = self.model.get_submodule(tap.module_name)
            return module if owns_params(module) else None
        if tap.name == STEM and self._stem_group is not None:
            modules, params = self._stem_group
            if len(modules) == 1 and not params:
                return self.model.get_submodule(modules[0])
            return _ModuleGroup({n: self.model.get_submodule(n) for n in modules},
                                {n: getattr(self.model, n) for n in params})
        return self.model.get_submodule(tap.module_name)

    def block_modules(self) -> list[tuple[str, nn.Module]]:
        """(tap name, module) for every tap that owns weights, input -> output (for Layer FT / SCL FT)."""
        out = []
        for tap in self.taps:
            module = self.tap_module(tap.name)
            if module is not None:
                out.append((tap.name, module))
        return out

    def head_module(self) -> nn.Module:
        """The classifier module (``model.get_classifier()``); an Identity when num_classes is 0."""
        return self.model.get_classifier()

    def reset_head(self, num_classes: int) -> nn.Module:
        """Replace the classifier by a fresh one with ``num_classes`` outputs (0: identity); returns it."""
        if int(num_classes) < 0:
            raise ValueError(f"num_classes must be >= 0. Got {num_classes!r} instead.")
        self.model.reset_classifier(int(num_classes))
        self.model.to(self.device)
        return self.head_module()

    def state_dict_cpu(self) -> dict[str, torch.Tensor]:
        """A detached CPU copy of the model's state_dict (a snapshot, e.g. the initial weights)."""
        return {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}

    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """Pixels (B, C, H, W) (uint8, or float in [0, 1]; C = 1 or ``in_chans``) -> model input
        (B, in_chans, H, W) float on the images' device, by :attr:`normalization`."""
        return self.normalization.apply(images)

    @property
    def info(self) -> dict:
        """What was loaded and how its input is prepared (JSON-friendly, for a run's meta)."""
        return {"name": self.name, "source": self.source, "in_chans": self.in_chans,
                "input_size": list(self.input_size), "normalization": self.normalization.as_dict()}

    def pre_logits(self, x: torch.Tensor) -> torch.Tensor:
        """``forward_head(forward_features(x), pre_logits=True)`` on model input (already normalized) on the device."""
        return self.model.forward_head(self.model.forward_features(x), pre_logits=True)

    def __repr__(self) -> str:
        return (f"Backbone({self.name!r}, device={self.device}, input={self.input_size}, "
                f"layers={len(self.taps)}: {self.layers[0]} .. {self.layers[-1]})")


