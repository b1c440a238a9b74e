"""The one GPU check: run once on a machine with a GPU, get one table (issue 32).

Sections (each timed, each a row or a few in the table; ``--only`` picks some):

- ``tests``: the device tests of the suite (``tests/lab/test_device.py``, ``test_metrics_device.py``,
  ``test_run_devices.py``, ``test_device_numerics.py``, ``test_study_gpu.py``) on this machine, so their
  CUDA-only cases run;
- ``throughput``: extraction and fine-tuning images/s against bare timm at 224 px for resnet50 and
  vit_base_patch16_224, same autocast and memory format on both sides (``benchmarks/gpu.py``); goals
  >= 0.95x and >= 0.90x;
- ``metrics``: the kNN metrics and the k-means NMI at N = 50,000, d = 768, 100 classes, each against one
  blocked float32 X @ X.T on the same device; goal <= 1.5x;
- ``preset``: the app's default preset (seed 0) on this device: wall time, seen held-out accuracy, and
  its answer (best layer, g, 95 % interval, best-layer share) against the CPU's answer stored in
  ``benchmarks/results/preset_answer_cpu.json`` (``--device cpu --only preset`` writes that file): the
  same best layer, or the CPU's best layer inside this device's interval of g;
- ``oom``: out-of-memory recovery: under a per-process memory cap a run with a batch too large fails
  with the batch-size advice, the memory it held is released, and a normal run in the same process
  then finishes;
- ``study``: a two-cell study on this device through Dask (a local cluster, one worker per GPU).

The table goes to ``benchmarks/results/gpu_check_<device>.txt`` (``<device>``: "cpu" or the GPU's
name). ``--device cpu --quick`` is the CI smoke test: the same code paths on tiny sizes (its timings
judge nothing). Exit status 1 when a check fails on CUDA (on CPU the GPU goals are reported only).

Run: ``python benchmarks/gpu_check.py [--device cuda|cpu] [--quick] [--only SECTION ...]``
(about 6-8 minutes on one H100).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks import gpu as gpu_bench  # noqa: E402
from benchmarks._results import add_save_option, recording  # noqa: E402
from benchmarks._results import RESULTS_DIR, git_commit, machine  # noqa: E402

SECTIONS = ("throughput", "metrics", "preset", "oom", "study", "tests")
TEST_FILES = ("tests/lab/test_device.py", "tests/lab/metrics/test_metrics_device.py",
              "tests/lab/runs/test_run_devices.py", "tests/lab/test_device_numerics.py",
              "tests/lab/study/test_study_gpu.py")
CPU_ANSWER = RESULTS_DIR / "preset_answer_cpu.json"


class Table:
    """Rows of (section, check, measured, goal, verdict); a verdict is "ok", "FAIL" or "info"."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []

    def add(self, section: str, check: str, measured: str, goal: str = "", ok: bool | None = None) -> None:
        verdict = "info" if ok is None else ("ok" if ok else "FAIL")
        self.rows.append((section, check, measured, goal, verdict))
        print(f"[{section}] {check}: {measured}" + (f"  (goal {goal}: {verdict})" if goal else ""), flush=True)

    def failed(self) -> list[tuple]:
        return [r for r in self.rows if r[4] == "FAIL"]

    def text(self) -> str:
        head = ("section", "check", "measured", "goal", "verdict")
        widths = [max(len(str(r[i])) for r in [head, *self.rows]) for i in range(4)]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(head, widths)) + "  verdict"]
        lines.append("-" * len(lines[0]))
        for row in self.rows:
            lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)) + "  " + row[4])
        return "\n".join(lines)


def _device_label(device: torch.device) -> str:
    if device.type != "cuda":
        return device.type
    return re.sub(r"[^A-Za-z0-9]+", "-", torch.cuda.get_device_name(device)).strip("-")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ------------------------------------------------------------------------------------------ sections


def check_tests(table: Table, device: torch.device, quick: bool) -> None:
    files = [f for f in TEST_FILES if (REPO / f).exists()]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not browser and not notebook",
           *files]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    tail = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    table.add("tests", f"device tests ({len(files)} files)", f"{tail} in {time.perf_counter() - t0:.0f} s",
              "all pass", done.returncode == 0)
    if done.returncode != 0:
        print(done.stdout[-6000:], done.stderr[-3000:], sep="\n")


def check_throughput(table: Table, device: torch.device, quick: bool) -> None:
    s = gpu_bench.QUICK if quick else gpu_bench.FULL
    for model in s["models"]:
        r = gpu_bench.bench_extraction(model, s, device)
        table.add("throughput", f"extraction {model}, every layer",
                  f"{r['lab']:.0f} img/s vs bare {r['bare']:.0f} img/s = {r['ratio']:.3f}x", ">= 0.95x",
                  _judged(r["ratio"] >= 0.95, device))
    for model in s["models"]:
        r = gpu_bench.bench_training(model, s, device)
        table.add("throughput", f"fine-tuning {model}, full, AdamW",
                  f"{r['lab']:.0f} img/s vs bare {r['bare']:.0f} img/s = {r['ratio']:.3f}x", ">= 0.90x",
                  _judged(r["ratio"] >= 0.90, device))


def check_metrics(table: Table, device: torch.device, quick: bool) -> None:
    s = gpu_bench.QUICK if quick else gpu_bench.FULL
    n = s["knn_n"]
    for name, bench in (("kNN accuracy + purity", gpu_bench.bench_knn), ("k-means NMI", gpu_bench.bench_kmeans)):
        r = bench(s, device)
        table.add("metrics", f"{name}, N={n:,}, d=768",
                  f"{r['lab']:.2f} s vs X@X.T {r['bare']:.2f} s = {r['ratio']:.2f}x", "<= 1.5x",
                  _judged(r["ratio"] <= 1.5, device))


def _judged(ok: bool, device: torch.device) -> bool | None:
    """GPU goals are judged on CUDA only (on CPU: reported as info)."""
    return ok if device.type == "cuda" else None


def _run(cfg, store) -> tuple[object, list, float]:
    """Run ``cfg`` to its end; (terminal event, epoch events, seconds)."""
    import lab

    t0 = time.perf_counter()
    end, epochs = None, []
    for ev in lab.run(cfg, store=store):
        if ev.kind == "epoch_finished":
            epochs.append(ev)
        elif ev.kind in ("run_finished", "run_failed", "run_cancelled"):
            end = ev
    return end, epochs, time.perf_counter() - t0


def _answer(store, run_id: str) -> dict:
    """The run's verdict and its per-layer unseen NMI with interval (last epoch), as the app shows them."""
    from lab.export import tables

    record = store.load(run_id)
    summary = record.summary()
    wide = tables.layer_table({run_id: record}, metrics=["nmi", "nmi_low", "nmi_high"])
    layers = {str(r.layer): {"nmi": float(r.nmi), "low": float(r.nmi_low), "high": float(r.nmi_high)}
              for r in wide.itertuples()}
    keep = ("epoch", "best_layer", "g", "g_low", "g_high", "best_share", "heldout_accuracy", "final_layer")
    return {**{k: summary.get(k) for k in keep}, "layers": layers}


def check_preset(table: Table, device: torch.device, quick: bool) -> None:
    from benchmarks.preset import preset_config
    from lab.store import RunStore

    cfg = preset_config(0, 1 if quick else None).replace(device=str(device))
    if quick:                                        # the smoke test: the same path on a small sample
        # (heldout_fraction 0.9: train on a tenth of the seen images; the full share made this 60 s on 2 cores;
        # 5 training images a class for split "train": 20 were a sixth of the run)
        cfg = cfg.replace(unseen_per_class=20, seen_per_class=20, projection="pca", heldout_fraction=0.9,
                          train_sample_per_class=5)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(tmp)
        end, epochs, wall = _run(cfg, store)
        if end is None or end.kind != "run_finished":
            table.add("preset", "default preset, seed 0", f"did not finish: {getattr(end, 'message', end)}", "finishes",
                      False)
            return
        answer = _answer(store, end.run_id)
    answer.update(device=str(device), epochs=cfg.n_epochs, wall_s=round(wall, 1))
    acc = answer["heldout_accuracy"]
    table.add("preset", f"default preset, seed 0, {cfg.n_epochs} epochs", f"{wall:.0f} s wall", "", None)
    table.add("preset", "seen held-out accuracy", f"{acc:.3f}", ">= 0.90", acc >= 0.90 if not quick else None)
    table.add("preset", "answer", f"best layer {answer['best_layer']}, g {answer['g']:.3f} "
              f"[{answer['g_low']:.3f}, {answer['g_high']:.3f}], best in {100 * answer['best_share']:.0f} % of resamples")
    if device.type == "cpu":
        if not quick:
            CPU_ANSWER.write_text(json.dumps(answer, indent=1) + "\n")
            print(f"CPU answer written to {CPU_ANSWER.relative_to(REPO)}")
        return
    if not CPU_ANSWER.exists():
        table.add("preset", "same answer as on CPU", f"no {CPU_ANSWER.name} to compare with", "", None)
        return
    cpu = json.loads(CPU_ANSWER.read_text())
    same = answer["best_layer"] == cpu["best_layer"]
    here = answer["layers"].get(cpu["best_layer"], {}).get("nmi", float("nan"))
    inside = answer["g_low"] <= here <= answer["g_high"]
    table.add("preset", "same best layer as on CPU",
              f"CPU {cpu['best_layer']} (g {cpu['g']:.3f}); here {answer['best_layer']}; here the CPU's layer has "
              f"NMI {here:.3f}", "same layer, or the CPU's inside this interval", bool(same or inside))
    (RESULTS_DIR / f"preset_answer_{_device_label(device)}.json").write_text(json.dumps(answer, indent=1) + "\n")


def check_oom(table: Table, device: torch.device, quick: bool) -> None:
    import lab
    from lab.data import Split

    if device.type != "cuda":
        table.add("oom", "out-of-memory recovery", "needs CUDA (a per-process memory cap); skipped on CPU")
        return
    split = Split.paper_default("glyphs")
    base = dict(dataset="glyphs", seen=tuple(split.seen), unseen=tuple(split.unseen), backbone="resnet50",
                pretrained=False, img_size=224, strategy="full", epochs=1, unseen_per_class=20, seen_per_class=20,
                projection="none", metrics=("nmi",), save_weights=False, device=str(device))
    index = device.index if device.index is not None else torch.cuda.current_device()
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info(index)
    cap = 4 << 30                                            # 4 GiB: resnet50 at batch 512 needs far more
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), index)
    try:
        before = torch.cuda.memory_allocated(index)
        end, _, _ = _run(lab.RunConfig(**base, batch_size=512), False)
        message = getattr(end, "message", "") or ""
        advised = end.kind == "run_failed" and "ran out of memory" in message and "batch_size" in message
        table.add("oom", "a run too large for a 4 GiB cap fails with advice", f"{end.kind}: {message[:110]}",
                  "run_failed naming batch_size", advised)
        held = (torch.cuda.memory_allocated(index) - before) / 2**20           # no gc.collect() before this
        table.add("oom", "memory still held after the failed run", f"{held:.0f} MiB", "<= 64 MiB", held <= 64)
        end, _, wall = _run(lab.RunConfig(**base, batch_size=16), False)
        table.add("oom", "then a normal run (batch 16) in the same process", f"{end.kind} in {wall:.0f} s",
                  "run_finished", end.kind == "run_finished")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, index)


def check_study(table: Table, device: torch.device, quick: bool) -> None:
    from lab.store import RunStore
    from lab.study import Study
    from lab.events import StudyStarted
    from lab.study.runner import run_study

    base = {"dataset": "glyphs", "backbone": "glyph_resnet18", "strategy": "full", "epochs": 1,
            "unseen_per_class": 20, "seen_per_class": 20, "projection": "none", "metrics": ["nmi", "knn_accuracy"],
            "save_weights": False, "device": str(device)}
    if quick:                                        # the smoke test: the teaching MLP on digits
        base.update(dataset="digits", backbone="mlp:depth=3,width=64", n_unseen=3)
    study = Study.from_dict({"name": "gpu-check", "base": base, "axes": {"seeds": [[0], [1]]}})
    events: list = []
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        # the CPU smoke test: one worker process runs both cells (a second one only imports torch again)
        workers = 1 if quick and device.type == "cpu" else None
        result = run_study(study, scheduler=None, store=RunStore(tmp), workers=workers, threads_per_worker=None,
                           on_event=events.append)
        wall = time.perf_counter() - t0
    started = next((e for e in events if isinstance(e, StudyStarted)), None)
    where = started and (started.devices or started.workers)
    done = len(result.run_ids) - len(result.failed)
    table.add("study", "two-cell study through Dask", f"{done} of 2 cells finished in {wall:.0f} s; workers: {where}"
              + (f"; failed: {result.failed}" if result.failed else ""), "2 of 2", done == 2 and not result.failed)


CHECKS = {"tests": check_tests, "throughput": check_throughput, "metrics": check_metrics, "preset": check_preset,
          "oom": check_oom, "study": check_study}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: the CPU smoke test of every section")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), metavar="SECTION",
                        help=f"run only these sections ({', '.join(SECTIONS)})")
    parser.add_argument("--commit", default=None, help=argparse.SUPPRESS)   # a copy of the tree without .git
    parser.add_argument("--out", default=None, help="the table's file (default benchmarks/results/gpu_check_<device>.txt)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    from lab.device import resolve_device
    try:
        device = resolve_device(args.device)
    except ValueError as exc:                        # cuda without CUDA: one line, exit 2
        parser.error(str(exc))
    with recording(__file__, parser, args, argv=argv, device=args.device, ignore=("out", "commit")):
        return _check(args, device, argv)


def _check(args: argparse.Namespace, device: torch.device, argv) -> int:
    """Run the chosen sections, write the table; the exit status (1: a judged check failed on CUDA)."""
    table = Table()
    t0 = time.perf_counter()
    log = io.StringIO()
    for name in args.only:
        start = time.perf_counter()
        print(f"== {name}", flush=True)
        try:
            with _tee(log):
                CHECKS[name](table, device, args.quick)
        except Exception as exc:                     # noqa: BLE001 - one broken section must not hide the others
            table.add(name, "section", f"raised {type(exc).__name__}: {' '.join(str(exc).split())[:160]}", "runs", False)
            traceback.print_exc()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        print(f"== {name}: {time.perf_counter() - start:.0f} s", flush=True)
    host = machine(str(device))
    head = [f"command:       python benchmarks/gpu_check.py {' '.join(argv if argv is not None else sys.argv[1:])}",
            f"date:          {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} (UTC, end)",
            f"commit:        {args.commit or git_commit()}", f"wall:          {time.perf_counter() - t0:.0f} s",
            *(f"{k + ':':<15}{v}" for k, v in host.items())]
    text = "\n".join(head) + "\n" + "=" * 100 + "\n" + table.text() + "\n"
    failed = table.failed()
    text += ("\n" + (f"{len(failed)} check(s) FAILED" if failed else "every judged check passed") + "\n")
    out = Path(args.out) if args.out else RESULTS_DIR / f"gpu_check_{_device_label(device)}{'_quick' if args.quick else ''}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text + "\n" + "-" * 40 + " log " + "-" * 40 + "\n" + log.getvalue())
    os.replace(tmp, out)
    print("\n" + text + f"written to {out}")
    return 1 if failed and device.type == "cuda" else 0


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)
        return len(text)

    def flush(self):
        for s in self.streams:
            s.flush()


@contextlib.contextmanager
def _tee(log: io.StringIO):
    stdout = sys.stdout
    sys.stdout = _Tee(stdout, log)
    try:
        yield
    finally:
        sys.stdout = stdout


if __name__ == "__main__":
    raise SystemExit(main())
