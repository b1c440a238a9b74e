"""Numerics off the CPU (bfloat16, MPS, CUDA), checked on the CPU: what differed or crashed there.

- bfloat16 extraction keeps identical taps identical (a ResNet's last block *is* its pre-logits);
- MPS has no float64: PCA and utilization do their float64 work on the CPU there;
- numpy-facing entry points take tensors that numpy cannot read (a GPU's, one that requires grad);
- the kNN row blocks are sized by device, and every block size gives the same answer;
- the distance GEMMs of kNN and k-means run with TF32 off on CUDA (and the caller's flags come back);
- cuML's UMAP runs on the run's device, and its failure falls back to umap-learn with a warning.

No GPU here: devices are simulated by tensor subclasses that behave as an MPS or CUDA tensor does at
the points the code under test touches (float64 refused, host memory unreadable).
"""
from __future__ import annotations

import sys
import threading
import types
import warnings
from functools import partial

import numpy as np
import pytest
import torch
from sklearn.neighbors import NearestNeighbors

from lab import metrics, projection
from lab.backbones import load
from lab.config import RunConfig
from lab.features import extract, to_numpy
from lab.metrics import _device, _kmeans_torch, _neighbors
from lab.runs import run
from lab.runs.evaluation import find_aliases
from tests.fixtures.blobs import blobs

pytestmark = pytest.mark.usefixtures("one_thread")      # conftest: torch on one thread


# ------------------------------------------------------------------ simulated devices

def _plain(t: torch.Tensor) -> torch.Tensor:
    return t.as_subclass(torch.Tensor)


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item)


class _FakeMPS(torch.Tensor):
    """CPU memory that acts, where the code touches it, like a tensor on an Apple GPU: ``.device`` is mps,
    a float64 result raises (MPS's own message), ``.cpu()`` / ``.to("cpu")`` leave it as a plain tensor,
    ``.to("mps")`` enters it, an op mixing it with a plain non-scalar tensor raises like a device
    mismatch, and ``.numpy()`` refuses."""

    @property
    def device(self) -> torch.device:
        return torch.device("mps")

    @classmethod
    def __torch_function__(cls, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.numpy, torch.Tensor.__array__):
            raise TypeError("can't convert mps:0 device type tensor to numpy. Use Tensor.cpu() first.")
        if func is torch.Tensor.cpu:
            return _plain(args[0])
        if func is torch.Tensor.double:
            raise TypeError("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't "
                            "support float64. Please use float32 instead.")
        if func is torch.Tensor.to:
            device = kwargs.get("device")
            dtype = kwargs.get("dtype")
            for a in args[1:]:
                if isinstance(a, cls):                     # .to(other): its device (mps) and dtype
                    return _plain(args[0]).to(_plain(a).dtype).as_subclass(cls)
                if isinstance(a, torch.dtype):
                    dtype = a
                elif isinstance(a, (str, torch.device)):
                    device = a
            plain = _plain(args[0])
            if device is not None and torch.device(device).type == "cpu":
                return plain.to(dtype) if dtype is not None else plain
            if dtype == torch.float64:
                raise TypeError("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't "
                                "support float64. Please use float32 instead.")
            return (plain.to(dtype) if dtype is not None else plain).as_subclass(cls)
        inputs = list(_tensors(args)) + list(_tensors(kwargs))
        if any(type(t) is torch.Tensor and t.dim() > 0 for t in inputs):
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                               "mps:0 and cpu!")
        out = super().__torch_function__(func, types_, args, kwargs)
        if any(isinstance(t, cls) and _plain(t).dtype == torch.float64 for t in _tensors(out)):
            raise TypeError("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't "
                            "support float64. Please use float32 instead.")
        return out


def _mps(t: torch.Tensor) -> _FakeMPS:
    return t.detach().clone().as_subclass(_FakeMPS)


class _OffHost(torch.Tensor):
    """A tensor numpy cannot read directly, as a CUDA tensor: ``np.asarray`` / ``.numpy()`` raise CUDA's
    message; ``.cpu()`` gives the plain host tensor."""

    @classmethod
    def __torch_function__(cls, func, types_, args=(), kwargs=None):
        if func in (torch.Tensor.numpy, torch.Tensor.__array__):
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                            "tensor to host memory first.")
        if func is torch.Tensor.cpu:
            return _plain(args[0]).clone()
        return super().__torch_function__(func, types_, args, kwargs)


def _off_host(t) -> _OffHost:
    return torch.as_tensor(t).clone().as_subclass(_OffHost)


def test_the_simulated_devices_fail_where_the_real_ones_do():
    x = _mps(torch.ones(3, 2))
    assert x.device.type == "mps"
    with pytest.raises(TypeError, match="MPS framework doesn't support float64"):
        x.double()
    with pytest.raises(TypeError, match="MPS framework doesn't support float64"):
        x.sum(dtype=torch.float64)
    with pytest.raises(RuntimeError, match="same device"):
        x + torch.ones(3, 2)
    assert type(x.cpu()) is torch.Tensor and type(x.to("cpu", torch.float64)) is torch.Tensor
    with pytest.raises(TypeError, match="cuda:0 device type tensor to numpy"):
        np.asarray(_off_host(torch.arange(3)))
    assert to_numpy(_off_host(torch.arange(3))).tolist() == [0, 1, 2]


# ------------------------------------------------------------------ 4. bfloat16 keeps identical taps identical

def _resnet_features(precision):
    # 96 px: the last map is 3 x 3, so its mean is a real reduction (at 1 x 1 any rounding agrees)
    torch.manual_seed(0)
    bb = load("resnet18", device="cpu", in_chans=1, img_size=96)
    x = torch.rand(12, 1, 96, 96, generator=torch.Generator().manual_seed(0))          # (N, C, H, W)
    return bb, extract(bb, x, layers=bb.layers, precision=precision)


def test_bfloat16_extraction_keeps_the_last_block_identical_to_pre_logits():
    bb, f32 = _resnet_features("float32")
    _, bf16 = _resnet_features("bfloat16")
    assert find_aliases(f32, bb.layers)["layer4.1"] == "pre_logits"
    assert find_aliases(bf16, bb.layers) == find_aliases(f32, bb.layers)
    assert bf16["pre_logits"].dtype == torch.float32
    # pre_logits is the float32 mean of the same bfloat16 map the hook pools: equal up to summation order
    torch.testing.assert_close(bf16["pre_logits"], bf16["layer4.1"], rtol=1e-6, atol=1e-6)


def test_a_vit_s_pre_logits_under_bfloat16_stay_near_float32():
    torch.manual_seed(0)
    bb = load("vit_tiny_patch16_224", device="cpu", in_chans=1, img_size=32, patch_size=8, depth=2)
    x = torch.rand(6, 1, 32, 32, generator=torch.Generator().manual_seed(1))
    f32 = extract(bb, x, layers=["pre_logits"], precision="float32")["pre_logits"]
    bf16 = extract(bb, x, layers=["pre_logits"], precision="bfloat16")["pre_logits"]
    assert bf16.dtype == torch.float32
    torch.testing.assert_close(bf16, f32, rtol=0.05, atol=0.05)


def test_a_bfloat16_run_gives_the_float32_answer(store):
    cfg = dict(dataset="digits", img_size=96, backbone="resnet18", n_unseen=4, unseen_per_class=10,
               seen_per_class=6, strategy="none", projection="none", device="cpu", metrics=("nmi",),
               layers=("layer3.1", "layer4.0", "layer4.1", "pre_logits"),
               train_sample_per_class=0)     # no split "train": g and the aliases come from the unseen images
    gens = {}
    for precision in ("float32", "bfloat16"):
        events = list(run(RunConfig(**cfg, precision=precision), store=store))
        assert events[-1].kind == "run_finished", events[-1]
        gens[precision] = next(e for e in events if e.kind == "generalization" and e.seed == 0)
    f32, bf16 = gens["float32"], gens["bfloat16"]
    assert bf16.aliases == f32.aliases and f32.aliases.get("layer4.1") == "pre_logits"
    assert f32.g_low <= bf16.g <= f32.g_high
    assert bf16.layer == f32.layer


# ------------------------------------------------------------------ 5. no float64 on MPS

def test_float64_work_moves_to_the_cpu_only_for_mps():
    assert _device._float64_device("mps") == torch.device("cpu")
    assert _device._float64_device(torch.device("mps", 0)) == torch.device("cpu")
    assert _device._float64_device("cpu") == torch.device("cpu")
    assert _device._float64_device("cuda:1") == torch.device("cuda", 1)


@pytest.mark.parametrize("shape", [(40, 6), (8, 30)])       # the scatter route and the Gram route
def test_pca_layout_of_mps_features_runs_and_agrees(shape):
    X = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    got = projection.pca_layout(_mps(X))
    np.testing.assert_allclose(got, projection.pca_layout(X), rtol=1e-4, atol=1e-4)


def test_utilization_of_mps_weights_runs_and_agrees():
    class Layer(torch.nn.Module):      # parameters on the (simulated) MPS device
        def __init__(self, weight):
            super().__init__()
            self.weight_ = weight

        def named_parameters(self, *args, **kwargs):
            return iter([("weight", self.weight_)])

    w0 = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    w = w0 + 0.5
    want = metrics.utilization(Layer(w), {"weight": w0}, {"l": ""})
    got = metrics.utilization(Layer(_mps(w)), {"weight": _mps(w0)}, {"l": ""})
    assert got.loc["l", "utilization"] == want.loc["l", "utilization"] == pytest.approx(0.5 * 12 ** 0.5)


# ------------------------------------------------------------------ 7. numpy entry points take any tensor

_blobs = partial(blobs, n_per_class=20, k=3, d=6, spread=6.0, dtype=np.float32, shuffle=False, as_tensor=True)


def test_to_numpy_takes_tensors_numpy_cannot_read():
    grad = torch.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(grad)
    assert to_numpy(grad).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    half = torch.tensor([1.5, 2.0], dtype=torch.bfloat16)
    assert to_numpy(half).dtype == np.float32 and to_numpy(half).tolist() == [1.5, 2.0]
    assert to_numpy(_off_host(torch.tensor([1, 2])), np.int64).dtype == np.int64
    assert to_numpy([1, 2]).tolist() == [1, 2]


def test_layouts_take_features_that_require_grad_and_labels_off_the_host(fake_cuml):
    X, y = _blobs()
    Xg = X.clone().requires_grad_()
    np.testing.assert_array_equal(projection.pca_layout(Xg), projection.pca_layout(X))
    ref = projection.pca_layout(X)
    np.testing.assert_array_equal(projection.pca_layout(X, reference=_off_host(torch.from_numpy(ref))), ref)
    fake_cuml(fails=False)                # umap-learn's fit is slow to compile; the failing-cuML test runs it
    coords = projection.umap_layout(Xg, labels=_off_host(torch.from_numpy(y)), fit_points=40, backend="cuml",
                                    init=_off_host(torch.from_numpy(ref)))
    assert coords.shape == (60, 2) and np.isfinite(coords).all()


def test_embedding_view_takes_tensors_off_the_host():
    pytest.importorskip("panel")          # the app's explorer (the GPU check's machine has no Panel)
    from app.explorer.embedding import EmbeddingView

    X, y = _blobs()
    coords = torch.from_numpy(projection.pca_layout(X)).requires_grad_()
    view = EmbeddingView.from_arrays(_off_host(coords.detach()), _off_host(torch.from_numpy(y)),
                                     names=["a", "b", "c"])
    assert view.n_points == 60
    view = EmbeddingView.from_arrays({"fc1": coords, "fc2": coords * 2}, torch.from_numpy(y))
    assert view.n_points == 60


def test_no_numpy_entry_point_reads_a_tensor_with_np_asarray():
    import inspect

    from app.explorer import _data as _embedding_data
    from lab.projection import budget as projection_budget

    for fn in (projection.umap_layout, projection.Projector.submit, projection_budget.fit_subset,
               _embedding_data._check_coords, _embedding_data._check_labels, _embedding_data._check_images):
        src = inspect.getsource(fn)
        for name in ("labels", "coords", "images", "init", "X"):
            assert f"np.asarray({name}" not in src, (fn.__qualname__, name)


# ------------------------------------------------------------------ 9. kNN blocks by device, same answer

def test_knn_gives_the_same_answer_for_every_block_size():
    rng = np.random.default_rng(3)
    n, n_classes = 1100, 4                        # N * N above the whole-Gram size: real row blocks
    y = np.repeat(np.arange(n_classes), n // n_classes)
    X = torch.from_numpy((rng.standard_normal((n, 10)) + rng.standard_normal((n_classes, 10))[y]).astype(np.float32))
    codes = torch.from_numpy(y)
    requests = {"nn": ("euclidean", 5, "ordered"), "cos": ("cosine", 3, "ordered"),
                "same": ("euclidean", 20, "same_class"), "w": ("cosine", 20, "weighted", 0.07)}
    results = [_neighbors._neighbor_graphs(X, requests, block_rows=rows, codes=codes, n_classes=n_classes,
                                           compiled=compiled)
               for rows in (1, 37, 256, 4096) for compiled in (False, True)]
    first = results[0]
    for other in results[1:]:
        for name in ("nn", "cos"):
            assert torch.equal(other[name].indices, first[name].indices)
            # the distances' last bits depend on the BLAS kernel a block's shape selects (a 1-row block is a
            # matrix-vector product, a whole one a symmetric rank-k update); the neighbours do not
            torch.testing.assert_close(other[name].values, first[name].values, rtol=1e-12, atol=1e-12)
        assert torch.equal(other["same"], first["same"]) and torch.equal(other["w"], first["w"])
    idx = NearestNeighbors(n_neighbors=20, algorithm="brute").fit(X.double().numpy()).kneighbors(
        return_distance=False)
    assert np.array_equal(first["nn"].indices.numpy(), idx[:, :5])
    assert np.array_equal(first["same"].numpy(), (y[idx] == y[:, None]).sum(1))


def test_knn_blocks_are_cache_sized_on_cpu_and_memory_sized_on_cuda(monkeypatch):
    assert _neighbors._block_rows(1000) == _neighbors._block_rows(1000, device=torch.device("cpu")) == 256
    assert _neighbors._block_rows(50_000, device="cpu") * 50_000 <= 1 << 24
    cuda = torch.device("cuda", 0)

    def no_runtime(device=None):
        raise RuntimeError("no CUDA here")

    monkeypatch.setattr(torch.cuda, "mem_get_info", no_runtime)
    assert _neighbors._block_rows(1000, device=cuda) == 1000                 # the whole matrix, one block
    assert _neighbors._block_rows(50_000, device=cuda) == (1 << 30) // (50_000 * 4)   # 1 GiB of float32
    assert _neighbors._block_rows(10**6, device=cuda) == 4096                 # at least 4096 rows
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2 << 30, 80 << 30))
    assert _neighbors._block_rows(50_000, device=cuda) == 4096                # 1/8 of 2 GiB free: the floor
    assert _neighbors._block_rows(50_000, 64, device=cuda) == 64              # an explicit size wins


# ------------------------------------------------------------------ 16. TF32 off for the distance GEMMs

@pytest.fixture
def tf32_on():
    precision, allow = torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32
    torch.set_float32_matmul_precision("high")
    yield
    torch.set_float32_matmul_precision(precision)
    torch.backends.cuda.matmul.allow_tf32 = allow


def test_exact_float32_turns_tf32_off_on_cuda_and_restores_the_flags(tf32_on):
    assert torch.backends.cuda.matmul.allow_tf32 and torch.get_float32_matmul_precision() == "high"
    with _device._exact_float32(torch.device("cuda", 0)):
        assert not torch.backends.cuda.matmul.allow_tf32
        assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cuda.matmul.allow_tf32 and torch.get_float32_matmul_precision() == "high"
    with pytest.raises(ZeroDivisionError):                 # restored on the way out of an error too
        with _device._exact_float32("cuda"):
            1 / 0
    assert torch.backends.cuda.matmul.allow_tf32 and torch.get_float32_matmul_precision() == "high"
    with _device._exact_float32("cpu"):                    # the CPU's flags are nobody's business here
        assert torch.get_float32_matmul_precision() == "high"


def test_knn_and_kmeans_compute_their_distances_with_tf32_off(monkeypatch, tf32_on):
    seen = []
    real = _device._exact_float32

    def spy(device):
        seen.append(torch.device(device).type)
        return real(torch.device("cuda"))              # as on a GPU: the flags go off around the work

    def gemm_guard(*args, **kwargs):
        assert not torch.backends.cuda.matmul.allow_tf32, "a distance GEMM ran with TF32 allowed"
        return original_addmm(*args, **kwargs)

    original_addmm = torch.addmm
    monkeypatch.setattr(_neighbors, "_exact_float32", spy)
    monkeypatch.setattr(_kmeans_torch, "_exact_float32", spy)
    X, y = _blobs()
    metrics.knn_accuracy(X, y)
    monkeypatch.setattr(torch, "addmm", gemm_guard)
    labels = _kmeans_torch.kmeans_labels_torch(X, 3, n_init=2, seed=0)
    assert seen == ["cpu", "cpu"] and labels.shape == (60,)
    assert torch.backends.cuda.matmul.allow_tf32                     # the caller's setting is back


# ------------------------------------------------------------------ 12. cuML on the run's device, or a fallback

class _FakeCudaDevice:
    """Stands for ``torch.cuda.device(index)``: records the thread's current device while entered."""

    current = threading.local()

    def __init__(self, index):
        self.index = index

    def __enter__(self):
        self.previous = getattr(self.current, "index", 0)
        self.current.index = self.index
        return self

    def __exit__(self, *exc):
        self.current.index = self.previous
        return False


@pytest.fixture
def fake_cuml(monkeypatch):
    """``fake_cuml(fails)``: a cuML whose UMAP records the current CUDA device and returns a known layout,
    or raises; installed in sys.modules (cupy absent), with torch.cuda.device faked."""
    from lab.projection import budget as projection_budget

    calls = []

    def install(fails: bool):
        class UMAP:
            def __init__(self, **options):
                self.options = options

            def fit_transform(self, X):
                calls.append(("fit", getattr(_FakeCudaDevice.current, "index", 0), X.shape))
                if fails:
                    raise RuntimeError("cudaErrorInvalidDevice: invalid device ordinal\nmore detail")
                return np.column_stack([np.arange(len(X)), -np.arange(len(X))]).astype(np.float64)

            def transform(self, X):
                calls.append(("transform", getattr(_FakeCudaDevice.current, "index", 0), X.shape))
                return np.full((len(X), 2), 7.0)

        manifold = types.ModuleType("cuml.manifold")
        manifold.UMAP = UMAP
        cuml = types.ModuleType("cuml")
        cuml.manifold = manifold
        monkeypatch.setitem(sys.modules, "cuml", cuml)
        monkeypatch.setitem(sys.modules, "cuml.manifold", manifold)
        monkeypatch.setitem(sys.modules, "cupy", None)          # import cupy -> ImportError
        monkeypatch.setattr(torch.cuda, "device", _FakeCudaDevice)
        projection_budget._cuml.cache_clear()
        return calls

    yield install
    projection_budget._cuml.cache_clear()


def _project(projector, X, y):
    projector.submit(0, 0, "fc1", X, labels=_off_host(torch.from_numpy(y)), pca=projection.pca_layout(X))
    return projector.drain()


def test_cuml_fits_on_the_run_s_device_and_its_layout_is_used(fake_cuml):
    calls = fake_cuml(fails=False)
    X, y = _blobs()
    projector = projection.Projector(device=torch.device("cuda", 1), fit_points=40, layers=["fc1"])
    assert projector.backend == "cuml"
    try:
        (res,) = _project(projector, X, y)
    finally:
        projector.close()
    assert [c[:2] for c in calls] == [("fit", 1), ("transform", 1)]        # on cuda:1, not the thread's 0
    fit = np.flatnonzero(res.coords[:, 1] != 7.0)                          # the fitted rows (the rest: 7, 7)
    assert len(fit) == 40 and np.array_equal(res.coords[fit, 0], np.arange(40))
    assert projector.take_messages() == [] and projector.errors == []


def test_a_failing_cuml_falls_back_to_umap_learn_and_says_so(fake_cuml):
    from lab.runs.projections import Projections, ProjectionWarning

    calls = fake_cuml(fails=True)
    X, y = _blobs()
    projector = projection.Projector(device="cuda:0", fit_points=40, n_epochs=10, layers=["fc1"])
    try:
        (res,) = _project(projector, X, y)
    finally:
        projector.close()
    assert calls[0][:2] == ("fit", 0)
    assert res.method == "umap" and res.coords.shape == (60, 2) and np.isfinite(res.coords).all()
    assert projector.backend == "umap-learn" and projector.errors == []
    assert "cuML's UMAP failed on cuda:0 (RuntimeError: cudaErrorInvalidDevice" in projector.fallback
    # the engine's side: the message becomes a warning the command line and notebooks show, once
    proj = Projections(types.SimpleNamespace(run_id="r1"))
    proj.projector = projector
    with pytest.warns(ProjectionWarning, match=r"run r1: cuML's UMAP failed on cuda:0 .* umap-learn on the CPU"):
        assert proj.poll() == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proj.poll()                                               # said once
