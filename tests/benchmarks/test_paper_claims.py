"""benchmarks/paper_claims.py (and the experiments of benchmarks/claims/): the fast mode runs end to end
and reports every claim.

Checks the report's shape (every row measured, every verdict from the allowed set, the
JSON agrees with the printed table), never whether a claim is reproduced.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path("benchmarks") / "paper_claims.py"

EXPECTED_KEYS = {"fig2_train", "fig2_heldout", "t3_accuracy", "t3_nc1", "dyballa_accuracy_vs_g",
                 "wang_utilization", "wang_reinit"}


@pytest.fixture(scope="session")
def claims(repo_root):
    """benchmarks/paper_claims.py as a module (registered first: its dataclasses look it up)."""
    name = "_paper_claims_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, repo_root / SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def experiments(claims):
    """The package benchmarks.claims that the script runs (importable once the script has put the repository
    root on sys.path)."""
    return importlib.import_module("benchmarks.claims")


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory, repo_root):
    """One fast-mode run in a subprocess (its own torch threads and store): (stdout, stderr, json)."""
    tmp = tmp_path_factory.mktemp("claims")
    out_json = tmp / "claims.json"
    proc = subprocess.run(
        [sys.executable, str(repo_root / SCRIPT), "--fast", "--json", str(out_json), "--runs-dir", str(tmp / "runs")],
        capture_output=True, text=True, cwd=str(tmp), timeout=850,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout, proc.stderr, json.loads(out_json.read_text())


@pytest.mark.slow
def test_fast_mode_reports_every_claim_prints_its_table_and_its_numbers_agree(fast_run, experiments):
    """One test for the one fast run (minutes of CPU): split into three, xdist may hand the tests to two
    workers and each would make the run."""
    _reports_every_claim_with_a_measured_value_and_an_allowed_verdict(fast_run, experiments)
    _prints_the_table_and_says_it_is_fast(fast_run)
    _numbers_are_consistent(fast_run)


def _reports_every_claim_with_a_measured_value_and_an_allowed_verdict(fast_run, experiments):
    stdout, stderr, data = fast_run
    module = experiments
    rows = data["rows"]
    keys = {row["key"] for row in rows}
    assert EXPECTED_KEYS <= keys
    # One best-layer row per Dyballa backbone of the fast preset.
    n_backbones = len(module.Settings.fast_preset().dy_backbones)
    assert sum(key.startswith("dyballa_best_layer_") for key in keys) == n_backbones
    assert len(rows) == len(EXPECTED_KEYS) + n_backbones
    allowed = set(module.VERDICTS) - {module.NOT_MEASURED}
    for row in rows:
        assert row["verdict"] in allowed, row
        assert row["measured"] and not row["measured"].startswith("—"), row
        assert any(ch.isdigit() for ch in row["measured"]), row
        assert row["rule"], row
    assert data["mode"] == "fast" and data["errors"] == []


def _prints_the_table_and_says_it_is_fast(fast_run):
    stdout, stderr, data = fast_run
    assert "FAST MODE" in stdout
    assert "Summary" in stdout and "Verdict rules" in stdout
    table = stdout[stdout.index("Summary"):stdout.index("Verdict rules")]
    for i, row in enumerate(data["rows"], 1):
        # Each row's number and the start of its verdict appear on a table line.
        assert any(line.startswith(f"| {i} ") and row["verdict"].split()[0] in line
                   for line in table.splitlines()), (i, row["verdict"])
    # Progress goes to stderr, not into the report.
    assert "epoch 1:" in stderr and "epoch 1:" not in stdout


def _numbers_are_consistent(fast_run):
    _, _, data = fast_run
    fig2 = data["details"]["fig2"]
    assert set(fig2["train_nc1"]) == set(fig2["layers"]) == set(fig2["heldout_nc1"]) - {"pre_logits"}
    t3 = data["details"]["table3"]["strategies"]
    assert set(t3) == {"linear", "layer", "scl", "full"}
    for strategy, r in t3.items():
        assert 0.0 <= r["heldout_accuracy"] <= 1.0
        # The engine's stored seen NC1 and the one recomputed from the saved weights agree.
        assert r["nc1_pre_logits_engine"] == pytest.approx(r["nc1_pre_logits_reloaded"], rel=1e-3, abs=1e-6)
    assert t3["full"]["trainable_fraction"] == pytest.approx(1.0, abs=1e-3)
    assert t3["linear"]["trainable_fraction"] < t3["layer"]["trainable_fraction"] < 1.0
    wang = data["details"]["wang_yang"]["noise"]
    assert set(wang) == {"0.0", "0.2", "0.5"}


def test_table_wraps_cells_and_keeps_every_row(claims, experiments):
    module = experiments
    rows = [module.Row(key=f"k{i}", source="src", claim="a claim " * 8, paper="p", measured="m 0.5",
                       verdict=module.MIXED, rule="r") for i in range(3)]
    text = claims._table(rows)
    widths = {len(line) for line in text.splitlines()}
    assert len(widths) == 1                      # every line the same width
    for i in range(1, 4):
        assert any(line.startswith(f"| {i} ") for line in text.splitlines())


def test_spearman_and_fast_verdicts(experiments):
    module = experiments
    assert module.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert module.spearman([1, 2, 3], [1, 1, 1]) != module.spearman([1, 2, 3], [1, 1, 1])   # NaN
    fast, full = module.Settings.fast_preset(), module.Settings.full()
    assert module.fast_or(fast, module.REPRODUCED, True) == module.FAST_VERDICT
    assert module.fast_or(fast, module.REPRODUCED, False) == module.REPRODUCED
    assert module.fast_or(full, module.NOT_REPRODUCED, True) == module.NOT_REPRODUCED


def test_bad_threads_is_rejected(capsys, claims):
    module = claims
    with pytest.raises(SystemExit):
        module.main(["--threads", "0"])
    assert "--threads must be >= 1" in capsys.readouterr().err


def test_seed_spreads_come_from_lab_analysis(claims, experiments):
    import numpy as np

    mean, std = experiments.seed_spread([0.6, 0.7, np.nan])
    assert mean == pytest.approx(0.65) and std == pytest.approx(np.std([0.6, 0.7], ddof=1))
    assert np.isnan(experiments.seed_spread([0.5])[1])              # one seed: no spread
    for module in (claims, experiments, *(importlib.import_module(f"benchmarks.claims.{name}")
                                          for name in ("_common", "nc_transfer", "dyballa", "wang_yang"))):
        assert not hasattr(module, "_load_data")                     # lab.runs.prepare_data, not a copy
