"""lab.Monitor(unit=...): a plain loop says whether its evaluation numbers count epochs or optimizer steps."""
from __future__ import annotations

import pytest


def test_a_plain_loop_says_it_counts_steps_and_the_run_keeps_it(monitored_run):
    store, run_id = monitored_run
    rec = store.load(run_id)
    assert rec.meta["axis"] == "step"
    assert sorted(set(rec.metrics["epoch"])) == [0, 4, 8]


def test_the_unit_defaults_to_epoch_and_a_wrong_one_is_refused(tmp_path):
    import lab
    from tests.fixtures.small_loop import digits_split, small_mlp

    unseen, _, _ = digits_split()
    model = small_mlp()
    with pytest.raises(ValueError, match=r"unit must be 'epoch' or 'step'.*Got 'steps' instead"):
        lab.Monitor(model, unseen=unseen, store=False, unit="steps")
    store = lab.RunStore(tmp_path / "runs")
    with lab.Monitor(model, unseen=unseen, store=store, metrics=("nmi",)) as mon:
        pass
    assert store.load(mon.run_id).meta["axis"] == "epoch"


def test_thumbnails_are_kept_only_of_images():
    import numpy as np
    import torch

    from lab.monitor._eval_set import eval_set, thumbnail_images

    labels = torch.arange(6) % 2
    colour = torch.rand(6, 3, 64, 48)                       # pixels in [0, 1]: x 255, longest side to 32
    thumbs = thumbnail_images(eval_set((colour, labels), "unseen", min_classes=2))
    assert thumbs.shape == (6, 32, 24, 3) and thumbs.dtype == np.uint8
    normalised = (colour[:, :, :32, :24] - 0.5) / 0.25     # standardised: each image stretched to its own range
    stretched = thumbnail_images(eval_set((normalised, labels), "unseen", min_classes=2))
    assert stretched.reshape(6, -1).min(1).tolist() == [0] * 6 and stretched.reshape(6, -1).max(1).tolist() == [255] * 6
    for not_images in (torch.rand(6, 5, 16, 16), torch.rand(6, 3, 4, 4)):   # feature maps, tiny grids
        assert thumbnail_images(eval_set((not_images, labels), "unseen", min_classes=2)) is None
