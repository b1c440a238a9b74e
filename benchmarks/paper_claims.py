"""Small, CPU-sized versions of the seed papers' claims, measured through lab's public API (issue 5).

Every number comes from runs of the engine (``lab.RunConfig`` + ``lab.run``), read back from a
``lab.RunStore``; where a claim needs a quantity the engine does not store (NC1 on the
*training* images, NC1 of the SCL head's input), the stored weights are reloaded with
``lab.backbones.load(checkpoint=lab.store.resolve_checkpoint("run:ID"))`` and measured with
``lab.features`` + ``lab.metrics``.
Each claim ends in one verdict computed from the measured numbers by the rule printed under
the table: "reproduced", "mixed", "not reproduced", or, with ``--fast``, "inconclusive (fast
mode)" where the fast settings are too small to judge ("not measured" only when a run failed).

1. Li, Liu et al., "Principled and efficient transfer learning of deep models via neural
   collapse", Fig. 2: an equal-width MLP trained on digits into the terminal phase; NC1
   falls from shallow to deep layers.
2. Same paper, Table 3 (qualitative): a small CNN pre-trained on 10 glyph styles, then
   fine-tuned on the 10 other styles by linear probe, Layer FT, SCL FT and full FT:
   linear probe < Layer FT ≈ SCL FT ≈ full FT, with the trained-parameter fractions, and
   lower penultimate NC1 where held-out accuracy is higher.
3. Dyballa et al. 2024 / Gerritz et al. 2024: glyphs, 15 seen / 5 unseen styles (the
   papers' split), several seeds, the zoo's glyph-pretrained CNN and ViT, a Hugging Face CvT and
   a from-scratch CNN (fast mode: two small from-scratch models): g (max over layers of
   unseen NMI) and its layer, best layer vs last layer, and whether seen-class accuracy
   ranks the backbones the way g does.
4. Wang & Yang 2022: MLP on digits at label noise 0, 0.2, 0.5: utilization of the last
   layer vs noise, and held-out accuracy after re-initialising the last layer(s)
   (``contribution=True``).

Nothing is downloaded: models start from random init or from the offline glyph zoo
(``lab/zoo``, pretrained on fonts disjoint from the targets), on images of 32-64 px, so the
absolute numbers are far from the papers'; the claims checked are the qualitative ones.

Run (the full mode takes ~15 min on 2 shared cores with one thread, ``--fast`` ~1-2 min)::

    .venv/bin/python benchmarks/paper_claims.py [--fast] [--runs-dir DIR] [--json OUT] [--threads 1]

Progress goes to stderr, the report to stdout. Runs are written to a temporary store that
is deleted at the end unless ``--runs-dir`` is given.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab import analysis  # noqa: E402 - torch-free; lab.runs (torch) is imported where used

__all__ = ["main", "Settings", "Row", "VERDICTS", "FAST_VERDICT", "run_claims"]

REPRODUCED, MIXED, NOT_REPRODUCED = "reproduced", "mixed", "not reproduced"
FAST_VERDICT = "inconclusive (fast mode)"
NOT_MEASURED = "not measured"
VERDICTS = (REPRODUCED, MIXED, NOT_REPRODUCED, FAST_VERDICT, NOT_MEASURED)
"""Every verdict a row can carry ("not measured" only when a run failed)."""


# ---------------------------------------------------------------------------------------------- settings


HF_CVT = "hf:cvt-small"
"""A CvT (Hugging Face ``transformers``; timm has none) of 3 stages, depths 1/2/4, widths 32/96/192,
random init: built here and saved with ``save_pretrained``, then loaded as ``hf:DIR`` like a user's
own model. The default ``hf:cvt`` (CvT-13) takes ~10x longer per epoch on a CPU."""
_HF_CVT_CONFIG = {"depth": [1, 2, 4], "embed_dim": [32, 96, 192], "num_heads": [1, 2, 3], "num_channels": 1}


def _hf_backbone(backbone: str, root: Path) -> str:
    """``backbone``, with :data:`HF_CVT` replaced by the ``hf:DIR`` of the small CvT saved under ``root``."""
    if backbone != HF_CVT:
        return backbone
    folder = root / "hf-cvt-small"
    if not (folder / "config.json").is_file():
        import torch
        from transformers import CvtConfig, CvtModel

        torch.manual_seed(0)
        CvtModel(CvtConfig(**_HF_CVT_CONFIG)).save_pretrained(folder)
    return f"hf:{folder}"


@dataclass(frozen=True)
class Settings:
    """Sizes of the four experiments; :meth:`full` and :meth:`fast` are the two presets."""

    fast: bool
    # 1. NC Fig. 2
    fig2_backbone: str
    fig2_epochs: int
    fig2_optimizer: str
    fig2_lr: float
    # 2. NC Table 3
    t3_backbone: str
    t3_img_size: int
    t3_block: str
    t3_pre_epochs: int
    t3_ft_epochs: int
    t3_pre_lr: float
    t3_ft_lr: float
    t3_seeds: tuple[int, ...]
    # 3. Dyballa / Gerritz
    dy_backbones: tuple[tuple[str, int | None, int, float], ...]   # (backbone, img_size, epochs, lr)
    dy_seeds: tuple[int, ...]
    dy_unseen_per_class: int
    # 4. Wang & Yang
    wy_backbone: str
    wy_noise: tuple[float, ...]
    wy_epochs: int
    wy_lr: float
    terminal_accuracy: float = 0.99

    @classmethod
    def full(cls) -> "Settings":
        return cls(
            fast=False,
            fig2_backbone="mlp:depth=8,width=128", fig2_epochs=60, fig2_optimizer="sgd", fig2_lr=0.02,
            t3_backbone="test_resnet", t3_img_size=32, t3_block="layer2.0", t3_pre_epochs=12, t3_ft_epochs=8,
            t3_pre_lr=2e-3, t3_ft_lr=1e-3, t3_seeds=(0, 1, 2),
            # the offline zoo's glyph-pretrained CNN and ViT (fine-tuned as the papers fine-tune
            # ImageNet models), a Hugging Face family (CvT, which timm lacks) and a from-scratch CNN
            dy_backbones=(("zoo:glyph_resnet18", None, 6, 1e-3), ("zoo:glyph_vit_tiny", None, 6, 5e-4),
                          (HF_CVT, 64, 6, 1e-3), ("test_resnet", 32, 16, 2e-3)),
            dy_seeds=(0, 1, 2), dy_unseen_per_class=200,
            wy_backbone="mlp:depth=6,width=256", wy_noise=(0.0, 0.2, 0.5), wy_epochs=40, wy_lr=1e-3,
        )

    @classmethod
    def fast_preset(cls) -> "Settings":
        return cls(
            fast=True,
            fig2_backbone="mlp:depth=6,width=128", fig2_epochs=20, fig2_optimizer="sgd", fig2_lr=0.02,
            t3_backbone="test_resnet", t3_img_size=32, t3_block="layer2.0", t3_pre_epochs=2, t3_ft_epochs=1,
            t3_pre_lr=2e-3, t3_ft_lr=1e-3, t3_seeds=(0,),
            dy_backbones=(("test_resnet", 32, 2, 2e-3), ("mlp:depth=6,width=256", 32, 2, 2e-3)),
            dy_seeds=(0,), dy_unseen_per_class=60,
            wy_backbone="mlp:depth=6,width=256", wy_noise=(0.0, 0.2, 0.5), wy_epochs=5, wy_lr=1e-3,
        )


@dataclass
class Row:
    """One claim of the summary table."""

    key: str
    source: str          # the paper and figure/table
    claim: str
    paper: str           # what the paper reports
    measured: str        # what was measured here (text)
    verdict: str
    rule: str            # how the verdict follows from the numbers
    values: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- helpers

_T0 = time.perf_counter()


def _log(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def _spearman(a, b) -> float:
    """Spearman rank correlation (average ranks for ties); NaN when either side is constant."""
    from scipy.stats import spearmanr

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    # Rounded so that thresholds such as -0.8 (one swapped pair of 4) are not missed by float error.
    return round(float(spearmanr(a, b).statistic), 9)


def _f(x, nd: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{nd}f}"


def _pm(mean, std, nd: int = 3) -> str:
    return _f(mean, nd) if std is None or not math.isfinite(std) else f"{_f(mean, nd)}±{_f(std, nd)}"


def _fast_or(settings: Settings, verdict: str, too_small: bool) -> str:
    """The rule's verdict, or "inconclusive (fast mode)" when the fast settings cannot judge it."""
    return FAST_VERDICT if settings.fast and too_small else verdict


class _RunFailed(RuntimeError):
    pass


def _run(cfg, store, label: str):
    """Consume ``lab.run(cfg)`` logging progress to stderr; return the stored RunRecord."""
    import lab

    _log(f"{label}: start ({cfg.describe()})")
    run_id, t = None, time.perf_counter()
    for ev in lab.run(cfg, store=store):
        run_id = ev.run_id
        if ev.kind == "epoch_finished":
            extra = f", resilience {ev.resilience:.3f}" if ev.resilience is not None else ""
            _log(f"  {label} seed {ev.seed} epoch {ev.epoch}: train acc {_f(ev.train_accuracy)}, "
                 f"held-out acc {_f(ev.heldout_accuracy)}{extra} ({ev.seconds:.1f}s)")
        elif ev.kind == "layer_contribution":
            _log(f"  {label} contribution {ev.layer}: held-out acc "
                 f"{_f(ev.values.get('heldout_accuracy'))} ({_f(ev.values.get('heldout_accuracy_delta'))})")
        elif ev.kind in ("run_failed", "run_cancelled"):
            raise _RunFailed(f"{label}: run {ev.run_id} {ev.kind.split('_')[1]}: {ev.message}")
    _log(f"{label}: done in {time.perf_counter() - t:.0f}s (run {run_id})")
    return store.load(run_id)


def _final(df, epoch_col: str = "epoch"):
    return df[df[epoch_col] == df[epoch_col].max()]


def _training_final(rec) -> dict[str, float]:
    """Mean over seeds of the last epoch's training row."""
    t = _final(rec.training)
    out = {}
    for col in ("train_accuracy", "heldout_accuracy", "heldout_loss", "resilience"):
        if col in t and t[col].notna().any():
            out[col] = float(t[col].astype(float).mean())
    return out


def _seen_metric(rec, metric: str, epoch: int | None = None) -> dict[str, float]:
    """{layer: value} of a seen-split metric at ``epoch`` (default last), mean over seeds."""
    m = rec.metrics
    m = m[(m["split"] == "seen") & (m["metric"] == metric)]
    m = m[m["epoch"] == (m["epoch"].max() if epoch is None else epoch)]
    order = [d["name"] for d in rec.meta["layers"]]
    s = m.groupby("layer")["value"].mean()
    return {layer: float(s[layer]) for layer in order if layer in s}


def _hidden_layers(rec) -> list[str]:
    """The hidden-layer taps of a teaching MLP (fc1..fcD), in order; pre_logits (= fcD) excluded."""
    return [d["name"] for d in rec.meta["layers"] if d["name"] != "pre_logits"]


def _seed_spread(values) -> tuple[float, float]:
    """(mean, std) over seeds of one value per seed, by lab.analysis (std ddof=1; NaN for one seed)."""
    import pandas as pd

    from lab import analysis

    frame = pd.DataFrame({"metric": "x", "value": np.asarray(values, dtype=float)})
    row = analysis.aggregate_seeds(frame, by=("metric",)).iloc[0]
    return float(row["mean"]), float(row["std"])


def _reload(rec, ds, seed: int | None = None):
    """The run's trained backbone through checkpoint='run:ID[/seed]' (default: its first seed)."""
    import lab
    from lab.store import resolve_checkpoint

    cfg = rec.config
    spec = f"run:{rec.run_id}" if seed is None else f"run:{rec.run_id}/{seed}"
    return lab.backbones.load(cfg.backbone, checkpoint=resolve_checkpoint(spec), in_chans=ds.in_chans,
                              img_size=cfg.img_size or ds.image_size, device="cpu")


# ---------------------------------------------------------------------------------------------- 1. Fig. 2


def fig2(settings: Settings, store) -> tuple[list[Row], dict, list[str]]:
    """NC1 per layer of an equal-width MLP trained on digits into the terminal phase."""
    import lab

    cfg = lab.RunConfig(
        name="claims-fig2", dataset="digits", backbone=settings.fig2_backbone, n_unseen=2, strategy="full",
        epochs=settings.fig2_epochs, optimizer=settings.fig2_optimizer, lr=settings.fig2_lr, augment=False, metrics=("nc1",), projection="none",
        seen_per_class=None, unseen_per_class=None, device="cpu", save_weights=True,
    )
    rec = _run(cfg, store, "fig2 mlp/digits")
    layers = _hidden_layers(rec)
    heldout_nc1 = _seen_metric(rec, "nc1")
    tr = _training_final(rec)
    # The paper plots NC1 on the training images: reload the final weights and measure it there.
    from lab.runs import prepare_data

    data = prepare_data(rec.config)                   # the engine's own datasets of this run
    ds, train = data.dataset, data.train
    bb = _reload(rec, ds)
    feats = lab.features.extract(bb, train, layers=layers, batch_size=256)
    y = np.asarray(train.targets)
    train_nc1 = {layer: float(lab.metrics.nc1(feats[layer], y)) for layer in layers}
    depth = np.arange(1, len(layers) + 1)
    terminal = tr.get("train_accuracy", 0.0) >= settings.terminal_accuracy

    rows, lines = [], []
    lines.append(f"[1] NC transfer paper, Fig. 2 — {settings.fig2_backbone} on digits, {len(rec.meta['split']['seen'])} "
                 f"seen classes, full training {settings.fig2_epochs} epochs ({settings.fig2_optimizer} lr "
                 f"{settings.fig2_lr:g}, no augmentation); run {rec.run_id}")
    lines.append(f"    final epoch: train accuracy {_f(tr.get('train_accuracy'), 4)} (terminal phase = "
                 f">= {settings.terminal_accuracy:g}: {'yes' if terminal else 'no'}), held-out accuracy "
                 f"{_f(tr.get('heldout_accuracy'))}")
    lines.append("    " + "layer".ljust(22) + "".join(f"{name:>8}" for name in layers))
    lines.append("    " + "NC1 seen train images".ljust(22) + "".join(f"{train_nc1[n]:8.3f}" for n in layers))
    lines.append("    " + "NC1 seen held-out".ljust(22) + "".join(f"{heldout_nc1[n]:8.3f}" for n in layers))
    values = {"run_id": rec.run_id, "layers": layers, "train_nc1": train_nc1, "heldout_nc1": heldout_nc1,
              **{f"final_{k}": v for k, v in tr.items()}, "terminal_phase": terminal}

    for key, which, nc1 in (("fig2_train", "seen training images (the paper's setting)", train_nc1),
                            ("fig2_heldout", "seen held-out images (the engine's seen metric)", heldout_nc1)):
        ys = [nc1[n] for n in layers]
        rho = _spearman(depth, ys)
        first, last = ys[0], ys[-1]
        ratio = last / first if first > 0 else float("nan")
        falls = last < first
        if rho <= -0.8 and falls:
            verdict = REPRODUCED
        elif falls and rho < 0:
            verdict = MIXED
        else:
            verdict = NOT_REPRODUCED
        if not terminal and verdict == REPRODUCED:
            verdict = MIXED   # the claim is about the terminal phase, which this run did not reach
        verdict = _fast_or(settings, verdict, not terminal)
        rows.append(Row(
            key=key, source="NC transfer, Fig. 2",
            claim=f"NC1 falls from shallow to deep layers ({which})",
            paper="NC1 decreases progressively with depth (MLP, terminal phase)",
            measured=(f"NC1 {layers[0]} {first:.3f} -> {layers[-1]} {last:.3f} (x{ratio:.2f}); Spearman(depth, NC1) "
                      f"{_f(rho, 2)}; train acc {_f(tr.get('train_accuracy'), 4)}"),
            verdict=verdict,
            rule=("reproduced: Spearman(depth, NC1) <= -0.8 and NC1(last) < NC1(first); mixed: NC1(last) < NC1(first) "
                  "with a weaker negative trend, or the trend holds but train accuracy < "
                  f"{settings.terminal_accuracy:g} (not the terminal phase); otherwise not reproduced"),
            values={"spearman": rho, "first": first, "last": last},
        ))
    return rows, values, lines


# ---------------------------------------------------------------------------------------------- 2. Table 3


def table3(settings: Settings, store) -> tuple[list[Row], dict, list[str]]:
    """Pre-train on 10 glyph styles, fine-tune on the other 10 with four strategies."""
    import torch

    import lab

    from lab.runs import prepare_data

    ds = lab.data.load("glyphs")
    pretrain, downstream = list(ds.classes[0::2]), list(ds.classes[1::2])
    common = dict(dataset="glyphs", backbone=settings.t3_backbone, img_size=settings.t3_img_size,
                  metrics=("nc1",), projection="none", device="cpu", unseen_per_class=10, seen_per_class=None)
    pre_cfg = lab.RunConfig(name="claims-t3-pretrain", seen=pretrain, unseen=downstream[:2], strategy="full",
                            epochs=settings.t3_pre_epochs, lr=settings.t3_pre_lr, layers=("pre_logits",),
                            save_weights=True, **common)
    pre = _run(pre_cfg, store, "table3 pre-train")
    pre_tr = _training_final(pre)

    block = settings.t3_block
    results: dict[str, dict] = {}
    for strategy in ("linear", "layer", "scl", "full"):
        cfg = lab.RunConfig(
            name=f"claims-t3-{strategy}", seen=downstream, unseen=pretrain[:2], checkpoint=f"run:{pre.run_id}",
            strategy=strategy, block=block if strategy in ("layer", "scl") else None, epochs=settings.t3_ft_epochs,
            lr=settings.t3_ft_lr, layers=(block, "pre_logits"), seeds=settings.t3_seeds, save_weights=True, **common)
        rec = _run(cfg, store, f"table3 {strategy}")
        tr = _training_final(rec)
        acc_std = _seed_spread(_final(rec.training)["heldout_accuracy"])[1]
        engine_nc1 = _seen_metric(rec, "nc1")["pre_logits"]
        # NC1 of what the head sees on the held-out images (for SCL: pre-logits + zero-padded pooled block),
        # from each seed's saved weights; the mean over seeds.
        heldout = prepare_data(rec.config).heldout     # the engine's own held-out images of this run
        y = np.asarray(heldout.targets)
        recomputed, head_nc1 = [], []
        for seed in settings.t3_seeds:
            bb = _reload(rec, ds, seed)
            feats = lab.features.extract(bb, heldout, layers=[block, "pre_logits"], batch_size=256)
            pre_logits = feats["pre_logits"]                                             # (N, D)
            recomputed.append(float(lab.metrics.nc1(pre_logits, y)))
            head_in = pre_logits
            if strategy == "scl":
                skip = feats[block]                                                      # (N, C), C <= D
                head_in = pre_logits + torch.nn.functional.pad(skip, (0, pre_logits.shape[1] - skip.shape[1]))
            head_nc1.append(float(lab.metrics.nc1(head_in, y)))
        results[strategy] = {
            "run_id": rec.run_id, "heldout_accuracy": tr.get("heldout_accuracy"), "heldout_accuracy_std": acc_std,
            "train_accuracy": tr.get("train_accuracy"),
            "trainable_fraction": float(rec.meta.get("trainable_fraction", float("nan"))),
            "n_trainable": rec.meta.get("n_trainable"),
            "nc1_pre_logits_engine": engine_nc1, "nc1_pre_logits_reloaded": float(np.mean(recomputed)),
            "nc1_head_input": float(np.mean(head_nc1)),
        }

    lines = [f"[2] NC transfer paper, Table 3 (qualitative) — {settings.t3_backbone} @{settings.t3_img_size} px; "
             f"pre-trained (full, {settings.t3_pre_epochs} epochs, lr {settings.t3_pre_lr:g}) on 10 glyph styles "
             f"(held-out acc {_f(pre_tr.get('heldout_accuracy'))}), run {pre.run_id};",
             f"    then fine-tuned on the 10 other styles, {settings.t3_ft_epochs} epochs, AdamW lr {settings.t3_ft_lr:g}, "
             f"block {block!r} for Layer/SCL FT, seeds {list(settings.t3_seeds)} (means); held-out = 64 images per style",
             "    strategy  trained params  held-out acc  train acc  NC1 head input  NC1 pre-logits (engine / reloaded)"]
    for s, r in results.items():
        lines.append(f"    {s:<8}  {r['trainable_fraction'] * 100:11.1f} %  "
                     f"{_pm(r['heldout_accuracy'], r['heldout_accuracy_std']):>12}  "
                     f"{_f(r['train_accuracy']):>9}  {_f(r['nc1_head_input']):>14}  "
                     f"{_f(r['nc1_pre_logits_engine'])} / {_f(r['nc1_pre_logits_reloaded'])}")

    acc = {s: r["heldout_accuracy"] for s, r in results.items()}
    std = {s: r["heldout_accuracy_std"] for s, r in results.items()}
    tol = 0.05
    lin_lowest = acc["linear"] < min(acc["layer"], acc["scl"], acc["full"])
    layer_rivals = acc["layer"] >= acc["full"] - tol
    scl_rivals = acc["scl"] >= acc["full"] - tol
    hits = [lin_lowest, layer_rivals, scl_rivals]
    verdict = REPRODUCED if all(hits) else NOT_REPRODUCED if not any(hits) else MIXED
    frac = {s: results[s]["trainable_fraction"] for s in results}
    rows = [Row(
        key="t3_accuracy", source="NC transfer, Table 3",
        claim="linear probe < Layer FT ≈ SCL FT ≈ full FT (held-out accuracy)",
        paper="Layer FT / SCL FT rival full FT while training a small fraction of the weights (6–8 % for a "
              "middle ResNet block); the linear probe is clearly worse",
        measured=(f"acc linear {_pm(acc['linear'], std['linear'])}, layer {_pm(acc['layer'], std['layer'])}, scl "
                  f"{_pm(acc['scl'], std['scl'])}, full {_pm(acc['full'], std['full'])} ({len(settings.t3_seeds)} "
                  f"seed(s)); trained params {frac['linear'] * 100:.1f} / {frac['layer'] * 100:.1f} / "
                  f"{frac['scl'] * 100:.1f} / {frac['full'] * 100:.0f} %"),
        verdict=_fast_or(settings, verdict, True),
        rule=(f"reproduced: linear is the lowest AND Layer FT and SCL FT are each within {tol:g} of full FT (or above); "
              "not reproduced: none of these three holds; mixed: some hold. Fast mode: too few epochs to judge"),
        values={"accuracy": acc, "trainable_fraction": frac},
    )]
    order = list(results)
    rho = _spearman([acc[s] for s in order], [results[s]["nc1_head_input"] for s in order])
    verdict = REPRODUCED if rho <= -0.8 else MIXED if rho < 0 else NOT_REPRODUCED
    rows.append(Row(
        key="t3_nc1", source="NC transfer, Table 3",
        claim="lower penultimate NC1 (downstream) where held-out accuracy is higher",
        paper="more collapse of the penultimate features on the downstream data goes with better accuracy",
        measured=("NC1 of the head's input linear {0}, layer {1}, scl {2}, full {3}; Spearman(acc, NC1) {4}"
                  .format(*[_f(results[s]['nc1_head_input']) for s in order], _f(rho, 2))),
        verdict=_fast_or(settings, verdict, True),
        rule=("Spearman(held-out accuracy, NC1 of the head's input on held-out images) over the 4 strategies: <= -0.8 "
              "reproduced (at most one swapped pair), < 0 mixed, >= 0 not reproduced"),
        values={"spearman": rho},
    ))
    values = {"pretrain_run": pre.run_id, "pretrain_classes": pretrain, "downstream_classes": downstream,
              "pretrain_heldout_accuracy": pre_tr.get("heldout_accuracy"), "strategies": results, "block": block}
    return rows, values, lines


# ---------------------------------------------------------------------------------------------- 3. Dyballa / Gerritz


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
            backbone=_hf_backbone(backbone, Path(store.root)), img_size=size, strategy="full", epochs=epochs, lr=lr,
            seeds=settings.dy_seeds, metrics=("nmi",), projection="none", unseen_per_class=settings.dy_unseen_per_class,
            seen_per_class=None, device="cpu", save_weights=False)
        rec = _run(cfg, store, f"dyballa {backbone}@{size or 'native'}")
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
        gap_mean, gap_std = _seed_spread((fin[best_source] - fin[last_layer]).to_numpy())  # per seed
        acc_final = _final(rec.training)["heldout_accuracy"]
        acc_mean, acc_std = _seed_spread(acc_final)
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
            "seen_accuracy_by_epoch": {int(e): (None if pd_isna(v) else float(v)) for e, v in acc_by_epoch.items()},
        }

    n_seeds = len(settings.dy_seeds)
    lines = [f"[3] Dyballa et al. / Gerritz et al. — glyphs, paper split 15 seen / 5 unseen "
             f"({', '.join(split.unseen)}), full fine-tuning (zoo: glyph-pretrained; others: from scratch; AdamW, "
             f"cosine schedule, augmentation on), seeds {list(settings.dy_seeds)}, "
             f"{settings.dy_unseen_per_class} unseen images per style; NMI at the final epoch, mean±std over seeds"]
    for name, r in per_bb.items():
        lines.append(f"    {name}: run {r['run_id']} ({r['epochs']} epochs, lr {r['lr']:g})")
        lines.append("      " + "  ".join(f"{layer} {_pm(r['nmi_mean'][layer], r['nmi_std'][layer], 2)}"
                                          for layer in r["layers"]))
        lines.append(f"      g {_pm(r['g'], r['g_std'])} at {r['best_layer']}"
                     f"{' (same features as pre_logits)' if r['best_is_last'] and r['best_layer'] != 'pre_logits' else ''}"
                     f"; last layer (pre_logits) {_pm(r['last_nmi'], r['last_nmi_std'])}; seen held-out accuracy "
                     f"{_pm(r['seen_accuracy'], r['seen_accuracy_std'])}")
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
            measured=(f"g {_pm(r['g'], r['g_std'])} at {r['best_layer']}; last {_pm(r['last_nmi'], r['last_nmi_std'])}; "
                      f"gap {_pm(r['gap_mean'], r['gap_std'])} over {n_seeds} seed(s)"),
            verdict=_fast_or(settings, verdict, n_seeds < 2),
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
        measured=(f"by seen acc: {' > '.join(rank_acc)}; by g: {' > '.join(rank_g)}; Spearman(acc, g) {_f(rho, 2)} "
                  f"over {len(names)} backbones"),
        verdict=_fast_or(settings, verdict, len(names) < 3 or n_seeds < 2),
        rule=("Spearman(seen held-out accuracy, g) across backbones (lab.analysis.accuracy_vs_g; undefined below 3): "
              "= 1 (same ranking) not reproduced, <= 0 reproduced, in between mixed (3 backbones: weak evidence either "
              "way). Fast mode (2 backbones, 1 seed): inconclusive"),
        values={"spearman": rho, "spearman_ci": ranks["spearman_ci"], "kendall": ranks["kendall"],
                "rank_by_accuracy": rank_acc, "rank_by_g": rank_g},
    ))
    return rows, {"split": split.to_dict(), "backbones": per_bb}, lines


def pd_isna(v) -> bool:
    import pandas as pd

    return bool(pd.isna(v))


# ---------------------------------------------------------------------------------------------- 4. Wang & Yang


def wang_yang(settings: Settings, store) -> tuple[list[Row], dict, list[str]]:
    """Utilization of the last layer vs label noise; held-out accuracy after re-initialising layers."""
    import lab

    per_noise: dict[float, dict] = {}
    for noise in settings.wy_noise:
        # a constant rate as in the paper (a decay to zero stills the late epochs that memorise noise)
        cfg = lab.RunConfig(
            name=f"claims-wang-noise{noise:g}", dataset="digits", backbone=settings.wy_backbone, n_unseen=2,
            strategy="full", epochs=settings.wy_epochs, lr=settings.wy_lr, lr_schedule="constant",
            augment=False, label_noise=noise, contribution=True, metrics=("nmi",), projection="none",
            seen_per_class=None, unseen_per_class=None, device="cpu", save_weights=False)
        rec = _run(cfg, store, f"wang noise {noise:g}")
        layers = _hidden_layers(rec)
        u = _final(rec.utilization)
        util = {layer: float(u[u["layer"] == layer]["relative"].mean()) for layer in layers}
        util_abs = {layer: float(u[u["layer"] == layer]["absolute"].mean()) for layer in layers}
        c = rec.contribution
        reinit_acc = {layer: float(c[(c["layer"] == layer) & (c["metric"] == "heldout_accuracy")]["value"].mean())
                      for layer in layers}
        reinit_delta = {layer: float(c[(c["layer"] == layer) & (c["metric"] == "heldout_accuracy_delta")]["value"].mean())
                        for layer in layers}
        per_noise[noise] = {"run_id": rec.run_id, "layers": layers, "relative_utilization": util,
                            "absolute_utilization": util_abs, "reinit_heldout_accuracy": reinit_acc,
                            "reinit_heldout_accuracy_delta": reinit_delta, **_training_final(rec)}

    noises = list(per_noise)
    layers = per_noise[noises[0]]["layers"]
    first, last, second_last = layers[0], layers[-1], layers[-2]
    lines = [f"[4] Wang & Yang — {settings.wy_backbone} on digits, full training {settings.wy_epochs} epochs (AdamW lr "
             f"{settings.wy_lr:g}, no augmentation), label noise {', '.join(f'{n:g}' for n in noises)}; "
             "contribution = re-initialise one layer to its epoch-0 weights"]
    lines.append("    (train acc is measured against the training labels as given, i.e. the noisy ones; resilience = "
                 "accuracy on the relabelled training images against their true labels)")
    lines.append("    noise  train acc  held-out acc  resilience  | relative utilization " + " ".join(f"{n:>6}" for n in layers)
                 + " | held-out acc after re-init " + " ".join(f"{n:>6}" for n in layers))
    for n, r in per_noise.items():
        lines.append(f"    {n:5.2f}  {_f(r.get('train_accuracy')):>9}  {_f(r.get('heldout_accuracy')):>12}  "
                     f"{_f(r.get('resilience')):>10}  | {'':20}"
                     + " ".join(f"{r['relative_utilization'][x]:6.3f}" for x in layers) + " | " + " " * 27
                     + " ".join(f"{r['reinit_heldout_accuracy'][x]:6.3f}" for x in layers))
    lines.append("    runs: " + ", ".join(f"noise {n:g} {r['run_id']}" for n, r in per_noise.items()))

    util_last = [per_noise[n]["relative_utilization"][last] for n in noises]
    acc = [per_noise[n].get("heldout_accuracy", float("nan")) for n in noises]
    up = all(b > a for a, b in zip(util_last, util_last[1:]))
    down = all(b < a for a, b in zip(acc, acc[1:]))
    ends = util_last[-1] > util_last[0] and acc[-1] < acc[0]
    verdict = REPRODUCED if up and down else MIXED if ends or up else NOT_REPRODUCED
    rows = [Row(
        key="wang_utilization", source="Wang & Yang",
        claim=f"last-layer utilization ({last}) grows with label noise as held-out accuracy falls",
        paper="the distance of the final layers' weights from their initial values correlates with the generalization "
              "error (larger with label noise)",
        measured=("noise " + ", ".join(f"{n:g}" for n in noises) + f": relative utilization {last} "
                  + " / ".join(_f(v) for v in util_last) + "; held-out acc " + " / ".join(_f(v) for v in acc)
                  + f" (for comparison {first}: " + " / ".join(_f(per_noise[n]["relative_utilization"][first])
                                                             for n in noises) + ")"),
        verdict=_fast_or(settings, verdict, True),
        rule=("reproduced: utilization rises and held-out accuracy falls strictly with noise; mixed: only the "
              "utilization trend holds, or both hold from the lowest to the highest noise only; otherwise not reproduced. "
              "Fast mode: too few epochs to memorise the noise"),
        values={"relative_utilization_last": dict(zip(map(str, noises), util_last)),
                "heldout_accuracy": dict(zip(map(str, noises), acc))},
    )]
    d_last = [per_noise[n]["reinit_heldout_accuracy_delta"][last] for n in noises]
    d_second = [per_noise[n]["reinit_heldout_accuracy_delta"][second_last] for n in noises]
    d_first = [per_noise[n]["reinit_heldout_accuracy_delta"][first] for n in noises]
    noisiest = noises.index(max(noises))
    cheap = d_last[noisiest] >= -0.02
    later_matters_less = all(dl > df for dl, df in zip(d_last, d_first))
    verdict = REPRODUCED if cheap and later_matters_less else MIXED if cheap or later_matters_less else NOT_REPRODUCED
    rows.append(Row(
        key="wang_reinit", source="Wang & Yang",
        claim=f"re-initialising the final layer ({last}) costs little held-out accuracy under label noise, unlike "
              f"the first ({first})",
        paper="deeper layers only fit the training (and mislabeled) data; re-initialising the final layers works as a "
              "post-training regularizer, while early layers carry what generalizes",
        measured=("Δ held-out acc after re-init, noise " + ", ".join(f"{n:g}" for n in noises) + f": {last} "
                  + " / ".join(_f(v) for v in d_last) + f"; {second_last} " + " / ".join(_f(v) for v in d_second)
                  + f"; {first} " + " / ".join(_f(v) for v in d_first)),
        verdict=_fast_or(settings, verdict, True),
        rule=(f"reproduced: at the highest noise re-initialising {last} changes held-out accuracy by >= -0.02 AND at every "
              f"noise level it hurts less than re-initialising {first}; mixed: one of the two; otherwise not reproduced. "
              "Fast mode: too few epochs"),
        values={"delta_last": d_last, "delta_second_last": d_second, "delta_first": d_first},
    ))
    return rows, {"noise": {str(k): v for k, v in per_noise.items()}}, lines


# ---------------------------------------------------------------------------------------------- report


def _table(rows: list[Row]) -> str:
    """A plain-text table: #, source, claim, paper reports, measured, verdict (wrapped cells)."""
    cols = [("#", 2), ("source", 18), ("claim", 34), ("paper reports", 34), ("measured here", 50), ("verdict", 14)]
    sep = "+" + "+".join("-" * (w + 2) for _, w in cols) + "+"
    out = [sep, "|" + "|".join(f" {name:<{w}} " for name, w in cols) + "|", sep.replace("-", "=")]
    for i, row in enumerate(rows, 1):
        cells = [str(i), row.source, row.claim, row.paper, row.measured, row.verdict]
        wrapped = [textwrap.wrap(text, w, break_long_words=True) or [""] for text, (_, w) in zip(cells, cols)]
        for j in range(max(map(len, wrapped))):
            out.append("|" + "|".join(f" {(lines[j] if j < len(lines) else ''):<{w}} "
                                      for lines, (_, w) in zip(wrapped, cols)) + "|")
        out.append(sep)
    return "\n".join(out)


EXPERIMENTS = ("fig2", "table3", "dyballa", "wang_yang")


def run_claims(settings: Settings, store, only: tuple[str, ...] = EXPERIMENTS) -> dict:
    """Run the experiments named in ``only`` (default all four); returns {"rows": [Row], "details": {...},
    "lines": [...], "errors": [...]}."""
    rows: list[Row] = []
    details: dict[str, Any] = {}
    lines: list[str] = []
    errors: list[str] = []
    experiments = (
        ("fig2", fig2, ["fig2_train", "fig2_heldout"]),
        ("table3", table3, ["t3_accuracy", "t3_nc1"]),
        ("dyballa", dyballa, ["dyballa_best_layer", "dyballa_accuracy_vs_g"]),
        ("wang_yang", wang_yang, ["wang_utilization", "wang_reinit"]),
    )
    for name, fn, keys in experiments:
        if name not in only:
            continue
        t = time.perf_counter()
        try:
            r, v, text = fn(settings, store)
        except _RunFailed as exc:
            _log(str(exc))
            errors.append(str(exc))
            rows.extend(Row(key=k, source=name, claim=k, paper="", measured=f"— ({exc})", verdict=NOT_MEASURED,
                            rule="a run failed: nothing was measured") for k in keys)
            continue
        v["seconds"] = time.perf_counter() - t
        rows.extend(r)
        details[name] = v
        lines.extend(text + [f"    ({v['seconds']:.0f} s)", ""])
    return {"rows": rows, "details": details, "lines": lines, "errors": errors}


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit code (1 when a run failed)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fast", action="store_true", help="a couple of minutes: fewer epochs, seeds, backbones")
    parser.add_argument("--runs-dir", default=None, help="keep the runs in this RunStore folder (default: a temporary one)")
    parser.add_argument("--json", dest="json_out", default=None, help="also write every number to this JSON file")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch/BLAS threads (default 1: on a shared 2-core machine more threads spin and slow down)")
    parser.add_argument("--only", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS), metavar="CLAIM",
                        help=f"run only these experiments ({', '.join(EXPERIMENTS)}; default: all)")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be >= 1. Got {args.threads} instead.")

    import torch
    # Loaded before threadpool_limits is entered: threadpoolctl limits only the libraries already loaded.
    import sklearn.cluster  # noqa: F401
    from threadpoolctl import threadpool_limits

    import lab

    settings = Settings.fast_preset() if args.fast else Settings.full()
    torch.set_num_threads(args.threads)
    tmp = None
    if args.runs_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="paper-claims-")
        root = tmp.name
    else:
        root = args.runs_dir
    os.environ["LAB_RUNS_DIR"] = str(root)   # so that checkpoint="run:ID" resolves in this store
    store = lab.RunStore(root)
    t0 = time.perf_counter()
    _log(f"paper claims, {'fast' if settings.fast else 'full'} mode, store {root}, {args.threads} thread(s)")
    try:
        with threadpool_limits(limits=args.threads):
            result = run_claims(settings, store, tuple(args.only))
    finally:
        seconds = time.perf_counter() - t0
        if tmp is not None:
            tmp.cleanup()

    rows = result["rows"]
    out = [f"layerscope — the seed papers' claims, small CPU versions ({'FAST' if settings.fast else 'full'} mode, "
           f"{seconds / 60:.1f} min, {args.threads} thread(s), lab {lab.__version__}, torch {torch.__version__})",
           "Models start from random init or the offline glyph zoo, on 32–64 px images (nothing is downloaded); "
           "only qualitative claims are checked.", ""]
    if settings.fast:
        out += ["FAST MODE: too few epochs, seeds and backbones to judge most claims — those rows say "
                f"'{FAST_VERDICT}'; run without --fast for verdicts.", ""]
    out += result["lines"]
    out += ["Summary", _table(rows), "", "Verdict rules (applied to the numbers above):"]
    out += [textwrap.fill(f"{i}. {row.rule}", 118, subsequent_indent="   ") for i, row in enumerate(rows, 1)]
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS if any(r.verdict == v for r in rows)}
    out += ["", "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items())]
    if result["errors"]:
        out += ["", "Failed runs:"] + [f"  {e}" for e in result["errors"]]
    print("\n".join(out), flush=True)

    if args.json_out:
        payload = {"mode": "fast" if settings.fast else "full", "seconds": seconds, "threads": args.threads,
                   "settings": asdict(settings), "rows": [asdict(r) for r in rows], "details": result["details"],
                   "errors": result["errors"], "runs_dir": args.runs_dir}
        Path(args.json_out).write_text(json.dumps(_jsonable(payload), indent=2, ensure_ascii=False))
        _log(f"numbers written to {args.json_out}")
    _log(f"done in {seconds:.0f}s")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
