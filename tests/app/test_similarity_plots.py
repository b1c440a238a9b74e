"""lab.export.tables.cka_matrix and app.similarity_plots on stored runs (CKA against lab.metrics.cka)."""
from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (options need a backend)
import numpy as np
import pytest

import lab
from app import similarity_plots
from lab.export import tables
from lab.metrics import cka
from lab.store import RunStore

LAYERS = ["a", "b", "c"]


def _run(store, *, shift=0.0, images=None):
    rng = np.random.default_rng(0)
    w = store.create(lab.RunConfig(name="cka", dataset="digits", backbone="mlp", strategy="full", epochs=1,
                                   n_unseen=3))
    w.update_meta(layers=[{"name": n, "kind": "vector", "dim": 6} for n in LAYERS])
    base = rng.normal(size=(30, 6))
    indices = np.arange(30) if images is None else images
    for epoch in (0, 1):
        feats = {"a": base, "b": np.tanh(base @ rng.normal(size=(6, 6))) + shift * epoch * rng.normal(size=(30, 6)),
                 "c": np.ones((30, 6))}
        for layer, X in feats.items():
            w.save_embeddings(0, epoch, layer, X.astype(np.float16), np.arange(30) % 3, indices)
        w.append_metrics([{"seed": 0, "epoch": epoch, "layer": layer, "split": "unseen", "metric": "cka_initial",
                           "value": 1.0 - 0.1 * epoch * i} for i, layer in enumerate(LAYERS)])
    w.finish("finished")
    return store.load(w.run_id)


def test_cka_matrix_is_lab_metrics_cka_of_the_stored_embeddings(tmp_path):
    store = RunStore(tmp_path / "runs")
    rec = _run(store, shift=1.0)
    table = tables.cka_matrix(rec)
    assert list(table.index) == list(table.columns) == LAYERS
    X = {layer: rec.embeddings(0, 1, layer)[0].astype(np.float64) for layer in LAYERS}
    assert table.loc["a", "b"] == pytest.approx(cka(X["a"], X["b"])) and table.loc["a", "a"] == pytest.approx(1.0)
    assert np.isnan(table.loc["c"]).all()                             # constant layer: undefined, a gap
    before_after = tables.cka_matrix(rec, epoch=0, other_epoch=1)
    X0 = rec.embeddings(0, 0, "b")[0].astype(np.float64)
    assert before_after.loc["b", "b"] == pytest.approx(cka(X0, X["b"])) and before_after.loc["b", "b"] < 0.99
    other = _run(store, images=np.arange(30)[::-1])
    with pytest.raises(ValueError, match="different images"):
        tables.cka_matrix(rec, other=other)
    with pytest.raises(ValueError, match="no embeddings at seed 0, epoch 5"):
        tables.cka_matrix(rec, epoch=5)


def test_similarity_figures(tmp_path):
    rec = _run(RunStore(tmp_path / "runs"))
    heat = similarity_plots.cka_heatmap(rec)
    assert isinstance(heat, hv.HeatMap) and len(heat.data) == 4          # the constant layer "c": no cells, no NaN
    assert np.isfinite(heat.dimension_values("cka")).all()
    figure = hv.render(heat)                                              # its column and row stay on the axes
    assert list(figure.x_range.factors) == list(figure.y_range.factors) == LAYERS
    assert similarity_plots.undefined_text(tables.cka_matrix(rec)) == \
        "CKA not defined (constant features), left empty: c (rows); c (columns)."
    curves = similarity_plots.cka_to_initial(rec)
    latest = [el for el in curves if isinstance(el, hv.Curve)][-1]
    np.testing.assert_allclose(latest.dimension_values("cka_initial"), [1.0, 0.9, 0.8])


def test_the_cka_caption_of_a_loop_counted_in_steps_names_no_epoch():
    import pandas as pd

    from app.compare.similarity_plots import initial_caption

    frame = pd.DataFrame({"epoch": [4, 8], "layer": ["fc1", "fc1"], "mean": [0.9, float("nan")], "std": [0.0, 0.0],
                          "n": [1, 0]})
    for caption in (initial_caption(frame.iloc[:0], axis="step"), initial_caption(frame, axis="step")):
        assert "epoch" not in caption and "features at the first evaluation" in caption, caption
    assert "Not defined at step 8 for fc1" in initial_caption(frame, axis="step")
    assert "its own epoch-0 features" in initial_caption(frame) and "at epoch 8" in initial_caption(frame)
