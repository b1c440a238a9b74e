"""Browser test of the Studies tab: `panel serve app` driven by Playwright in Debian's Chromium.

A study is composed in the page from a blank composer on the sidebar's settings (the tiny demo, 2 epochs, no
layout): 2 backbones x 2 label noises x 2 seeds of small MLPs on digits. It is saved, launched on a local Dask
cluster of one worker, grown by a third seed while it runs, stopped while the new cells wait, and resumed from the
CLI on the saved spec with no finished cell run again; picked in the tab, its figures show every condition over
n = 3 seeds. Needs the ``chromium`` binary (``apt-get install
chromium``); never ``playwright install``. Without chromium the test skips, except on CI (``CI=true``) where it
fails. Screenshots go to ``test-artifacts/studies*.png`` (gitignored).
"""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from served import ARTIFACTS, choose_preset, with_repo_on_path

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
STUDY = "grown-in-page"
BACKBONES = "mlp:depth=3,width=16, mlp:depth=3,width=24"
NOISES = "0.0, 0.4"
N_CONDITIONS = 4      # 2 backbones x 2 noises: enough for a rank correlation, and two condition axes (the heatmap)
N_LAYERS = 4          # fc1, fc2, fc3, pre_logits of mlp:depth=3


@pytest.fixture(scope="module")
def server(app_server):
    """The session's `panel serve app` (tests/browser/shared_servers/conftest.py); ``before``: the runs stored
    before this module."""
    return {**app_server, "before": set(Path(app_server["runs"]).iterdir())}


@pytest.fixture(scope="module")
def page(chromium, server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1600, "height": 1800})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        # console errors too (Bokeh logs a failed document patch there), except resources the page
        # asks of the internet (the template's web fonts): this machine has no network
        page.on("console", lambda msg: errors.append(f"console: {msg.text}")
                if msg.type == "error" and not msg.text.startswith("Failed to load resource") else None)
        page.goto(server["url"], timeout=180_000)
        page.wait_for_selector(".ls-run button", timeout=180_000)
        page.errors = errors
        yield page
        context.close()
        browser.close()


# Every Bokeh plot of the page: its title, whether a view of it is drawn on a canvas, and per glyph
# renderer the glyph type and the number of finite x values of its data source.
_PLOTS = """
() => {
  const out = [];
  for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
    for (const m of doc._all_models.values()) {
      if (!m.renderers || !m.title || m.title.text === undefined) continue;
      const view = Bokeh.index.find_one(m);
      const drawn = view != null && view.canvas_view != null && view.el.isConnected
        && view.bbox.width > 50 && view.bbox.height > 50;
      const glyphs = [];
      for (const r of m.renderers) {
        if (!r.glyph || !r.data_source) continue;
        const d = r.data_source.data;
        const get = (k) => (d instanceof Map ? d.get(k) : d[k]);
        const xs = Array.from(get(r.glyph.x?.field ?? "x") ?? []);
        const seeds = Array.from(get("n") ?? []).filter((v) => typeof v === "number" && isFinite(v));
        glyphs.push({type: r.glyph.type,
                     n: xs.filter((v) => (typeof v === "number" && isFinite(v)) || typeof v === "string").length,
                     seeds: seeds.length ? Math.max(...seeds) : null});
      }
      out.push({title: m.title.text, drawn, glyphs});
    }
  }
  return out;
}
"""


def bokeh_plots(page) -> list[dict]:
    return page.evaluate(_PLOTS)


def cell_statuses(page) -> list[str]:
    rows = page.locator(".ls-study-table .tabulator-row")
    return [rows.nth(i).inner_text() for i in range(rows.count())]


_TEXT = """
(el) => { const text = (n) => n.shadowRoot ? text(n.shadowRoot) : n.nodeType === 3 ? n.textContent
          : [...n.childNodes].map(text).join(""); return text(el); }
"""


def pane_text(page, selector: str) -> str:
    """The text of a Panel pane, shadow roots included (innerText stops at them)."""
    return page.locator(selector).first.evaluate(_TEXT)


def wait_rows(page, check, timeout: float, what: str, fail=lambda rows: False) -> list[str]:
    deadline = time.monotonic() + timeout
    rows: list[str] = []
    while time.monotonic() < deadline:
        rows = cell_statuses(page)
        if check(rows):
            return rows
        assert not fail(rows), rows
        page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "studies-timeout.png"), full_page=True)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; rows: {rows}; "
                         f"message: {pane_text(page, '.ls-study-message')!r}; page errors: {page.errors}")


def layer_lines(page) -> list[dict]:
    """The Line glyphs of the drawn "Unseen NMI per layer" plot (one per condition; ``seeds``: its largest n)."""
    plots = [p for p in bokeh_plots(page) if p["drawn"] and p["title"].startswith("Unseen NMI per layer")]
    return [g for p in plots[-1:] for g in p["glyphs"] if g["type"] == "Line"]


def heatmaps(page) -> list[dict]:
    """The drawn condition heatmaps of utilization at fc1 (one cell per condition)."""
    return [p for p in bokeh_plots(page) if p["drawn"] and p["title"].startswith("utilization at fc1")]


def wait_message(page, text: str, timeout: float) -> str:
    from playwright.sync_api import expect

    expect(page.locator(".ls-study-message").first).to_contain_text(text, timeout=timeout * 1000)
    return pane_text(page, ".ls-study-message")


def stored_cells(spec: Path, runs: Path) -> dict[int, str]:
    """Cell index -> run id of the study's finished cells in the store (lab.Study.status)."""
    from lab.study import Study

    status = Study.from_file(spec).status(store=runs)
    return {int(i): r for i, (s, r) in enumerate(zip(status["status"], status["run_id"])) if s == "finished"}


def compose(page) -> None:
    """A blank study on the sidebar's settings, 2 backbones x 2 noises, the default seeds (0, 1)."""
    from playwright.sync_api import expect

    choose_preset(page, "Tiny demo (fast)")
    for section in ("Fine-tuning", "Metrics, seeds & device"):            # unfold the sidebar's sections
        header = page.locator(".accordion-header", has_text=section).first
        if not page.locator(".ls-field-epochs" if section == "Fine-tuning" else ".ls-field-projection").is_visible():
            header.click()
    page.locator(".ls-field-projection select").select_option("none")
    epochs = page.locator(".ls-field-epochs input")
    epochs.fill("2")
    epochs.press("Enter")
    page.locator(".bk-tab", has_text="Studies").click()
    page.locator(".ls-study-new button").click()
    expect(page.locator(".ls-compose-axis select")).to_be_visible(timeout=60_000)
    name = page.locator(".ls-compose-name input")
    name.fill(STUDY)
    name.press("Enter")
    for axis, values in (("backbone", BACKBONES), ("label_noise", NOISES)):
        page.locator(".ls-compose-axis select").select_option(axis)
        page.locator(".ls-compose-values input").fill(values)
        page.locator(".ls-compose-add button").click()
        expect(page.locator(".ls-compose-rows")).to_contain_text(f"{axis} [2]", timeout=30_000)
    expect(page.locator(".ls-compose-estimate")).to_contain_text("8 cells · 0 already stored · about ",
                                                                 timeout=60_000)
    yaml = page.locator(".ls-compose-yaml textarea")
    expect(yaml).to_have_value(re.compile(r"\n  label_noise: \[0\.0, 0\.4\]\n  seeds: \[\[0\], \[1\]\]"),
                               timeout=30_000)
    assert "epochs: 2" in yaml.input_value() and "projection: none" in yaml.input_value()


def set_seeds(page, text: str) -> None:
    seeds = page.locator(".ls-compose-seeds input")
    seeds.fill(text)
    seeds.press("Enter")


@pytest.mark.timeout(900)
def test_a_study_composed_in_the_page_grows_by_a_seed_while_it_runs_and_resumes_from_the_cli(page, server):
    from playwright.sync_api import expect

    compose(page)
    page.locator(".ls-compose-save button").click()
    expect(page.locator(".ls-compose-message")).to_contain_text("Saved", timeout=30_000)
    spec = Path(server["studies"]) / f"{STUDY}.yaml"
    assert spec.exists()
    page.screenshot(path=str(ARTIFACTS / "studies-composer.png"), full_page=True)
    workers = page.locator(".ls-study-workers input")
    workers.fill("1")
    workers.press("Enter")
    page.wait_for_timeout(300)
    t0 = time.monotonic()
    page.locator(".ls-compose-launch button").click()
    rows = wait_rows(page, lambda rows: len(rows) == 8, 30, "the launched study's 8 cells")
    assert all("pending" in row for row in rows), rows
    expect(page.locator(".ls-compose-launch button")).to_have_text("Add to running study", timeout=10_000)

    # a third seed as soon as the study runs (its cells take a second each: a later click could find it over):
    # 4 new cells queue on the same cluster; stopped at once, while they wait
    set_seeds(page, "0, 1, 2")
    page.locator(".ls-compose-launch button").click()
    grown = wait_message(page, "now has 12 cells: 4 queued, 0 dropped", 60)
    page.locator(".ls-study-stop button").click()
    rows = wait_rows(page, lambda rows: len(rows) == 12, 30, "the 12 cells")
    page.screenshot(path=str(ARTIFACTS / "studies-growing.png"), full_page=True)
    wait_message(page, "Stopped.", 120)
    seconds = time.monotonic() - t0
    # the grown study saved over the spec saved before: the CLI resumes it, new seed included
    page.locator(".ls-compose-save button").click()
    expect(page.locator(".ls-compose-message")).to_contain_text("replacing the version saved before", timeout=30_000)

    # every finished cell ran once: one run in the store per cell
    from lab.store import RunStore

    runs = Path(server["runs"])
    finished = stored_cells(spec, runs)
    listed = RunStore(runs).list()
    mine = listed[listed["run_id"].isin([d.name for d in set(runs.iterdir()) - server["before"]])]
    assert len(finished) < 12, (finished, grown)
    assert sorted(mine.loc[mine["status"] == "finished", "run_id"]) == sorted(finished.values()), mine

    # resumed from the CLI on the saved (grown) spec: only the cells not finished run
    out = subprocess.run([sys.executable, "-m", "lab", "study", "run", str(spec), "--runs-dir", str(runs),
                          "--workers", "1", "--no-progress"], capture_output=True, text=True, timeout=600,
                         env={k: v for k, v in with_repo_on_path().items() if k != "DASK_SCHEDULER_ADDRESS"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"12 of 12 finished ({len(finished)} from before)" in out.stdout, out.stdout
    after = stored_cells(spec, runs)
    assert len(after) == 12 and all(after[i] == r for i, r in finished.items()), (finished, after)

    # the saved spec, picked in the tab: its 12 cells finished, every condition drawn over its 3 seeds
    page.locator(".ls-study-spec select").select_option(f"{STUDY}.yaml")
    wait_rows(page, lambda rows: len(rows) == 12 and all("finished" in r for r in rows), 60, "12 finished cells")
    deadline = time.monotonic() + 60
    while not (len(layer_lines(page)) == N_CONDITIONS and all(g["seeds"] == 3 for g in layer_lines(page))):
        assert time.monotonic() < deadline, f"the conditions do not show n = 3: {layer_lines(page)}"
        page.wait_for_timeout(250)
    page.wait_for_timeout(1000)
    page.screenshot(path=str(ARTIFACTS / "studies.png"), full_page=True)
    lines = layer_lines(page)
    assert all(g["n"] == N_LAYERS for g in lines), lines
    plots = [p for p in bokeh_plots(page) if p["drawn"]]          # replaced plots may linger in the document
    accuracy = [p for p in plots if p["title"].startswith("Seen accuracy against g")]
    assert len(accuracy) == 1 and sum(g["n"] for g in accuracy[0]["glyphs"] if g["type"] == "Scatter") == N_CONDITIONS
    # the heatmap follows the layer picker, and the running study's may still be drawn beside it for a while
    deadline = time.monotonic() + 60
    while not any(sum(g["n"] for g in p["glyphs"]) == N_CONDITIONS for p in heatmaps(page)):
        assert time.monotonic() < deadline, heatmaps(page)
        page.wait_for_timeout(250)
    ranks = pane_text(page, ".ls-study-ranks")
    assert f"Over {N_CONDITIONS} conditions: Spearman" in ranks and "Kendall" in ranks, ranks
    assert not page.errors, page.errors
    print(f"composed study grown from 8 to 12 cells in the browser and stopped after {seconds:.0f} s; "
          f"{len(finished)} finished before the CLI resumed it")
