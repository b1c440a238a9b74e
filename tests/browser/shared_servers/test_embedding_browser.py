"""Browser test of app.EmbeddingView: a served page of 20,000 random-blob points with images.

``panel serve tests/browser/embedding_page.py`` driven by Playwright in Debian's Chromium: hovering a
point shows its thumbnail, a box and a lasso drawn on the (rasterized) plot set ``selection`` in
Python (read back from the page's probe element), and the side-by-side mode highlights the selection
at the second layer. Needs the ``chromium`` binary (``apt-get install chromium``); never
``playwright install``. Without chromium the test skips, except on CI (``CI=true``) where it fails.
The screenshot goes to ``test-artifacts/embedding.png`` (gitignored).
"""
from __future__ import annotations

import math
import time

import pytest
from embedding_server import ARTIFACTS, CHROMIUM_ARGS, probe, wait_probe

pytestmark = [pytest.mark.browser, pytest.mark.slow]

N = 20_000                 # above the view's raster threshold: the plot is a Datashader image
RADIUS = 6.0               # the page's blob k sits at RADIUS * (cos, sin)(2 pi k / 6) in layer_a

# The data frame of every Bokeh figure on the page: its place on screen and its visible data ranges.
_FRAMES = """
() => [...Bokeh.index.all_views()].filter(v => v.model.type === "Figure" || v.model.type === "Plot").map(v => {
  const r = v.canvas_view.el.getBoundingClientRect(); const f = v.frame.bbox;
  return {left: r.left + f.left, top: r.top + f.top, width: f.width, height: f.height,
          x0: v.frame.x_range.start, x1: v.frame.x_range.end, y0: v.frame.y_range.start, y1: v.frame.y_range.end};
}).filter(f => f.width > 0)
"""


@pytest.fixture(scope="module")
def server(embedding_server):
    """The session's test page on 127.0.0.1 (tests/browser/shared_servers/conftest.py)."""
    return embedding_server


@pytest.fixture(scope="module")
def page(chromium, server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{server}?n={N}", timeout=180_000)
        page.wait_for_selector(".ls-embedding-plot canvas", timeout=180_000)
        page.errors = errors
        yield page
        browser.close()


def frames(page) -> list[dict]:
    return page.evaluate(_FRAMES)


def to_screen(frame: dict, x: float, y: float) -> tuple[float, float]:
    """Page pixels of the data point (x, y) in ``frame``."""
    return (frame["left"] + (x - frame["x0"]) / (frame["x1"] - frame["x0"]) * frame["width"],
            frame["top"] + (frame["y1"] - y) / (frame["y1"] - frame["y0"]) * frame["height"])


def blob(k: int) -> tuple[float, float]:
    return RADIUS * math.cos(2 * math.pi * k / 6), RADIUS * math.sin(2 * math.pi * k / 6)


def test_hover_lasso_and_box_reach_python_and_link_the_layers(page):
    from playwright.sync_api import expect

    [frame] = frames(page)
    assert probe(page) == {"selection": 0, "first": [], "hovered": None}

    # hover: the server reads the raster's pixel under the pointer and shows that image
    x, y = to_screen(frame, *blob(0))
    for dx in range(6):
        page.mouse.move(x + dx, y)
        page.wait_for_timeout(250)
        if probe(page)["hovered"] is not None:
            break
    hovered = wait_probe(page, lambda s: s["hovered"] is not None, 20, "the hovered point")["hovered"]
    card = page.locator(".ls-hover-card")
    card.wait_for(timeout=20_000)
    assert card.get_attribute("data-index") == str(hovered)
    assert card.locator("img").get_attribute("src").startswith("data:image/png;base64,")
    assert "class A" in card.inner_text()

    # box select around blob 0 ("class A")
    page.locator(".bk-tool-icon-box-select").first.click()
    (cx, cy) = blob(0)
    x0, y0 = to_screen(frame, cx - 2.5, cy + 2.5)
    x1, y1 = to_screen(frame, cx + 2.5, cy - 2.5)
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x1, y1, steps=8)
    page.mouse.up()
    boxed = wait_probe(page, lambda s: s["selection"] > 0, 30, "the box selection in Python")
    assert N / 6 * 0.5 < boxed["selection"] < N / 6 * 1.2        # about one blob's points
    grid = page.locator(".ls-selection")
    expect(grid).to_have_attribute("data-count", str(boxed["selection"]), timeout=20_000)
    assert "class A" in grid.inner_text()

    # lasso around blob 2 ("class C"): a new selection replaces the box's
    page.locator(".bk-tool-icon-lasso-select").first.click()
    cx, cy = blob(2)
    ring = [to_screen(frame, cx + 2.5 * math.cos(t * math.pi / 8), cy + 2.5 * math.sin(t * math.pi / 8))
            for t in range(17)]
    page.mouse.move(*ring[0])
    page.mouse.down()
    for point in ring[1:]:
        page.mouse.move(*point, steps=3)
    page.mouse.up()
    lassoed = wait_probe(page, lambda s: s["selection"] > 0 and s["first"] != boxed["first"], 30,
                         "the lasso selection in Python")
    assert N / 6 * 0.5 < lassoed["selection"] < N / 6 * 1.2
    expect(grid).to_have_attribute("data-count", str(lassoed["selection"]), timeout=20_000)
    assert "class C" in grid.inner_text()

    # side by side: the same images highlighted at layer_b, next to layer_a
    page.locator(".ls-embedding-side input").check()
    deadline = time.monotonic() + 30
    while len(frames(page)) < 2:
        assert time.monotonic() < deadline, "the second plot did not appear"
        page.wait_for_timeout(250)
    page.wait_for_timeout(2000)          # the raster of the second plot arrives after its frame
    page.screenshot(path=str(ARTIFACTS / "embedding.png"), full_page=True)
    assert probe(page)["selection"] == lassoed["selection"]
    assert not page.errors, page.errors
