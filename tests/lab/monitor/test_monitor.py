"""lab.Monitor: a researcher's own training loop, evaluated by the engine's Evaluator into a stored run."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import lab
from lab.monitor import MonitorClosedError
from tests.fixtures.small_loop import digits_split, small_mlp, train_epoch

METRICS = ("nmi", "knn_accuracy", "nc1", "cdnv")


@pytest.fixture(scope="module")
def digits():
    """(unseen lab dataset of 4 classes x 10 images, seen training images (120, 1, 16, 16), their labels 0..5)."""
    return digits_split()


_mlp, _train_epoch = small_mlp, train_epoch


def _hooks(model):
    return [name for name, m in model.named_modules()
            if m._forward_hooks or m._forward_pre_hooks or m._backward_hooks]


def test_a_plain_loop_writes_a_finished_run_measured_as_compute_layer_measures(store, digits, one_thread):
    unseen, images, labels = digits
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with lab.Monitor(model, unseen=unseen, store=store, metrics=METRICS, name="loop") as mon:
        for epoch in range(3):
            loss = _train_epoch(model, images, labels, opt) if epoch else None
            table = mon.evaluate(epoch, train_loss=loss)
            assert set(table["epoch"]) == {epoch}
    rec = store.load(mon.run_id)
    assert rec.status == "finished" and rec.name == "loop"
    layers = ["fc1", "fc2", "pre_logits"]
    assert [layer["name"] for layer in rec.meta["layers"]] == layers
    unseen_rows = rec.metrics[rec.metrics["split"] == "unseen"]
    for metric in METRICS + ("nmi_low", "nmi_high", "cka_initial"):
        got = unseen_rows[unseen_rows["metric"] == metric]
        assert sorted(zip(got["epoch"], got["layer"])) == sorted((e, layer) for e in range(3) for layer in layers)
    assert list(rec.training["epoch"]) == [0, 1, 2]
    assert rec.training["train_loss"].notna().tolist() == [False, True, True]
    assert rec.config.strategy == "none" and rec.config.backbone == "monitor:MLP"
    assert rec.meta["monitor"]["unseen_images"] == 40 and rec.meta["epochs"] == 2
    assert rec.image_record_problem(0, 2) is None
    assert len(rec.projection_keys()) == 3 * len(layers)                      # a PCA layout per layer and epoch
    assert set(rec.utilization["layer"]) >= {"fc1", "fc2"}
    # one source of truth: the last evaluation equals lab.metrics.compute_layer on the same features
    feats = lab.features.extract(mon.backbone, unseen, layers=layers)
    y = torch.as_tensor(np.asarray(unseen.targets))
    last = unseen_rows[unseen_rows["epoch"] == 2].set_index(["layer", "metric"])["value"]
    for layer in layers:
        expected = lab.metrics.compute_layer(feats[layer], y, metrics=METRICS, layer=layer)
        for metric, value in expected.items():
            assert last[(layer, metric)] == pytest.approx(float(value), rel=1e-5, abs=1e-6), (layer, metric)


def test_evaluate_leaves_the_model_as_it_found_it(digits, one_thread):
    unseen, _, _ = digits
    model = _mlp()
    model.train()
    model.fc1.eval()                                   # a mixed state comes back mixed
    flags = [m.training for m in model.modules()]
    with lab.Monitor(model, unseen=unseen, store=False, metrics=("nmi",)) as mon:
        torch.manual_seed(3)
        rng = torch.get_rng_state()
        mon.evaluate()
        assert torch.equal(torch.get_rng_state(), rng)
        assert [m.training for m in model.modules()] == flags
        assert torch.is_grad_enabled()
        with torch.no_grad():
            mon.evaluate()
            assert not torch.is_grad_enabled()
        assert _hooks(model) == []
        out = model(torch.rand(2, 1, 16, 16))
        assert out.requires_grad                       # training goes on as before


def test_a_failure_inside_the_block_fails_the_run_with_its_message(store, digits, one_thread):
    unseen, _, _ = digits
    with pytest.raises(RuntimeError, match="loss is nan"):
        with lab.Monitor(_mlp(), unseen=unseen, store=store, metrics=("nmi",)) as mon:
            mon.evaluate(0)
            raise RuntimeError("loss is nan at step 12")
    rec = store.load(mon.run_id)
    assert rec.status == "failed"
    assert "loss is nan at step 12" in rec.meta["message"]
    assert list(rec.training["epoch"]) == [0]                 # what was measured stays


def test_evaluate_outside_the_block_says_how_to_call_it(digits):
    unseen, _, _ = digits
    mon = lab.Monitor(_mlp(), unseen=unseen, store=False, metrics=("nmi",))
    with pytest.raises(MonitorClosedError, match="before its with-block opened"):
        mon.evaluate()
    with mon:
        pass
    with pytest.raises(MonitorClosedError, match="after its with-block closed.*with lab.Monitor"):
        mon.evaluate()
    with pytest.raises(MonitorClosedError, match="writes one run"):
        with mon:
            pass


def test_epochs_must_grow(digits, one_thread):
    unseen, _, _ = digits
    with lab.Monitor(_mlp(), unseen=unseen, store=False, metrics=("nmi",)) as mon:
        mon.evaluate(2)
        with pytest.raises(ValueError, match="the last was 2, got 2"):
            mon.evaluate(2)
        assert set(mon.evaluate()["epoch"]) == {3}


def test_module_names_are_layers_of_a_plain_module(store, one_thread):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8), nn.ReLU(), nn.Linear(8, 3))
    images, labels = torch.rand(30, 1, 8, 8), torch.arange(30) % 3
    with lab.Monitor(model, unseen=(images, labels), layers=["4", "2"], store=store, metrics=("nmi",)) as mon:
        mon.evaluate()
    rec = store.load(mon.run_id)
    assert [layer["name"] for layer in rec.meta["layers"]] == ["2", "4"]       # forward order
    assert set(rec.metrics["layer"]) == {"2", "4"}
    named = nn.Sequential(OrderedDict(flat=nn.Flatten(), fc1=nn.Linear(64, 8), act=nn.ReLU(), fc2=nn.Linear(8, 3)))
    with pytest.raises(ValueError, match=r"layers: 'fc_2' is no module of Sequential; closest: fc2"):
        lab.Monitor(named, unseen=(images, labels), layers=["fc_2"], store=False)


def test_bad_input_names_the_fix():
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 3))
    images = torch.rand(12, 1, 8, 8)
    with pytest.raises(ValueError, match="only class 1.*at least 2 classes"):
        lab.Monitor(model, unseen=(images, torch.ones(12, dtype=torch.long)), store=False)
    with pytest.raises(ValueError, match="integer class indices.*labels.long"):
        lab.Monitor(model, unseen=(images, torch.arange(12) % 3 * 1.0), store=False)
    with pytest.raises(ValueError, match="pass \\(images, labels\\)"):
        lab.Monitor(model, unseen=images, store=False)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, torch.arange(12) % 3), shuffle=True)
    with pytest.raises(ValueError, match="shuffle=False"):
        lab.Monitor(model, unseen=loader, store=False)
    with pytest.raises(ValueError, match="knn_accuracy.*at least 2 per class"):
        lab.Monitor(model, unseen=(images[:3], torch.arange(3)), metrics=("knn_accuracy",), store=False)


def test_every_form_of_data_gives_the_same_numbers(one_thread):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3))
    images, labels = torch.rand(30, 1, 8, 8), torch.arange(30) % 3
    dataset = torch.utils.data.TensorDataset(images, labels)
    forms = [(images, labels), dataset, torch.utils.data.DataLoader(dataset, batch_size=7)]
    tables = []
    for form in forms:
        with lab.Monitor(model, unseen=form, store=False, metrics=("nmi", "nc1")) as mon:
            tables.append(mon.evaluate().set_index(["layer", "metric"])["value"].sort_index())
    for table in tables[1:]:
        pd.testing.assert_series_equal(table, tables[0])


def test_a_wrapped_model_is_unwrapped_for_tapping(digits, one_thread):
    unseen, _, _ = digits
    model = _mlp()
    for wrapped in (torch.compile(model), nn.DataParallel(model)):
        with lab.Monitor(wrapped, unseen=unseen, store=False, metrics=("nmi",)) as mon:
            table = mon.evaluate()
        assert mon.backbone.model is model
        assert set(table["layer"]) == {"fc1", "fc2", "pre_logits"}


def test_two_monitors_at_once_write_two_runs(store, digits, one_thread):
    unseen, _, _ = digits
    with lab.Monitor(_mlp(), unseen=unseen, store=store, metrics=("nmi",)) as a, \
            lab.Monitor(_mlp(), unseen=unseen, store=store, metrics=("nmi",)) as b:
        a.evaluate()
        b.evaluate()
    assert a.run_id != b.run_id
    assert set(store.list()["status"]) == {"finished"}


def test_seen_images_give_the_seen_split(store, digits, one_thread):
    unseen, images, labels = digits
    with lab.Monitor(_mlp(), unseen=unseen, seen=(images, labels), store=store, metrics=("nmi", "nc1")) as mon:
        mon.evaluate()
    rec = store.load(mon.run_id)
    seen = rec.metrics[rec.metrics["split"] == "seen"]
    assert set(seen["metric"]) >= {"nc1"} and set(seen["layer"]) == {"fc1", "fc2", "pre_logits"}


def _tiny_vit():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.ViTConfig(image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=2, intermediate_size=64, num_labels=3, num_channels=1)
    return transformers.ViTForImageClassification(config)


def _check_hf_run(store, mon, model, cli, epochs):
    rec = store.load(mon.run_id)
    assert rec.status == "finished"
    assert list(rec.training["epoch"]) == epochs
    assert set(rec.metrics["layer"]) == {"layers.0", "layers.1"}
    assert _hooks(model) == []
    assert mon.run_id in set(store.list()["run_id"])
    out = cli("runs", "list", "--runs-dir", str(store.root))
    assert out.returncode == 0, out.stderr
    assert mon.run_id in out.stdout


def test_the_hf_trainer_callback_in_a_real_trainer(store, tmp_path, cli, one_thread):
    pytest.importorskip("accelerate", reason="transformers' Trainer needs accelerate, which is not installed")
    import transformers

    from lab.monitor import HFTrainerCallback

    model = _tiny_vit()
    images, labels = torch.rand(24, 1, 16, 16), torch.arange(24) % 3

    class Pixels(torch.utils.data.Dataset):
        def __len__(self):
            return len(images)

        def __getitem__(self, i):
            return {"pixel_values": images[i], "labels": labels[i]}

    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), num_train_epochs=2,
                                          per_device_train_batch_size=8, report_to=[], save_strategy="no",
                                          logging_strategy="no", use_cpu=True, disable_tqdm=True)
    with lab.Monitor(model, unseen=(images, labels), layers=["vit.layers.0", "layers.1"], store=store,
                     metrics=("nmi", "knn_accuracy"), name="hf") as mon:
        transformers.Trainer(model=model, args=args, train_dataset=Pixels(),
                             callbacks=[HFTrainerCallback(mon)]).train()
    _check_hf_run(store, mon, model, cli, [0, 1, 2])


@pytest.mark.parametrize("env, writes", [({"RANK": "1"}, False), ({"RANK": "0"}, True),
                                         ({"LOCAL_RANK": "1", "NODE_RANK": "0"}, False),
                                         ({"LOCAL_RANK": "0", "NODE_RANK": "1"}, False), ({}, True)])
def test_only_the_main_process_of_a_distributed_run_writes_it(store, digits, one_thread, monkeypatch, env, writes):
    """The launchers' environment is the interface (torchrun / accelerate: RANK; Lightning's DDP: LOCAL_RANK and
    NODE_RANK); once torch.distributed is initialized its rank decides (tested by the adapters' DDP run)."""
    unseen, _, _ = digits
    for name in ("RANK", "LOCAL_RANK", "NODE_RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    model = _mlp()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with lab.Monitor(model, unseen=unseen, store=store, metrics=("nmi",)) as mon:
        first, second = mon.evaluate(), mon.evaluate()
    assert mon.active is writes and len(store.ids()) == int(writes)
    assert (len(first) > 0) is writes and (set(second["epoch"]) == {1} if writes else second.empty)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    if not writes:
        assert mon.run_id is None
        with pytest.raises(ValueError, match="not the main process.*all_ranks=True"):
            mon.record()
        with pytest.raises(MonitorClosedError):
            mon.evaluate()
        with lab.Monitor(model, unseen=unseen, store=store, metrics=("nmi",), all_ranks=True) as every:
            every.evaluate()
        assert every.active and store.load(every.run_id).status == "finished"
