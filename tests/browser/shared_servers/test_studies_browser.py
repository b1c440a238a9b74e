"""Browser test of the Studies tab: `panel serve app` driven by Playwright in Debian's Chromium.

A tiny study spec (4 cells of small MLPs on digits, 1 epoch) is put in a temporary specs folder
($LAB_STUDIES_DIR), started from the page on a local Dask cluster of 2 workers, and its figures
checked once every cell has finished. Needs the ``chromium`` binary (``apt-get install chromium``);
never ``playwright install``. Without chromium the test skips, except on CI (``CI=true``) where it
fails. The screenshot goes to ``test-artifacts/studies.png`` (gitignored).
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from served import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SPEC_FILE = "tiny_browser_study.yaml"
# 2 backbones x 2 noise ratios: 4 conditions (enough for a rank correlation) and two condition axes
# (the heatmap); seconds per run.
SPEC = """\
name: tiny-browser-study
description: four tiny runs for the browser test.
base:
  dataset: digits
  strategy: full
  epochs: 1
  lr: 0.003
  projection: none
  unseen_per_class: 30
  seen_per_class: 15
  metrics: [nmi, nc1]
  save_weights: false
axes:
  backbone: ["mlp:depth=3,width=16", "mlp:depth=3,width=32"]
  label_noise: [0.0, 0.4]
"""
N_CELLS = 4
N_LAYERS = 4          # fc1, fc2, fc3, pre_logits of mlp:depth=3


@pytest.fixture(scope="module")
def server(app_server):
    """The session's `panel serve app` (tests/browser/shared_servers/conftest.py) with this test's spec in its specs
    folder (the Studies tab lists the folder when a page opens); ``before``: the runs stored before this module."""
    (app_server["studies"] / SPEC_FILE).write_text(SPEC)
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
        glyphs.push({type: r.glyph.type,
                     n: xs.filter((v) => (typeof v === "number" && isFinite(v)) || typeof v === "string").length});
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


@pytest.mark.timeout(1200)
def test_studies_tab_runs_a_study_and_draws_its_figures(page, server):
    page.locator(".bk-tab", has_text="Studies").click()
    page.locator(".ls-study-spec select").select_option(SPEC_FILE)
    page.get_by_text("tiny-browser-study").first.wait_for(timeout=30_000)
    rows = wait_rows(page, lambda rows: len(rows) == N_CELLS, 60, "the cells table")
    assert all("pending" in row for row in rows), rows
    workers = page.locator(".ls-study-workers input")
    workers.fill("2")
    workers.press("Enter")
    page.wait_for_timeout(500)
    t0 = time.monotonic()
    page.locator(".ls-study-run button").click()
    page.get_by_text("local worker(s)").first.wait_for(timeout=120_000)
    assert "on 2 local worker(s)" in pane_text(page, ".ls-study-message")

    wait_rows(page, lambda rows: len(rows) == N_CELLS and all("finished" in r for r in rows), 600,
              "every cell to finish", fail=lambda rows: any("failed" in r for r in rows))
    page.get_by_text("Finished: 4 of 4 runs").first.wait_for(timeout=60_000)
    seconds = time.monotonic() - t0
    page.wait_for_timeout(2000)
    page.screenshot(path=str(ARTIFACTS / "studies.png"), full_page=True)

    plots = [p for p in bokeh_plots(page) if p["drawn"]]          # replaced plots may linger in the document
    layers = [p for p in plots if p["title"].startswith("Unseen NMI per layer")]
    accuracy = [p for p in plots if p["title"].startswith("Seen accuracy against g")]
    assert len(layers) == 1 and len(accuracy) == 1, [p["title"] for p in plots]
    # one line of N_LAYERS points per condition, and one point per condition against g
    lines = [g for g in layers[0]["glyphs"] if g["type"] == "Line"]
    assert len(lines) == N_CELLS and all(g["n"] == N_LAYERS for g in lines), layers
    points = [g for g in accuracy[0]["glyphs"] if g["type"] == "Scatter"]
    assert sum(g["n"] for g in points) == N_CELLS, accuracy
    assert page.locator(".ls-study-layers canvas").count() >= 1
    assert page.locator(".ls-study-accuracy canvas").count() >= 1
    heatmap = [p for p in plots if p["title"].startswith("utilization at fc1")]
    assert heatmap and sum(g["n"] for g in heatmap[0]["glyphs"]) == N_CELLS, [p["title"] for p in plots]
    layer = page.locator(".ls-study-layer select")
    assert layer.input_value() == "fc1", layer.evaluate("e => e.outerHTML")
    ranks = pane_text(page, ".ls-study-ranks")
    assert "Over 4 conditions: Spearman" in ranks and "Kendall" in ranks, ranks
    # the store is the session's: the study's runs are the ones stored since this module began
    assert len(set(Path(server["runs"]).glob("*-digits-mlp-*")) - server["before"]) == N_CELLS
    assert not page.errors, page.errors
    print(f"4-cell study from the browser: {seconds:.0f} s")


def test_new_study_opens_the_composer_in_the_page_and_its_estimate_follows_an_added_axis(page):
    """The composer is made at the first "New study" of a served page: every widget it shows must work in a page
    that did not load it at the start (a CodeEditor there left "ace is not defined" and no composer)."""
    from playwright.sync_api import expect

    page.locator(".bk-tab", has_text="Studies").click()
    seen_errors = len(page.errors)
    page.locator(".ls-study-new button").click()
    expect(page.locator(".ls-compose-axis select")).to_be_visible(timeout=60_000)
    page.locator(".ls-compose-axis select").select_option("epochs")
    page.locator(".ls-compose-values input").fill("1, 2")
    page.locator(".ls-compose-add button").click()
    # the blank study's seeds (the sidebar's) times the two epochs: the line under the grid counts them
    expect(page.locator(".ls-compose-estimate")).to_contain_text(" cells · ", timeout=60_000)
    expect(page.locator(".ls-compose-yaml textarea")).to_have_value(re.compile(r"\n  epochs: \[1, 2\]\n"),
                                                                     timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "studies-composer.png"), full_page=True)
    assert page.errors[seen_errors:] == [], page.errors[seen_errors:]
