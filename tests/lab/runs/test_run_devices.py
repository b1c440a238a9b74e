"""A run on a device, checked on the CPU: it frees its model when it ends (no
reference cycle waits for the collector), one seed's model is gone before the next loads, an
out-of-memory error outside extraction and training names its stage, device names and the
precision are checked before anything starts, and the CUDA-only settings (bfloat16 without
emulation, TF32 off in metrics, the current device in every thread) are asked of torch correctly.

CUDA is faked where torch allows it (``torch.cuda.is_available``, ``device_count``, ...); no test
here puts a tensor on a GPU.
"""
from __future__ import annotations

import contextlib
import gc
import threading
import weakref

import pytest
import torch

import lab
import lab.backbones
import lab.device
from lab.device import (DeviceOutOfMemoryError, autocast_dtype, check_device, cuda_index, device_choices,
                        device_key, device_scope, exact_float32, resolve_device)
from lab.runs import CancelToken
from lab.runs.worker import Worker

from tests.fixtures.configs import TINY


def _cfg(**changes):
    return lab.RunConfig(**{**TINY, "epochs": 1, "projection": "none", **changes})


@pytest.fixture
def no_gc():
    """The cyclic garbage collector off for the test: what is freed is freed by reference counts."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@pytest.fixture
def models(monkeypatch):
    """Weak references to every model the engine loads, in load order."""
    refs: list[weakref.ref] = []
    real = lab.backbones.load

    def load(*args, **kwargs):
        bb = real(*args, **kwargs)
        refs.append(weakref.ref(next(bb.model.parameters())))
        return bb

    monkeypatch.setattr(lab.backbones, "load", load)
    return refs


def _fake_cuda(monkeypatch, n: int = 1, major: int = 8):
    """A machine with ``n`` CUDA devices of compute capability ``major``.x, as far as lab.device asks."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)

    def bf16(including_emulation: bool = True):
        return major >= 8 or including_emulation           # torch: emulated bfloat16 counts by default

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", bf16)


# -- 1. a failed, cancelled or closed run frees its model at once -------------------------------------

def test_a_failed_run_frees_its_model_before_the_failure_is_reported(no_gc, models):
    # a diverging loss fails epoch 1 inside the worker thread (the exception crosses threads)
    events = lab.run(_cfg(lr=1e12, optimizer="sgd"), store=False)
    for event in events:
        if event.kind == "run_failed":
            assert "training diverged" in event.message
            assert models and all(ref() is None for ref in models), "the failed run still holds its model"
    assert event.kind == "run_failed"


def test_a_cancelled_run_frees_its_model(no_gc, models):
    token = CancelToken()
    last = None
    for last in lab.run(_cfg(), store=False, cancel=token):
        if last.kind == "progress" and last.stage == "train":
            token.cancel()
    assert last.kind == "run_cancelled"
    assert models and all(ref() is None for ref in models)


def test_closing_the_run_frees_its_model(no_gc, models):
    events = lab.run(_cfg(), store=False)
    for event in events:
        if event.kind == "progress" and event.stage == "train":
            break
    events.close()
    assert models and all(ref() is None for ref in models)


def test_the_worker_rethrows_without_a_reference_cycle(no_gc):
    class Big:
        pass

    worker = Worker(CancelToken())
    held = []

    def fn(progress, should_stop):
        big = Big()                          # what a failing call holds in its frame (activations ...)
        held.append(weakref.ref(big))
        raise RuntimeError("boom")

    gen = worker.stream(fn, stage="train", seed=0, epoch=1)
    with pytest.raises(RuntimeError, match="boom"):
        list(gen)
    del gen
    worker.close()
    assert held[0]() is None


# -- 14. one seed's model is gone before the next one loads --------------------------------------------

def test_the_previous_seed_is_freed_before_the_next_loads(no_gc, monkeypatch):
    alive_at_load: list[bool] = []
    refs: list[weakref.ref] = []
    real = lab.backbones.load

    def load(*args, **kwargs):
        alive_at_load.append(any(ref() is not None for ref in refs))
        bb = real(*args, **kwargs)
        refs.append(weakref.ref(next(bb.model.parameters())))
        return bb

    monkeypatch.setattr(lab.backbones, "load", load)
    events = list(lab.run(_cfg(seeds=[0, 1], save_weights=False), store=False))
    assert events[-1].kind == "run_finished", events[-1]
    assert alive_at_load == [False, False]


# -- 11. out of memory outside extraction and training ----------------------------------------------------

def test_out_of_memory_in_the_metrics_is_a_failed_run_naming_the_stage_and_the_fix(no_gc, models, monkeypatch):
    import lab.runs.evaluation

    def oom(*args, **kwargs):
        raise lab.device.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(lab.runs.evaluation, "compute_metrics", oom)
    events = lab.run(_cfg(pooling="flatten"), store=False)
    for event in events:
        if event.kind == "run_failed":
            assert all(ref() is None for ref in models)
            break
    message = event.message
    assert event.kind == "run_failed" and "\n" not in message
    assert message.startswith("the cpu device ran out of memory in evaluation at epoch 0 (metrics"), message
    for fix in ("unseen_per_class (now 10)", "seen_per_class (now 6)", "pooling='mean' instead of 'flatten'",
                "smaller img_size", "free the device"):
        assert fix in message, (fix, message)
    assert "bug" not in message


def test_the_out_of_memory_exception_is_named_in_one_place():
    assert lab.device.OutOfMemoryError is getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    with pytest.raises(DeviceOutOfMemoryError, match="in training .* lower batch_size to 32"):
        with lab.device.out_of_memory_hint("training", "batch_size", 64, "cpu"):
            raise lab.device.OutOfMemoryError("out of memory")


# -- 6. bfloat16 only where the GPU has it -------------------------------------------------------------------

@pytest.mark.parametrize("major, expected", [(7, torch.float16), (8, torch.bfloat16)], ids=["T4/V100", "A100"])
def test_auto_precision_ignores_emulated_bfloat16(monkeypatch, major, expected):
    _fake_cuda(monkeypatch, major=major)
    assert autocast_dtype(torch.device("cuda"), "auto") is expected
    assert autocast_dtype(torch.device("cpu"), "auto") is None


# -- 10. devices: one key per GPU, the GPUs offered, a device or precision the machine lacks -----------

def test_device_key_is_one_name_per_physical_device(monkeypatch):
    _fake_cuda(monkeypatch, n=2)
    assert device_key("cuda") == device_key("cuda:0") == device_key(torch.device("cuda")) == "cuda:0"
    assert device_key("CUDA:1") == "cuda:1" and device_key("cpu") == "cpu" and device_key("auto") == "cuda:0"
    assert cuda_index("cuda") == 0 and cuda_index("cuda:1") == 1 and cuda_index("cpu") is None
    _fake_cuda(monkeypatch, n=0)
    assert device_key("auto") in ("cpu", "mps") and device_key("cpu") == "cpu"


def test_device_choices_offer_every_gpu(monkeypatch):
    _fake_cuda(monkeypatch, n=2)
    assert [c for c in device_choices() if c.startswith("cuda")] == ["cuda:0", "cuda:1"]
    _fake_cuda(monkeypatch, n=1)
    assert [c for c in device_choices() if c.startswith("cuda")] == ["cuda"]
    _fake_cuda(monkeypatch, n=0)
    assert device_choices()[:2] == ["auto", "cpu"] and not any(c.startswith("cuda") for c in device_choices())


def test_a_gpu_the_machine_lacks_is_one_line_naming_what_there_is(monkeypatch):
    _fake_cuda(monkeypatch, n=1)
    with pytest.raises(ValueError, match=r"^device 'cuda:7' was requested but this machine has 1 CUDA device "
                                         r"\(cuda:0\); use device='cuda:0', 'auto' or 'cpu'\.$"):
        resolve_device("cuda:7")
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    _fake_cuda(monkeypatch, n=0)
    with pytest.raises(ValueError, match=r"^device 'cuda' was requested but CUDA is not available here"):
        check_device("cuda", "auto")


def test_a_precision_the_device_cannot_run_is_refused(monkeypatch):
    _fake_cuda(monkeypatch, n=1, major=7)
    with pytest.raises(ValueError, match=r"^precision 'bfloat16' was requested but cuda:0 has no native bfloat16 "
                                         r"\(compute capability below 8\.0\); use precision='auto' \(float16 there\), "
                                         r"'float16' or 'float32'\.$"):
        check_device("cuda", "bfloat16")
    assert check_device("cuda:0", "auto") == torch.device("cuda:0")
    assert check_device("cuda", "float16") == torch.device("cuda")
    # CPU autocast runs both half types (the CPU tests exercise the GPU path that way)
    assert check_device("cpu", "bfloat16") == check_device("cpu", "float16") == torch.device("cpu")
    with pytest.raises(ValueError, match="precision must be one of"):
        check_device("cpu", "half")


def test_the_cli_refuses_a_missing_gpu_with_status_2_before_any_run_starts(monkeypatch, tmp_path, capsys):
    from lab.cli.entry import main

    _fake_cuda(monkeypatch, n=1)
    runs = tmp_path / "runs"
    flags = ["run", "--runs-dir", str(runs), "--dataset", "digits", "--backbone", "mlp:depth=2,width=16",
             "--epochs", "1", "--n-unseen", "3", "--no-progress"]
    status = main(flags + ["--device", "cuda:7"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "device 'cuda:7' was requested but this machine has 1 CUDA device (cuda:0)" in err
    assert err.count("\n") == 1 and "bug" not in err
    assert not runs.exists() or not any(runs.iterdir())
    _fake_cuda(monkeypatch, n=1, major=7)
    assert main(flags + ["--device", "cuda", "--precision", "bfloat16"]) == 2
    assert "has no native bfloat16" in capsys.readouterr().err


def test_the_app_refuses_a_missing_gpu_with_an_alert(monkeypatch):
    pytest.importorskip("panel")
    from app.live import LiveView
    from app.live.run_controls import RunControl

    _fake_cuda(monkeypatch, n=1)
    live = LiveView()
    cfg = lab.RunConfig(dataset="digits", backbone="mlp:depth=2,width=16", epochs=1, n_unseen=3, device="cuda:7")
    control = RunControl(live, lambda: cfg, store=False)
    assert control.start() is False and control._thread is None and not control.running
    assert live._alert.visible and "device 'cuda:7' was requested" in live._alert.object


def test_device_locks_key_cuda_and_cuda0_as_one_device(monkeypatch):
    from app.base.resources import DeviceLocks

    _fake_cuda(monkeypatch, n=2)
    locks = DeviceLocks()
    with locks.hold("cuda", "run A") as got:
        assert got and locks.holder("cuda:0") == "run A" and locks.holder("cuda:1") is None
        with locks.hold("cuda:0", "run B", should_stop=lambda: True) as second:
            assert second is False                       # queued behind run A, then stopped
    with locks.hold_all(["cuda:1", "cuda", "cuda:0"], "study") as got:
        assert got and locks.holder("cuda:0") == locks.holder("cuda:1") == "study"
    assert locks.holder("cuda:0") is None and locks.holder("cuda:1") is None


def test_the_studies_tab_holds_the_local_devices_while_a_study_runs(monkeypatch, tmp_path):
    pytest.importorskip("panel")
    from types import SimpleNamespace

    from app.base.resources import shared
    from app.studies.studies_panel import StudiesPanel, study_device_keys
    from lab.store import RunStore

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    held = []
    study = SimpleNamespace(
        cells=lambda: [SimpleNamespace(config=_cfg(device="cpu"))],
        run=lambda **kw: held.append(shared().devices.holder("cpu"))
        or SimpleNamespace(cancelled=False, run_ids=[], failed=[], skipped=[], seconds=0.0),
        status=lambda store: None, name="s")
    pushed = []
    panel = StudiesPanel(RunStore(tmp_path / "runs"))
    panel._work(study, threading.Event(), SimpleNamespace(push=lambda msg, urgent=False: pushed.append(msg)))
    assert held and held[0] is not None and "study" in held[0]
    assert shared().devices.holder("cpu") is None
    assert pushed[-1]["kind"] == "done"

    _fake_cuda(monkeypatch, n=2)
    assert study_device_keys([_cfg(device="auto")]) == ["cuda:0", "cuda:1"]
    assert study_device_keys([_cfg(device="cpu"), _cfg(device="cuda:1")]) == ["cpu", "cuda:0", "cuda:1"]
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://10.0.0.1:8786")
    assert study_device_keys([_cfg(device="auto")]) == []          # a remote cluster: no local lock


# -- 15. normalization statistics built once per device ---------------------------------------------------

def test_normalization_builds_its_statistics_once_per_device_and_dtype(monkeypatch):
    from lab.backbones._normalize import from_stats

    norm = from_stats([0.5, 0.4, 0.3], [0.2, 0.2, 0.25], 3, "test")
    x = torch.rand(2, 3, 4, 4)
    expected = (x - torch.tensor([0.5, 0.4, 0.3]).view(1, -1, 1, 1)) / torch.tensor([0.2, 0.2, 0.25]).view(1, -1, 1, 1)
    assert torch.equal(norm.apply(x), expected)                 # bit-identical to building them per batch
    made = []
    real = torch.tensor
    monkeypatch.setattr(torch, "tensor", lambda *a, **k: made.append(a) or real(*a, **k))
    for _ in range(3):
        assert torch.equal(norm.apply(x), expected)
    assert made == []


# -- 16. exact float32 in the metrics --------------------------------------------------------------------------

def test_exact_float32_turns_tf32_off_inside_and_restores_it_after():
    before = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = True               # a user's global setting
    try:
        with exact_float32():
            assert torch.backends.cuda.matmul.allow_tf32 is False
            assert torch.get_float32_matmul_precision() == "highest"
            with exact_float32():                              # nested (and concurrent runs) keep it off
                pass
            assert torch.backends.cuda.matmul.allow_tf32 is False
        assert torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.set_float32_matmul_precision(before)


def test_the_engine_measures_under_exact_float32(monkeypatch):
    import lab.runs.evaluation

    real = lab.runs.evaluation.compute_metrics
    seen = []

    def spy(*args, **kwargs):
        seen.append(torch.get_float32_matmul_precision())
        return real(*args, **kwargs)

    monkeypatch.setattr(lab.runs.evaluation, "compute_metrics", spy)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        events = list(lab.run(_cfg(epochs=0, strategy="none", lr=None), store=False))
    finally:
        torch.set_float32_matmul_precision(before)
    assert events[-1].kind == "run_finished" and seen and set(seen) == {"highest"}


# -- 17a. the run's GPU is the current device in every thread it uses -------------------------------------------

def test_the_worker_thread_runs_on_the_runs_gpu(monkeypatch):
    entered = []

    class FakeDevice:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            entered.append((threading.current_thread().name, self.index))

        def __exit__(self, *exc):
            return False

    _fake_cuda(monkeypatch, n=2)
    monkeypatch.setattr(torch.cuda, "device", FakeDevice)
    worker = Worker(CancelToken(), device=torch.device("cuda:1"))
    gen = worker.stream(lambda progress, should_stop: 7, stage="extract", seed=0, epoch=0)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    worker.close()
    assert stop.value.value == 7
    assert entered == [(entered[0][0], 1)] and entered[0][0].startswith("lab-worker")
    with device_scope("cuda:1"):
        pass
    with device_scope("cpu"):
        pass
    assert entered[1:] == [(threading.current_thread().name, 1)]        # nothing entered for the CPU


def test_device_scope_makes_the_runs_gpu_current_for_the_block_and_restores_the_previous_one(monkeypatch):
    current = [0]

    class FakeDevice:
        """torch.cuda.device: the current CUDA device is ``index`` inside, the previous one after."""

        def __init__(self, index):
            self.index, self.previous = index, None

        def __enter__(self):
            self.previous, current[0] = current[0], self.index

        def __exit__(self, *exc):
            current[0] = self.previous
            return False

    _fake_cuda(monkeypatch, n=2)
    monkeypatch.setattr(torch.cuda, "device", FakeDevice)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    inside = []
    with device_scope("cuda:1"):
        inside.append(current[0])
        with device_scope(torch.device("cuda", 0)):
            inside.append(current[0])
        inside.append(current[0])
        with device_scope("cuda"):                      # "cuda" is the current device: GPU 1 stays
            inside.append(current[0])
    assert inside == [1, 0, 1, 1] and current[0] == 0
    with pytest.raises(RuntimeError, match="boom"), device_scope("cuda:1"):
        raise RuntimeError("boom")
    assert current[0] == 0                              # restored after an error too
    with device_scope("cpu"), device_scope(torch.device("meta")):
        assert current[0] == 0                          # other devices leave the CUDA device alone


def test_the_engine_loads_and_trains_under_the_device_scope_of_its_device(monkeypatch):
    import lab.runs.engine
    from lab import finetune

    scopes, depth, inside = [], [0], {}
    real_scope, real_load, real_epoch = lab.device.device_scope, lab.backbones.load, finetune.FineTuner.train_epoch

    @contextlib.contextmanager
    def spy(device):
        scopes.append(str(device))
        depth[0] += 1
        try:
            with real_scope(device):
                yield
        finally:
            depth[0] -= 1

    def load(*args, **kwargs):
        inside["load"] = depth[0] > 0
        return real_load(*args, **kwargs)

    def train_epoch(self, *args, **kwargs):
        inside["train"] = depth[0] > 0
        return real_epoch(self, *args, **kwargs)

    monkeypatch.setattr(lab.device, "device_scope", spy)
    monkeypatch.setattr(lab.backbones, "load", load)
    monkeypatch.setattr(finetune.FineTuner, "train_epoch", train_epoch)
    events = list(lab.run(_cfg(), store=False))
    assert events[-1].kind == "run_finished" and scopes == ["cpu"]
    assert inside == {"load": True, "train": True} and depth[0] == 0


# -- 15. training reads each batch's loss one step late, so the device always has work queued ----------------

def test_train_epoch_reads_a_batchs_loss_after_launching_the_next_and_keeps_the_numbers(monkeypatch):
    from lab import finetune

    def setup():
        torch.manual_seed(0)
        bb = lab.backbones.load("mlp:depth=2,width=16", in_chans=1, img_size=8, device="cpu")
        g = torch.Generator().manual_seed(0)
        batches = [(torch.rand(8, 1, 8, 8, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(3)]
        return finetune.prepare(bb, 3, "full", lr=1e-2, seed=0), batches

    ft, batches = setup()
    expected_loss, expected_right = 0.0, 0
    ft.model.train()
    for x, y in batches:                              # one synchronous step at a time, as before
        loss, right = ft.train_step(x, y)
        expected_loss += loss * len(y)
        expected_right += right

    ft, batches = setup()
    order = []
    forward = ft.model.forward
    monkeypatch.setattr(ft.model, "forward", lambda x: order.append("forward") or forward(x))
    tolist = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: order.append("read") or tolist(t))
    stats = ft.train_epoch(batches, progress=lambda done, total: order.append(f"progress {done}"))
    assert order == ["forward", "forward", "read", "progress 1", "forward", "read", "progress 2",
                     "read", "progress 3"]
    assert stats == {"loss": expected_loss / 24, "accuracy": expected_right / 24, "n": 24}   # bit for bit


def test_projection_notices_reach_the_listener_of_the_run_s_thread_only():
    """The UMAP fallback's notice goes to the listener of the thread that drives the run (the app's session
    shows it), not to another session's thread, and stays a ProjectionWarning for the command line."""
    import threading
    import types
    import warnings

    from lab.runs.projections import Projections, ProjectionWarning, notices_to

    class Projector:
        def take_messages(self):
            return ["the UMAP layouts fell back to umap-learn"]

    projections = Projections.__new__(Projections)
    projections.ctx, projections.projector = types.SimpleNamespace(run_id="r1"), Projector()
    mine, other, ready, done = [], [], threading.Event(), threading.Event()

    def other_session():
        with notices_to(other.append):
            ready.set()
            done.wait(5)

    thread = threading.Thread(target=other_session)
    thread.start()
    ready.wait(5)
    try:
        with notices_to(mine.append), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            projections._warn()
    finally:
        done.set()
        thread.join()
    assert mine == ["run r1: the UMAP layouts fell back to umap-learn"]
    assert other == []
    assert [(w.category, str(w.message)) for w in caught] == [(ProjectionWarning, mine[0])]
