"""Refresh the README's screenshots, ``docs/app.png`` and ``docs/jupyterlab.png``.

Run from the repository root with the project's Python::

    .venv/bin/python docs/screenshots.py                  # default preset, finished -> docs/app.png
    .venv/bin/python docs/screenshots.py --preset "Tiny demo (fast)" --out /tmp/tiny.png   # a quick check
    .venv/bin/python docs/screenshots.py --jupyterlab     # quickstart notebook, Tiny demo run -> docs/jupyterlab.png

The app mode starts ``panel serve app`` on a free localhost port, opens it in Debian's
Chromium (Playwright, never ``playwright install``; ``apt-get install chromium``),
applies the preset, presses Run and shoots the whole page once the run has finished
(the default preset takes about 5 minutes on a 2-core CPU). The JupyterLab mode runs
the quickstart notebook in a real JupyterLab, as ``tests/browser/test_jupyterlab.py``
does (its helpers are imported from there), presses LayerScope's Run and shoots the
window. Runs go to a temporary ``$LAB_RUNS_DIR``; nothing leaves localhost.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
MAX_BYTES = 400_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(cmd: list[str], env: dict, cwd: Path, ready_url: str, log_path: Path):
    """Run ``cmd`` (a server) while the block runs, once ``ready_url`` answers 200 (within 4 min)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"{cmd[2]} exited or did not answer:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(ready_url, timeout=60) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def probe(page) -> dict:
    """The app's state as its hidden probe element tells it (as in tests/browser/shared_servers/test_app_browser.py)."""
    raw = page.locator(".ls-probe").first.get_attribute("data-probe")
    return json.loads(raw) if raw else {}


def wait_probe(page, check, timeout: float, what: str) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check(state := probe(page)):
            return state
        page.wait_for_timeout(500)
    sys.exit(f"timed out after {timeout:.0f} s waiting for {what}; last probe: {state}")


def save_png(page, out: Path, crop: bool = False) -> None:
    """Screenshot the viewport to ``out`` via Pillow (optimized; channels rounded while over MAX_BYTES).
    ``crop``: cut the blank bottom of a tall viewport (blank: white right of the sidebar)."""
    from PIL import Image, ImageChops

    image = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
    if crop:
        w, h = image.size
        strip = image.crop((w // 3, 0, w, h))
        box = ImageChops.difference(strip, Image.new("RGB", strip.size, "white")).getbbox()
        image = image.crop((0, 0, w, min(h, box[3] + 30)))
    image.save(out, optimize=True)
    for step in (4, 8, 16):     # too big: round every channel to a multiple of step (4 looks the same)
        if out.stat().st_size <= MAX_BYTES:
            break
        image.point([min(255, (v + step // 2) // step * step) for v in range(256)] * 3).save(out, optimize=True)
    print(f"wrote {out} ({image.size[0]}x{image.size[1]}, {out.stat().st_size // 1000} kB)")


def shoot_app(browser, tmp: Path, preset: str | None, out: Path, width: int) -> None:
    port = free_port()
    env = dict(os.environ, LAB_RUNS_DIR=str(tmp / "runs"), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "panel", "serve", "app", "--address", "127.0.0.1", "--port", str(port)]
    url = f"http://127.0.0.1:{port}/app"
    with serve(cmd, env, ROOT, url, tmp / "panel.log"):
        page = browser.new_page(viewport={"width": width, "height": 1000})
        page.goto(url, timeout=180_000)
        page.wait_for_selector(".ls-run button", timeout=180_000)
        if preset:
            page.locator(".ls-preset select").select_option(preset)
            page.locator(".ls-apply-preset button").click()
            page.wait_for_timeout(1000)
        button = page.locator(".ls-run button")
        page.wait_for_function("b => !b.disabled", arg=button.element_handle(), timeout=60_000)
        t0 = time.monotonic()
        button.click()
        wait_probe(page, lambda s: s.get("status") != "idle", 120, "the run to start")
        state = wait_probe(page, lambda s: s.get("status") in ("finished", "failed", "cancelled"), 1200, "its end")
        print(f"run {state['status']} after {time.monotonic() - t0:.0f} s: {state}")
        if state["status"] != "finished":
            sys.exit("the run did not finish; the server's log ends:\n" + (tmp / "panel.log").read_text()[-3000:])
        best = page.locator(".ls-best-layer").inner_text().strip()
        wait_probe(page, lambda s: s.get("layout_layer") == best and s.get("projection_points"), 120,
                   f"the layout to show the best layer {best}")
        verdict = page.locator(".ls-best-layer").evaluate(
            "e => { while (e.parentElement) e = e.parentElement; return e.innerText; }")   # the verdict's root
        print("verdict:", " ".join(verdict.split()))
        page.set_viewport_size({"width": width, "height": 3000})   # the app scrolls inside: no full_page
        page.mouse.move(0, 0)                   # no hover tooltip in the picture
        page.wait_for_timeout(6000)             # Bokeh draws the last updates; the "finished" toast goes
        save_png(page, out, crop=True)


def shoot_jupyterlab(browser, tmp: Path, out: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    import test_jupyterlab as jl                 # the test's helpers: cells, dialogs, Run, scrolling

    work = tmp / "notebooks"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / jl.NOTEBOOK, work / jl.NOTEBOOK)
    port, token = free_port(), secrets.token_hex(24)
    cmd, env = jl.lab_command(tmp, work, port, token)
    with serve(cmd, env, work, f"http://127.0.0.1:{port}/api/status?token={token}", tmp / "jupyterlab.log"):
        context = browser.new_context(viewport={"width": 1600, "height": 1300})
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(("data:", "blob:"))
                      or route.request.url.split("/")[2].split(":")[0] in jl.LOCAL_HOSTS else route.abort())
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/lab/tree/{jl.NOTEBOOK}?token={token}", timeout=180_000)
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=180_000)
        jl.wait_for(page, lambda: jl.kernel_ready(page), 180, "the kernel to start")
        page.keyboard.press("Control+b")        # hide the file browser: room for the app
        jl.run_all_cells(page)
        jl.wait_for_all_cells(page, 1200)
        page.wait_for_selector(".ls-run button", timeout=120_000)
        state = jl.press_run(page, 0, 600, "the LayerScope run to finish")
        print("LayerScope run:", state)
        jl.wait_for(page, lambda: jl.filled_documents(page, {**jl.EVERY_PLOT, "cdnv": "CDNV (unseen & seen)"}),
                    60, "LayerScope's plots to show points")
        jl.scroll_to_top(page, ".ls-run button", 0)
        page.mouse.move(0, 0)
        save_png(page, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", help="the app's preset to run (default: the app's default preset)")
    parser.add_argument("--jupyterlab", action="store_true", help="shoot the quickstart notebook in JupyterLab")
    parser.add_argument("--out", type=Path, help="the PNG to write (default: docs/app.png or docs/jupyterlab.png)")
    parser.add_argument("--width", type=int, default=1600, help="the browser's width for the app (px)")
    args = parser.parse_args()
    out = (args.out or ROOT / "docs" / ("jupyterlab.png" if args.jupyterlab else "app.png")).resolve()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="layerscope-shots-") as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        if args.jupyterlab:
            shoot_jupyterlab(browser, Path(tmp), out)
        else:
            shoot_app(browser, Path(tmp), args.preset, out, args.width)


if __name__ == "__main__":
    main()
