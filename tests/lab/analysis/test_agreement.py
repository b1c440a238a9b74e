"""One source of truth: g, its best layer and its seed spread of one stored multi-seed run agree
exactly through every consumer (issue 11) — the engine's events, the store's summary, the CLI,
the app's model and an executed exported notebook.

The reference is :func:`lab.analysis.run_summary` over the stored tables.
"""
from __future__ import annotations

import re

import pytest

from lab import analysis

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference(tiny_run):
    store, run_id, events = tiny_run
    rec = store.load(run_id)
    ref = analysis.run_summary(rec.metrics, rec.training, layers=rec.meta["layers"],
                               aliases=rec.meta.get("layer_aliases"))
    assert ref["g"] is not None and ref["n_seeds"] == 2 and ref["g_std"] is not None
    return ref


def _triple(d, layer="best_layer"):
    return d[layer], d["g"], d["g_std"]


def test_the_engine_events_agree(tiny_run, reference):
    _, _, events = tiny_run
    finished = events[-1]
    assert _triple(finished.summary) == _triple(reference)
    final = [e for e in events if e.kind == "generalization" and e.seed is None]
    assert final and final[-1].epoch == reference["epoch"]
    assert (final[-1].layer, final[-1].g, final[-1].g_std) == _triple(reference)


def test_the_store_summary_agrees(tiny_run, reference):
    store, run_id, _ = tiny_run
    rec = store.load(run_id)
    facts = {key: rec.summary()[key] for key in analysis.RUN_FACTS}          # epochs, seeds, layers, ...
    assert rec.summary() == {"status": "finished", **facts, **reference}
    assert _triple(rec.meta["summary"]) == _triple(reference)
    listed = store.list().set_index("run_id").loc[run_id]
    assert (listed["best_layer"], listed["g"]) == (reference["best_layer"], reference["g"])


def test_the_cli_agrees(tiny_run, reference, cli):
    store, run_id, _ = tiny_run
    res = cli("runs", "show", run_id, "--runs-dir", str(store.root))
    assert res.returncode == 0, res.stderr
    m = re.search(r"best layer at epoch (\d+): (\S+) \(g = unseen NMI ([\d.]+) ± ([\d.]+), (\d+) seeds\)", res.stdout)
    assert m, res.stdout
    epoch, layer, g, g_std, n = m.groups()
    # the CLI prints 3 decimals: it agrees exactly at the precision it shows
    assert (int(epoch), layer, int(n)) == (reference["epoch"], reference["best_layer"], reference["n_seeds"])
    assert (g, g_std) == (f"{reference['g']:.3f}", f"{reference['g_std']:.3f}")
    where = "is" if reference["best_is_final"] else "is not"
    assert f"the best layer {where} the final representation ({reference['final_layer']})" in res.stdout


def test_the_app_model_agrees(tiny_run, reference):
    from app.live._model import RunModel, verdict_html

    _, _, events = tiny_run
    model = RunModel()
    for e in events:
        model.apply(e)
    v = model.verdict()
    assert (v["layer"], v["g"], v["g_std"]) == _triple(reference)
    assert (v["epoch"], v["n_seeds"], v["is_final"]) == (reference["epoch"], 2, reference["best_is_final"])
    assert v["heldout_accuracy"] == reference["heldout_accuracy"]
    assert f"g = NMI {reference['g']:.3f} ± {reference['g_std']:.3f}" in verdict_html(v)


@pytest.mark.notebook
def test_the_exported_notebook_agrees(tiny_run, reference, tmp_path):
    import lab.export

    store, run_id, _ = tiny_run
    path = tmp_path / "run.ipynb"
    lab.export.to_notebook([run_id], path, store=store, execute=True)
    shown = lab.export.notebook_summary(path)[run_id]
    assert _triple(shown) == _triple(reference)
    assert (shown["epoch"], shown["n_seeds"], shown["best_is_final"]) == (
        reference["epoch"], reference["n_seeds"], reference["best_is_final"])


def test_identical_taps_agree_everywhere(tmp_path, cli, one_thread):
    """A run whose last hidden block *is* its pooled output (a 1-block MLP: fc1 == pre_logits): every
    consumer reports the final representation, whichever of the two won by floating-point noise."""
    from app.live._model import RunModel
    from lab.runs import run
    from lab.store import RunStore
    from tests.fixtures.configs import TINY

    store = RunStore(tmp_path / "runs")
    events = list(run({**TINY, "backbone": "mlp:depth=1,width=16", "epochs": 1, "seeds": (0, 1)}, store=store))
    assert events[-1].kind == "run_finished", events[-1]
    run_id = events[-1].run_id
    rec = store.load(run_id)
    assert rec.meta["layer_aliases"] == {"fc1": "pre_logits"}
    ref = analysis.run_summary(rec.metrics, rec.training, layers=rec.meta["layers"], aliases=rec.meta["layer_aliases"])
    assert ref["best_layer"] == "pre_logits" and ref["best_is_final"] is True
    assert _triple(events[-1].summary) == _triple(ref)
    assert _triple(rec.summary()) == _triple(ref)
    model = RunModel()
    for e in events:
        model.apply(e)
    v = model.verdict()
    assert (v["layer"], v["g"], v["g_std"], v["is_final"]) == (*_triple(ref), True)
    res = cli("runs", "show", run_id, "--runs-dir", str(store.root))
    assert "best layer at epoch 1: pre_logits" in res.stdout, res.stdout
    assert "the best layer is the final representation (pre_logits)" in res.stdout
