"""The served app follows a training loop that another process runs with lab.Monitor.

The session's ``panel serve app`` (tests/browser/shared_servers/conftest.py) and its run store, which the other
browser tests of this folder fill too; ``tests/fixtures/monitored_loop.py`` trains a small MLP on digits in a process
of its own, stepped by the test through control files. The sidebar's "Watch a running run" lists the loop's run
while it runs (it looks every 5 s); Watch has Run & watch follow it: the curves, heatmap and layout
fill in as each evaluation lands; when the loop dies without closing its run, the page says it was interrupted.
A screenshot goes to ``test-artifacts/watch-monitored-run.png``.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from served import ARTIFACTS, ROOT, wait_probe, with_repo_on_path

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def test_the_app_follows_a_monitored_loop_started_elsewhere(chromium, app_server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    runs, control = app_server["runs"], tmp_path / "control"      # the session's served app and its store
    control.mkdir()
    env = with_repo_on_path({"LAB_RUNS_DIR": str(runs)})
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 2000})
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(app_server["url"], timeout=180_000)
        page.wait_for_selector(".ls-run button", timeout=180_000)
        note = page.locator(".ls-watch-note")
        expect(note).to_be_visible(timeout=60_000)

        loop = subprocess.Popen(
            [sys.executable, "-m", "tests.fixtures.monitored_loop", str(runs), str(control), "--epochs", "2",
             "--end", "hang", "--name", "browser loop"], cwd=ROOT,
            env={**env, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 180
            while not (control / "run_id").exists():
                assert loop.poll() is None, loop.stdout.read()
                assert time.monotonic() < deadline, "the loop never opened its run"
                time.sleep(0.2)
            run_id = (control / "run_id").read_text()
            select = page.locator(".ls-watch-select select")
            expect(select.locator("option")).to_contain_text([f"browser loop · {run_id}"], timeout=60_000)
            expect(note).to_contain_text(re.compile(r"[1-9]\d* run\(s\) being written now"))
            page.locator(".ls-watch button").click()

            state = wait_probe(page, lambda s: s.get("run_id") == run_id and s.get("epochs_done") == 1
                               and s.get("metric_layers") == 3 and s.get("heatmap_cells") == 3, 120,
                               "the loop's first evaluation in the page")
            assert state["status"] == "running", state
            expect(page.locator(".ls-status")).to_contain_text("1 evaluation so far", timeout=30_000)
            expect(note).to_contain_text(f"Following run {run_id}", timeout=30_000)

            (control / "go1").touch()                       # the loop trains an epoch and evaluates again
            state = wait_probe(page, lambda s: s.get("epochs_done") == 2 and s.get("heatmap_cells") == 6
                               and s.get("projection_points") == 40, 120, "the second evaluation")
            expect(page.locator(".ls-best-layer")).to_have_count(1, timeout=30_000)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "watch-monitored-run.png"), full_page=True)

            (control / "exit").touch()                      # the loop dies without closing its run
            loop.wait(60)
            state = wait_probe(page, lambda s: s.get("status") == "interrupted", 120, "the interrupted status")
            expect(page.locator(".ls-alert")).to_contain_text("The run was interrupted", timeout=30_000)
            expect(page.locator(".ls-alert")).to_contain_text("epoch 1", timeout=30_000)
            assert state["epochs_done"] == 2
        finally:
            loop.kill()
        assert not errors, errors
        browser.close()
