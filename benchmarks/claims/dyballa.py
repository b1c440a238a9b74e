"""Dyballa et al. 2024 / Gerritz et al. 2024, small CPU version: where unseen-class NMI peaks across layers,
and whether seen-class accuracy ranks the backbones the way g does.

Glyphs, 15 seen / 5 unseen styles (the papers' split), several seeds, the zoo's glyph-pretrained
CNN and ViT, a Hugging Face CvT and a from-scratch CNN (fast mode: two small from-scratch models):
g (max over layers of unseen NMI) and its layer, best layer vs last layer, and whether seen-class
accuracy ranks the backbones the way g does.
"""
from __future__ import annotations

import math
from pathlib import Path

from lab import analysis   # torch-free; lab.runs (torch) is imported where used

from ._common import (
    MIXED, NOT_REPRODUCED, REPRODUCED, Row, Settings, fast_or, fmt, hf_backbone, last_epoch, pm, run_logged,
    seed_spread,
)

__all__ = ["dyballa"]


_MIN_GAP = 0.02
"""Smallest NMI gain of the best layer over the last that counts as a real intermediate-layer peak."""


def dyballa(settings: Settings, store) -> tuple[list[Row], dict, list[str]]:
    """g and its layer per backbone on the papers' glyph split; seen accuracy vs g."""
    import lab

    split = lab.data.Split.paper_default("glyphs")
    per_bb: dict[str, dict] = {}
    for backbone, size, epochs, lr in settings.dy_backbones:
        cfg = lab.RunConfig(
            name=f"claims-dyballa-{backbone.replace(':', '-')}", dataset="glyphs", seen=split.seen, unseen=split.unseen,
            backbone=hf_backbone(backbone, Path(store.root)), img_size=size, strategy="full", epochs=epochs, lr=lr,
            seeds=settings.dy_seeds, metrics=("nmi",), projection="none", unseen_per_class=settings.dy_unseen_per_class,
            seen_per_class=None, device="cpu", save_weights=False)
        rec = run_logged(cfg, store, f"dyballa {backbone}@{size or 'native'}")
        # g, its layer and the seed spreads: lab.analysis (complete evaluations only, exact ties and
        # taps with the final layer's features go to the deeper layer), as everywhere else.
        layers, aliases = rec.meta["layers"], rec.meta.get("layer_aliases") or {}
        m = rec.metrics
        order = analysis.layer_order(layers, m)
        summ = analysis.run_summary(m, rec.training, layers=layers, aliases=aliases)
        curve = analysis.layer_curve(m, layers=layers, metric="nmi").set_index("layer")      # last complete epoch
        gen = analysis.generalization(m, layers=layers, aliases=aliases)
        last_layer, best = order[-1], summ["best_layer"]
        best_source = max(curve.index[curve["mean"] == summ["g"]], key=order.index)          # the tap g was read at
        fin = analysis.complete_evaluations(m, order, metric="nmi")
        fin = fin[fin["epoch"] == summ["epoch"]].pivot_table(index="seed", columns="layer", values="value")
        gap_mean, gap_std = seed_spread((fin[best_source] - fin[last_layer]).to_numpy())  # per seed
        acc_final = last_epoch(rec.training)["heldout_accuracy"]
        acc_mean, acc_std = seed_spread(acc_final)
        acc_by_epoch = rec.training.groupby("epoch")["heldout_accuracy"].mean()
        per_bb[f"{backbone}@{size or 64}"] = {
            "run_id": rec.run_id, "epochs": epochs, "lr": lr, "layers": order, "epoch": summ["epoch"],
            "nmi_mean": {k: float(v) for k, v in curve["mean"].items()},
            "nmi_std": {k: float(v) for k, v in curve["std"].items()},
            "g": summ["g"], "g_std": summ["g_std"] if summ["g_std"] is not None else float("nan"),
            "best_layer": best, "best_is_last": bool(summ["best_is_final"]),
            "layers_same_as_last": [name for name in order if name == last_layer or aliases.get(name) == last_layer],
            "last_nmi": float(curve.loc[last_layer, "mean"]), "last_nmi_std": float(curve.loc[last_layer, "std"]),
            "gap_mean": gap_mean, "gap_std": gap_std,
            "seen_accuracy": acc_mean, "seen_accuracy_std": acc_std,
            "g_by_epoch": {int(r.epoch): float(r.g) for r in gen.itertuples()},
            "best_layer_by_epoch": {int(r.epoch): str(r.layer) for r in gen.itertuples()},
            "seen_accuracy_by_epoch": {int(e): (None if _isna(v) else float(v)) for e, v in acc_by_epoch.items()},
        }

    n_seeds = len(settings.dy_seeds)
    lines = [f"[3] Dyballa et al. / Gerritz et al. — glyphs, paper split 15 seen / 5 unseen "
             f"({', '.join(split.unseen)}), full fine-tuning (zoo: glyph-pretrained; others: from scratch; AdamW, "
             f"cosine schedule, augmentation on), seeds {list(settings.dy_seeds)}, "
             f"{settings.dy_unseen_per_class} unseen images per style; NMI at the final epoch, mean±std over seeds"]
    for name, r in per_bb.items():
        lines.append(f"    {name}: run {r['run_id']} ({r['epochs']} epochs, lr {r['lr']:g})")
        lines.append("      " + "  ".join(f"{layer} {pm(r['nmi_mean'][layer], r['nmi_std'][layer], 2)}"
                                          for layer in r["layers"]))
        lines.append(f"      g {pm(r['g'], r['g_std'])} at {r['best_layer']}"
                     f"{' (same features as pre_logits)' if r['best_is_last'] and r['best_layer'] != 'pre_logits' else ''}"
                     f"; last layer (pre_logits) {pm(r['last_nmi'], r['last_nmi_std'])}; seen held-out accuracy "
                     f"{pm(r['seen_accuracy'], r['seen_accuracy_std'])}")
        lines.append("      g by epoch " + ", ".join(f"{e}:{v:.2f}" for e, v in r["g_by_epoch"].items())
                     + " | best layer by epoch " + ", ".join(f"{e}:{v}" for e, v in r["best_layer_by_epoch"].items()))

    rows = []
    for name, r in per_bb.items():
        significant = n_seeds > 1 and r["gap_mean"] > max(r["gap_std"], _MIN_GAP)
        if r["best_is_last"]:
            verdict = NOT_REPRODUCED
        elif significant:
            verdict = REPRODUCED
        else:
            verdict = MIXED
        rows.append(Row(
            key=f"dyballa_best_layer_{name}", source="Dyballa / Gerritz",
            claim=f"{name}: the layer with the best unseen NMI (g) is not the last",
            paper="g often peaks at an intermediate layer, not the last (e.g. ViT-B/16, ResNets on glyphs)",
            measured=(f"g {pm(r['g'], r['g_std'])} at {r['best_layer']}; last {pm(r['last_nmi'], r['last_nmi_std'])}; "
                      f"gap {pm(r['gap_mean'], r['gap_std'])} over {n_seeds} seed(s)"),
            verdict=fast_or(settings, verdict, n_seeds < 2),
            rule=("best layer = lab.analysis's argmax of the seed-mean NMI curve at the last complete epoch (ties and taps "
                  "with the final features go deeper); not reproduced if it is the final representation; reproduced if not, and the per-seed gap g − NMI(last) has a mean "
                  f"above both its std and {_MIN_GAP:g} NMI; mixed otherwise. Fast mode (1 seed): no spread to judge"),
            values={k: r[k] for k in ("g", "g_std", "best_layer", "last_nmi", "gap_mean", "gap_std", "best_is_last")},
        ))
    names = list(per_bb)
    accs = [per_bb[n]["seen_accuracy"] for n in names]
    gs = [per_bb[n]["g"] for n in names]
    import pandas as pd

    ranks = analysis.accuracy_vs_g(pd.DataFrame({"heldout_accuracy": accs, "g": gs}))   # NaN below 3 backbones
    rho = ranks["spearman"]
    rank_acc = [n for _, n in sorted(zip(accs, names), reverse=True)]
    rank_g = [n for _, n in sorted(zip(gs, names), reverse=True)]
    if not math.isfinite(rho):
        verdict = MIXED
    elif rho >= 0.99:
        verdict = NOT_REPRODUCED
    elif rho <= 0:
        verdict = REPRODUCED
    else:
        verdict = MIXED
    rows.append(Row(
        key="dyballa_accuracy_vs_g", source="Dyballa / Gerritz",
        claim="seen-class accuracy does not predict g (backbone ranking)",
        paper="accuracy on the seen classes is a poor predictor of generalization to unseen classes (g)",
        measured=(f"by seen acc: {' > '.join(rank_acc)}; by g: {' > '.join(rank_g)}; Spearman(acc, g) {fmt(rho, 2)} "
                  f"over {len(names)} backbones"),
        verdict=fast_or(settings, verdict, len(names) < 3 or n_seeds < 2),
        rule=("Spearman(seen held-out accuracy, g) across backbones (lab.analysis.accuracy_vs_g; undefined below 3): "
              "= 1 (same ranking) not reproduced, <= 0 reproduced, in between mixed (3 backbones: weak evidence either "
              "way). Fast mode (2 backbones, 1 seed): inconclusive"),
        values={"spearman": rho, "spearman_ci": ranks["spearman_ci"], "kendall": ranks["kendall"],
                "rank_by_accuracy": rank_acc, "rank_by_g": rank_g},
    ))
    return rows, {"split": split.to_dict(), "backbones": per_bb}, lines


def _isna(v) -> bool:
    import pandas as pd

    return bool(pd.isna(v))
