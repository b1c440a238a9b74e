"""The neural-collapse lesson in the served app: choose its preset, run it, open the Neural collapse card.

One run of ``lab.lessons.NC_LESSON`` (about 20 s on a 2-core CPU) through ``panel serve app`` in Debian's Chromium:
the card's panels draw, its key names the three splits and their dashes, the terminal-phase mark is on the plots,
the simplex view draws the two cosine matrices and, for K = 3, the triangle, and the epoch player steps. A screenshot
of the card goes to ``test-artifacts/collapse-lesson.png``. Then the law-of-equi-separation lesson
(``lab.lessons.SEPARATION_LAW_LESSON``) on the same page: the law against depth with its fitted line and r against
every epoch (``test-artifacts/collapse-law-lesson.png``).
"""
from __future__ import annotations

import time

import pytest
from served import ARTIFACTS, choose_preset, probe, wait_probe

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = "Neural collapse: the terminal phase (lesson)"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

# What the page's Bokeh documents hold: the cells of the cosine heatmaps, the sizes of the point sets (the plane's
# means among them), the texts drawn on the plots and the terminal-phase marks (red vertical spans).
_CARD_MODELS = """
() => {
  const out = {heatmaps: [], point_sets: [], texts: [], terminal_marks: 0};
  for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
    for (const m of doc._all_models.values()) {
      // the terminal-phase mark: a red vertical span (hv.VLine) at a finite epoch
      if (m.dimension === "height" && m.line_color === "#b2182b" && Number.isFinite(m.location)) out.terminal_marks++;
      if (!(m.data && (m.data instanceof Map || typeof m.data === "object"))) continue;
      const d = m.data;
      const get = (k) => (d instanceof Map ? d.get(k) : d[k]);
      const keys = d instanceof Map ? [...d.keys()] : Object.keys(d);
      if (keys.includes("cosine") && keys.includes("row")) out.heatmaps.push(get("row").length);
      if (keys.includes("class") && keys.includes("x") && keys.includes("y")) out.point_sets.push(get("x").length);
      if (keys.includes("text")) out.texts.push(...Array.from(get("text")).map(String));
    }
  }
  return out;
}
"""


@pytest.fixture(scope="module")
def page(chromium, app_server):
    """The session's served app (tests/browser/shared_servers/conftest.py) in a Chromium page, its page errors kept in
    ``page.errors``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 2300})
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.goto(app_server["url"], timeout=180_000)
        page.wait_for_selector(".ls-run button", timeout=180_000)
        yield page
        browser.close()


def run_preset(page, preset: str, what: str) -> dict:
    """Apply ``preset`` in the sidebar, press Run and wait (up to 300 s) for that run to end: its probe state."""
    choose_preset(page, preset)
    run = page.locator(".ls-run button")
    page.wait_for_function("b => !b.disabled", arg=run.element_handle(), timeout=60_000)
    before = probe(page).get("run_id")
    run.click()
    return wait_probe(page, lambda s: s.get("run_id") not in (None, before)
                      and s.get("status") in ("finished", "failed", "cancelled"), 300, what)


def test_the_lesson_draws_the_neural_collapse_card(page):
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(exist_ok=True)
    t0 = time.monotonic()
    state = run_preset(page, LESSON, "the lesson run's end")
    assert state["status"] == "finished", state
    print(f"lesson run in the app: {time.monotonic() - t0:.1f} s")

    card = page.locator(".ls-collapse").first
    card.locator(".card-header").first.click()                      # unfold: the card draws only when open
    key = card.locator(".ls-collapse-key")
    for text in ("train sample", "held-out (seen)", "unseen classes", "terminal phase (100 % train accuracy)"):
        expect(key).to_contain_text(text, timeout=60_000)
    # the key draws each split's dash: solid, dashed, dotted
    dashes = key.locator("svg line").evaluate_all("ls => ls.slice(0, 3).map(l => l.getAttribute('stroke-dasharray'))")
    assert dashes == [None, "6,3", "2,3"], dashes
    expect(card.locator(".ls-collapse-notes")).to_contain_text("seed 0: epoch", timeout=30_000)
    panels = card.locator(".ls-collapse-panel")
    expect(panels).to_have_count(6, timeout=60_000)
    expect(panels.first.locator("canvas").first).to_be_visible(timeout=60_000)

    deadline = time.monotonic() + 60                               # the browser has the data a moment after Python
    while True:
        models = page.evaluate(_CARD_MODELS)
        if models["heatmaps"].count(9) >= 2 and 3 in models["point_sets"]:
            break
        assert time.monotonic() < deadline, f"the simplex view did not draw: {models}"
        page.wait_for_timeout(500)
    assert models["terminal_marks"], "no terminal-phase mark on the panels"

    deviation = card.locator(".ls-simplex-deviation")
    card.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "collapse-lesson.png"), full_page=True)
    # the head input's class means at the last epoch, where the player starts
    expect(deviation).to_contain_text("pre_logits, epoch 15", timeout=30_000)
    card.locator(".ls-simplex-player button.previous").click()                  # one epoch back
    expect(deviation).to_contain_text("epoch 14", timeout=30_000)
    assert not page.errors, page.errors


# The law panels' data: legend labels (the fitted lines say "×ratio per layer, r ...") and, per r-against-epoch
# source, how many epochs it holds.
_LAW_MODELS = """
() => {
  const out = {labels: [], r_points: [], r_x_end: []};
  for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
    for (const m of doc._all_models.values()) {
      try {
        if (m.renderers !== undefined && m.index !== undefined && m.label) {
          const l = m.label;
          out.labels.push(String(typeof l === "object" && "value" in l ? l.value : l));
        }
        if (m.title && m.x_range && String(m.title.text).startsWith("r against epoch")) out.r_x_end.push(m.x_range.end);
        const d = m.data;
        if (d && (d instanceof Map || typeof d === "object")) {
          const keys = d instanceof Map ? [...d.keys()] : Object.keys(d);
          if (keys.includes("r") && keys.includes("epoch")) {
            out.r_points.push((d instanceof Map ? d.get("epoch") : d["epoch"]).length);
          }
        }
      } catch (e) { continue; }
    }
  }
  return out;
}
"""


def test_the_law_lesson_draws_the_law_against_depth_and_r_against_epoch(page):
    """The lesson of issue 49 run in the app: the card's law panels draw the fitted line (its legend gives the
    ratio per layer and r) and r against every evaluated epoch (0 to 8)."""
    from playwright.sync_api import expect

    from app.choose.presets import LAW_LESSON_PRESET

    state = run_preset(page, LAW_LESSON_PRESET, "the law lesson run's end")
    assert state["status"] == "finished", state

    card = page.locator(".ls-collapse").first
    if not card.locator(".ls-law").count() or not card.locator(".ls-law").first.is_visible():
        card.locator(".card-header").first.click()                  # unfold (the first test may have left it open)
    expect(card.locator(".ls-law-depth canvas").first).to_be_visible(timeout=60_000)
    expect(card.locator(".ls-law-r canvas").first).to_be_visible(timeout=60_000)
    deadline = time.monotonic() + 60
    while True:
        models = page.evaluate(_LAW_MODELS)
        fitted = [label for label in models["labels"] if label.startswith("train sample: ×") and "per layer, r" in label]
        # every epoch drawn: the x range reaches the last one (it once stayed at the epochs first streamed)
        if fitted and 9 in models["r_points"] and models["r_x_end"] and max(models["r_x_end"]) >= 8:
            break
        assert time.monotonic() < deadline, f"the law panels did not draw: {models}"
        page.wait_for_timeout(500)
    card.locator(".ls-law").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "collapse-law-lesson.png"), full_page=True)
    assert not page.errors, page.errors
