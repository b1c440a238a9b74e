"""Browser test of the explorer's per-image answers (issue 35) on a stored run: colour by arrival layer, select
what the final layer forgets, lasso, and the selection's measures per layer drawn over all images.

``panel serve tests/browser/embedding_page.py`` with ``?run=`` (the session's real tiny run, from
``$LAB_RUNS_DIR``) driven by Playwright in Debian's Chromium. Every expected number comes from lab.analysis.
Needs the ``chromium`` binary (``apt-get install chromium``); without it the test skips, except on CI
(``CI=true``). The screenshot goes to ``test-artifacts/explorer-images.png`` (gitignored).
"""
from __future__ import annotations

import math
import time

import pytest
from embedding_server import ARTIFACTS, CHROMIUM_ARGS, probe, wait_probe

pytestmark = [pytest.mark.browser, pytest.mark.slow]


# The data frame of every Bokeh figure on the page: its place on screen.
_FRAMES = """
() => [...Bokeh.index.all_views()].filter(v => v.model.type === "Figure" || v.model.type === "Plot").map(v => {
  const r = v.canvas_view.el.getBoundingClientRect(); const f = v.frame.bbox;
  return {left: r.left + f.left, top: r.top + f.top, width: f.width, height: f.height};
}).filter(f => f.width > 0)
"""
# The factors of every categorical colour mapper of the page's documents (the points' colours).
_MAPPERS = """
() => Bokeh.documents.flatMap(d => [...d.all_models]).filter(m => m.type === "CategoricalColorMapper")
      .map(m => [...m.factors])
"""


@pytest.fixture(scope="module")
def served(embedding_server, tiny_run):
    """The session's explorer test page on 127.0.0.1 (tests/browser/shared_servers/conftest.py), its store the
    session's tiny run's: (url, store, run_id)."""
    store, run_id, _ = tiny_run
    return f"{embedding_server}?run={run_id}", store, run_id


def wait_for(page, check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        page.wait_for_timeout(250)


def test_arrival_colours_forgotten_filter_and_lasso_draw_the_selection_curve(served, chromium):
    from playwright.sync_api import expect, sync_playwright

    from lab import analysis

    url, store, run_id = served
    table = analysis.image_table(run_id, store=store)          # the view opens at the latest epoch, first seed
    layers = [*table.attrs["layers"], "never"]
    forgotten = table.index[table["forgotten"].fillna(False).to_numpy(bool)].tolist()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url, timeout=180_000)
        page.wait_for_selector(".ls-embedding-plot canvas", timeout=180_000)
        assert layers not in page.evaluate(_MAPPERS)                      # coloured by class first

        # colour by arrival layer: the points' colour mapper and the legend list the layers in order, then never
        page.locator(".ls-color-by button", has_text="arrival layer").click()
        wait_probe(page, lambda s: s.get("color_by") == "arrival layer", 30, "the colour mode in Python")
        wait_for(page, lambda: layers in page.evaluate(_MAPPERS), 30, "the arrival-layer colour mapper")
        legend = page.locator(".ls-arrival-legend")
        expect(legend).to_be_visible(timeout=20_000)
        items = [t.strip() for t in legend.locator(".ls-arrival-item").all_inner_texts()]
        counts = analysis.arrival_counts(table)
        assert items == [f"\u25cf {name} {n}" for name, n in counts.items()]

        # select what the final layer forgets (the button is off when nothing is): the selection and its measures
        if forgotten:
            page.locator(".ls-select-forgotten button").click()
            state = wait_probe(page, lambda s: s["selection"] == len(forgotten), 30, "the forgotten images selected")
            assert state["first"] == forgotten[:5]
            expect(page.locator(".ls-selection-report")).to_have_attribute("data-n", str(len(forgotten)),
                                                                          timeout=20_000)
        else:
            expect(page.locator(".ls-select-forgotten button")).to_be_disabled()

        # a lasso over the middle of the plot replaces it; the curve is redrawn for the new selection
        plot = max(page.evaluate(_FRAMES), key=lambda f: f["height"])      # the layout (the curve's is smaller)
        page.locator(".bk-tool-icon-lasso-select").first.click()
        cx, cy = plot["left"] + plot["width"] / 2, plot["top"] + plot["height"] / 2
        ring = [(cx + 0.45 * plot["width"] * math.cos(t * math.pi / 8),
                 cy + 0.45 * plot["height"] * math.sin(t * math.pi / 8)) for t in range(17)]
        page.mouse.move(*ring[0])
        page.mouse.down()
        for point in ring[1:]:
            page.mouse.move(*point, steps=3)
        page.mouse.up()
        lassoed = wait_probe(page, lambda s: s["selection"] > 0 and s["selection"] != len(forgotten), 30,
                             "the lasso selection in Python")
        expect(page.locator(".ls-selection-report")).to_have_attribute("data-n", str(lassoed["selection"]),
                                                                      timeout=20_000)
        curve = page.locator(".ls-selection-measures canvas").first
        expect(curve).to_be_visible(timeout=20_000)
        wait_for(page, lambda: len(page.evaluate(_FRAMES)) >= 2, 30, "the selection curve's figure")
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ARTIFACTS / "explorer-images.png"), full_page=True)
        assert probe(page)["color_by"] == "arrival layer"
        assert not errors, errors
        browser.close()
