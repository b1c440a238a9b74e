"""lab.study.figures(study, summary=...): every run read at its last, best or a given epoch, each condition's
mean with its 95 % interval over seeds and n; numbers checked with numpy/scipy on the written values."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lab.study import figures
from tests.fixtures.summary_study import LAYERS, LRS, heldout, nmi, stored_summary_study


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    return stored_summary_study(tmp_path_factory.mktemp("summary_study"))


@pytest.fixture
def study(stored):
    return stored[0]


@pytest.fixture
def store(stored):
    return stored[1]


def _t_interval(values):
    ref = stats.ttest_1samp(values, 0.0).confidence_interval(0.95)
    return ref.low, ref.high


@pytest.mark.parametrize("summary, epoch", [("last", 3), ("best", 1), (2, 2)])
def test_each_condition_is_its_seeds_mean_at_the_summary_epoch_with_the_t_interval(study, store, summary, epoch):
    figs = figures(study, store=store, summary=summary)
    assert figs["summary"]["summary"] == summary and figs["summary"]["left_out"].empty
    assert (figs["summary"]["epochs"]["epoch"] == epoch).all() and len(figs["summary"]["epochs"]) == 4
    for lr in LRS:
        group = f"lr={lr}"
        curve = figs["layers"][figs["layers"]["group"] == group].set_index("layer")
        for i, layer in enumerate(LAYERS):
            seeds = [nmi(lr, s, epoch, i) for s in (0, 1)]
            row = curve.loc[layer]
            assert row["mean"] == pytest.approx(np.mean(seeds)) and row["n"] == 2
            assert (row["seed_low"], row["seed_high"]) == pytest.approx(_t_interval(seeds))
        gen = figs["generalization"].set_index("group").loc[group]
        means = [np.mean([nmi(lr, s, epoch, i) for s in (0, 1)]) for i in range(len(LAYERS))]
        best = int(np.argmax(means))
        assert gen["layer"] == LAYERS[best] and gen["g"] == pytest.approx(means[best])
        assert (gen["g_seed_low"], gen["g_seed_high"]) == pytest.approx(
            _t_interval([nmi(lr, s, epoch, best) for s in (0, 1)]))
        accs = [heldout(lr, s, epoch) for s in (0, 1)]
        assert gen["heldout_accuracy"] == pytest.approx(np.mean(accs)) and gen["heldout_n"] == 2
        assert (gen["heldout_seed_low"], gen["heldout_seed_high"]) == pytest.approx(_t_interval(accs))
        nc1 = figs["nc1"][figs["nc1"]["group"] == group]
        assert (nc1["n"] == 2).all() and np.allclose(nc1["mean"], 0.5)


def test_the_default_is_the_last_epoch_and_an_epoch_no_run_has_leaves_them_out_and_says_why(study, store):
    default, last = figures(study, store=store), figures(study, store=store, summary="last")
    pd.testing.assert_frame_equal(default["layers"], last["layers"])
    pd.testing.assert_frame_equal(default["generalization"], last["generalization"])
    assert default["summary"]["label"] == "last epoch"
    figs = figures(study, store=store, summary=7)
    assert figs["layers"].empty and figs["generalization"].empty and figs["summary"]["label"] == "epoch 7"
    left = figs["summary"]["left_out"]
    assert len(left) == 4 and left["reason"].str.contains("no complete evaluation at epoch 7; it has epochs "
                                                          "0, 1, 2, 3").all()
    with pytest.raises(ValueError, match="summary must be"):
        figures(study, store=store, summary="first")


def _spec_file(study, tmp_path):
    import json

    path = tmp_path / "summary.json"
    path.write_text(json.dumps(study.to_dict()), encoding="utf-8")
    return path


@pytest.mark.parametrize("option, summary", [([], "last"), (["--summary", "best"], "best"), (["--summary", "2"], 2)])
def test_study_show_reads_the_runs_at_the_summary_it_is_given(study, store, tmp_path, capsys, option, summary):
    from lab.__main__ import main
    from lab.study import summary_text

    spec = _spec_file(study, tmp_path)
    assert main(["study", "show", str(spec), *option, "--runs-dir", str(store.root)]) == 0
    out = capsys.readouterr().out
    figs = figures(study, store=store, summary=summary)
    assert summary_text(figs) in out
    for row in figs["generalization"].itertuples(index=False):   # g per condition, as the table prints it
        line = next(line for line in out.splitlines() if line.split()[:1] == [row.group])
        assert f"{row.g:.3f}" in line.split()


def test_a_summary_the_cli_cannot_read_is_one_line_naming_the_choices(study, store, tmp_path, capsys):
    from lab.__main__ import main

    spec = _spec_file(study, tmp_path)
    for args in (["study", "show", str(spec), "--summary", "first"],
                 ["study", "export", str(spec), "-o", str(tmp_path / "s.html"), "--summary=-1"]):
        with pytest.raises(SystemExit) as stop:   # argparse's exit, as from the command line
            main([*args, "--runs-dir", str(store.root)])
        assert stop.value.code == 2, args
        err = capsys.readouterr().err
        assert "summary must be 'last'" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["export", "20990101-000000-x-0000", "-o", str(tmp_path / "r.html"), "--summary", "best",
                 "--runs-dir", str(store.root)]) == 2
    assert "give --study NAME_OR_SPEC too" in capsys.readouterr().err
    assert not (tmp_path / "s.html").exists() and not (tmp_path / "r.html").exists()


def test_the_study_page_reads_the_runs_at_the_summary_and_says_which(study, store, tmp_path):
    import json
    import re

    from lab.__main__ import main
    from lab.study import summary_text

    spec, out = _spec_file(study, tmp_path), tmp_path / "study.html"
    assert main(["study", "export", str(spec), "-o", str(out), "--summary", "best", "--runs-dir", str(store.root)]) == 0
    found = re.findall(r'<script type="application/json" id="ls-model">(.*?)</script>', out.read_text("utf-8"), re.S)
    shown = json.loads(found[0])["study"]
    best, last = figures(study, store=store, summary="best"), figures(study, store=store)
    assert shown["summary"] == summary_text(best) and "best epoch by unseen g" in shown["summary"]
    assert shown["read_at"] == "the best epoch by unseen g"      # the captions of the g table and the law say it
    g = {row["group"]: row["g"] for row in shown["generalization"]}
    assert g == pytest.approx(dict(zip(best["generalization"]["group"], best["generalization"]["g"])))
    assert g != pytest.approx(dict(zip(last["generalization"]["group"], last["generalization"]["g"])))
