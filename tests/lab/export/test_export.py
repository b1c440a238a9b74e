"""lab.export: notebook structure, escaping, status notes, execution and injection safety."""
from __future__ import annotations

import ast
import html.parser
import json
import math
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

import lab
from lab.export import build_notebook, escape_markdown, notebook_summary, py_literal, to_notebook
from lab.store import RunNotFoundError, RunStore

REPO = Path(__file__).resolve().parents[3]
LAYERS = ["stem", "blocks.0", "blocks.1", "pre_logits"]
CLASSES = ["a<b>", "c|d", "e*f"]
# The example name, with a side effect we can look for instead of `echo`.
MARKER_NAME = "layerscope-export-pwned"


def _evil_name(marker: Path) -> str:
    return f'"); import os; os.system("touch {marker}")  #'


def _fake_run(store, name, *, seeds=(0, 1), epochs=2, finish=True, offset=0.0, seed=0, embeddings=False):
    """A run written by hand through the RunWriter API (no engine): 4 layers, 3 metrics; with ``embeddings``,
    also 30 unseen images' features per layer (pre_logits constant) and each layer's cka_initial."""
    cfg = lab.RunConfig(name=name, dataset="digits", backbone="mlp", strategy="full", epochs=epochs,
                        seeds=list(seeds), n_unseen=3, projection="pca")
    w = store.create(cfg)
    w.update_meta(layers=[{"name": layer, "kind": "vector", "dim": 8} for layer in LAYERS],
                  split={"seen": ["x", "y"], "unseen": CLASSES}, device="cpu")
    rng = np.random.default_rng(seed)
    for s in seeds:
        for epoch in range(epochs + 1):
            rows = [{"seed": s, "epoch": epoch, "layer": layer, "split": "unseen", "metric": metric,
                     "value": float(rng.random()) + offset}
                    for layer in LAYERS for metric in ("nmi", "knn_accuracy", "nc1")]
            w.append_metrics(rows)
            for layer in LAYERS:
                w.save_projection(s, epoch, layer, "pca", rng.normal(size=(9, 2)), np.arange(9) % 3,
                                  np.arange(9), class_names=CLASSES)
            if embeddings:
                for i, layer in enumerate(LAYERS):
                    X = np.ones((30, 5)) if layer == "pre_logits" else rng.normal(size=(30, 5))
                    w.save_embeddings(s, epoch, layer, X, np.arange(30) % 3, np.arange(30))
                w.append_metrics([{"seed": s, "epoch": epoch, "layer": layer, "split": "unseen",
                                   "metric": "cka_initial", "value": 1.0 - 0.1 * i * epoch}
                                  for i, layer in enumerate(LAYERS)])
            w.append_training({"seed": s, "epoch": epoch, "train_loss": None if epoch == 0 else 1.0 / epoch,
                               "heldout_accuracy": 0.3 + 0.2 * epoch + offset, "seconds": 0.1})
    if finish:
        w.finish("finished")
    return w.run_id


def _interrupt(store, run_id):
    """Make a "running" run look like its process died (the pid's start time no longer matches)."""
    meta_path = store.path(run_id) / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["pid_start"] = -1
    meta_path.write_text(json.dumps(meta))


def _sources(nb, kind):
    return [c.source for c in nb.cells if c.cell_type == kind]


# ------------------------------------------------------------------------------------- escaping

@pytest.mark.parametrize("text", [
    '"); import os; os.system("echo pwned")  #',
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "**bold** _it_ `code` $x$ | cell | # head",
    "line\nbreak\r\n## heading",
    "\u202eevil",
])
def test_escape_markdown_leaves_no_markup(text):
    out = escape_markdown(text)
    assert "<" not in out and ">" not in out
    assert "\n" not in out and "\r" not in out and "\u202e" not in out
    # every ASCII punctuation mark is escaped (backslash) or an entity (&...;)
    i = 0
    while i < len(out):
        ch = out[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "&":
            end = out.index(";", i)
            assert out[i:end + 1] in {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"}
            i = end + 1
            continue
        assert not (ch.isascii() and not ch.isalnum() and not ch.isspace()), (ch, out)
        i += 1


@pytest.mark.parametrize("value", [
    '"); import os; os.system("echo pwned")  #', "'''", '"""', "\\", "a\x00b", "\U0001F600",
    {"name": "x'y\"z", "seeds": [0, 1], "lr": 2e-4, "ok": True, "none": None},
])
def test_py_literal_round_trips(value):
    source = py_literal(value)
    tree = ast.parse(source, mode="eval")
    assert isinstance(tree.body, (ast.Constant, ast.Dict, ast.List))
    assert ast.literal_eval(source) == value


@pytest.mark.parametrize("bad, match", [(float("nan"), "finite"), ({1: 2}, "keys must be strings"),
                                        (object(), "must be made of")])
def test_py_literal_refuses_non_literals(bad, match):
    with pytest.raises(ValueError, match=match):
        py_literal(bad)


# ------------------------------------------------------------------------------------ structure

def test_notebook_structure(store, tmp_path):
    a = _fake_run(store, "first run", seed=1)
    b = _fake_run(store, "second run", seed=2, offset=0.1)
    path = to_notebook([a, b], tmp_path / "out" / "cmp.ipynb", store=store)
    assert path == tmp_path / "out" / "cmp.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert nb.metadata["layerscope"]["run_ids"] == [a, b]
    for source in _sources(nb, "code"):
        ast.parse(source)
    markdown = "\n".join(_sources(nb, "markdown"))
    # the summary names everything the issue lists
    for heading in ("## Run 1: first run", "## Run 2: second run", "side by side"):
        assert heading in markdown
    for field in ("dataset", "class split", "backbone", "strategy", "seeds", "status", "best layer",
                  "seen accuracy", "ran", "versions"):
        assert f"| {field} |" in markdown
    assert "digits" in markdown and "g = " in markdown
    assert "a&lt;b&gt;, c\\|d, e\\*f" in markdown           # class names escaped
    code = "\n".join(_sources(nb, "code"))
    # the figures come from the app's plot module (tests/app/test_plots.py: error bars, heatmap, ...)
    for needle in ("lab.RunStore(STORE_ROOT)", "store.load(run_id)", "plots.layer_curves", "plots.layer_epoch_heatmap",
                   "seen_accuracy", "LAYER = ", "projection_plot", "lab.RunConfig.from_dict", "lab.run(cfg",
                   "EmbeddingView(store=store, run_id=EXPLORE_RUN)"):
        assert needle in code
    # the explorer opens the first run with a layout, its id a literal
    [explorer] = [c for c in nb.cells if "explorer" in c.metadata.get("tags", [])]
    assigned = {t.targets[0].id: t.value for t in ast.parse(explorer.source).body if isinstance(t, ast.Assign)}
    assert ast.literal_eval(assigned["EXPLORE_RUN"]) == a
    # the CKA cell lists the runs with stored embeddings as a literal (these hand-written runs have none)
    [cka_cell] = [c for c in nb.cells if "cka" in c.metadata.get("tags", [])]
    assigned = {t.targets[0].id: t.value for t in ast.parse(cka_cell.source).body if isinstance(t, ast.Assign)}
    assert ast.literal_eval(assigned["CKA_RUNS"]) == [] and "similarity_plots.run_heatmap" in cka_cell.source
    # the last cell holds the exact configs as a literal and re-runs them
    last = nb.cells[-1]
    assert last.cell_type == "code" and "reproduce" in last.metadata["tags"]
    tree = ast.parse(last.source)
    assigned = {t.targets[0].id: t.value for t in tree.body if isinstance(t, ast.Assign)
                and isinstance(t.targets[0], ast.Name)}
    configs = ast.literal_eval(assigned["CONFIGS"])
    assert configs == {rid: store.load(rid).config.to_dict() for rid in (a, b)}
    assert lab.RunConfig.from_dict(configs[a]) == store.load(a).config
    assert ast.literal_eval(assigned["RERUN"]) is False


def _defined_names(source: str) -> list[str]:
    """Functions, classes and lambdas a code cell defines (it should call the library instead)."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    return [getattr(n, "name", "lambda") for n in ast.walk(ast.parse(source)) if isinstance(n, kinds)]


def test_notebooks_hold_no_library_code(store):
    """Exported and shipped notebooks import lab and app.plots; no code cell defines a function or class."""
    rid = _fake_run(store, "no library code")
    notebooks = {"exported": build_notebook([rid], store=store)}
    notebooks.update({p.name: nbformat.read(p, as_version=4) for p in sorted((REPO / "notebooks").glob("*.ipynb"))})
    assert len(notebooks) == 9                     # the exported one and the 8 shipped
    # 08 shows the reader's own LightningModule, which lab.Monitor attaches to: that class is theirs, not lab's
    own_code = {"08_attach_to_your_training.ipynb": ["GlyphClassifier", "__init__", "training_step",
                                                     "configure_optimizers"]}
    for name, nb in notebooks.items():
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        defined = [n for source in code for n in _defined_names(source)]
        assert defined == own_code.get(name, []), f"{name} defines {defined} in its cells"
        assert any("import lab" in source for source in code), name
    exported = "\n".join(c.source for c in notebooks["exported"].cells if c.cell_type == "code")
    assert "from app import plots" in exported and "groupby" not in exported


def test_single_run_id_and_errors(store, tmp_path):
    a = _fake_run(store, "solo")
    nb = build_notebook(a, store=store)              # one id as a string
    assert nb.metadata["layerscope"]["run_ids"] == [a]
    assert not any("side by side" in s for s in _sources(nb, "markdown"))
    with pytest.raises(ValueError, match=r"run id .* is not valid"):
        build_notebook(["../../etc"], store=store)
    with pytest.raises(RunNotFoundError, match="no run"):
        build_notebook(["nope"], store=store)
    with pytest.raises(ValueError, match="at least one run"):
        build_notebook([], store=store)
    with pytest.raises(ValueError, match="more than once"):
        build_notebook([a, a], store=store)
    with pytest.raises(ValueError, match=r"\.ipynb"):
        to_notebook([a], tmp_path / "out.txt", store=store)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        to_notebook([a], tmp_path / "out.ipynb", store=store, execute=True, timeout=0)
    with pytest.raises(ValueError, match="store must be a lab.RunStore"):
        build_notebook([a], store=42)
    # a store given as a folder path works too, and a record serves as the run
    assert build_notebook([a], store=str(store.root)).metadata["layerscope"]["store"] == str(store.root.resolve())
    assert build_notebook(store.load(a), store=store).metadata["layerscope"]["run_ids"] == [a]


def test_running_and_interrupted_runs_say_so(store):
    running = _fake_run(store, "still going", finish=False, seeds=(0,), epochs=1)
    dead = _fake_run(store, "killed", finish=False, seeds=(0,), epochs=1)
    _interrupt(store, dead)
    assert store.load(running).status == "running" and store.load(dead).status == "interrupted"
    nb = build_notebook([running, dead], store=store)
    md = _sources(nb, "markdown")
    assert "still going is **running**" in md[0] and "killed is **interrupted**" in md[0]
    assert "still running" in md[1] and "Epochs completed: 1 of 1" in md[1]
    assert "interrupted" in md[2] and "process stopped before the run finished" in md[2]
    assert nb.metadata["layerscope"]["status"] == {running: "running", dead: "interrupted"}


def test_injected_names_stay_data_without_executing(store, tmp_path):
    marker = tmp_path / MARKER_NAME
    rid = _fake_run(store, _evil_name(marker))
    nb = build_notebook([rid], store=store)
    md = "\n".join(_sources(nb, "markdown"))
    assert "os\\.system\\(&quot;touch" in md and "<" not in md.replace("<br>", "")
    for source in _sources(nb, "code"):
        tree = ast.parse(source)
        # the name may appear only inside string constants (the config literal), never as code
        calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        assert "system" not in calls
        if "touch" in source:
            consts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            assert _evil_name(marker) in consts


# -------------------------------------------------------------------------------- execution

def _html_tables(html_text: str) -> list[list[list[str]]]:
    """Rows of cell texts of every <table> in an HTML string (pandas' to_html output)."""

    class _Parser(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.row, self.cell = [], None, None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.tables.append([])
            elif tag == "tr":
                self.row = []
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                # pandas writes runs of spaces as &nbsp; so that HTML keeps them
                self.row.append("".join(self.cell).replace("\xa0", " ").strip())
                self.cell = None
            elif tag == "tr" and self.row is not None:
                self.tables[-1].append(self.row)
                self.row = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell.append(data)

    parser = _Parser()
    parser.feed(html_text)
    return parser.tables


def _tagged_html(nb, tag):
    cell = next(c for c in nb.cells if tag in c.metadata.get("tags", []))
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert not errors, errors
    return [o.data["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]


def _engine_run(store, name, seed):
    cfg = lab.RunConfig(name=name, dataset="digits", backbone="mlp:depth=3,width=32", strategy="full",
                        epochs=1, seeds=[seed, seed + 1], n_unseen=3, unseen_per_class=20, seen_per_class=10,
                        metrics=["nmi", "knn_accuracy", "nc1"], projection="pca", save_weights=False,
                        device="cpu", batch_size=128)
    events = list(lab.run(cfg, store=store))
    assert events[-1].kind == "run_finished", events[-1]
    return events[0].run_id


@pytest.fixture(scope="module")
def executed_comparison(tmp_path_factory):
    """Two finished engine runs (one with the issue's injection name) exported and executed once,
    with the final cell's RERUN switch on, so the notebook also re-runs both configs from scratch."""
    tmp = tmp_path_factory.mktemp("export")
    marker = tmp / MARKER_NAME
    store = RunStore(tmp / "runs")
    evil = _engine_run(store, _evil_name(marker), seed=0)
    plain = _engine_run(store, "plain <b>run</b>", seed=2)
    path = to_notebook([evil, plain], tmp / "nb" / "comparison.ipynb", store=store, execute=True, timeout=300,
                       rerun=True)
    return store, [evil, plain], nbformat.read(path, as_version=4), marker


@pytest.mark.slow
def test_executed_comparison_reproduces_the_stored_values(executed_comparison):
    store, ids, nb, _ = executed_comparison
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.execution_count is not None
            assert not [o for o in cell.outputs if o.output_type == "error"]
    [explorer] = [c for c in nb.cells if "explorer" in c.metadata.get("tags", [])]     # the explorer was shown
    assert any(o.output_type in ("display_data", "execute_result") for o in explorer.outputs)
    [table] = _html_tables(_tagged_html(nb, "metric-table")[0])
    header, rows = table[0], table[1:]
    assert header[1:4] == ["run", "epoch", "layer"]
    metric_cols = header[4:]
    measured = {"nmi", "knn_accuracy", "nc1"}
    # the bootstrap interval of every separability metric (and each layer's CKA to epoch 0) sit beside them
    extra = {f"{m}_{s}" for m in ("nmi", "knn_accuracy") for s in ("low", "high", "best_share")} | {"cka_initial"}
    assert measured <= set(metric_cols) <= measured | extra, metric_cols
    assert {"nmi_low", "nmi_high", "nmi_best_share"} <= set(metric_cols)
    expected = {}
    for rid in ids:
        rec = store.load(rid)
        m = rec.metrics
        last = m[(m["split"] == "unseen") & (m["epoch"] == m["epoch"].max())]
        means = last.groupby(["layer", "metric"])["value"].mean()
        for (layer, metric), value in means.items():
            expected[(rec.name, layer, metric)] = value
    seen = 0
    for row in rows:
        run, epoch, layer = row[1:4]
        assert int(epoch) == 1
        for metric, text in zip(metric_cols, row[4:]):
            want = expected[(run, layer, metric)]
            assert math.isclose(float(text), want, rel_tol=1e-3, abs_tol=1e-4), (run, layer, metric, text, want)
            seen += 1
    assert seen == len(expected) == 2 * len(store.load(ids[0]).meta["layers"]) * len(metric_cols)
    # the generalization table reproduces g and the seen accuracy of each run's summary
    gen_html = _tagged_html(nb, "generalization-table")[0]
    [gen] = _html_tables(gen_html)
    cols = gen[0]
    for rid in ids:
        rec = store.load(rid)
        summ = rec.summary()
        row = next(r for r in gen[1:] if r[cols.index("run")] == rec.name and int(r[cols.index("epoch")]) == summ["epoch"])
        assert math.isclose(float(row[cols.index("g")]), summ["g"], abs_tol=1e-4)
        assert row[cols.index("g_layer")] == summ["best_layer"]
        assert math.isclose(float(row[cols.index("seen_accuracy")]), summ["heldout_accuracy"], abs_tol=1e-4)


@pytest.mark.slow
def test_notebook_summary_reads_what_the_executed_notebook_showed(executed_comparison, tmp_path):
    store, ids, nb, _ = executed_comparison
    shown = notebook_summary(nb)
    assert set(shown) == set(ids)
    for rid in ids:
        assert shown[rid] == store.load(rid).summary()           # exact: the values travel as JSON numbers
    [table] = _html_tables(_tagged_html(nb, "summary")[0])       # and the same g is in the table people see
    cols = table[0]
    for row in table[1:]:
        rid = row[cols.index("run_id")]
        assert math.isclose(float(row[cols.index("g")]), shown[rid]["g"], abs_tol=1e-4)
        assert row[cols.index("best_layer")] == shown[rid]["best_layer"]
    path = tmp_path / "copy.ipynb"
    nbformat.write(nb, str(path))
    assert notebook_summary(path) == shown


def test_notebook_summary_needs_an_executed_export(store):
    nb = build_notebook([_fake_run(store, "not executed")], store=store)
    with pytest.raises(ValueError, match="execute it first"):
        notebook_summary(nb)
    nb.cells = [c for c in nb.cells if "summary" not in c.metadata.get("tags", [])]
    with pytest.raises(ValueError, match="no cell tagged 'summary'"):
        notebook_summary(nb)


@pytest.mark.slow
def test_executed_injection_runs_nothing(executed_comparison):
    store, ids, nb, marker = executed_comparison
    assert not marker.exists(), "the run name was executed as code"
    name = _evil_name(marker)
    assert store.load(ids[0]).name == name
    # the name is shown: escaped in the summary, verbatim (HTML-escaped) in the executed tables
    assert any(escape_markdown(name) in c.source for c in nb.cells if c.cell_type == "markdown")
    [table] = _html_tables(_tagged_html(nb, "metric-table")[0])
    assert name in {row[1] for row in table[1:]}
    # no output of any cell carries the names as live HTML
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            for mime, data in out.get("data", {}).items():
                if mime == "text/html":
                    assert "<b>run</b>" not in data


def test_the_law_cell_draws_the_first_run_that_measured_nc1(store, make_run):
    without = make_run(layers=LAYERS)                                   # unseen NMI only
    with_nc1 = _fake_run(store, "with nc1", seeds=(0,), epochs=1)
    for runs, expected in (([without, with_nc1], with_nc1), ([without], None)):
        cell = next(c for c in build_notebook(runs, store=store).cells
                    if "separation-law" in c.metadata.get("tags", []))
        assigned = {t.targets[0].id: t.value for t in ast.parse(cell.source).body if isinstance(t, ast.Assign)}
        assert ast.literal_eval(assigned["LAW_RUN"]) == expected
        assert "lab.analysis.separation_law(runs[LAW_RUN])" in cell.source


@pytest.mark.slow
def test_executed_law_cell_shows_each_runs_summary_law_and_draws_it(executed_comparison):
    from lab import analysis

    store, ids, nb, _ = executed_comparison
    [cell] = [c for c in nb.cells if "separation-law" in c.metadata.get("tags", [])]
    assert not [o for o in cell.outputs if o.output_type == "error"]
    [shown] = [o for o in cell.outputs if "layerscope_law" in o.get("metadata", {})]
    law = {rid: store.load(rid).summary()["separation_law"] for rid in ids}
    assert shown.metadata["layerscope_law"] == law                      # exact: JSON numbers
    for entries in law.values():                                      # fc3 is pre_logits: three layers fitted
        assert set(entries) == {"train", "seen", "unseen"} and {e["n_layers"] for e in entries.values()} == {3}
    [table] = _html_tables(shown.data["text/html"])
    cols = table[0]
    assert len(table) - 1 == 6
    for row in table[1:]:
        entry = law[row[cols.index("run_id")]][row[cols.index("split")]]
        for q in ("ratio", "ratio_std", "r", "r_std"):
            assert math.isclose(float(row[cols.index(q)]), entry[q], abs_tol=1e-4), (row, q)
    # the first run's own rows at its last epoch (first seed) are lab.analysis.separation_law's
    rec = store.load(ids[0])
    per_seed = analysis.separation_law(rec)
    at = per_seed[(per_seed["seed"] == per_seed["seed"].min()) & (per_seed["epoch"] == per_seed["epoch"].max())]
    [seed_table] = [t for o in cell.outputs if "text/html" in o.get("data", {}) and o is not shown
                    for t in _html_tables(o.data["text/html"])]
    r_shown = [float(row[seed_table[0].index("r")]) for row in seed_table[1:]]
    np.testing.assert_allclose(r_shown, at["r"].to_numpy(), atol=1e-4)
    [figure] = [o for o in cell.outputs if o.output_type == "execute_result"]
    assert ":Layout" in figure.data["text/plain"]
    assert "log10 NC1 against depth" in figure.data["text/html"] and "r against epoch" in figure.data["text/html"]


@pytest.mark.slow
def test_executed_notebook_reproduces_the_runs_from_scratch(executed_comparison):
    store, ids, nb, marker = executed_comparison
    last = nb.cells[-1]
    assert "reproduce" in last.metadata["tags"]
    printed = "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")
    assert not [o for o in last.outputs if o.output_type == "error"]
    new_ids = sorted(set(store.ids()) - set(ids))
    assert len(new_ids) == 2, printed
    for old_id in ids:
        old = store.load(old_id)
        [new_id] = [i for i in new_ids if f"{old_id} re-run as {i}: run_finished" in printed]
        new = store.load(new_id)
        assert new.config == old.config and new.name == old.name
        keys = ["seed", "epoch", "layer", "split", "metric"]
        both = old.metrics.merge(new.metrics, on=keys, suffixes=("_old", "_new"))
        assert len(both) == len(old.metrics) == len(new.metrics)
        np.testing.assert_allclose(both["value_new"], both["value_old"], rtol=1e-4, atol=1e-5)
    assert not marker.exists()


@pytest.mark.slow
def test_export_of_interrupted_and_running_runs_executes(store, tmp_path):
    running = _fake_run(store, "still going", finish=False, seeds=(0,), epochs=1)
    dead = _fake_run(store, "killed", finish=False, seeds=(0, 1), epochs=2, seed=3)
    _interrupt(store, dead)
    empty = store.create(lab.RunConfig(name="just started", dataset="digits", backbone="mlp")).run_id
    path = to_notebook([running, dead, empty], tmp_path / "live.ipynb", store=store, execute=True, timeout=300)
    nb = nbformat.read(path, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "'still going' is running" in printed and "'killed' is interrupted" in printed
    assert "'just started' is running" in printed


@pytest.mark.slow
def test_executed_cka_cell_shows_lab_metrics_cka_of_the_stored_embeddings(store, tmp_path):
    from lab.metrics import cka

    with_features = _fake_run(store, "with features", seeds=(0,), epochs=1, embeddings=True)
    without = _fake_run(store, "no features", seeds=(0,), epochs=1)
    path = to_notebook([without, with_features], tmp_path / "cka.ipynb", store=store, execute=True, timeout=300)
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if "cka" in c.metadata.get("tags", [])]
    assert not [o for o in cell.outputs if o.output_type == "error"]
    assigned = {t.targets[0].id: t.value for t in ast.parse(cell.source).body if isinstance(t, ast.Assign)}
    assert ast.literal_eval(assigned["CKA_RUNS"]) == [with_features]
    [shown] = [o for o in cell.outputs if o.get("metadata", {}).get("layerscope_cka_run") == with_features]
    [table] = _html_tables(shown.data["text/html"])
    header, rows = table[0][1:], {row[0]: row[1:] for row in table[1:]}
    assert header == list(rows) == LAYERS
    rec = store.load(with_features)
    features = {layer: rec.embeddings(0, 1, layer)[0].astype(np.float64) for layer in LAYERS}
    for a in LAYERS:
        for b, text in zip(LAYERS, rows[a]):
            if "pre_logits" in (a, b):
                assert text == "NaN"                              # constant features: not defined
            else:
                assert math.isclose(float(text), cka(features[a], features[b]), abs_tol=1e-4), (a, b, text)
    # the figures: the CKA-to-epoch-0 curves (the run trained) and the heatmap of its last epoch
    [figure] = [o for o in cell.outputs if o.output_type == "execute_result"]
    assert ":Overlay" in figure.data["text/plain"] and ":HeatMap" in figure.data["text/plain"]
    assert "with features: CKA to epoch 0, one line per epoch" in figure.data["text/html"]
    assert "with features: linear CKA between layers" in figure.data["text/html"]


@pytest.mark.slow
def test_cli_export(store, tmp_path):
    rid = _fake_run(store, "cli run", seeds=(0,), epochs=1)
    out = tmp_path / "cli.ipynb"
    res = subprocess.run([sys.executable, "-m", "lab", "export", rid, "-o", str(out), "--runs-dir", str(store.root)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    nb = nbformat.read(out, as_version=4)
    assert nb.metadata["layerscope"]["run_ids"] == [rid]


def test_lab_export_imports_no_plotting_library():
    """The notebook's cells import app.plots to draw; lab itself never imports a plotting library."""
    code = ("import sys, lab.export; bad = [m for m in ('panel', 'bokeh', 'holoviews', 'hvplot') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
