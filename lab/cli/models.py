"""``python -m lab models``: the models that load here without a network (:func:`lab.backbones.offline_models`:
each model source of the registry, :data:`lab.backbones.SOURCES`, lists its own)."""
from __future__ import annotations

import json
import sys

from lab.cli._common import EXIT_OK

__all__ = ["add_models_parser", "format_models"]

_HOW_TO_ADD = (
    "To add models, where there is network: `hf download timm/resnet18.a1_in1k` (timm weights; load with "
    "--pretrained) or `hf download microsoft/cvt-21` (a transformers model; load as hf:microsoft/cvt-21), then "
    "copy ~/.cache/huggingface/hub to this machine or point HF_HUB_CACHE at it; a weights file loads with "
    "--checkpoint PATH on the model it was saved from.")


def add_models_parser(sub, common) -> None:
    p = sub.add_parser("models", parents=[common], help="list the models that load here without a network",
                       description="List the backbones that load on this machine without a network: the "
                                   "glyph-pretrained zoo, the ImageNet backbones shipped as packages, timm "
                                   "weights in the Hugging Face hub cache ($HF_HUB_CACHE, $HF_HOME/hub) and "
                                   "torch hub's cache ($TORCH_HOME), and transformers models in the hub "
                                   "cache, with their sizes on disk.")
    p.add_argument("--json", action="store_true", help="print one JSON object per model instead of a table")
    p.add_argument("--all", action="store_true", help="also list cached models this lab cannot load, with why")
    p.set_defaults(func=_cmd_models)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size / 1e3:.1f} kB"


def format_models(models, *, hub: str, torch_hub: str, show_all: bool = False, problems=()) -> str:
    """The table ``python -m lab models`` prints: loadable models, then (``show_all``) the others, the
    caches read, and ``problems`` (:func:`lab.backbones.cache_problems`), one line each."""
    usable = [m for m in models if m.loads]
    others = [m for m in models if not m.loads]
    rows = usable + (others if show_all else [])
    width = max([len(m.name) for m in rows] + [4])
    lines = [f"{'name':<{width}}  {'kind':<9}  {'size':>9}  what"]
    for m in rows:
        how = f"; {m.note}" if m.note else ""
        mark = "" if m.loads else "  [cannot load]"
        lines.append(f"{m.name:<{width}}  {m.kind:<9}  {_megabytes(m.size):>9}  {m.about}{how}{mark}")
    cached = [m for m in models if m.kind in ("timm", "hf", "torch-hub")]
    lines.append("")
    lines.append(f"caches read: Hugging Face hub {hub}; torch hub checkpoints {torch_hub}")
    lines += [f"warning: {problem}" for problem in problems]
    if not cached:
        lines.append("No timm or Hugging Face weights in these caches (empty or missing): only the zoo and the "
                     "ImageNet backbones above load offline.")
        lines.append(_HOW_TO_ADD)
    elif others and not show_all:
        lines.append(f"{len(others)} more cached model(s) cannot load here (--all lists them with why).")
    return "\n".join(lines)


def _cmd_models(args) -> int:
    from lab.backbones import cache_problems, hub_cache_dir, offline_models, torch_checkpoints_dir

    models = offline_models()
    if args.json:
        for problem in cache_problems():
            print(f"warning: {problem}", file=sys.stderr)
        for m in models:
            if m.loads or args.all:
                print(json.dumps(m.as_dict()))
        return EXIT_OK
    print(format_models(models, hub=str(hub_cache_dir()), torch_hub=str(torch_checkpoints_dir()),
                        show_all=args.all, problems=cache_problems()))
    return EXIT_OK
