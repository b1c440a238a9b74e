"""Time the served app as a user sees it: Run → first metrics, and a short fine-tuning run end to end.

Starts ``panel serve app`` on a free port with a temporary run store, drives it
with Playwright in Debian's Chromium, and prints, per preset, the seconds from
clicking Run to the first layer metrics on the page and to the run's end, plus
the 1-minute load average (the machine may be shared). Needs ``chromium``.

    .venv/bin/python benchmarks/app_timings.py [--presets "Tiny demo (fast)" ...] [--save]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
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
DEFAULT_PRESETS = ["Which layer generalizes (glyphs, 15/5)", "Tiny demo (fast)"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _probe(page) -> dict:
    raw = page.locator(".ls-probe").first.get_attribute("data-probe")
    return json.loads(raw) if raw else {}


def _wait(page, check, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _probe(page)
        if check(state):
            return state
        page.wait_for_timeout(100)
    raise TimeoutError(f"no change within {timeout} s; last probe {_probe(page)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="*", default=DEFAULT_PRESETS)
    parser.add_argument("--timeout", type=float, default=1800)
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, ignore=("timeout",)):
        return _timings(args)


def _timings(args: argparse.Namespace) -> int:
    """Serve the app, drive it per preset and print the timings; the exit code."""
    chromium = shutil.which("chromium")
    if chromium is None:
        print("chromium is not installed (apt-get install chromium)")
        return 1
    from playwright.sync_api import sync_playwright

    port = _free_port()
    env = dict(os.environ, LAB_RUNS_DIR=tempfile.mkdtemp(prefix="layerscope-bench-"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    server = subprocess.Popen([sys.executable, "-m", "panel", "serve", "app", "--port", str(port)], cwd=ROOT,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://localhost:{port}/app"
    t_server = time.monotonic()
    try:
        while True:
            try:
                with urllib.request.urlopen(url, timeout=60) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        print(f"server ready (first page) after {time.monotonic() - t_server:.1f} s")
        time.sleep(15)   # let the server's preload and umap warm-up finish, as on a server that has been up
        results = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            t_page = time.monotonic()
            page.goto(url, timeout=180_000)
            page.wait_for_selector(".ls-run button", timeout=180_000)
            print(f"page ready after {time.monotonic() - t_page:.1f} s")
            for preset in args.presets:
                page.locator(".ls-preset select").select_option(preset)
                page.locator(".ls-apply-preset button").click()
                page.wait_for_timeout(1000)
                before = _probe(page)
                load = os.getloadavg()[0]
                t0 = time.monotonic()
                page.locator(".ls-run button").click()
                _wait(page, lambda s: s.get("run_id") not in (None, before.get("run_id"))
                      and s.get("metric_layers", 0) >= 1, args.timeout)
                first = time.monotonic() - t0
                state = _wait(page, lambda s: s.get("status") in ("finished", "failed", "cancelled"), args.timeout)
                total = time.monotonic() - t0
                results.append({"preset": preset, "first_metrics_s": round(first, 1), "total_s": round(total, 1),
                                "status": state["status"], "load_avg_1min_at_start": round(load, 1)})
                print(json.dumps(results[-1]))
            browser.close()
    finally:
        server.terminate()
        server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
