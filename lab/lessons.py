"""Runs that teach one idea each, as plain :class:`lab.RunConfig` values (no Panel: the app's presets read them).

:data:`NC_LESSON` is the one-minute lesson on neural collapse (Papyan, Han & Donoho 2020; docs/METRICS.md,
"Neural collapse on the training set"): a small MLP on three digit classes reaches 100 % accuracy on its training
sample within a few epochs and keeps training, the terminal phase of training, while the collapse measures go on
falling. ``benchmarks/nc_lesson.py`` checks what it promises on a 2-core CPU: the whole run in at most
:data:`NC_LESSON_SECONDS`, the training sample's NC1 at the head input at least :data:`NC_LESSON_FALL` times lower
at the last epoch than at epoch 0, and NC4 (the head against the nearest class centre) at 0 at the end. The app
offers it as the preset "Neural collapse: the terminal phase (lesson)"; ``notebooks/07_neural_collapse_lesson``
tells its story.

:data:`SEPARATION_LAW_LESSON` is the one-minute lesson on neural collapse across layers: the law of
equi-separation (He & Su, PNAS 2023; docs/METRICS.md, "Collapse across layers"), log10 NC1 falling linearly with
depth, absent at initialization and emerging as training goes on. ``benchmarks/separation_law.py --lesson`` checks
what it promises on a 2-core CPU: the whole run in at most :data:`SEPARATION_LAW_SECONDS`, Pearson r of the
training sample's log10 NC1 against depth above :data:`LAW_ABSENT_R` at epoch 0 and at most :data:`LAW_HOLDS_R`
at the last epoch. The app offers it as the preset "Neural collapse across layers: the law of equi-separation
(lesson)".

Example
-------
>>> import lab
>>> from lab.lessons import NC_LESSON
>>> for event in lab.run(NC_LESSON):                     # doctest: +SKIP
...     pass
"""
from __future__ import annotations

from lab.config import RunConfig

__all__ = ["NC_LESSON", "NC_LESSON_METRICS", "NC_LESSON_SECONDS", "NC_LESSON_FALL", "SEPARATION_LAW_LESSON",
           "SEPARATION_LAW_SECONDS", "LAW_ABSENT_R", "LAW_HOLDS_R"]

NC_LESSON_METRICS = (
    "nmi", "nc1", "nc2_equinorm", "nc2_equiangularity", "nc2_cosine_std", "ncc_accuracy",
    "nc2_classifier_equinorm", "nc2_classifier_equiangularity", "nc3_self_duality", "nc4_ncc_disagreement",
    "head_accuracy",
)
"""What the lesson measures: NMI (which layer separates the classes), the collapse family at every layer and the
classifier family at the head input; nothing else, so that the run stays within its minute."""

NC_LESSON_SECONDS = 60.0
"""The wall time the whole lesson run may take on a 2-core CPU (``benchmarks/nc_lesson.py``)."""
NC_LESSON_FALL = 10.0
"""How many times lower the training sample's NC1 at the head input must be at the end than at epoch 0."""

NC_LESSON = RunConfig(
    name="Neural collapse lesson (MLP on 3 digits)",
    # K = 3 seen classes: the class means' simplex is a triangle, drawn in its own plane; the 7 other digits are
    # the unseen classes (a random split with split_seed 0).
    dataset="digits", n_unseen=7,
    backbone="mlp:depth=3,width=64", strategy="full",
    # 15 epochs at lr 2e-3: 100 % on the training sample by epoch 2, then 13 epochs of the terminal phase.
    # Weight decay as in Papyan et al.'s runs; no augmentation, so the network trains on the images it is
    # measured on.
    epochs=15, lr=2e-3, weight_decay=5e-4, augment=False,
    seen_per_class=30, unseen_per_class=20, train_sample_per_class=20,
    metrics=NC_LESSON_METRICS, projection="pca", seeds=(0,),
)
"""The neural-collapse lesson's run (measured by ``benchmarks/nc_lesson.py``: ``benchmarks/results/nc_lesson.txt``)."""

SEPARATION_LAW_SECONDS = 60.0
"""The wall time the whole law-of-equi-separation lesson may take on a 2-core CPU (``benchmarks/separation_law.py``)."""
LAW_ABSENT_R = -0.5
"""The training sample's r (log10 NC1 against depth) at epoch 0 must lie above this: no law at initialization."""
LAW_HOLDS_R = -0.98
"""The training sample's r at the last epoch must be at most this: the law holds."""

SEPARATION_LAW_LESSON = RunConfig(
    name="Neural collapse across layers: the law of equi-separation",
    # 8 hidden layers of one width, so that every layer could separate the 7 seen classes equally well; the
    # last hidden layer and pre_logits are the same tensor and count once (8 layers fitted).
    dataset="digits", n_unseen=3,
    backbone="mlp:depth=8,width=256", strategy="full", epochs=8, lr=1e-3,
    # 100 images per seen class in the training sample the law is read on, as issue 49 measured it
    seen_per_class=50, unseen_per_class=100, train_sample_per_class=100,
    # the collapse family only (NC1 is the law's measure) and PCA: the run stays within its minute
    metrics=NC_LESSON_METRICS, projection="pca", seeds=(0,),
)
"""The law-of-equi-separation lesson's run (``benchmarks/separation_law.py --lesson``:
``benchmarks/results/separation_law_lesson.txt``)."""
