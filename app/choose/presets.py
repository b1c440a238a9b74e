"""Named starting points for the Choose panel.

Each preset is a set of :class:`lab.RunConfig` fields plus a few view choices
(``"view"``). Presets are data, not state: nothing here is mutated.
"""
from __future__ import annotations

from types import MappingProxyType

from lab.config import RunConfig
from lab.lessons import NC_LESSON, SEPARATION_LAW_LESSON

__all__ = ["PRESETS", "DEFAULT_PRESET", "IMAGENET_PRESET", "RANDOM_INIT_PRESET", "TINY_PRESET", "NC_LESSON_PRESET",
           "LAW_LESSON_PRESET", "SEED_ARCHITECTURES"]

SEED_ARCHITECTURES = (
    "resnet18", "resnet50", "vit_tiny_patch16_224", "vit_small_patch16_224", "swin_tiny_patch4_window7_224",
    "pvt_v2_b0", "poolformer_s12", "convnextv2_atto", "mlp", "mlp:depth=8,width=256",
)
"""Backbones of the seed papers (and the teaching MLP), listed first in the backbone search."""

DEFAULT_PRESET = "Which layer generalizes (glyphs, 15/5)"
TINY_PRESET = "Tiny demo (fast)"
RANDOM_INIT_PRESET = "Which layer generalizes, random init (baseline)"
IMAGENET_PRESET = "Which layer generalizes: ImageNet-pretrained"
NC_LESSON_PRESET = "Neural collapse: the terminal phase (lesson)"
LAW_LESSON_PRESET = "Neural collapse across layers: the law of equi-separation (lesson)"


def _fields(config: RunConfig) -> MappingProxyType:
    """The fields of ``config`` that differ from RunConfig's defaults: a preset of exactly that run (the form fills
    the others with RunConfig's defaults or its own, which the lesson sets itself)."""
    defaults = RunConfig.defaults()
    return MappingProxyType({name: getattr(config, name) for name, default in defaults.items()
                             if getattr(config, name) != default})

PRESETS = MappingProxyType({
    DEFAULT_PRESET: MappingProxyType({
        "about": "Fine-tune the zoo's glyph-pretrained ResNet-18 (font and character recognition on 26 other CJK fonts) on "
                 "15 calligraphy styles and watch which layer best separates the 5 withheld styles "
                 "(Dyballa et al. 2024; Gerritz et al. 2024). 4 epochs: under 3 minutes on a 2-core CPU "
                 "(127-177 s a seed, benchmarks/preset.py).",
        "split_mode": "paper default",
        "config": MappingProxyType(dict(
            dataset="glyphs", backbone="glyph_resnet18", strategy="full", epochs=4, lr=1e-3,
            n_unseen=5, seeds=(0,), projection="umap",
        )),
        "view": MappingProxyType({"heatmap_metric": "nmi"}),
    }),
    IMAGENET_PRESET: MappingProxyType({
        "about": "The same protocol from natural photos: Google's EfficientNet-Lite0 pretrained on ImageNet-1k "
                 "(75.1 % top-1 as published; weights from an installed package, offline), fine-tuned on the 15 "
                 "seen styles, the 5 withheld styles measured layer by layer. The glyphs are enlarged to 128 px: "
                 "measured on one seed (benchmarks/imagenet_preset.py, 4 epochs), 128 px reached seen held-out "
                 "accuracy 0.996 and g 0.989 [0.975-1.000] (best layer blocks.5.0, not the last), 64 px 0.898 and "
                 "g 0.864 [0.828-0.905], at 3x the time: about 11 minutes on a 2-core CPU (64 px: 4).",
        "split_mode": "paper default",
        "config": MappingProxyType(dict(
            dataset="glyphs", backbone="imagenet_efficientnet_lite0", img_size=128, strategy="full", epochs=4,
            lr=1e-3, n_unseen=5, seeds=(0,), projection="umap",
        )),
        "view": MappingProxyType({"heatmap_metric": "nmi"}),
    }),
    RANDOM_INIT_PRESET: MappingProxyType({
        "about": "The same protocol from random init (timm ResNet-18, no pretraining): the baseline the "
                 "pretrained preset is compared with.",
        "split_mode": "paper default",
        "config": MappingProxyType(dict(
            dataset="glyphs", backbone="resnet18", strategy="full", epochs=6, lr=1e-3,
            n_unseen=5, seeds=(0,), projection="umap",
        )),
        "view": MappingProxyType({"heatmap_metric": "nmi"}),
    }),
    LAW_LESSON_PRESET: MappingProxyType({
        "about": "The one-minute lesson on neural collapse across layers, the law of equi-separation (He & Su 2023): "
                 "an 8-layer MLP learns 7 digit classes for 8 epochs. Open the Neural collapse card: log10 NC1 "
                 "against depth, its fitted line, and r against epoch. Measured in one run (seed 0, "
                 "benchmarks/results/separation_law_lesson.txt): on the training sample r went from +0.85 at epoch "
                 "0 (no law) to -0.995 at epoch 8, NC1 multiplied by 0.64 per layer; held-out images 0.70 per "
                 "layer (r -0.999); on the 3 unseen classes NC1 grew by 1.36 per layer (r +0.96), each deeper "
                 "layer separating them worse. Other seeds, depths or data may differ. Under a minute on a 2-core "
                 "CPU.",
        "split_mode": "random",
        "config": _fields(SEPARATION_LAW_LESSON),   # lab.lessons.SEPARATION_LAW_LESSON, which the benchmark runs
        "view": MappingProxyType({"heatmap_metric": "nc1"}),
    }),
    "Layer utilization with label noise": MappingProxyType({
        "about": "Fine-tune with 30 % of the seen labels corrupted and see which layers move to "
                 "memorize them, and what re-initialising each layer does (Wang & Yang).",
        "split_mode": "paper default",
        "config": MappingProxyType(dict(
            dataset="glyphs", backbone="resnet18", strategy="full", epochs=4, label_noise=0.3,
            contribution=True, unseen_per_class=60, seen_per_class=30, seeds=(0,), projection="pca",
        )),
        "view": MappingProxyType({"heatmap_metric": "nc1"}),
    }),
    NC_LESSON_PRESET: MappingProxyType({
        "about": "The one-minute lesson on neural collapse (Papyan, Han & Donoho 2020): a small MLP learns 3 digit "
                 "classes, classifies its whole training sample right by epoch 2 and keeps training (the terminal "
                 "phase). Open the Neural collapse card: the training sample's NC1 at the head input falls 66-fold, "
                 "the head agrees with the nearest class centre (NC4 = 0), and the 3 class means spread into a "
                 "triangle; compare the held-out (dashed) and unseen (dotted) lines. About 20 s on a 2-core CPU "
                 "(benchmarks/nc_lesson.py).",
        "split_mode": "random",
        "config": _fields(NC_LESSON),          # lab.lessons.NC_LESSON, the run notebook 07 and the benchmark use
        "view": MappingProxyType({"heatmap_metric": "nc1"}),
    }),
    TINY_PRESET: MappingProxyType({
        "about": "A 3-layer MLP on digits for 2 epochs: the whole loop in a few seconds on a CPU.",
        "split_mode": "random",
        "config": MappingProxyType(dict(
            dataset="digits", backbone="mlp:depth=3,width=64", strategy="full", epochs=2, n_unseen=3,
            unseen_per_class=30, seen_per_class=20, seeds=(0,), projection="umap", batch_size=64,
        )),
        "view": MappingProxyType({"heatmap_metric": "nmi"}),
    }),
})
"""Preset name -> {"about", "split_mode", "config" (RunConfig fields), "view" (LiveView params)}.
Fields a preset leaves out take the fresh form's value (``app.choose.config_panel.FORM_DEFAULTS``)."""
