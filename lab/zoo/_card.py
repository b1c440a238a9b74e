"""The files a zoo recipe run writes beside its weights: the card ``NAME.json`` and ``NAME.md``.

The card's first fields are :data:`lab.zoo.CARD_KEYS` (what ``lab.backbones`` reads);
the recipe adds :data:`lab.zoo.RECIPE_KEYS`: both source accuracies, the data, the
augmentation maxima, the wall time and the per-epoch history. One function computes each
number; the Markdown card only formats the JSON card.
"""
from __future__ import annotations

import platform

from lab.data import glyphs

__all__ = ["TASK_TEXT", "source_parts", "disjointness", "make_card", "model_card_md"]

TASK_TEXT = {"font": "font recognition", "char": "character recognition",
             "both": "font and character recognition (one head, a cross-entropy over each part)"}
_PARTS = {"font": ("font",), "char": ("char",), "both": ("font", "char")}


def source_parts(task: str) -> tuple[str, ...]:
    """The accuracies a task reports: ``("font",)``, ``("char",)`` or ``("font", "char")``."""
    return _PARTS[task]


def disjointness(data) -> dict:
    """What the source data shares with the ``glyphs`` targets (the shipped ``glyphs.json``): font
    packages, typeface families and characters; every list and count is empty or zero for a zoo
    whose transfer to glyphs is a transfer to unseen styles and characters."""
    import json
    from pathlib import Path

    meta = json.loads(Path(glyphs.__file__).with_name("glyphs.json").read_text(encoding="utf-8"))
    packages = {f["package"] for f in meta["fonts"]}
    families = {f["family"].lower() for f in meta["fonts"]}
    return {"dataset": "glyphs", "target_styles": [f["name"] for f in meta["fonts"]],
            "target_characters": len(meta["characters"]),
            "shared_packages": sorted({f["package"] for f in data.fonts} & packages),
            "shared_families": sorted({f["family"].lower() for f in data.fonts} & families),
            "shared_characters": len(set(data.chars) & set(meta["characters"]))}


def _shared(card: dict) -> str:
    d = card.get("disjoint_from_targets")
    if d is None:
        return "not recorded"
    return (f"{len(d['shared_packages'])} font packages, {len(d['shared_families'])} typeface families and "
            f"{d['shared_characters']} characters in common with the {len(d['target_styles'])} styles and "
            f"{d['target_characters']} characters of `glyphs`")


def make_card(*, name: str, recipe, command: str, model_name: str, model_kwargs: dict, num_classes: int,
              weights: str, mean, std, data, history: list, wall_seconds: float, cpu_seconds: float,
              threads: int) -> dict:
    """The JSON card of a finished run (``data`` a :class:`lab.zoo._source.SourceData`).

    ``source_accuracy`` is the font accuracy on the held-out font-character pairs after the last
    epoch (the character accuracy for the ``"char"`` task); ``source_accuracies`` has both.
    """
    import timm
    import torch

    final = history[-1]["val_accuracy"]
    main = "char" if recipe.task == "char" else "font"
    n_fonts, n_chars, held_out = len(data.fonts), len(data.chars), int(data.val.sum())

    return {
        "name": name,
        "architecture": model_name,
        "model_kwargs": dict(model_kwargs),
        "num_classes": int(num_classes),
        "weights": weights,
        "input_size": [1, glyphs.IMAGE_SIZE, glyphs.IMAGE_SIZE],
        "mean": list(mean),
        "std": list(std),
        "source": (f"{TASK_TEXT[recipe.task].split(' (')[0]} on {len(data.images)} rendered 64 px glyphs: "
                   f"{n_fonts} Debian CJK fonts disjoint from the glyphs typefaces x {n_chars} characters not in "
                   f"glyphs ({data.pool!r} pool), with pen and scan augmentation (held-out {held_out} "
                   f"font-character pairs; source_accuracy = {main} accuracy)"),
        "recipe": command,
        "epochs": int(recipe.epochs),
        "source_accuracy": round(float(final[main]), 4),
        "seed": int(recipe.seed),
        "source_accuracies": {k: round(float(v), 4) for k, v in final.items()},
        "data": {"fonts": n_fonts, "characters": n_chars, "pool": data.pool, "images": len(data.images),
                 "held_out": held_out, "render_seconds": round(float(data.render_seconds), 1),
                 "render_key": data.key, "font_names": [f["name"] for f in data.fonts]},
        "disjoint_from_targets": disjointness(data),
        "augment": recipe.augment.to_dict(),
        "wall_seconds": round(float(wall_seconds), 1),
        "training": {"task": recipe.task, "batch_size": recipe.batch_size, "lr": recipe.lr,
                     "weight_decay": recipe.weight_decay, "label_smoothing": recipe.label_smoothing,
                     "threads": int(threads), "cpu_seconds": round(float(cpu_seconds), 1),
                     "machine": platform.machine(), "torch": torch.__version__, "timm": timm.__version__},
        "history": history,
    }


def model_card_md(card: dict, data) -> str:
    """The Markdown model card of a JSON card from :func:`make_card`."""
    parts = list(card["source_accuracies"])
    fonts = "\n".join(f"| {f['name']} | {f['family']} | {f['package']} | {f['package_version'] or '?'} |"
                      for f in data.fonts)
    head = " | ".join(f"{p} accuracy" for p in parts)
    epochs = "\n".join(f"| {h['epoch']} | {h['train_loss']:.3f} | "
                       + " | ".join(f"{h['val_accuracy'][p]:.3f}" for p in parts) + f" | {h['seconds']:.0f} |"
                       for h in card["history"])
    kwargs = ", ".join(f"{k}={v!r}" for k, v in card["model_kwargs"].items())
    t, d, aug = card["training"], card["data"], card["augment"]
    accs = ", ".join(f"{p} {card['source_accuracies'][p]:.3f}" for p in parts)
    augment = ("none" if aug["strength"] == 0 else
               f"strength {aug['strength']:g} x (stroke weight {aug['thickness']:g} of a 1 px dilation, rotation "
               f"{aug['rotate']:g} deg, shear {aug['shear']:g}, scale {aug['scale']:g}, shift {aug['translate']:g} px, "
               f"elastic {aug['elastic']:g} px, blur sigma {aug['blur']:g} px, ink/paper contrast "
               f"{aug['contrast']:g}, paper shading {aug['texture']:g}, noise {aug['noise']:g})")
    task = card["source"].split(" on ")[0]
    classifier = ("font classifier (the character rows of the training head are dropped: only the backbone "
                  "transfers)" if card["training"]["task"] == "both" else "source classifier")
    return f"""# {card['name']}

`{card['architecture']}` ({kwargs}) pretrained offline on **{task}** over CJK
glyphs rendered from Debian fonts that are disjoint from the 20 typefaces of the `glyphs`
dataset, with characters that are not among its characters (the shipped `glyphs.json` lists both). Load it by name
(`{card['name']}`); the full timm model with its {card['num_classes']}-way {classifier} is
stored in `{card['weights']}` (fp16 safetensors).

- **Source data**: {card['source']}; rendered in {_duration(d['render_seconds'])} (cached under
  `$LAB_CACHE_DIR/zoo-source`, key `{d['render_key'] or '-'}`).
- **Disjoint from the targets**: {_shared(card)}.
- **Recipe**: `{card['recipe']}` (CPU, {t['threads']} torch threads: {_duration(card['wall_seconds'])} wall,
  {_duration(t['cpu_seconds'])} CPU on {t['machine']} with torch {t['torch']}, timm {t['timm']}: the epochs kept,
  over every session of a resumed run, and the rendering when this run did it).
- **Training**: {card['epochs']} epochs, AdamW (weight decay {t['weight_decay']:g}), linear warm-up and cosine decay,
  label smoothing {t['label_smoothing']:g}, batch {t['batch_size']}, learning rate {t['lr']:g}; each image varies
  per batch by the pen and scan augmentation: {augment}.
- **Source accuracy** (held-out font-character pairs, clean images): {card['source_accuracy']:.3f}
  ({accs}).
- **Input and normalization**: {card['input_size'][0]} channel,
  {card['input_size'][1]}x{card['input_size'][2]} px, dark ink on white, `(x / 255 - mean) / std`
  with mean {card['mean']} and std {card['std']}.
- **Seed**: {card['seed']}.

| epoch | train loss | {head} | seconds |
|---|---|{'---|' * len(parts)}---|
{epochs}

Source fonts (one class each for the font task):

| name | family | Debian package | version |
|---|---|---|---|
{fonts}

Characters ({len(data.chars)}): {data.chars}
"""


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
