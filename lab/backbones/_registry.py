"""The model sources: one registry entry per kind of name :func:`lab.backbones.load` takes.

Like timm's ``register_model`` behind ``create_model`` and ``list_models``, every source is one
:class:`Source` in :data:`SOURCES` with its name rule (which names it claims), its check (is the
name loadable here, offline, without building anything), its loader and its listings. Everything
that takes a backbone or checkpoint name reads this table and nothing else branches on a prefix:
:func:`lab.backbones.load`, :func:`check_name`, :func:`lab.backbones.resolve_checkpoint` and
:func:`lab.backbones.check_checkpoint`, :func:`offline_models` (``python -m lab models``) and
:func:`list_models` (the app's backbone picker, the closest names of an error).

>>> check_name("resnet18")
>>> check_name("resnet1")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lab.errors.UnknownNameError: unknown backbone 'resnet1'; closest: 'resnet18', ...
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Callable

from lab.backbones import _resolve, _source_checks as _checks
from lab.backbones._build import Built, build_hf, build_imagenet, build_mlp, build_timm, build_zoo
from lab.backbones._resolve import Checkpoint
from lab.backbones._offline import OfflineModel, hub_models, imagenet_models, torch_hub_models, zoo_models
from lab.errors import CheckpointError, UnknownNameError
from lab.text import join_words

__all__ = ["Source", "SOURCES", "source_for", "check_name", "list_models", "offline_models", "Built", "Checkpoint",
           "resolve_checkpoint", "check_checkpoint"]


def _nothing() -> list:
    return []


@dataclass(frozen=True)
class Source:
    """One model source (``role="backbone"``) or checkpoint source (``role="checkpoint"``).

    Attributes
    ----------
    name : str
        The source's name, also :attr:`lab.backbones.Backbone.source` of what it loads.
    what : str
        What its names stand for, in a few words (``"a stored run"``).
    role : {"backbone", "checkpoint"}
        What its names stand for: a model to build, or weights to load into one.
    rule : callable
        ``rule() -> str``: the name rule in words (the forms it takes, with the names installed here), for
        the fix of an unknown name.
    claims : callable
        ``claims(name) -> spec or None``: the part its loader reads when the source takes ``name``.
    check : callable
        ``check(name, spec, **context)``: raise :class:`lab.errors.UnknownNameError` (a
        :class:`lab.errors.CheckpointError` for checkpoints) unless the name can load here; builds
        nothing, reads no weights, never uses the network.
    load : callable
        Backbones: ``load(spec, *, name, pretrained, num_classes, in_chans, img_size, kwargs) ->``
        :class:`Built`. Checkpoints: ``load(spec, *, name, store) ->``
        :class:`lab.backbones.Checkpoint`.
    names : callable
        ``names() -> list[str]``: the valid names it lists (the picker, the closest names of a typo).
    offline : callable
        ``offline() -> list[OfflineModel]``: what of it loads here without a network, with sizes.
    fallback : bool
        Whether it takes every name no other source of its role claims (timm; a checkpoint file).
    """

    name: str
    what: str
    role: str
    rule: Callable[[], str]
    claims: Callable[[str], "str | None"]
    check: Callable[..., None]
    load: Callable
    names: Callable[[], list] = _nothing
    offline: Callable[[], list] = _nothing
    fallback: bool = False


def _prefixed(prefix: str) -> Callable[[str], "str | None"]:
    def claims(name: str) -> str | None:
        return name[len(prefix):].strip() if name.startswith(prefix) else None
    return claims


def _claims_zoo(name: str) -> str | None:
    if name.startswith("zoo:"):
        return name[4:].strip()
    from lab.backbones import _timm, _zoo

    return name if name in _zoo.zoo_names() and not _timm.is_timm_name(name) else None


def _claims_imagenet(name: str) -> str | None:
    from lab.backbones import _imagenet, _timm

    return name if name in _imagenet.imagenet_names() and not _timm.is_timm_name(name) else None


def _claims_mlp(name: str) -> str | None:
    return name if name == "mlp" or name.startswith("mlp:") else None


def _everything(name: str) -> str:
    return name


def _zoo_names() -> list[str]:
    from lab.backbones import _zoo

    names = _zoo.zoo_names()
    return names + [f"zoo:{n}" for n in names]


def _imagenet_names() -> list[str]:
    from lab.backbones import _imagenet

    return _imagenet.imagenet_names()


def _hf_names() -> list[str]:
    from lab.backbones import _hf

    return [f"hf:{family}" for family in _hf.HF_FAMILIES]


def _timm_names() -> list[str]:
    import timm

    return timm.list_models()


def _zoo_rule() -> str:
    from lab.backbones import _zoo

    return f"zoo:NAME ({', '.join(_zoo.zoo_names()) or 'none installed'})"


def _imagenet_rule() -> str:
    return f"{' or '.join(_imagenet_names())} (ImageNet-pretrained, offline)"


def _hf_rule() -> str:
    from lab.backbones import _hf

    return (f"hf:FAMILY ({', '.join(_hf.HF_FAMILIES)}), hf:ORG/NAME from the local Hugging Face cache, hf:DIR "
            f"(a save_pretrained folder)")


SOURCES: tuple[Source, ...] = (
    Source("zoo", "a glyph-pretrained zoo model", "backbone", rule=_zoo_rule, claims=_claims_zoo,
           check=_checks.check_zoo, load=build_zoo, names=_zoo_names, offline=zoo_models),
    Source("imagenet", "an ImageNet backbone", "backbone", rule=_imagenet_rule, claims=_claims_imagenet,
           check=_checks.check_imagenet, load=build_imagenet, names=_imagenet_names, offline=imagenet_models),
    Source("timm", "a timm model", "backbone",
           rule=lambda: "a timm model name (timm.list_models(), hf-hub:ORG/NAME, local-dir:PATH)",
           claims=_everything, check=_checks.check_timm, load=build_timm, names=_timm_names,
           offline=lambda: hub_models("timm") + torch_hub_models(), fallback=True),
    Source("hf", "a Hugging Face model", "backbone", rule=_hf_rule, claims=_prefixed("hf:"),
           check=_checks.check_hf, load=build_hf, names=_hf_names, offline=lambda: hub_models("hf")),
    Source("mlp", "the teaching MLP", "backbone", rule=lambda: "mlp:depth=D,width=W", claims=_claims_mlp,
           check=_checks.check_mlp, load=build_mlp, names=lambda: ["mlp"]),
    Source("run", "a stored run", "checkpoint", rule=lambda: "run:ID[/SEED] (the fine-tuned weights of a stored run)",
           claims=_prefixed("run:"), check=_resolve.check_run, load=_resolve.resolve_run),
    Source("file", "a weights file", "checkpoint", rule=lambda: "the path of a .safetensors or PyTorch state_dict file",
           claims=_everything, check=_resolve.check_file, load=_resolve.resolve_file, fallback=True),
)
"""Every source, in the order they are listed; a name goes to the first source of its role whose rule claims
it, the fallback of the role last."""


def _fallback(role: str) -> Source:
    """The source of ``role`` that takes every name no other source claims."""
    return next(s for s in SOURCES if s.role == role and s.fallback)


def _in_order(role: str) -> list[Source]:
    """The sources of ``role`` in the order their rules are tried: the fallback last."""
    return sorted((s for s in SOURCES if s.role == role), key=lambda s: s.fallback)


def source_for(name: str, role: str = "backbone") -> tuple[Source, str]:
    """The source of ``role`` that takes ``name``, and the spec its loader reads.

    >>> source_for("hf:vit")[0].name, source_for("hf:vit")[1]
    ('hf', 'vit')
    """
    for source in _in_order(role):
        spec = source.claims(name)
        if spec is not None:
            return source, spec
    raise ValueError(f"role must be 'backbone' or 'checkpoint'. Got {role!r} instead.")


def list_models(role: str = "backbone", *, fallback: bool = True) -> list[str]:
    """The names the sources of ``role`` list: the named sources first, then (``fallback``) the fallback's.

    For backbones: the zoo (bare and ``zoo:``), the ImageNet backbones, ``hf:FAMILY``, ``mlp``, then
    every timm architecture; checkpoints list none (a store lists its runs: ``RunStore.ids()``).
    """
    return [n for s in _in_order(role) if fallback or not s.fallback for n in s.names()]


def offline_models() -> list[OfflineModel]:
    """Every model that can load here without a network, source by source in the registry's order: the
    zoo, the ImageNet backbones, timm weights in the Hugging Face hub cache and timm files in torch hub's
    cache, then ``transformers`` models in the hub cache. Entries that cannot load (``loads=False``) are listed
    too, with the reason in ``note``.
    """
    return [m for s in SOURCES for m in s.offline()]


def _fix() -> str:
    rules = [s.rule() for s in SOURCES if s.role == "backbone"]
    return "use " + join_words(rules, "or")


def _closest(name: str) -> list[str]:
    """Up to 5 valid names closest to ``name`` among those the backbone sources list."""
    by_lower = {c.lower(): c for c in list_models()}
    return [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=5, cutoff=0.6)]


def unknown(name: str) -> UnknownNameError:
    """The error for a backbone name no source takes: the closest listed names and every source's rule."""
    return UnknownNameError("backbone", name, _closest(name), _fix())


def check_name(name: str) -> None:
    """Raise :class:`lab.errors.UnknownNameError` unless :func:`lab.backbones.load` can load ``name`` here.

    Builds no model and reads no weights: the source that claims the name checks it (timm names in timm's
    registry, ``hf-hub:`` ids in the Hugging Face cache, ``local-dir:`` folders on disk; ``hf:`` names
    against the families, a folder's or the local cache's ``config.json``, never the network; zoo names
    against their cards and weight files, ImageNet backbones against their card and installed package,
    ``mlp:...`` with the MLP's own parser).

    Parameters
    ----------
    name : str
        A backbone name as :func:`lab.backbones.load` takes it.

    Raises
    ------
    UnknownNameError
        With ``kind="backbone"``, the closest valid names and the fix.
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownNameError("backbone", name, [], _fix(), reason="a backbone name must be a non-empty string")
    name = name.strip()
    checkpoint, _ = source_for(name, "checkpoint")
    if checkpoint is not _fallback("checkpoint"):   # a checkpoint form that is no file (run:ID) is no backbone
        raise UnknownNameError("backbone", name, [], f"set checkpoint={name!r} and backbone to the model that "
                               f"run used (`python -m lab runs show ID`)",
                               reason=f"names {checkpoint.what}, which is a checkpoint, not a backbone")
    source, spec = source_for(name)
    try:
        source.check(name, spec)
    except UnknownNameError as exc:
        if exc.reason is None and not exc.suggestions and not exc.fix:   # simply unknown: say what is close
            raise unknown(name) from None
        raise


def _spec(checkpoint) -> str:
    try:
        return os.fspath(checkpoint)
    except TypeError:
        raise CheckpointError(checkpoint, "a checkpoint must be a path or a 'run:ID[/SEED]' string", [],
                              _resolve._FILE_FIX) from None


def resolve_checkpoint(checkpoint, *, store=None) -> Checkpoint:
    """Resolve a checkpoint spec to its file: the one checkpoint resolver.

    Parameters
    ----------
    checkpoint : str, PathLike or Checkpoint
        The path of a ``.safetensors`` or PyTorch state_dict file, or ``"run:ID[/SEED]"`` (the
        fine-tuned weights of a stored run; default seed: the run's first). A :class:`Checkpoint`
        comes back as it is.
    store : lab.RunStore, optional
        The store that finds ``run:`` specs (its ``run_weights``: a :class:`lab.RunStore` looks in itself,
        then in the default store, ``$LAB_RUNS_DIR`` or ``./runs``); ``lab.RunStore()`` for the default
        store. Not used for files.

    Returns
    -------
    Checkpoint
        ``path`` (a file that exists) and ``kind`` (``"safetensors"`` or ``"torch"``), ``source``.

    Raises
    ------
    lab.errors.CheckpointError
        A ValueError naming the spec, the problem (no such file, no such run, a damaged run, no
        weights for that seed, a malformed spec) and the fix; the ones for missing weights are also
        FileNotFoundErrors (:class:`lab.errors.CheckpointNotFoundError`).
    """
    if isinstance(checkpoint, Checkpoint):
        return checkpoint
    spec = _spec(checkpoint)
    source, body = source_for(spec, "checkpoint")
    return source.load(body, name=spec, store=store)


def check_checkpoint(checkpoint, *, store=None) -> None:
    """Raise :class:`lab.errors.CheckpointError` (an :class:`~lab.errors.UnknownNameError` with
    ``kind="checkpoint"``) unless :func:`resolve_checkpoint` finds ``checkpoint`` (``run:`` specs through
    ``store``); reads no weights. The message names the closest files or runs.
    """
    spec = _spec(checkpoint)
    source, body = source_for(spec, "checkpoint")
    source.check(spec, body, store=store)
