"""``python -m lab pretrain``: train a zoo backbone on the glyph source task (the recipe of lab.zoo)."""
from __future__ import annotations

from lab.cli._common import EXIT_OK

__all__ = ["add_pretrain_parser"]


def add_pretrain_parser(sub, common) -> None:
    from lab.zoo import recipe

    pre = sub.add_parser("pretrain", parents=[common], help="pretrain a zoo backbone on the glyph source task",
                         description="Render CJK fonts disjoint from the glyphs typefaces and train a backbone "
                                     "on them from a seed on the CPU (the recipe of lab.zoo). An interrupted "
                                     "run resumes when the same command is run again.")
    recipe.add_arguments(pre)
    pre.set_defaults(func=_cmd_pretrain)


def _cmd_pretrain(args) -> int:
    from lab.zoo import recipe

    card = recipe.run_from_args(args)
    parts = ", ".join(f"{k} {v:.3f}" for k, v in card["source_accuracies"].items())
    print(f"pretrained {card['name']}: source accuracy {card['source_accuracy']:.3f} ({parts}) after "
          f"{card['epochs']} epochs")
    return EXIT_OK
