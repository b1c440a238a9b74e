"""A late visitor's page: how long a new page takes to offer a usable Run button while other sessions run.

Serves ``panel serve app`` on 127.0.0.1 with a temporary run store and drives it with Playwright in Debian's
Chromium. First a *quiet* page (nothing runs); then ``--busy`` pages (default 4) each apply the preset (default
"Tiny demo (fast)") and press Run, and while their runs go on (one computes, the others queue for the device)
a *late* page is opened. For each of the two pages it prints, in seconds from the start of navigation:

- ``html``: the server's answer to ``GET /app`` (the server builds the session's page before answering);
- ``first paint``: the browser's first contentful paint;
- ``Run shown``: the Run button is on the page (the document has arrived over the websocket and rendered);
- ``Run usable``: a click on it has gone to the server and come back: the page's probe left "idle".

Where the time goes: with py-spy (``--py-spy PATH``, or on ``PATH``) the server is sampled while the late page loads: the samples of the
thread holding the GIL (``--gil``) and of the threads on a CPU, grouped by what they were doing. The load
average is printed with each figure (the machine may be shared).

``--against REV`` measures the app of git revision REV too (its tree exported with ``git archive``), in rounds
that alternate with this checkout's (``--rounds`` each), so that both meet the same load on a shared machine.

    .venv/bin/python benchmarks/late_page.py [--busy 4] [--preset "Tiny demo (fast)"] [--against REV] [--save]
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import add_save_option, recording  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]
TINY = "Tiny demo (fast)"
ACTIVE = ("queued", "starting", "running", "stopping")

# what a sampled stack of the server was doing: its thread, then the first rule whose pattern is in the stack
_RUN_THREADS = ("layerscope-run", "lab-worker")
_RUN_RULES = [("torch (training, extraction)", ("torch/",)),
              ("umap / numba / sklearn", ("umap", "numba", "sklearn", "pynndescent")),
              ("Python", ("",))]
_LOOP_RULES = [("page build (the session's app code)", ("main.py", "layerscope.py")),
               ("watch list poll", ("watch_control.py",)),
               ("redraws of the busy pages", ("_redraw.py",)),
               ("events of the busy pages", ("_dispatch.py",)),
               ("document to and from JSON", ("serializ", "protocol", "pull_doc", "push_doc", "patch_doc")),
               ("Bokeh / Tornado server", ("",))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _probe(page) -> dict:
    import json

    raw = page.locator(".ls-probe").first.get_attribute("data-probe")
    return json.loads(raw) if raw else {}


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=4, help="sessions running a preset when the late page opens")
    parser.add_argument("--preset", default=TINY, help="the preset the busy sessions run")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for any one page")
    parser.add_argument("--against", default=None, help="a git revision whose app is measured too, alternately")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of each app (quiet page, busy pages, late page)")
    parser.add_argument("--py-spy", dest="py_spy", default=None,
                        help="py-spy executable to sample the server with (default: py-spy on PATH, if any; "
                             "'none': no sampling)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, ignore=("timeout", "py_spy", "against", "rounds")):
        return _bench(args)


class _Server:
    """``panel serve app`` of the tree ``root`` on 127.0.0.1, with a temporary store and its log in a file."""

    def __init__(self, root: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/app"
        tmp = Path(tempfile.mkdtemp(prefix="layerscope-late-"))
        (tmp / "runs").mkdir()
        (tmp / "studies").mkdir()
        self.log_path = tmp / "server.log"
        env = dict(os.environ, LAB_RUNS_DIR=str(tmp / "runs"), LAB_STUDIES_DIR=str(tmp / "studies"),
                   PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("DASK_SCHEDULER_ADDRESS", None)
        self._log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "panel", "serve", "app", "--address", "127.0.0.1", "--port", str(self.port),
             "--allow-websocket-origin", f"127.0.0.1:{self.port}"],
            cwd=root, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url, timeout=timeout) as resp:
                    if resp.status == 200:
                        return time.monotonic() - t0
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"the server did not answer within {timeout:.0f} s")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


class _Sampler:
    """py-spy sampling the server into a raw (collapsed stacks) file until :meth:`stop`."""

    def __init__(self, exe: str, pid: int, gil: bool, path: Path):
        self.path = path
        cmd = [exe, "record", "--pid", str(pid), "--rate", "50", "--format", "raw", "--nonblocking",
               "--threads", "-o", str(path)]
        if gil:
            cmd.append("--gil")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> collections.Counter:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        counts: collections.Counter = collections.Counter()
        if not self.path.exists():
            return counts
        for line in self.path.read_text(errors="replace").splitlines():
            stack, _, n = line.rpartition(" ")
            if not n.isdigit():
                continue
            counts[_activity(stack)] += int(n)
        return counts


def _activity(stack: str) -> str:
    thread, _, frames = stack.partition(";")
    name = thread.partition(": ")[2]
    if name.startswith(_RUN_THREADS):
        last = frames.rpartition(";")[2]
        return "run thread: " + next(label for label, pats in _RUN_RULES if any(p in last for p in pats))
    if name == "MainThread":
        return "event loop: " + next(label for label, pats in _LOOP_RULES if any(p in frames for p in pats))
    return f"other threads ({re.sub(r'[-_ (]*[0-9_)]*$', '', name) or 'unnamed'})"


def _open_page(browser, server: _Server, timeout: float, *, click: bool = True) -> dict:
    """Open the app, time it (seconds from the navigation's start) and, with ``click``, press Run once."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    t0 = time.monotonic()
    page.goto(server.url, wait_until="commit", timeout=timeout * 1000)
    t_html = time.monotonic() - t0
    run = page.locator(".ls-run button")
    run.wait_for(state="visible", timeout=timeout * 1000)
    t_shown = time.monotonic() - t0
    deadline = t0 + timeout
    while not run.is_enabled() and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    row = {"page": page, "html": t_html, "shown": t_shown, "enabled": time.monotonic() - t0}
    paint = page.evaluate("() => (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime")
    row["paint"] = paint / 1000 if paint else None
    if click:
        run.click()
        while _probe(page).get("status", "idle") == "idle" and time.monotonic() < deadline:
            page.wait_for_timeout(50)
        row["usable"] = time.monotonic() - t0
        row["status"] = _probe(page).get("status")
    return row


def _drawn(probe: dict) -> bool:
    """The page shows its finished run: every layer's curves, its heatmap and its layout."""
    return (probe.get("status") == "finished" and probe.get("metric_layers", 0) == probe.get("layers", -1)
            and probe.get("heatmap_cells", 0) > 0 and probe.get("projection_points", 0) > 0)


def _stop_run(page, wait: float = 0) -> None:
    """Press Stop if it is enabled; wait up to ``wait`` seconds for the run to have ended."""
    stop = page.locator(".ls-stop button")
    if stop.is_enabled():
        stop.click()
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and _probe(page).get("status") in ACTIVE:
        page.wait_for_timeout(200)


def _bench(args: argparse.Namespace) -> int:
    chromium = shutil.which("chromium")
    if chromium is None:
        print("chromium is not installed (apt-get install chromium)")
        return 1
    py_spy = None if args.py_spy == "none" else (args.py_spy or shutil.which("py-spy"))
    trees = {"this checkout": ROOT}
    if args.against:
        rev = subprocess.run(["git", "rev-parse", "--short", args.against], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        other = Path(tempfile.mkdtemp(prefix=f"layerscope-{rev}-"))
        subprocess.run(f"git archive {rev} | tar -x -C {other}", shell=True, cwd=ROOT, check=True)
        trees = {rev: other, **trees}
    print(f"cores: {len(os.sched_getaffinity(0))}; load average (1/5/15 min) at the start: {_load()}; "
          f"{args.busy} busy sessions x {args.preset!r}")
    results = []
    for i in range(args.rounds):
        for label, root in trees.items():
            print(f"\n--- round {i + 1}: the app of {label}", flush=True)
            results.append((label, _round(root, chromium, py_spy, args)))
    _summary(results)
    return 0


def _round(root: Path, chromium: str, py_spy: str | None, args: argparse.Namespace) -> dict:
    """One round on a fresh server: a quiet page, then the busy pages and the late page; prints and returns it."""
    from playwright.sync_api import sync_playwright

    server = _Server(root)
    profiles: list = []
    try:
        print(f"server ready (first page) after {server.wait_ready(args.timeout):.1f} s")
        time.sleep(15)      # the server's preload and umap warm-up, as on a server that has been up a while
        rows = {}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=ARGS)
            # the quiet page: nothing runs; its Run starts the default preset, stopped at once
            load = _load()
            quiet = _open_page(browser, server, args.timeout)
            quiet.update(load=load)
            _stop_run(quiet["page"], wait=args.timeout)
            rows["quiet"] = quiet
            quiet["page"].close()
            # the busy pages: each applies the preset and presses Run
            busy = []
            for _ in range(args.busy):
                page = browser.new_page(viewport={"width": 1500, "height": 1000})
                page.goto(server.url, timeout=args.timeout * 1000)
                page.locator(".ls-run button").wait_for(state="visible", timeout=args.timeout * 1000)
                page.locator(".ls-preset select").select_option(args.preset)
                page.locator(".ls-apply-preset button").click()
                page.wait_for_timeout(500)
                page.locator(".ls-run button").click()
                busy.append(page)
            t_wait = time.monotonic()      # every Run click taken (the pages left "idle"), one run computing
            while time.monotonic() - t_wait < args.timeout:
                before = [_probe(pg).get("status", "idle") for pg in busy]
                if "idle" not in before and "running" in before:
                    break
                busy[0].wait_for_timeout(200)
            load = _load()
            samplers = []
            if py_spy:
                tmp = server.log_path.parent
                samplers = [_Sampler(py_spy, server.proc.pid, True, tmp / "gil.txt"),
                            _Sampler(py_spy, server.proc.pid, False, tmp / "cpu.txt")]
            t_late = time.monotonic()
            late = _open_page(browser, server, args.timeout)
            profiles = [s.stop() for s in samplers]
            after = [_probe(pg).get("status") for pg in busy]
            late.update(load=load)
            rows["late"] = late
            _stop_run(late["page"])
            # the busy pages still draw what their runs sent: when has every one drawn its finished run?
            while time.monotonic() - t_late < args.timeout and not all(_drawn(_probe(pg)) for pg in busy):
                busy[0].wait_for_timeout(500)
            drawn = time.monotonic() - t_late
            browser.close()
    finally:
        server.stop()
    print(f"the busy sessions' status when the late page opened: {before}; when it was usable: {after}; "
          f"every busy page had drawn its finished run {drawn:.1f} s after the late page opened")
    print(f"{'page':<7}{'html':>7}{'first paint':>13}{'Run shown':>11}{'Run usable':>12}   load avg at open")
    for name, r in rows.items():
        print(f"{name:<7}{_fmt(r['html']):>7}{_fmt(r['paint']):>13}{_fmt(r['shown']):>11}{_fmt(r.get('usable')):>12}"
              f"   {r['load']}")
    for title, counts in zip(("the thread holding the GIL", "threads on a CPU (all, summed)"), profiles):
        total = sum(counts.values())
        if not total:
            continue
        print(f"server samples while the late page loaded (py-spy, 50 Hz): {title}, {total / 50:.1f} s")
        for name, n in counts.most_common():
            if n / total >= 0.005:
                print(f"  {name:<48}{n / 50:7.1f} s {100 * n / total:5.1f} %")
    return {"drawn": drawn,
            **{name: {k: r.get(k) for k in ("html", "paint", "shown", "usable", "load")} for name, r in rows.items()}}


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def _summary(results: list) -> None:
    print(f"\nsummary: seconds from the start of navigation to a usable Run button (a click answered)")
    print("(busy drawn: seconds from the late page's start until every busy page showed its finished run)")
    print(f"{'app':<16}{'quiet':>8}{'late':>8}{'late / quiet':>14}{'busy drawn':>12}   load avg at the late page's start")
    for label, rows in results:
        quiet, late = rows["quiet"]["usable"], rows["late"]["usable"]
        ratio = f"{late / quiet:.1f}x" if quiet and late else "-"
        print(f"{label:<16}{_fmt(quiet):>8}{_fmt(late):>8}{ratio:>14}{_fmt(rows['drawn']):>12}   {rows['late']['load']}")


if __name__ == "__main__":
    sys.exit(main())
