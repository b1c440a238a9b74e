"""Runs that teach one idea each, as plain :class:`lab.RunConfig` values (no Panel: the app's presets read them).

:data:`NC_LESSON` is the one-minute lesson on neural collapse (Papyan, Han & Donoho 2020; docs/METRICS.md,
"Neural collapse on the training set"): a small MLP on three digit classes reaches 100 % accuracy on its training
sample within a few epochs and keeps training, the terminal phase of training, while the collapse measures go on
falling. ``benchmarks/nc_lesson.py`` checks what it promises on a 2-core CPU: the whole run in at most
:data:`NC_LESSON_SECONDS`, the training sample's NC1 at the head input at least :data:`NC_LESSON_FALL` times lower
at the last epoch than at epoch 0, and NC4 (the head against the nearest class centre) at 0 at the end. The app
offers it as the preset "Neural collapse: the terminal phase (lesson)"; ``notebooks/07_neural_collapse_lesson``
tells its story.

Example
-------
>>> import lab
>>> from lab.lessons import NC_LESSON
>>> for event in lab.run(NC_LESSON):                     # doctest: +SKIP
...     pass
"""
from __future__ import annotations

from lab.config import RunConfig

__all__ = ["NC_LESSON", "NC_LESSON_METRICS", "NC_LESSON_SECONDS", "NC_LESSON_FALL"]

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
