"""lab.export.to_html: every number the page shows is lab.analysis's, the file refers to nothing outside it, and
hostile names stay text."""
from __future__ import annotations

import ast
import html.parser
import json
import re
from pathlib import Path

import numpy as np
import pytest

import lab
from lab import analysis
from lab.export import to_html
from lab.export.html import MAX_LAYOUT_POINTS
from lab.export.html.model import COLLAPSE_PANELS, LAYOUT_SCALE
from lab.store import RunNotFoundError, RunStore
from tests.fixtures.lesson_run import tiny_nc_lesson

REPO = Path(__file__).resolve().parents[3]
HOSTILE = "</script><img src=x onerror=alert(1)> http://evil.example/"
_MODEL = re.compile(r'<script type="application/json" id="ls-model">(.*?)</script>', re.S)


def read_model(text: str) -> dict:
    """The page model embedded in an exported file, as the page's script reads it."""
    found = _MODEL.findall(text)
    assert len(found) == 1, "one model element"
    return json.loads(found[0])


@pytest.fixture(scope="module")
def nc_run(tmp_path_factory):
    """The NC lesson shrunk to seconds (16 units, 2 epochs, a few images a class): (store, run_id, html text)."""
    store = RunStore(tmp_path_factory.mktemp("html") / "runs")
    run_id = tiny_nc_lesson(store, epochs=2)
    path = to_html([run_id], tmp_path_factory.mktemp("page") / "lesson.html", store=store)
    return store, run_id, path.read_text(encoding="utf-8")


def test_every_number_shown_is_lab_analysis(nc_run):
    store, run_id, text = nc_run
    record = store.load(run_id)
    run = read_model(text)["runs"][0]
    layers, epochs = run["layers"], run["epochs"]
    m = record.metrics

    # the verdict: g and its layer, as lab.analysis gives them, and as the raw rows say (one seed: g is the
    # largest unseen NMI of the last epoch)
    gen = analysis.latest_generalization(m, layers=record.meta["layers"], aliases=record.meta["layer_aliases"])
    verdict = run["verdict"]
    assert (verdict["layer"], verdict["epoch"]) == (gen["layer"], gen["epoch"])
    assert verdict["g"] == pytest.approx(gen["g"], rel=1e-12)
    last = m[(m["metric"] == "nmi") & (m["split"] == "unseen") & (m["epoch"] == m["epoch"].max())]
    assert verdict["g"] == pytest.approx(last["value"].max(), rel=1e-12)
    assert record.summary()["best_layer"] == verdict["layer"]

    # the law: ratio and r at every epoch and split, as separation_law fits them, the last as the run summary
    # reports it, and refitted here with numpy from the stored NC1 of the distinct layers
    law = analysis.separation_law(record)
    assert len(law) == sum(len(v) for v in run["law"]["fits"].values()) > 0
    for row in law.itertuples():
        shown = run["law"]["fits"][str(row.epoch)][row.split]
        assert shown["ratio"] == pytest.approx(row.ratio, rel=1e-12)
        assert shown["r"] == pytest.approx(row.r, rel=1e-12)
    distinct = [name for name in layers if name not in record.meta["layer_aliases"]]
    for split, entry in record.summary()["separation_law"].items():
        shown = run["law"]["fits"][str(entry["epoch"])][split]
        assert (shown["ratio"], shown["r"]) == (pytest.approx(entry["ratio"]), pytest.approx(entry["r"]))
        nc1 = m[(m["metric"] == "nc1") & (m["split"] == split) & (m["epoch"] == entry["epoch"])].set_index("layer")
        y = np.log10(nc1.loc[distinct, "value"].to_numpy(float))
        x = np.arange(len(distinct))
        assert shown["ratio"] == pytest.approx(10 ** np.polyfit(x, y, 1)[0], rel=1e-9)
        assert shown["r"] == pytest.approx(np.corrcoef(x, y)[0, 1], rel=1e-9)

    # the neural-collapse values at every epoch: the stored rows themselves (one seed)
    for metric in ("nc1", "nc2_equinorm", "nc2_equiangularity", "nc2_cosine_std", "nc4_ncc_disagreement"):
        for split, grid in run["values"][metric].items():
            for e, epoch in enumerate(epochs):
                for i, layer in enumerate(layers):
                    rows = m[(m["metric"] == metric) & (m["split"] == split) & (m["epoch"] == epoch)
                             & (m["layer"] == layer)]
                    want = float(rows["value"].iloc[0]) if len(rows) else None
                    got = grid["mean"][e][i]
                    assert (got is None and (want is None or not np.isfinite(want))) or got == pytest.approx(want), \
                        (metric, split, epoch, layer)
    assert run["collapse"]["terminal"] == {str(s): e for s, e in analysis.terminal_phase(m).items()}

    # the simplex: the cosines of the stored Gram matrices, computed here from the Gram itself; one seed's, named
    seeds = record.class_means["seed"]
    assert (run["simplex"]["seed"], run["simplex"]["n_seeds"]) == (int(seeds.min()), int(seeds.nunique()))
    for row in record.class_means.itertuples():
        shown = run["simplex"]["at"][row.layer][row.split][str(row.epoch)]
        gram = np.asarray(row.gram, dtype=float)
        norms = np.sqrt(np.diag(gram))
        np.testing.assert_allclose(np.array(shown["cosines"], dtype=float), gram / np.outer(norms, norms), atol=1e-12)
        assert shown["deviation"] == pytest.approx(analysis.simplex(gram)["deviation"], rel=1e-12)

    # the layouts: every stored point, within 1/LAYOUT_SCALE of the layout's range
    layouts = run["layouts"]
    keys = record.projection_keys()
    assert len(keys) == sum(len(v) for v in layouts["at"].values())
    for key in keys.itertuples():
        coords, labels, indices = record.projection(key.seed, key.epoch, key.layer, key.method)
        shown = layouts["at"][key.layer][str(key.epoch)]
        x0, x1, y0, y1 = shown["range"]
        x = x0 + np.array(shown["x"]) / LAYOUT_SCALE * (x1 - x0)
        np.testing.assert_allclose(x, coords[:, 0], atol=(x1 - x0) / LAYOUT_SCALE)
        assert shown["label"] == labels.tolist() and shown["index"] == indices.tolist()


def test_the_file_refers_to_nothing_outside_it(nc_run, tmp_path):
    store, run_id, text = nc_run
    for reference in ("http://", "https://", "url(", "@import", "<link", "<img", "<iframe"):
        assert reference not in text.lower(), reference
    assert not re.search(r"\b(src|href)\s*=\s*[\"']", text), "no markup attribute names a resource"
    # what the page draws from: the model, the styles, the script, each once
    assert text.count("<script") == 2 and text.count("<style>") == 1
    # the hover pictures are inside the file: a PNG data URI per image shown, read again from the digits
    layouts = read_model(text)["runs"][0]["layouts"]
    pictures = layouts["thumbnails"]["images"]
    shown = {str(i) for per in layouts["at"].values() for at in per.values() for i in at["index"]}
    assert set(pictures) == shown and all(uri.startswith("data:image/png;base64,") for uri in pictures.values())
    without = to_html([run_id], tmp_path / "small.html", store=store, thumbnails=False).read_text(encoding="utf-8")
    assert read_model(without)["runs"][0]["layouts"]["thumbnails"] is None and len(without) < len(text)


def test_the_collapse_panels_are_the_apps(repo_root):
    """The page's six panels are the app's collapse card's (lab may not import the app: read its source)."""
    tree = ast.parse((repo_root / "app/collapse/_rows.py").read_text(encoding="utf-8"))
    panels = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                  and getattr(node.targets[0], "id", None) == "PANELS")
    app = [tuple(ast.literal_eval(arg) for arg in call.args) for call in panels.elts]
    assert [tuple(p) for p in COLLAPSE_PANELS] == app


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_hostile_names_stay_text_and_big_layouts_are_subsampled(store, tmp_path):
    """A run and class names that are markup appear only inside the JSON, escaped; a layout of 2,500 images keeps
    a fixed 2,000, the same at every layer and epoch."""
    n = MAX_LAYOUT_POINTS + 500
    classes = [HOSTILE, "<b>bold</b>", "a&b"]
    w = store.create(lab.RunConfig(name=HOSTILE, dataset="digits", backbone="mlp", epochs=1, n_unseen=3,
                                   projection="pca"))
    w.update_meta(layers=[{"name": name, "kind": "vector", "dim": 4} for name in ("fc1", HOSTILE)],
                  split={"seen": ["x", "y"], "unseen": classes})
    rng = np.random.default_rng(0)
    for epoch in (0, 1):
        w.append_metrics([{"seed": 0, "epoch": epoch, "layer": layer, "split": "unseen", "metric": "nmi",
                           "value": 0.1 + 0.2 * i} for i, layer in enumerate(("fc1", HOSTILE))])
        for layer in ("fc1", HOSTILE):
            w.save_projection(0, epoch, layer, "pca", rng.normal(size=(n, 2)), np.arange(n) % 3,
                              np.arange(n)[::-1], class_names=classes)
        w.save_class_means(0, epoch, [{"layer": HOSTILE, "split": "unseen", "classes": classes,
                                      "gram": np.eye(3) - 1 / 3}])
    w.finish("finished")
    first = to_html(w.run_id, tmp_path / "a.html", store=store).read_text(encoding="utf-8")
    second = to_html([store.load(w.run_id)], tmp_path / "b.html").read_text(encoding="utf-8")

    parser = _Tags()
    parser.feed(first)
    assert set(parser.tags) <= {"html", "head", "meta", "title", "style", "body", "noscript", "p", "code", "main",
                                "script"}, parser.tags
    assert "<img" not in first and "<b>" not in first and "http://" not in first
    assert first.count("</script>") == 2
    run = read_model(first)["runs"][0]
    assert run["name"] == HOSTILE and HOSTILE in run["layers"]
    assert run["layouts"]["classes"] == classes and run["simplex"]["at"][HOSTILE]["unseen"]["1"]["classes"] == classes
    assert read_model(first)["title"] == HOSTILE

    layouts = run["layouts"]
    assert (layouts["total"], layouts["shown"]) == (n, MAX_LAYOUT_POINTS)
    shown = [sorted(v["index"]) for per in layouts["at"].values() for v in per.values()]
    assert all(len(s) == MAX_LAYOUT_POINTS and s == shown[0] for s in shown)
    assert read_model(second)["runs"][0]["layouts"]["at"] == layouts["at"]      # the same subset every time


def test_errors_say_what_to_do(store, make_run, tmp_path):
    run_id = make_run()
    with pytest.raises(ValueError, match=r"\.html file.*add the \.html suffix"):
        to_html([run_id], tmp_path / "run.ipynb", store=store)
    with pytest.raises(ValueError, match="at least one run"):
        to_html([], tmp_path / "run.html", store=store)
    with pytest.raises(RunNotFoundError):
        to_html(["20990101-000000-nothing-0000"], tmp_path / "run.html", store=store)
    assert not (tmp_path / "run.html").exists()
    # a run with metrics only (no layouts, class means, law or training): the page says what it has
    text = to_html([run_id], tmp_path / "run.html", store=store).read_text(encoding="utf-8")
    run = read_model(text)["runs"][0]
    assert run["layouts"] is None and run["simplex"] is None and run["law"] is None and run["verdict"]["g"] > 0
    assert run["training"] is None


def test_cli_chooses_html_by_the_suffix(store, make_run, tmp_path, capsys):
    from lab.__main__ import main

    run_id = make_run()
    out = tmp_path / "run.html"
    assert main(["export", run_id, "-o", str(out), "--runs-dir", str(store.root)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert read_model(out.read_text(encoding="utf-8"))["runs"][0]["run_id"] == run_id
    for args, message in (
            ([run_id, "-o", str(tmp_path / "run.txt")], "-o must name a .ipynb file (a notebook) or a .html file"),
            ([run_id, "-o", str(out), "--execute"], "leave --execute out"),
            (["--study", "x", "-o", str(out), "--execute"], "leave --execute out"),
            (["20990101-000000-nothing-0000", "-o", str(tmp_path / "none.html")], "20990101-000000-nothing-0000")):
        assert main(["export", *args, "--runs-dir", str(store.root)]) == 2, args
        assert message in capsys.readouterr().err, args
    assert not (tmp_path / "none.html").exists()


def test_a_study_as_one_page_with_seeds_as_replicates(store, tmp_path, capsys):
    """Two conditions of two seeds: each condition's g is the mean of its seeds' g with the 95 % Student-t
    interval of scipy, and n = 2; the g curves per layer carry the same intervals."""
    from scipy import stats

    from lab.__main__ import main
    from lab.study import Study
    from lab.study.records import tag_run

    base = {"dataset": "digits", "img_size": 16, "backbone": "mlp:depth=2,width=16", "strategy": "full",
            "epochs": 1, "projection": "none", "unseen_per_class": 10, "seen_per_class": 6, "device": "cpu",
            "metrics": ["nmi", "nc1"], "save_weights": False}
    study = Study(HOSTILE, base, {"lr": [0.01, 0.05], "seeds": [[0], [1]]})
    for cell in study.cells():
        events = list(lab.run(cell.config, store=store))
        assert events[-1].kind == "run_finished", events[-1]
        tag_run(events[0].run_id, study.name, cell.values, store=store)

    out, spec = tmp_path / "study.html", tmp_path / "spec.json"
    spec.write_text(json.dumps(study.to_dict()), encoding="utf-8")
    assert main(["export", "--study", str(spec), "-o", str(out), "--runs-dir", str(store.root)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    again = tmp_path / "again.html"
    assert main(["study", "export", str(spec), "-o", str(again), "--runs-dir", str(store.root)]) == 0
    assert read_model(again.read_text(encoding="utf-8"))["study"] == read_model(out.read_text("utf-8"))["study"]
    text = out.read_text(encoding="utf-8")
    assert "http://" not in text and "<img" not in text and text.count("</script>") == 2
    page = read_model(text)
    shown = page["study"]
    assert page["title"] == f"Study: {HOSTILE}" and page["runs"] == [] and len(shown["conditions"]) == 2

    runs = {}
    for run_id in store.ids():
        record = store.load(run_id)
        runs.setdefault(record.meta["cell"]["lr"], []).append(record)
    for row in shown["generalization"]:
        records = runs[float(row["group"].split("=")[1])]
        gs = [analysis.latest_generalization(r.metrics, layers=r.meta["layers"],
                                             aliases=r.meta["layer_aliases"])["g"] for r in records]
        low, high = stats.t.interval(0.95, len(gs) - 1, loc=np.mean(gs), scale=stats.sem(gs))
        assert row["n_seeds"] == 2 and row["g"] == pytest.approx(np.mean(gs))
        assert (row["seed_low"], row["seed_high"]) == (pytest.approx(low), pytest.approx(high))
    for group, rows in shown["layers"].items():
        for row in rows:
            assert row["n"] == 2 and row["seed_low"] < row["mean"] < row["seed_high"]


def test_a_cancelled_run_and_a_monitored_loop_export_what_they_have(cancelled_run, monitored_run, tmp_path):
    store, run_id = cancelled_run
    run = read_model(to_html([run_id], tmp_path / "c.html", store=store).read_text(encoding="utf-8"))["runs"][0]
    assert run["status"] == "cancelled" and run["epochs"] == [] and run["verdict"] is None
    assert run["curves"] == [] and run["layouts"] is None and run["law"] is None and run["settings"]["name"]
    store, run_id = monitored_run
    run = read_model(to_html([run_id], tmp_path / "m.html", store=store).read_text(encoding="utf-8"))["runs"][0]
    assert run["axis"] == "step" and run["epochs"] == [0, 4, 8] and run["verdict"]["epoch"] == 8
