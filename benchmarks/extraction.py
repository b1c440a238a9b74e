"""Cost of all-layer extraction relative to a plain forward pass.

For resnet18 @64 px and a ViT-tiny @64 px (patch 8), batch 64, random init, in one
process: median over repeats of time(``lab.features.extract`` of every layer of one
batch) / time(plain ``model(x)`` of the same batch), each pair timed back to back
(alternating which goes first) so that load from other processes on a shared
machine hits both alike; also the ratio of the best times, and the process's peak
RSS. Goal (issue 2): ratio <= 1.10.

On a machine busy with other processes the wall-clock ratio is noisy (the load
average is printed); ``--threads 1`` gives a steadier reading. The hooks' own
pooling costs well under 1 % of a forward pass (about 40 us per feature map here).

Run: ``python benchmarks/extraction.py [--repeats N] [--device cpu] [--threads N] [--save]``
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402
from lab import backbones, features  # noqa: E402
from lab.device import autocast, autocast_dtype, to_channels_last  # noqa: E402

GOAL = 1.10
CASES = [
    ("resnet18", {"img_size": 64}),
    ("vit_tiny_patch16_224", {"img_size": 64, "patch_size": 8}),
]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def bench(name: str, kwargs: dict, *, batch: int, repeats: int, device: str) -> dict:
    bb = backbones.load(name, in_chans=3, device=device, **kwargs)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 3, bb.img_size, bb.img_size, generator=gen).to(bb.device)  # (B, 3, H, W)
    # The plain forward runs as extract does (its autocast dtype and memory format: bfloat16 and
    # channels_last for CNNs on CUDA; float32 NCHW on CPU), so the ratio measures hooks, not precision.
    amp = autocast_dtype(bb.device)
    if to_channels_last(bb):
        x = x.contiguous(memory_format=torch.channels_last)

    def plain():
        with torch.no_grad(), autocast(bb.device, amp):
            bb.model(x)

    def extract():
        features.extract(bb, x, layers=bb.layers, batch_size=batch)

    for fn in (plain, extract, plain, extract):  # warm-up (allocator, kernels, lazy init)
        fn()
    t_plain, t_extract, c_plain, c_extract = [], [], [], []
    for i in range(repeats):
        # Back-to-back pairs, alternating which runs first, so drifting load hits both alike.
        pair = ((plain, t_plain, c_plain), (extract, t_extract, c_extract))
        for fn, wall, cpu in (pair if i % 2 == 0 else pair[::-1]):
            _sync(bb.device)
            start, cpu_start = time.perf_counter(), time.process_time()
            fn()
            _sync(bb.device)
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - cpu_start)
    ratios = [e / p for e, p in zip(t_extract, t_plain)]
    cpu_ratios = [e / p for e, p in zip(c_extract, c_plain)]
    return {
        "model": f"{name} @{bb.img_size}", "layers": len(bb.layers),
        "plain_ms": 1000 * statistics.median(t_plain), "extract_ms": 1000 * statistics.median(t_extract),
        "ratio": statistics.median(ratios), "ratio_min": min(t_extract) / min(t_plain),
        "ratio_cpu": statistics.median(cpu_ratios),
        "peak_rss_mib": _peak_rss_mib(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, device=args.device):
        return _measure(args)


def _measure(args: argparse.Namespace) -> int:
    """Time every case and print the table; 0 when the goal is met."""
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = [bench(n, kw, batch=args.batch, repeats=args.repeats, device=args.device) for n, kw in CASES]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"batch {args.batch}, {args.repeats} repeats, device {args.device}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, cpus {os.cpu_count()}, load average {load:.1f}; "
          f"goal: ratio <= {GOAL:.2f}")
    print("ratio = median over repeats of extract/forward wall time, timed back to back; "
          "ratio(min) = best extract / best forward; ratio(cpu) = median of process CPU-time ratios")
    header = (f"{'model':<28} {'taps':>4} {'forward ms':>11} {'extract ms':>11} {'ratio':>6} {'ratio(min)':>10} "
              f"{'ratio(cpu)':>10} {'peak RSS MiB':>13}")
    print(header)
    print("-" * len(header))
    ok = True
    for r in rows:
        ok &= r["ratio"] <= GOAL
        print(f"{r['model']:<28} {r['layers']:>4} {r['plain_ms']:>11.1f} {r['extract_ms']:>11.1f} "
              f"{r['ratio']:>6.3f} {r['ratio_min']:>10.3f} {r['ratio_cpu']:>10.3f} {r['peak_rss_mib']:>13.0f}")
    print("goal met" if ok else "goal NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
