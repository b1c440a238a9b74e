"""The ``python -m lab`` command line: flags, runs list/show/delete, export, exit codes, end to end."""
from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
from pathlib import Path

import pytest

from lab import events as ev
from lab.__main__ import main
from lab.config import RunConfig
from lab.store import RunStore

LAYERS = ["stem", "blocks.0", "pre_logits"]


@pytest.fixture
def populated(store, make_run):
    run_id = make_run(layers=LAYERS, seeds=(0, 1), epochs=1, name="demo", meta={"device": "cpu"},
                      nmi=lambda seed, epoch, i: (0.2, 0.7 + 0.1 * seed, 0.5)[i], seen={"nc1": 1.5},
                      training=lambda seed, epoch: {"train_loss": 0.3, "heldout_accuracy": 0.9})
    return store, run_id


# ------------------------------------------------------------------------------------- parser

def _exit_code(argv):
    """main()'s return value, or the status of the SystemExit argparse raises."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for command in ("run", "runs", "export", "--runs-dir"):
        assert command in out


def test_every_config_field_is_a_flag(capsys):
    assert _exit_code(["run", "--help"]) == 0
    out = capsys.readouterr().out
    for f in dataclasses.fields(RunConfig):
        assert "--" + f.name.replace("_", "-") + " " in out, f.name
    assert "--pretrained | --no-pretrained" in out and "--seeds INT [INT ...]" in out and "--config FILE" in out


def _run_config(argv, monkeypatch, store):
    """Parse ``run`` flags through main() with a fake engine and return the config it got."""
    seen = {}

    def fake_run(config, store=None, cancel=None):
        seen["config"] = config
        w = store.create(config)
        yield ev.RunFinished(w.run_id, seconds=0.0)
        w.finish("finished")

    import lab.runs

    monkeypatch.setattr(lab.runs, "run", fake_run)
    assert main(["run", "--runs-dir", str(store.root), "--no-progress", *argv]) == 0
    return seen["config"]


def test_flags_override_the_config_file(tmp_path, monkeypatch, store, capsys):
    cfg_file = tmp_path / "cfg.json"
    cfg_file.write_text(json.dumps({"dataset": "digits", "backbone": "mlp", "epochs": 5, "n_unseen": 4,
                                    "img_size": 32, "seeds": [3]}))
    cfg = _run_config(["--config", str(cfg_file), "--epochs", "2", "--seeds", "0", "1", "--no-augment",
                       "--img-size", "none", "--strategy", "layer", "--block", "2", "--layers", "a", "b",
                       "--lr", "0.001"], monkeypatch, store)
    assert cfg == RunConfig(dataset="digits", backbone="mlp", epochs=2, n_unseen=4, img_size=None,
                            seeds=(0, 1), augment=False, strategy="layer", block=2, layers=("a", "b"), lr=0.001)
    cfg = _run_config(["--block", "layer3", "--strategy", "scl"], monkeypatch, store)
    assert cfg.block == "layer3" and cfg.dataset == "glyphs"         # RunConfig defaults
    assert "stored in" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["run", "--epochs", "x"], r"argument --epochs: invalid int value: 'x'"),
    (["run", "--strategy", "bogus"], r"strategy must be one of 'none', 'linear'"),
    (["run", "--seeds"], r"argument --seeds: expected at least one argument"),
    (["run", "--config", "/no/such/file.json"], r"cannot read --config /no/such/file.json"),
    (["run", "--backbone", "resnet1"], r"unknown backbone 'resnet1'; closest: 'resnet18'"),
    (["run", "--dataset", "glyph"], r"unknown dataset 'glyph'; closest: 'glyphs'"),
    (["run", "--backbone", "mlp", "--checkpoint", "run:nope"], r"checkpoint 'run:nope': no such run in the store"),
    (["runs", "show", "nope"], r"no run 'nope' in the store"),
    (["runs", "show", "../../etc"], r"run id '../../etc' is not valid"),
    (["runs", "delete", "/etc/passwd"], r"run id '/etc/passwd' is not valid"),
    (["export", "nope", "-o", "x.ipynb"], r"no run 'nope'"),
    (["frobnicate"], r"invalid choice: 'frobnicate'"),
    (["runs"], r"give an action: list, show, follow, delete, pack, unpack, to-tensorboard or to-mlflow"),
])
def test_bad_input_exits_2_with_one_line(argv, message, store, capsys):
    assert _exit_code([*argv, "--runs-dir", str(store.root)] if argv[0] != "frobnicate" else argv) == 2
    assert not store.root.exists() or store.list().empty               # nothing was started
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.search(message, err), err


def test_bad_config_file_contents(tmp_path, store, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert main(["run", "--config", str(bad), "--runs-dir", str(store.root)]) == 2
    assert "must hold a JSON object" in capsys.readouterr().err
    bad.write_text('{"dataset": "digits", "colour": "red"}')
    assert main(["run", "--config", str(bad), "--runs-dir", str(store.root)]) == 2
    assert "unknown RunConfig field 'colour'" in capsys.readouterr().err


def test_real_entry_point_one_line_errors(store, cli):
    res = cli("runs", "show", "../../etc", "--runs-dir", str(store.root))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "is not valid" in res.stderr
    res = cli("run", "--n-unseen", "1", "--runs-dir", str(store.root))
    assert res.returncode == 2 and res.stderr.strip() == (
        "python -m lab: error: n_unseen must be an integer >= 2. Got 1 instead.")


# --------------------------------------------------------------------------------- runs list/show

def test_runs_list(populated, capsys):
    store, run_id = populated
    assert main(["runs", "list", "--runs-dir", str(store.root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["run_id", "name", "status", "dataset"]
    row = lines[1].split()
    assert row[0] == run_id and row[1] == "demo" and row[2] == "finished"
    assert "blocks.0" in row and "0.750" in row and "0.900" in row


def test_reading_the_store_does_not_load_torch(populated, repo_root):
    """`runs list` and `runs show` answer in well under a second: nothing on their path imports torch
    (the engine, the backbones and the zoo load it on first use; they took 3-4 s)."""
    import subprocess

    store, run_id = populated
    code = ("import sys\nfrom lab.cli import main\n"
            "codes = [main(['runs', 'list', '--runs-dir', sys.argv[1]]), "
            "main(['runs', 'show', sys.argv[2], '--runs-dir', sys.argv[1]])]\n"
            "print('CODES', codes, 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code, str(store.root), run_id], capture_output=True, text=True,
                          cwd=repo_root, timeout=300)
    assert done.returncode == 0, done.stderr
    assert run_id in done.stdout and "best layer" in done.stdout, done.stdout
    assert done.stdout.strip().splitlines()[-1] == "CODES [0, 0] False", done.stdout


def test_runs_list_empty_and_damaged(tmp_path, capsys):
    root = tmp_path / "runs"
    assert main(["--runs-dir", str(root), "runs", "list"]) == 0
    assert "no runs in" in capsys.readouterr().out
    (root / "junk").mkdir(parents=True)
    (root / "junk" / "meta.json").write_text("{")
    assert main(["--runs-dir", str(root), "runs", "list"]) == 0
    captured = capsys.readouterr()
    assert "junk" in captured.out and "damaged: meta.json is not valid JSON" in captured.out
    (root / "stray").mkdir()                      # no run files at all: not a run, skipped with a warning
    assert main(["--runs-dir", str(root), "runs", "list"]) == 0
    assert "skipping 'stray'" in capsys.readouterr().err


def test_runs_show(populated, capsys):
    store, run_id = populated
    assert main(["runs", "show", run_id, "--runs-dir", str(store.root)]) == 0
    out = capsys.readouterr().out
    assert f"run {run_id} (demo)" in out and "status: finished" in out
    assert 'dataset: "digits"' in out
    assert "best layer at epoch 1: blocks.0 (g = unseen NMI 0.750" in out
    assert "seen held-out accuracy at epoch 1: 0.900" in out
    table = out[out.index("layers at epoch 1"):].splitlines()
    assert "unseen:nmi" in table[1] and "seen:nc1" in table[1]
    assert [line.split()[0] for line in table[3:6]] == LAYERS


def test_runs_show_says_whether_the_best_layer_is_the_final_representation(populated, make_run, capsys):
    store, run_id = populated
    assert main(["runs", "show", run_id, "--runs-dir", str(store.root)]) == 0
    assert "the best layer is not the final representation (pre_logits)" in capsys.readouterr().out
    # blocks.0 has pre_logits' features (meta layer_aliases): reported as pre_logits, the final one
    other = make_run(layers=LAYERS, nmi=lambda seed, epoch, i: (0.2, 0.7, 0.5)[i],
                     meta={"layer_aliases": {"blocks.0": "pre_logits"}})
    assert main(["runs", "show", other, "--runs-dir", str(store.root)]) == 0
    out = capsys.readouterr().out
    assert "best layer at epoch 1: pre_logits (g = unseen NMI 0.700, 1 seed)" in out
    assert "the best layer is the final representation (pre_logits)" in out


def test_runs_show_prints_the_law_of_equi_separation_of_the_summary(populated, make_run, capsys):
    store, run_id = populated
    assert main(["runs", "show", run_id, "--runs-dir", str(store.root)]) == 0
    out = capsys.readouterr().out
    # seen NC1 is 1.5 at each of the three layers: ratio 1 per layer, r undefined, and the summary says why
    law = store.load(run_id).summary()["separation_law"]
    assert law["seen"]["ratio"] == 1.0 and law["seen"]["r"] is None
    assert ("    held-out (seen) at epoch 1: ×1.000 ± 0.000 per layer, r undefined (3 layers, 2 seeds; NC1 is the "
            "same at every layer: r undefined)") in out.splitlines()
    no_nc1 = make_run(layers=LAYERS)
    assert main(["runs", "show", no_nc1, "--runs-dir", str(store.root)]) == 0
    assert "  law of equi-separation: not measured (nc1 is not among the run's metrics)" in capsys.readouterr().out


def test_console_best_layer_is_lab_analysis_per_seed(capsys):
    from lab.cli.console import RunConsole

    console = RunConsole(progress=False)
    w = types.SimpleNamespace(run_id="r")
    for e in (_started(w), *_epoch(w, 0, 0, nmis=(0.2, 0.8, 0.8))):     # a tie: the deeper layer
        console.handle(e)
    console.handle(ev.LayerMetrics("r", seed=0, epoch=1, layer="stem", split="unseen", values={"nmi": 0.95}))
    console.handle(ev.EpochFinished("r", seed=0, epoch=1, train_loss=0.1, train_accuracy=None,
                                    heldout_accuracy=None, seconds=1.0))   # epoch 1 reached one layer only
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("epoch 0 | best layer pre_logits (unseen nmi 0.800)")
    assert out[2] == "epoch 1 | train loss 0.100 | 1.0 s"


def test_runs_delete(populated, capsys):
    store, run_id = populated
    assert main(["runs", "delete", run_id, "--runs-dir", str(store.root)]) == 0
    assert "deleted run" in capsys.readouterr().out
    assert not (store.root / run_id).exists()
    assert main(["runs", "delete", run_id, "--runs-dir", str(store.root)]) == 2


# ------------------------------------------------------------------------------- run (fake engine)

def _fake_engine(monkeypatch, script):
    """Replace lab.runs.run by one that writes to the store and yields what ``script`` says."""
    closed = []

    def fake_run(config, store=None, cancel=None):
        w = store.create(config)
        try:
            yield from script(w)
        except GeneratorExit:
            closed.append(w.run_id)
            w.finish("cancelled")
            raise

    import lab.runs

    monkeypatch.setattr(lab.runs, "run", fake_run)
    return closed


def _epoch(w, seed, epoch, nmis=(0.2, 0.8, 0.5)):
    yield ev.Progress(w.run_id, stage="extract", done=1, total=2, seed=seed, epoch=epoch)
    for layer, nmi in zip(LAYERS, nmis):
        yield ev.LayerMetrics(w.run_id, seed=seed, epoch=epoch, layer=layer, split="unseen",
                              values={"nmi": nmi, "knn_accuracy": 0.5})
        yield ev.LayerMetrics(w.run_id, seed=seed, epoch=epoch, layer=layer, split="seen", values={"nc1": 9.0})
    yield ev.EpochFinished(w.run_id, seed=seed, epoch=epoch, train_loss=None if epoch == 0 else 0.25,
                           train_accuracy=None, heldout_accuracy=0.75, seconds=1.5)


def _started(w):
    return ev.RunStarted(w.run_id, config={}, layers=[{"name": n, "kind": "vector", "dim": 4} for n in LAYERS],
                         classes=list("abcde"), seen=list("ab"), unseen=list("cde"), device="cpu",
                         n_images={"train": 8, "heldout": 2, "unseen": 9}, seeds=[0])


def test_run_prints_epoch_lines_and_final_line(monkeypatch, store, capsys):
    def script(w):
        yield _started(w)
        yield from _epoch(w, 0, 0)
        yield from _epoch(w, 0, 1, nmis=(0.9, 0.1, 0.1))
        yield ev.RunFinished(w.run_id, seconds=3.0)
        w.finish("finished")

    _fake_engine(monkeypatch, script)
    assert main(["run", "--runs-dir", str(store.root), "--dataset", "digits"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "epoch 0 | best layer blocks.0 (unseen nmi 0.800) | seen held-out acc 0.750 | 1.5 s"
    assert out[2] == ("epoch 1 | best layer stem (unseen nmi 0.900) | seen held-out acc 0.750 | "
                      "train loss 0.250 | 1.5 s")
    run_id = store.list()["run_id"].item()
    assert out[-1] == f"finished in 3.0 s: run {run_id} stored in {store.root / run_id}"
    assert store.load(run_id).status == "finished"


def test_run_prints_the_summarys_law_before_the_final_line(monkeypatch, store, capsys):
    law = {"train": {"epoch": 1, "ratio": 0.64, "ratio_std": None, "r": -0.995, "r_std": None, "slope": -0.19,
                     "n_layers": 8, "n_seeds": 1, "reason": None},
           "unseen": {"epoch": 1, "ratio": None, "ratio_std": None, "r": None, "r_std": None, "slope": None,
                      "n_layers": 2, "n_seeds": 0, "reason": "no law: 2 layer(s) with a finite, positive NC1"}}

    def script(w):
        yield _started(w)
        yield from _epoch(w, 0, 0)
        yield ev.RunFinished(w.run_id, seconds=3.0, summary={"separation_law": law})
        w.finish("finished")

    _fake_engine(monkeypatch, script)
    assert main(["run", "--runs-dir", str(store.root), "--dataset", "digits"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-4].startswith("law of equi-separation (log10 NC1 against depth")
    assert out[-3] == "  train sample at epoch 1: ×0.640 per layer, r -0.995 (8 layers, 1 seed)"
    assert out[-2] == "  unseen classes at epoch 1: no law: 2 layer(s) with a finite, positive NC1"
    assert out[-1].startswith("finished in 3.0 s")


def test_run_failed_before_start_is_bad_input(monkeypatch, store, capsys):
    def script(w):
        yield ev.RunFailed(w.run_id, message="unknown dataset 'nope': expected 'glyphs', 'digits', ...")
        w.finish("failed")

    _fake_engine(monkeypatch, script)
    assert main(["run", "--runs-dir", str(store.root), "--dataset", "digits"]) == 2
    err = capsys.readouterr().err
    assert err == "python -m lab: error: unknown dataset 'nope': expected 'glyphs', 'digits', ...\n"
    assert store.list().empty                  # nothing was measured: no record kept


def test_engine_value_error_before_start_is_bad_input(monkeypatch, store, capsys):
    def script(w):
        raise ValueError("unknown backbone 'resnet1800'")
        yield                              # a generator

    _fake_engine(monkeypatch, script)
    assert main(["run", "--runs-dir", str(store.root)]) == 2
    assert capsys.readouterr().err == "python -m lab: error: unknown backbone 'resnet1800'\n"


def test_run_failed_after_start_exits_1(monkeypatch, store, capsys):
    def script(w):
        yield _started(w)
        yield from _epoch(w, 0, 0)
        yield ev.RunFailed(w.run_id, message="out of memory\nin layer 3")
        w.finish("failed")

    _fake_engine(monkeypatch, script)
    assert main(["run", "--runs-dir", str(store.root)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "failed: out of memory in layer 3 (partial results in" in err[0]


def test_ctrl_c_closes_the_engine(monkeypatch, store, capsys):
    def script(w):
        yield _started(w)
        yield from _epoch(w, 0, 0)
        yield ev.Progress(w.run_id, stage="train", done=0, total=3, seed=0, epoch=1)
        yield ev.RunFinished(w.run_id, seconds=1.0)

    closed = _fake_engine(monkeypatch, script)
    from lab.cli.console import RunConsole

    original = RunConsole.handle

    def interrupt(self, event):
        if event.kind == "progress" and event.stage == "train":
            raise KeyboardInterrupt
        original(self, event)

    monkeypatch.setattr(RunConsole, "handle", interrupt)
    assert main(["run", "--runs-dir", str(store.root)]) == 130
    assert len(closed) == 1 and store.load(closed[0]).status == "cancelled"
    assert "cancelled (partial results in" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ export

def test_export_delegates(monkeypatch, populated, tmp_path, capsys):
    store, run_id = populated
    calls = []

    def to_notebook(run_ids, path, *, store=None, execute=False):
        calls.append((run_ids, Path(path), store.root, execute))
        Path(path).write_text("{}")
        return Path(path)

    monkeypatch.setitem(sys.modules, "lab.export", types.SimpleNamespace(to_notebook=to_notebook))
    out = tmp_path / "o.ipynb"
    assert main(["export", run_id, "-o", str(out), "--execute", "--runs-dir", str(store.root)]) == 0
    assert calls == [([run_id], out, store.root, True)]
    assert f"wrote {out}" in capsys.readouterr().out
    assert main(["export", run_id, "-o", str(tmp_path / "o.txt"), "--runs-dir", str(store.root)]) == 2
    assert "-o must name a .ipynb file" in capsys.readouterr().err


def test_export_without_the_module(monkeypatch, populated, tmp_path, capsys):
    store, run_id = populated
    monkeypatch.setitem(sys.modules, "lab.export", None)          # import fails
    assert main(["export", run_id, "-o", str(tmp_path / "o.ipynb"), "--runs-dir", str(store.root)]) == 1
    assert "notebook export is not available" in capsys.readouterr().err


# --------------------------------------------------------------------------------------- end to end

@pytest.mark.slow
def test_run_end_to_end(tmp_path, cli):
    res = cli("run", "--dataset", "digits", "--backbone", "mlp:depth=3,width=32", "--epochs", "1",
               "--n-unseen", "3", "--unseen-per-class", "10", "--seen-per-class", "5", "--projection", "pca",
               "--metrics", "nmi", "nc1", "--device", "cpu", "--batch-size", "32",
               "--runs-dir", str(tmp_path / "runs"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert any(line.startswith("epoch 0 | best layer ") for line in lines), res.stdout
    assert any(line.startswith("epoch 1 | best layer ") and "seen held-out acc" in line for line in lines)
    assert lines[-1].startswith("finished in ") and str(tmp_path / "runs") in lines[-1]
    store = RunStore(tmp_path / "runs")
    listed = store.list()
    assert len(listed) == 1 and listed["status"].item() == "finished"
    rec = store.load(listed["run_id"].item())
    assert sorted(rec.metrics["epoch"].unique()) == [0, 1]
    assert set(rec.metrics["metric"]) >= {"nmi", "nc1"}
    assert sorted(rec.training["epoch"]) == [0, 1]
    assert rec.summary()["best_layer"] in set(rec.metrics["layer"])
    show = cli("runs", "show", rec.run_id, "--runs-dir", str(tmp_path / "runs"))
    assert show.returncode == 0 and "layers at epoch 1" in show.stdout
    # the law of the run summary, printed at the end of the run and by `runs show` (fc3 is pre_logits: 3 layers)
    from lab.cli._common import law_lines

    law = rec.summary()["separation_law"]
    assert set(law) == {"train", "seen", "unseen"} and all(e["n_layers"] == 3 for e in law.values())
    assert all(e["ratio"] is not None and e["r"] is not None for e in law.values())
    printed = law_lines(law)
    assert "\n".join(printed) in res.stdout
    assert "\n".join(f"  {line}" for line in printed) in show.stdout


@pytest.mark.slow
def test_run_unknown_dataset_exits_2(tmp_path, cli):
    res = cli("run", "--dataset", "no-such-dataset", "--backbone", "mlp", "--runs-dir", str(tmp_path / "runs"))
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1 and "no-such-dataset" in res.stderr
    assert "Traceback" not in res.stderr
    assert RunStore(tmp_path / "runs").list().empty


def test_console_lines_carry_the_best_layers_bootstrap_interval_of_a_real_run(store, tiny_config, capsys):
    import numpy as np

    import lab
    from lab.cli.console import RunConsole

    console = RunConsole(progress=False)
    for event in lab.run(tiny_config(seeds=(0, 1), epochs=1, projection="none"), store=store):
        console.handle(event)
    out = capsys.readouterr().out
    rec = store.load(store.ids()[0])
    m, aliases = rec.metrics, rec.meta.get("layer_aliases") or {}
    order = [layer["name"] for layer in rec.meta["layers"]]

    def best_of(rows):
        """The best layer (ties and aliases -> the deeper) and the interval of its stored rows, by hand."""
        nmi = rows[rows["metric"] == "nmi"].groupby("layer")["value"].mean()
        top = max((layer for layer in order if nmi[layer] == nmi.max()), key=order.index)
        top = aliases.get(top, top)
        value = {name: rows.loc[(rows["metric"] == name) & (rows["layer"] == top), "value"].mean()
                 for name in ("nmi", "nmi_low", "nmi_high", "nmi_best_share")}
        return top, value

    for seed in (0, 1):
        for epoch in (0, 1):
            layer, v = best_of(m[(m["seed"] == seed) & (m["epoch"] == epoch) & (m["split"] == "unseen")])
            assert 0 < v["nmi_best_share"] <= 1 and v["nmi_low"] <= v["nmi_high"]
            assert (f"seed {seed} epoch {epoch} | best layer {layer} (unseen nmi {v['nmi']:.3f}; best in "
                    f"{100 * v['nmi_best_share']:.0f} % of resamples; {v['nmi_low']:.2f}-{v['nmi_high']:.2f})") in out
    for epoch in (0, 1):
        layer, v = best_of(m[(m["epoch"] == epoch) & (m["split"] == "unseen")])
        std = np.std(m.loc[(m["epoch"] == epoch) & (m["metric"] == "nmi") & (m["layer"] == layer)
                           & (m["split"] == "unseen"), "value"], ddof=1)
        assert (f"epoch {epoch} over 2 seeds: g = {v['nmi']:.3f} ± {std:.3f} at layer {layer} (best in "
                f"{100 * v['nmi_best_share']:.0f} % of resamples; {v['nmi_low']:.2f}-{v['nmi_high']:.2f}; "
                "95 % bootstrap over the unseen images, mean over seeds)") in out


def test_show_says_why_a_run_has_no_timings(store, make_run, capsys):
    """Timings are written when a run ends: a run still going has none yet; an ended run without them was
    recorded without them (the one not_recorded line), and neither is called old."""
    going = make_run(status=None, name="going")
    ended = make_run(name="ended")
    assert main(["runs", "show", going, "--runs-dir", str(store.root)]) == 0
    assert "timings: none yet (written when the run ends)" in capsys.readouterr().out
    assert main(["runs", "show", ended, "--runs-dir", str(store.root)]) == 0
    out = capsys.readouterr().out
    assert "timings: this run has no per-stage timings: it was recorded without them" in out
    assert "predates" not in out
