"""The live view shows the label-free family: its metric-vs-layer panels when the run measures it, and its rows
under the verdict (best layer by each measure, "—" where no bootstrap gives a share, marked "no labels")."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from lab import analysis


def test_a_run_that_measures_the_family_gets_its_panels():
    from app.live._streams import curve_specs

    # a run with a seen split (its held-out images): the seen curves apply
    model = SimpleNamespace(config={"metrics": ["nmi", "rankme", "alpha_req", "twonn_id", "lidar"]},
                            seen=("a", "b"), n_images=None)
    assert curve_specs(model) == [("nmi", ("unseen",)), ("rankme", ("unseen", "seen")),
                                  ("alpha_req", ("unseen", "seen")), ("twonn_id", ("unseen", "seen")),
                                  ("lidar", ("unseen",))]
    older = SimpleNamespace(config={"metrics": ["nmi", "knn_accuracy", "nc1", "cdnv"]}, seen=("a", "b"), n_images=None)
    assert [m for m, _ in curve_specs(older)] == ["nmi", "knn_accuracy", "nc1", "cdnv"]


def test_the_agreement_rows_of_the_label_free_measures(store):
    from app.live._agreement import agreement_html
    from lab.config import RunConfig

    layers = ["a", "b", "c"]
    values = {"nmi": [0.2, 0.9, 0.4], "nmi_best_share": [0.1, 0.85, 0.05], "rankme": [3.0, 5.0, 9.0],
              "twonn_id": [9.0, 4.0, 6.0]}
    w = store.create(RunConfig(dataset="digits", backbone="mlp", epochs=0, strategy="none"))
    w.update_meta(layers=layers, layer_aliases={})
    w.append_metrics([{"seed": 0, "epoch": 0, "layer": layer, "split": "unseen", "metric": m, "value": v[i]}
                      for m, v in values.items() for i, layer in enumerate(layers)])
    w.append_training({"seed": 0, "epoch": 0})
    w.finish("finished")
    table = analysis.measure_agreement(w.run_id, store=store)
    assert list(table.index) == ["nmi", "rankme", "twonn_id"]
    text = agreement_html(table)
    assert ("<tr data-measure='nmi'><td>NMI</td><td>b</td><td style='text-align:right'>85 %</td>"
            "<td style='text-align:right'>1.00</td></tr>") in text
    marked = " <span style='color:#777'>(no labels)</span>"
    assert (f"<tr data-measure='rankme'><td>RankMe{marked}</td><td>c</td><td style='text-align:right'>—</td>"
            f"<td style='text-align:right'>{table.loc['rankme', 'spearman']:.2f}</td></tr>") in text
    assert f"<tr data-measure='twonn_id'><td>TwoNN ID{marked}</td><td>b</td>" in text
    assert np.isfinite(table.loc["twonn_id", "spearman"]) and isinstance(table, pd.DataFrame)
