"""lab.export.study_to_notebook: a study's figures and tables as a notebook, its safety, and the CLI."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

import lab
from lab.export import build_study_notebook, notebook_tables, study_to_notebook, table_metadata
from lab.store import RunStore
from lab.study import Study, figures, summary_text
from lab.study.records import tag_run

REPO = Path(__file__).resolve().parents[3]
LAYERS = ["fc1", "fc2", "pre_logits"]
MARKER_NAME = "layerscope-study-export-pwned"


def _evil(marker: Path) -> str:
    return f'"); import os; os.system("touch {marker}")  #'


def _defined_names(source: str) -> list[str]:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    return [getattr(n, "name", "lambda") for n in ast.walk(ast.parse(source)) if isinstance(n, kinds)]


def _assigned(nb, tag: str) -> dict:
    cell = next(c for c in nb.cells if tag in c.metadata.get("tags", []))
    tree = ast.parse(cell.source)
    return {t.targets[0].id: ast.literal_eval(t.value) for t in tree.body
            if isinstance(t, ast.Assign) and isinstance(t.targets[0], ast.Name)
            and isinstance(t.value, (ast.Constant, ast.Dict, ast.List))}


def _tagged_run(store, study: Study, cell, *, nmi: float, accuracy: float) -> str:
    """A run written by hand through the RunWriter API, tagged as ``cell`` of ``study``."""
    w = store.create(cell.config)
    w.update_meta(layers=[{"name": layer, "kind": "vector", "dim": 8} for layer in LAYERS], device="cpu")
    for seed in cell.config.seeds:
        for epoch in (0, 1):
            w.append_metrics([{"seed": seed, "epoch": epoch, "layer": layer, "split": split, "metric": metric,
                               "value": nmi * (i + 1) / len(LAYERS) if metric == "nmi" else 0.5 + i}
                              for i, layer in enumerate(LAYERS) for split in ("unseen", "seen")
                              for metric in ("nmi", "nc1")])
            w.append_training({"seed": seed, "epoch": epoch, "train_loss": 1.0, "train_accuracy": accuracy + 0.1,
                               "heldout_accuracy": accuracy, "seconds": 0.1})
    w.finish("finished")
    tag_run(w.run_id, study.name, cell.values, store=store)
    return w.run_id


@pytest.fixture
def hand_study(tmp_path):
    """A 3-cell study whose runs were written by hand (no training), with user text in every field."""
    marker = tmp_path / MARKER_NAME
    store = RunStore(tmp_path / "runs")
    study = Study(f"study {_evil(marker)}", {"dataset": "digits", "backbone": "mlp", "epochs": 1,
                                             "name": _evil(marker)},
                  {"label_noise": [0.0, 0.2, 0.4]}, description=f"<script>x</script> {_evil(marker)}")
    ids = [_tagged_run(store, study, cell, nmi=0.3 + 0.1 * i, accuracy=0.9 - 0.2 * i)
           for i, cell in enumerate(study.cells())]
    return store, study, ids, marker


# ------------------------------------------------------------------------------------- building

def test_study_notebook_structure(hand_study):
    store, study, ids, _ = hand_study
    nb = build_study_notebook(study, store=store)
    nbformat.validate(nb)
    tags = {t for c in nb.cells for t in c.metadata.get("tags", [])}
    assert {"study-status", "study-layers", "study-generalization", "study-grid", "study-nc1", "study-run"} <= tags
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    for source in code:
        assert not _defined_names(source), source
    assert any("import lab" in s for s in code) and any("from app import study_plots" in s for s in code)
    slots = _assigned(nb, "study-status")
    assert slots["SPEC"] == json.loads(json.dumps(study.to_dict()))
    assert Study.from_dict(slots["SPEC"]).cells() == study.cells()
    assert slots["EXPORTED_RUN_IDS"] == ids and slots["STORE_ROOT"] == str(store.root.resolve())
    assert _assigned(nb, "study-run")["RUN_MISSING"] is False
    meta = nb.metadata["layerscope"]
    assert meta["study"] == study.name and meta["run_ids"] == ids and meta["status"] == {"finished": 3}


def test_study_notebook_reads_the_summary_it_was_exported_with(hand_study):
    store, study, _, _ = hand_study
    assert _assigned(build_study_notebook(study, store=store), "study-status")["SUMMARY"] == "last"
    nb = build_study_notebook(study, store=store, summary="best")
    load = next(c for c in nb.cells if "study-status" in c.metadata.get("tags", []))
    assert _assigned(nb, "study-status")["SUMMARY"] == "best" and nb.metadata["layerscope"]["summary"] == "best"
    assert "figures(study, store=store, summary=SUMMARY)" in load.source
    assert "**best epoch by unseen g**" in nb.cells[0].source and "95 % interval" in nb.cells[0].source
    assert _assigned(build_study_notebook(study, store=store, summary=1), "study-status")["SUMMARY"] == 1
    with pytest.raises(ValueError, match="summary must be 'last'"):
        build_study_notebook(study, store=store, summary="final")


def test_study_notebook_says_whether_the_measures_agree(hand_study):
    store, study, _, _ = hand_study
    nb = build_study_notebook(study, store=store)
    cell = next(c for c in nb.cells if "study-agreement" in c.metadata.get("tags", []))
    assert "lab.analysis.study_agreement(study, store=store)" in cell.source
    assert 'table_metadata("agreement"' in cell.source and not _defined_names(cell.source)
    # what the cell shows: the hand-written runs measured NMI only, so nothing to compare yet
    assert lab.analysis.study_agreement(study, store=store).empty


def test_user_text_stays_data(hand_study):
    store, study, _, marker = hand_study
    nb = build_study_notebook(study, store=store)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "<script>" not in md and "&lt;script&gt;" in md and "os\\.system\\(&quot;touch" in md
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        assert "system" not in calls
        if "touch" in cell.source:
            consts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            assert study.name in consts and _evil(marker) in consts


def test_bad_input_is_refused_with_a_message(hand_study, tmp_path):
    store, study, _, _ = hand_study
    with pytest.raises(ValueError, match=r"has no runs in the store .*; run it first"):
        build_study_notebook(Study("never-run", {"dataset": "digits"}), store=store)
    with pytest.raises(ValueError, match=r"no study 'nope' in the store"):
        build_study_notebook("nope", store=store)
    with pytest.raises(ValueError, match=r"\.ipynb"):
        study_to_notebook(study, tmp_path / "out.txt", store=store)
    with pytest.raises(ValueError, match="study must be a lab.Study"):
        build_study_notebook(42, store=store)
    with pytest.raises(ValueError, match="execute it first"):
        notebook_tables(build_study_notebook(study, store=store))


def test_a_spec_file_or_a_saved_name_resolves(hand_study, tmp_path):
    from lab.study import save_spec

    store, study, ids, _ = hand_study
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(study.to_dict()))
    assert build_study_notebook(str(spec), store=store).metadata["layerscope"]["run_ids"] == ids
    save_spec(study, store=store)
    assert build_study_notebook(study.name, store=store).metadata["layerscope"]["run_ids"] == ids


def test_table_metadata_round_trips_exactly(hand_study):
    store, study, _, _ = hand_study
    gen = figures(study, store=store)["generalization"]
    assert len(gen) == 3 and gen["heldout_std"].isna().all()          # NaN, floats, bools, ints, text
    payload = json.loads(json.dumps(table_metadata("generalization", gen)))   # as a notebook stores it
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[
        nbformat.v4.new_output("display_data", data={"text/plain": "x"}, metadata=payload)])])
    pd.testing.assert_frame_equal(notebook_tables(nb)["generalization"], gen, check_exact=True)
    mixed = pd.DataFrame({"a": [1.0 / 3, np.nan], "b": [None, "x"], "c": [True, False], "d": np.array([1, 2])})
    back = notebook_tables(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[
        nbformat.v4.new_output("display_data", data={"text/plain": "x"},
                               metadata=json.loads(json.dumps(table_metadata("m", mixed))))])]))["m"]
    pd.testing.assert_frame_equal(back, mixed, check_exact=True)
    with pytest.raises(ValueError, match="must be a pandas DataFrame"):
        table_metadata("m", [1, 2])


def test_cli_export_needs_run_ids_or_a_study(tmp_path):
    from lab.__main__ import main

    out = str(tmp_path / "o.ipynb")
    runs = ["--runs-dir", str(tmp_path / "runs")]
    assert main(["export", "-o", out, *runs]) == 2
    assert main(["export", "abc", "--study", "x", "-o", out, *runs]) == 2
    assert main(["export", "--study", "nope", "-o", out, *runs]) == 2
    assert not Path(out).exists()


def test_cli_export_messages(tmp_path):
    res = subprocess.run([sys.executable, "-m", "lab", "export", "--study", "nope", "-o", str(tmp_path / "o.ipynb"),
                          "--runs-dir", str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "no study 'nope' in the store" in res.stderr and "give a spec file" in res.stderr
    res = subprocess.run([sys.executable, "-m", "lab", "export", "-o", str(tmp_path / "o.ipynb")], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "give the RUN_IDs to export, or --study NAME_OR_SPEC" in res.stderr


# ------------------------------------------------------------------------------------- a real study

@pytest.fixture(scope="module")
def finished_study(tmp_path_factory):
    """A 4-cell study of tiny runs on a real LocalCluster (one worker process: test_study runs two), exported and
    executed."""
    tmp = tmp_path_factory.mktemp("study-export")
    marker = tmp / MARKER_NAME
    store = RunStore(tmp / "runs")
    base = {"dataset": "digits", "backbone": "mlp:depth=3,width=16", "strategy": "full", "epochs": 1,
            "projection": "none", "unseen_per_class": 20, "seen_per_class": 10, "n_unseen": 3,
            "metrics": ["nmi", "knn_accuracy", "nc1"], "save_weights": False, "contribution": True,
            "name": _evil(marker)}
    study = Study("tiny-export", base, {"label_noise": [0.0, 0.3], "lr": [0.001, 0.01]},
                  description=f"<b>tiny</b> {_evil(marker)}")
    result = study.run(store=store, workers=1)
    assert not result.failed and len(result.run_ids) == 4
    path = study_to_notebook(study, tmp / "nb" / "study.ipynb", store=store, execute=True, timeout=300)
    return store, study, nbformat.read(path, as_version=4), marker


@pytest.mark.slow
def test_executed_study_notebook_shows_the_study_figures(finished_study):
    store, study, nb, marker = finished_study
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    for cell in code:
        assert not _defined_names(cell.source), cell.source
    shown = notebook_tables(nb)
    figs = figures(study, store=store)
    # the g table the notebook showed is lab.study.figures()'s, value for value
    pd.testing.assert_frame_equal(shown["generalization"], figs["generalization"], check_exact=True)
    assert len(figs["generalization"]) == 4 and figs["generalization"]["g"].between(0, 1).all()
    # every condition table shows the mean with n and the 95 % interval over seeds
    pd.testing.assert_frame_equal(shown["layers"], figs["layers"], check_exact=True)
    assert {"mean", "seed_low", "seed_high", "n"} <= set(shown["layers"]) <= set(figs["layers"])
    assert {"g_seed_low", "g_seed_high", "n_seeds", "heldout_seed_low", "heldout_n"} <= set(shown["generalization"])
    assert {"mean", "seed_low", "seed_high", "n"} <= set(shown["grid"]) and list(shown["nc1"]) == [
        "group", "layer", "mean", "seed_low", "seed_high", "n"]
    pd.testing.assert_frame_equal(shown["status"], study.status(store=store), check_exact=True)
    assert (shown["status"]["status"] == "finished").all()
    # the agreement table it showed is lab.analysis.study_agreement's (kNN accuracy against NMI, 4 runs)
    agreement = lab.analysis.study_agreement(study, store=store).reset_index()
    pd.testing.assert_frame_equal(shown["agreement"], agreement, check_exact=True, check_dtype=False)
    assert agreement["n_runs"].tolist() == [4]
    # ...and it is the table on the page, not only in the metadata
    gen_cell = next(c for c in code if "study-generalization" in c.metadata.get("tags", []))
    html = "".join(o.data.get("text/html", "") for o in gen_cell.outputs if "data" in o)
    assert all(group in html for group in figs["generalization"]["group"])
    printed = "".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream")
    assert "Over 4 conditions: Spearman" in printed and "note:" not in printed
    assert summary_text(figs) in printed and "each run at the last epoch" in printed
    assert not marker.exists(), "text from the study spec was executed"
    # the figures were drawn (HoloViews objects in the outputs of the figure cells)
    for tag in ("study-layers", "study-generalization", "study-grid", "study-nc1"):
        cell = next(c for c in code if tag in c.metadata.get("tags", []))
        assert any("execute_result" == o.output_type for o in cell.outputs), tag


@pytest.mark.slow
def test_cli_exports_a_study_by_name_and_by_spec(finished_study, tmp_path):
    from lab.study import save_spec

    store, study, nb, _ = finished_study
    save_spec(study, store=store)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(study.to_dict()))
    for name in (study.name, str(spec)):
        out = tmp_path / "cli.ipynb"
        res = subprocess.run([sys.executable, "-m", "lab", "export", "--study", name, "-o", str(out),
                              "--runs-dir", str(store.root)], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        written = nbformat.read(out, as_version=4)
        assert written.metadata["layerscope"]["run_ids"] == nb.metadata["layerscope"]["run_ids"]
        assert written.metadata["layerscope"]["study"] == "tiny-export"
