"""Where extraction's time goes against a bare forward on one device: a diagnostic for the GPU check.

``benchmarks/gpu_check.py`` measured ``lab.features.extract`` of every layer at 0.65x the images/s of a
bare ``model(x)`` on an H200 (resnet50 and vit_base_patch16_224, 224 px, batch 64, bfloat16 autocast),
with both forwards far below the GPU's arithmetic peak: at batch 64 a forward is bound by the host
launching kernels, so any host work per layer shows. This script separates the parts, each the median
of ``--repeats`` timed calls (with a device sync) alternating with the bare forward:

- bare: ``model(x)`` under ``no_grad`` and the run's autocast (the reference);
- hooks that do nothing on every tap (the cost of the hook machinery);
- hooks that pool every tap (``pool_tap_output``) and drop the result;
- ``extract(layers=["pre_logits"])`` (no hooks: the cost of extract's own per-call work);
- ``extract`` of every layer (what the run does);

then, for ``extract`` of every layer, the host functions that take the time (cProfile, by own time) and
the device kernels (torch.profiler, by self device time).

Run: ``python benchmarks/gpu_extraction_profile.py [--device cuda] [--batch 64] [--repeats 20]``
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402
from lab import backbones, features  # noqa: E402
from lab.device import autocast, autocast_dtype, resolve_device, to_channels_last  # noqa: E402

MODELS = ("resnet50", "vit_base_patch16_224")


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn, device, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def profile_model(name: str, device, batch: int, repeats: int) -> None:
    torch.manual_seed(0)
    bb = backbones.load(name, pretrained=False, in_chans=3, num_classes=0, device=device)
    nhwc = to_channels_last(bb)
    x = torch.randn(batch, 3, bb.img_size, bb.img_size, generator=torch.Generator().manual_seed(0)).to(device)
    if nhwc:
        x = x.contiguous(memory_format=torch.channels_last)
    amp = autocast_dtype(device)
    taps = [bb.tap(n) for n in bb.layers if n != features.PRE_LOGITS]
    bb.model.eval()

    def bare():
        with torch.no_grad(), autocast(device, amp):
            bb.model(x)

    def with_hooks(pool: bool):
        def hook_for(tap):
            def hook(module, args, out):
                if pool:
                    features.pool_tap_output(features.first_tensor(out), tap)
            return hook
        handles = [bb.model.get_submodule(t.module_name).register_forward_hook(hook_for(t)) for t in taps]
        try:
            bare()
        finally:
            for h in handles:
                h.remove()

    variants = {
        "bare forward": bare,
        "bare + hooks that do nothing": lambda: with_hooks(False),
        "bare + hooks that pool (dropped)": lambda: with_hooks(True),
        "extract pre_logits only": lambda: features.extract(bb, x, layers=["pre_logits"], batch_size=batch,
                                                            normalize=False),
        "extract every layer": lambda: features.extract(bb, x, layers=bb.layers, batch_size=batch, normalize=False),
    }
    base = None
    print(f"\n{name}: {len(bb.layers)} layers, batch {batch}, autocast {amp}, channels_last {nhwc}")
    for label, fn in variants.items():
        t = _time(fn, device, repeats)
        base = base or t
        print(f"  {label:<34} {1000 * t:8.2f} ms  {batch / t:9.0f} img/s  {base / t:6.3f}x of bare")

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(repeats):
        variants["extract every layer"]()
    _sync(device)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(18)
    print(f"  host functions of {repeats} extract calls, by own time:")
    print("\n".join("    " + line for line in out.getvalue().splitlines()[5:32]))

    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as tp:
        for _ in range(3):
            variants["extract every layer"]()
        _sync(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"  operators of 3 extract calls, by {key}:")
    print("\n".join("    " + line for line in tp.key_averages().table(sort_by=key, row_limit=15).splitlines()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--models", nargs="+", default=list(MODELS))
    add_save_option(p)
    args = p.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as exc:
        p.error(str(exc))
    with recording(__file__, p, args, argv=argv, device=args.device):
        for name in args.models:
            profile_model(name, device, args.batch, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
