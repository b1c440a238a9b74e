"""What the claim modules share: the verdicts, the experiment sizes (:class:`Settings`), a summary row
(:class:`Row`), running a config through the engine with progress on stderr, and reading a stored run back."""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "REPRODUCED", "MIXED", "NOT_REPRODUCED", "FAST_VERDICT", "NOT_MEASURED", "VERDICTS", "HF_CVT", "hf_backbone",
    "Settings", "Row", "RunFailed", "log", "spearman", "fmt", "pm", "fast_or", "run_logged", "last_epoch",
    "training_final", "seen_metric", "hidden_layers", "seed_spread", "reload_backbone",
]

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


def hf_backbone(backbone: str, root: Path) -> str:
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
            fig2_backbone="mlp:depth=6,width=128", fig2_epochs=3, fig2_optimizer="sgd", fig2_lr=0.02,
            t3_backbone="test_resnet", t3_img_size=32, t3_block="layer2.0", t3_pre_epochs=1, t3_ft_epochs=1,
            t3_pre_lr=2e-3, t3_ft_lr=1e-3, t3_seeds=(0,),
            dy_backbones=(("test_resnet", 32, 2, 2e-3), ("mlp:depth=6,width=256", 32, 2, 2e-3)),
            dy_seeds=(0,), dy_unseen_per_class=60,
            wy_backbone="mlp:depth=6,width=256", wy_noise=(0.0, 0.2, 0.5), wy_epochs=2, wy_lr=1e-3,
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


def log(msg: str) -> None:
    """``msg`` on stderr with the seconds since the experiments were imported (stdout is the report)."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def spearman(a, b) -> float:
    """Spearman rank correlation (average ranks for ties); NaN when either side is constant."""
    from scipy.stats import spearmanr

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    # Rounded so that thresholds such as -0.8 (one swapped pair of 4) are not missed by float error.
    return round(float(spearmanr(a, b).statistic), 9)


def fmt(x, nd: int = 3) -> str:
    """``x`` with ``nd`` decimals; "n/a" for None and non-finite values."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{nd}f}"


def pm(mean, std, nd: int = 3) -> str:
    """"mean±std", or the mean alone when the std is undefined (one seed)."""
    return fmt(mean, nd) if std is None or not math.isfinite(std) else f"{fmt(mean, nd)}±{fmt(std, nd)}"


def fast_or(settings: Settings, verdict: str, too_small: bool) -> str:
    """The rule's verdict, or "inconclusive (fast mode)" when the fast settings cannot judge it."""
    return FAST_VERDICT if settings.fast and too_small else verdict


class RunFailed(RuntimeError):
    """A run of an experiment failed or was cancelled: its claims are not measured."""


def run_logged(cfg, store, label: str):
    """Consume ``lab.run(cfg)`` logging progress to stderr; return the stored RunRecord."""
    import lab

    log(f"{label}: start ({cfg.describe()})")
    run_id, t = None, time.perf_counter()
    for ev in lab.run(cfg, store=store):
        run_id = ev.run_id
        if ev.kind == "epoch_finished":
            extra = f", resilience {ev.resilience:.3f}" if ev.resilience is not None else ""
            log(f"  {label} seed {ev.seed} epoch {ev.epoch}: train acc {fmt(ev.train_accuracy)}, "
                f"held-out acc {fmt(ev.heldout_accuracy)}{extra} ({ev.seconds:.1f}s)")
        elif ev.kind == "layer_contribution":
            log(f"  {label} contribution {ev.layer}: held-out acc "
                f"{fmt(ev.values.get('heldout_accuracy'))} ({fmt(ev.values.get('heldout_accuracy_delta'))})")
        elif ev.kind in ("run_failed", "run_cancelled"):
            raise RunFailed(f"{label}: run {ev.run_id} {ev.kind.split('_')[1]}: {ev.message}")
    log(f"{label}: done in {time.perf_counter() - t:.0f}s (run {run_id})")
    return store.load(run_id)


def last_epoch(df, epoch_col: str = "epoch"):
    """The rows of ``df`` at its last epoch."""
    return df[df[epoch_col] == df[epoch_col].max()]


def training_final(rec) -> dict[str, float]:
    """Mean over seeds of the last epoch's training row."""
    t = last_epoch(rec.training)
    out = {}
    for col in ("train_accuracy", "heldout_accuracy", "heldout_loss", "resilience"):
        if col in t and t[col].notna().any():
            out[col] = float(t[col].astype(float).mean())
    return out


def seen_metric(rec, metric: str, epoch: int | None = None) -> dict[str, float]:
    """{layer: value} of a seen-split metric at ``epoch`` (default last), mean over seeds."""
    m = rec.metrics
    m = m[(m["split"] == "seen") & (m["metric"] == metric)]
    m = m[m["epoch"] == (m["epoch"].max() if epoch is None else epoch)]
    order = [d["name"] for d in rec.meta["layers"]]
    s = m.groupby("layer")["value"].mean()
    return {layer: float(s[layer]) for layer in order if layer in s}


def hidden_layers(rec) -> list[str]:
    """The hidden-layer taps of a teaching MLP (fc1..fcD), in order; pre_logits (= fcD) excluded."""
    return [d["name"] for d in rec.meta["layers"] if d["name"] != "pre_logits"]


def seed_spread(values) -> tuple[float, float]:
    """(mean, std) over seeds of one value per seed, by lab.analysis (std ddof=1; NaN for one seed)."""
    import pandas as pd

    from lab import analysis

    frame = pd.DataFrame({"metric": "x", "value": np.asarray(values, dtype=float)})
    row = analysis.aggregate_seeds(frame, by=("metric",)).iloc[0]
    return float(row["mean"]), float(row["std"])


def reload_backbone(rec, ds, seed: int | None = None):
    """The run's trained backbone through checkpoint='run:ID[/seed]' (default: its first seed)."""
    import lab
    from lab.store import RunStore

    cfg = rec.config
    spec = f"run:{rec.run_id}" if seed is None else f"run:{rec.run_id}/{seed}"
    # the run lives in the claims' own store, not the default one: resolve it there
    checkpoint = lab.backbones.resolve_checkpoint(spec, store=RunStore(rec.path.parent))
    return lab.backbones.load(cfg.backbone, checkpoint=checkpoint, in_chans=ds.in_chans,
                              img_size=cfg.img_size or ds.image_size, device="cpu")
