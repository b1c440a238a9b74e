"""lab.study.figures(study, summary=...): every run read at its last, best or a given epoch, each condition's
mean with its 95 % interval over seeds and n; numbers checked with numpy/scipy on the written values."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lab.study import figures
from tests.fixtures.summary_study import LAYERS, LRS, heldout, nmi, summary_study


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    from lab.store import RunStore

    store = RunStore(tmp_path_factory.mktemp("summary_study") / "runs")
    return summary_study(store), store


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
