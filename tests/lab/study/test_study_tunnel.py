"""lab.study.figures(...)["tunnel"]: the tunnel per condition over its seeds, read from the study's stored runs
(hand-written through the store's writer: no training), checked against the definition written out by hand."""
from __future__ import annotations

import numpy as np
import pytest

from lab.study import Study, figures
from lab.study.records import tag_run

LAYERS = ("l0", "l1", "l2", "l3", "l4")
PEAK = {0.001: 1, 0.01: 3}                     # lr -> the layer where the unseen NMI peaks (seed 0)


def test_figures_tunnel_is_each_condition_over_its_seeds(make_run, store):
    study = Study("tunnel_test", {"dataset": "digits", "backbone": "mlp"},
                  {"lr": [0.001, 0.01], "seeds": [[0], [1], [2]]})
    seen = {"ncc_accuracy": 0.95, "numerical_rank": 4.0}          # flat: a saturated probe, no compression
    for cell in study.cells():
        lr, seed = cell.values["lr"], cell.values["seeds"][0]
        peak = min(PEAK[lr] + seed, len(LAYERS) - 1)              # seeds move the peak one layer deeper each
        run = make_run(layers=LAYERS, seeds=(seed,), lr=lr, seen=seen,
                       nmi=lambda s, epoch, i, peak=peak: 0.5 - 0.1 * abs(i - peak))
        tag_run(run, study.name, cell.values, store=store)
    table = figures(study, store=store)["tunnel"].set_index("group")
    assert list(table.index) == ["lr=0.001", "lr=0.01"]
    for lr, group in ((0.001, "lr=0.001"), (0.01, "lr=0.01")):
        peaks = [min(PEAK[lr] + s, 4) for s in (0, 1, 2)]
        depth = np.array(peaks) / (len(LAYERS) - 1)
        row = table.loc[group]
        assert row["n"] == 3 and row["n_layers"] == len(LAYERS)
        assert row["relative_depth"] == pytest.approx(depth.mean())
        assert row["relative_depth_std"] == pytest.approx(depth.std(ddof=1))
        assert row["share"] == 0.0 and row["n_tunnel"] == 0.0   # the rank never falls: no tunnel layer
        assert row["probe_best"] == pytest.approx(0.95)
