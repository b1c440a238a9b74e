"""lab.monitor's trainer callbacks in the real trainers (PyTorch Lightning, transformers' Trainer) on CPU: a tiny
MLP trained on 16 px digits, evaluated on 4 other digit classes into a temporary run store."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import lab
from lab.monitor import HFTrainerCallback, LightningCallback, MonitorClosedError
from tests.fixtures.small_loop import digits_split, small_mlp

LAYERS = {"fc1", "fc2", "pre_logits"}


@pytest.fixture(scope="module")
def digits():
    """(unseen lab dataset: 4 classes x 10 images, training images (120, 1, 16, 16), their labels 0..5)."""
    return digits_split()


@pytest.fixture(scope="module")
def pl():
    try:
        import lightning.pytorch as pl
    except ImportError:
        pl = pytest.importorskip("pytorch_lightning", reason='PyTorch Lightning: pip install "layerscope[trainers]"')
    return pl


def _mlp():
    return small_mlp().train()                    # as a training script hands it to its trainer


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _check_run(store, mon, epochs, unit, before, model):
    """The stored run: finished, evaluated at ``epochs``, metric rows per layer at each, the axis in its meta;
    and the model trained."""
    rec = store.load(mon.run_id)
    assert rec.status == "finished"
    assert list(rec.training["epoch"]) == epochs
    unseen = rec.metrics[(rec.metrics["split"] == "unseen") & (rec.metrics["metric"] == "nmi")]
    assert sorted(zip(unseen["epoch"], unseen["layer"])) == sorted((e, layer) for e in epochs for layer in LAYERS)
    assert rec.meta["axis"] == unit and rec.meta["callback"]["unit"] == unit
    assert rec.meta["epochs"] == epochs[-1]
    after = model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), "the trainer trained nothing"


# -- PyTorch Lightning ----------------------------------------------------------------------------------------
def _lightning_module(pl, model):
    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model

        def training_step(self, batch, _):
            x, y = batch
            return nn.functional.cross_entropy(self.model(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Module()


def _flag_probe(pl, flags):
    """Records every module's train flag at each hook the monitor's callback uses: one probe before it in the
    callback list and one after it see the same flags when the callback leaves them as the trainer had them."""
    class Probe(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            flags.append(tuple(m.training for m in pl_module.modules()))

        def on_train_batch_end(self, trainer, pl_module, *args):
            flags.append(tuple(m.training for m in pl_module.modules()))

        def on_train_epoch_end(self, trainer, pl_module):
            flags.append(tuple(m.training for m in pl_module.modules()))

        def on_train_end(self, trainer, pl_module):
            flags.append(tuple(m.training for m in pl_module.modules()))

    return Probe()


def _lightning_trainer(pl, callbacks, **kw):
    return pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks, **kw)


@pytest.mark.parametrize("every, unit, max_epochs, accumulate, epochs", [
    (1, None, 2, 1, [0, 1, 2]),                   # the default: every epoch
    (2, "epoch", 3, 1, [0, 2, 3]),                # epoch 3 is off the grid: the final model, measured at the end
    (2, "step", 1, 1, [0, 2, 4]),                 # 4 batches of 32 a epoch
    (4, "step", 3, 2, [0, 4, 6]),                 # 2 batches per optimizer step: a step is evaluated once
], ids=["every-epoch", "every-2-epochs", "every-2-steps", "every-4-steps-accumulated"])
def test_lightning_evaluates_on_its_schedule(pl, store, digits, one_thread, every, unit, max_epochs, accumulate,
                                             epochs):
    unseen, images, labels = digits
    model = _mlp()
    before = _weights(model)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=32)
    before_flags, after_flags = [], []
    with lab.Monitor(model, unseen=unseen, store=store, metrics=("nmi",)) as mon:
        callback = LightningCallback(mon, every=every, **({} if unit is None else {"unit": unit}))
        assert isinstance(callback, pl.Callback) and (callback.every, callback.unit) == (every, unit or "epoch")
        trainer = _lightning_trainer(pl, [_flag_probe(pl, before_flags), callback, _flag_probe(pl, after_flags)],
                                     max_epochs=max_epochs, accumulate_grad_batches=accumulate)
        trainer.fit(_lightning_module(pl, model), loader)
    _check_run(store, mon, epochs, unit or "epoch", before, model)
    assert after_flags == before_flags and any(all(f) for f in before_flags)


def test_lightning_evaluates_the_epoch_max_steps_stopped_in(pl, store, digits, one_thread):
    """max_steps stops Lightning halfway through epoch 2: Lightning still ends that epoch, and it is evaluated."""
    unseen, images, labels = digits
    model = _mlp()
    before = _weights(model)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=32)
    with lab.Monitor(model, unseen=unseen, store=store, metrics=("nmi",)) as mon:
        _lightning_trainer(pl, [LightningCallback(mon)], max_epochs=5, max_steps=6).fit(
            _lightning_module(pl, model), loader)
    _check_run(store, mon, [0, 1, 2], "epoch", before, model)


class _Trainer:
    """What the callback reads of a Lightning Trainer on a non-zero rank of a distributed run (the callback's
    documented interface: ``is_global_zero``, ``current_epoch``, ``global_step``)."""

    is_global_zero = False
    current_epoch = 0
    global_step = 0


def test_lightning_off_rank_zero_evaluates_nothing(pl, store, digits, one_thread):
    unseen, _, _ = digits
    model = _mlp()
    with lab.Monitor(model, unseen=unseen, store=store, metrics=("nmi",)) as mon:
        for unit in ("epoch", "step"):
            callback, trainer = LightningCallback(mon, every=1, unit=unit), _Trainer()
            callback.on_train_start(trainer, None)
            for step in range(1, 4):
                trainer.global_step = step
                callback.on_train_batch_end(trainer, None, None, None, step - 1)
            trainer.current_epoch = 0
            callback.on_train_epoch_end(trainer, None)
            callback.on_train_end(trainer, None)
    rec = store.load(mon.run_id)
    assert rec.status == "finished" and rec.training.empty and rec.metrics.empty


def test_rank_zero_in_another_process_than_the_monitor_is_refused(store, digits):
    """A forking launcher (Lightning's ddp_notebook) would evaluate in a child process, away from the run."""
    import os

    unseen, _, _ = digits
    with lab.Monitor(_mlp(), unseen=unseen, store=False, metrics=("nmi",)) as mon:
        callback = LightningCallback(mon)
        trainer = _Trainer()
        trainer.is_global_zero = True
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:                                      # the child: only the callback's check runs here
            try:
                callback.on_train_start(trainer, None)
                message = b"no error"
            except RuntimeError as exc:
                message = str(exc).encode()
            os.write(write, message[:4000])
            os._exit(0)
        os.close(write)
        message = os.read(read, 4000).decode()
        os.waitpid(pid, 0)
        assert message.startswith("LightningCallback: the trainer runs rank 0 in process") and \
            "strategy='ddp'" in message
        assert mon.ctx.results.metrics().empty


def test_ddp_spawn_is_refused_with_the_launcher_to_use(pl, digits):
    """strategy="ddp_spawn" pickles the trainer's callbacks into the processes it starts (rank 0 among them)."""
    import pickle

    unseen, _, _ = digits
    with lab.Monitor(_mlp(), unseen=unseen, store=False, metrics=("nmi",)) as mon:
        with pytest.raises(TypeError, match="LightningCallback cannot be sent to other processes.*strategy='ddp'"):
            pickle.dumps(LightningCallback(mon))


def test_a_closed_monitor_is_refused_and_evaluate_after_close_says_so(pl, digits, one_thread):
    unseen, images, labels = digits
    model = _mlp()
    with lab.Monitor(model, unseen=unseen, store=False, metrics=("nmi",)) as mon:
        callback = LightningCallback(mon)
    with pytest.raises(MonitorClosedError, match="LightningCallback: the monitor's with-block already closed"):
        LightningCallback(mon)
    with pytest.raises(MonitorClosedError, match="HFTrainerCallback: the monitor's with-block already closed"):
        HFTrainerCallback(mon)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=32)
    with pytest.raises(MonitorClosedError, match=r"Monitor.evaluate was called after its with-block closed.*"
                                                 r"with lab.Monitor"):
        _lightning_trainer(pl, [callback], max_epochs=1).fit(_lightning_module(pl, model), loader)


# -- transformers' Trainer --------------------------------------------------------------------------------------
class _Classifier(nn.Module):
    """What transformers' Trainer trains: forward(pixel_values, labels) -> {"loss", "logits"}."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, pixel_values, labels=None):
        logits = self.net(pixel_values)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


class _Pixels(torch.utils.data.Dataset):
    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return {"pixel_values": self.images[i], "labels": self.labels[i]}


def _hf_train(tmp_path, model, images, labels, callbacks, epochs=2, batch=32, accumulate=1):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers' Trainer needs accelerate: "
                                             'pip install "layerscope[trainers]"')
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"), num_train_epochs=epochs, per_device_train_batch_size=batch,
        gradient_accumulation_steps=accumulate, learning_rate=0.05, report_to=[], use_cpu=True, save_strategy="no",
        logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_Pixels(images, labels), callbacks=callbacks)
    trainer.train()
    return trainer


def _hf_flag_probe(flags, model):
    from transformers import TrainerCallback

    class Probe(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            flags.append(tuple(m.training for m in model.modules()))

        def on_step_end(self, args, state, control, **kwargs):
            flags.append(tuple(m.training for m in model.modules()))

        def on_epoch_end(self, args, state, control, **kwargs):
            flags.append(tuple(m.training for m in model.modules()))

        def on_train_end(self, args, state, control, **kwargs):
            flags.append(tuple(m.training for m in model.modules()))

    return Probe()


@pytest.mark.parametrize("every, unit, accumulate, epochs", [
    (1, None, 1, [0, 1, 2]),                      # the default: every epoch
    (3, "step", 2, [0, 3, 6, 8]),                 # 8 batches of 16 a epoch, 2 per step: 8 steps, the last off grid
], ids=["every-epoch", "every-3-steps-accumulated"])
def test_the_hf_trainer_evaluates_on_its_schedule(store, tmp_path, digits, one_thread, every, unit, accumulate,
                                                  epochs):
    unseen, images, labels = digits
    net = _mlp()
    model = _Classifier(net)
    before = _weights(net)
    before_flags, after_flags = [], []
    with lab.Monitor(net, unseen=unseen, store=store, metrics=("nmi",)) as mon:
        callback = HFTrainerCallback(mon, every=every, **({} if unit is None else {"unit": unit}))
        _hf_train(tmp_path, model, images, labels, [_hf_flag_probe(before_flags, net), callback,
                                                    _hf_flag_probe(after_flags, net)],
                  batch=16 if accumulate > 1 else 32, accumulate=accumulate)
    _check_run(store, mon, epochs, unit or "epoch", before, net)
    assert after_flags == before_flags and any(all(f) for f in before_flags)


def test_an_hf_int_every_counts_epochs_unless_unit_says_steps(store, tmp_path, digits, one_thread):
    unseen, images, labels = digits
    net = _mlp()
    before = _weights(net)
    with lab.Monitor(net, unseen=unseen, store=store, metrics=("nmi",)) as mon:
        with warnings.catch_warnings():
            warnings.simplefilter("error")                          # one meaning: nothing to warn about
            assert (HFTrainerCallback(mon, every=3).every, HFTrainerCallback(mon, every=3).unit) == (3, "epoch")
            callback = HFTrainerCallback(mon, every=3, unit="step")
        _hf_train(tmp_path, _Classifier(net), images, labels, [callback], epochs=1)      # 4 steps
    _check_run(store, mon, [0, 3, 4], "step", before, net)


def test_the_hf_callback_off_the_main_process_evaluates_nothing(store, digits, one_thread):
    """Rank != 0 as the Trainer tells its callbacks: ``TrainerState(is_world_process_zero=False)``."""
    from transformers import TrainerControl, TrainerState

    unseen, _, _ = digits
    with lab.Monitor(_mlp(), unseen=unseen, store=store, metrics=("nmi",)) as mon:
        for unit in ("epoch", "step"):
            callback = HFTrainerCallback(mon, every=1, unit=unit)
            state, control = TrainerState(is_world_process_zero=False), TrainerControl()
            callback.on_train_begin(None, state, control)
            for step in range(1, 4):
                state.global_step, state.epoch = step, step / 3
                assert callback.on_step_end(None, state, control) is control
            callback.on_epoch_end(None, state, control)
            callback.on_train_end(None, state, control)
    rec = store.load(mon.run_id)
    assert rec.status == "finished" and rec.training.empty and rec.metrics.empty


# -- arguments ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("callback", [HFTrainerCallback, LightningCallback], ids=["hf", "lightning"])
def test_bad_arguments_name_the_fix(pl, digits, callback):
    unseen, _, _ = digits
    name = callback.__name__
    with lab.Monitor(_mlp(), unseen=unseen, store=False, metrics=("nmi",)) as mon:
        for every in (0, -2, 1.5, True, "step", "epoch"):
            with pytest.raises(ValueError, match=rf"{name}: every must be a positive int, the number of epochs or "
                                                 rf"optimizer steps between evaluations \(every=N, unit='epoch' or "
                                                 rf"unit='step'\)\. Got {every!r} instead"):
                callback(mon, every=every, unit="step")
        for unit in ("minute", None):
            with pytest.raises(ValueError, match=rf"{name}: unit must be 'epoch' or 'step' \(optimizer steps\)\. "
                                                 rf"Got {unit!r} instead"):
                callback(mon, unit=unit)
        with pytest.raises(ValueError, match=rf"{name}: monitor must be a lab.Monitor.*Got Sequential instead"):
            callback(nn.Sequential())
        assert (callback(mon).every, callback(mon).unit) == (1, "epoch")


_DDP_SCRIPT = """
import json, os, sys
import torch
from torch import nn
import lightning.pytorch as pl
import lab
from lab.monitor import LightningCallback

class Module(pl.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def training_step(self, batch, _):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3))
    x, y = torch.rand(40, 1, 8, 8), torch.arange(40) % 3
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=5)
    # every rank opens the monitor on the same store: only rank 0 (LOCAL_RANK unset or 0) writes the run
    with lab.Monitor(net, unseen=(x, y), store=lab.RunStore(sys.argv[1]), metrics=("nmi",)) as mon:
        trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2, logger=False,
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                             callbacks=[LightningCallback(mon)])
        trainer.fit(Module(net), loader)
        evaluated = sorted(set(mon.ctx.results.metrics()["epoch"])) if mon.active else []
    print("RANK " + json.dumps({"rank": trainer.global_rank, "active": mon.active, "evaluated": [int(e) for e in evaluated],
                                "steps": trainer.global_step}), flush=True)
"""


@pytest.mark.slow
def test_lightning_ddp_on_two_processes_evaluates_once_on_rank_zero(pl, tmp_path, repo_root):
    """A real 2-process DDP run on CPU (gloo), every rank opening the same monitor on the same store: rank 0 (this
    script's process) evaluates and writes the one run; rank 1's monitor is inactive."""
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "ddp_monitor.py"
    script.write_text(_DDP_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(repo_root), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "runs")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    ranks = {r["rank"]: r for r in (json.loads(line[5:]) for line in out.stdout.splitlines()
                                    if line.startswith("RANK "))}
    assert set(ranks) == {0, 1}
    assert ranks[0]["evaluated"] == [0, 1, 2] and ranks[1]["evaluated"] == []
    assert ranks[0]["active"] and not ranks[1]["active"]
    assert ranks[0]["steps"] == ranks[1]["steps"] == 8                 # 40 images over 2 ranks, batches of 5, 2 epochs
    runs = lab.RunStore(tmp_path / "runs").list()
    assert len(runs) == 1 and runs["status"].tolist() == ["finished"]
    rec = lab.RunStore(tmp_path / "runs").load(runs["run_id"][0])
    assert list(rec.training["epoch"]) == [0, 1, 2] and set(rec.metrics["epoch"]) == {0, 1, 2}
