"""Browser tests: `panel serve app` driven by Playwright in Debian's Chromium.

Run with ``pytest -m browser``. Needs the ``chromium`` binary (``apt-get install
chromium``); never ``playwright install``. Without chromium the tests skip,
except on CI (``CI=true``) where they fail. Screenshots and timings go to
``test-artifacts/`` (gitignored).
"""
from __future__ import annotations

import json
import time

import pytest
from served import ARTIFACTS, choose_preset, probe, wait_probe

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
TINY = "Tiny demo (fast)"
DEFAULT = "Which layer generalizes (glyphs, 15/5)"


@pytest.fixture(scope="module")
def server(app_server):
    """The session's `panel serve app` (tests/browser/shared_servers/conftest.py), on a temporary run store."""
    return app_server


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(browser, server):
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": 1600, "height": 2300}, accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    elsewhere: list[str] = []               # requests to any host but the server's: the app works offline
    page.on("request", lambda req: None if req.url.startswith(("data:", "blob:", "http://127.0.0.1:", "ws://127.0.0.1:"))
            else elsewhere.append(req.url))
    page.goto(server["url"], timeout=180_000)
    page.wait_for_selector(".ls-run button", timeout=180_000)
    page.errors = errors
    page.elsewhere = elsewhere
    yield page
    context.close()


# ------------------------------------------------------------------ helpers
_BOKEH_COUNTS = """
() => {
  const out = {curve_layers: 0, heat_cells: 0, points: 0};
  for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
    for (const m of doc._all_models.values()) {
      if (m.type !== "ColumnDataSource" && !(m.constructor && m.constructor.name === "ColumnDataSource")) continue;
      const d = m.data;
      const get = (k) => (d instanceof Map ? d.get(k) : d[k]);
      const keys = d instanceof Map ? [...d.keys()] : Object.keys(d);
      const finite = (arr) => arr ? Array.from(arr).filter((v) => typeof v === "number" && isFinite(v)).length : 0;
      if (keys.includes("layer_pos")) {
        for (const k of keys) {
          if (["layer_pos", "layer", "std", "epoch", "split"].includes(k)) continue;
          out.curve_layers = Math.max(out.curve_layers, finite(get(k)));
        }
      }
      if (keys.includes("zvalues")) out.heat_cells = Math.max(out.heat_cells, finite(get("zvalues")));
      // the layout's points (app.EmbeddingView draws a small layout as glyphs with class and index)
      if (keys.includes("index") && keys.includes("class") && keys.includes("x")) {
        out.points = Math.max(out.points, finite(get("x")));
      }
    }
  }
  return out;
}
"""


def bokeh_counts(page) -> dict:
    return page.evaluate(_BOKEH_COUNTS)


_BOKEH_TITLES = """
() => {
  const out = [];
  for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
    for (const m of doc._all_models.values()) {
      if (m.type === "Title" || (m.constructor && m.constructor.name === "Title")) out.push(String(m.text));
    }
  }
  return out;
}
"""


def bokeh_titles(page) -> list[str]:
    """The text of every plot title in the page (drawn on a canvas: not in the page's text)."""
    return page.evaluate(_BOKEH_TITLES)


def click_run(page) -> float:
    """Click Run and wait until the server has taken the click (the probe leaves the previous run)."""
    button = page.locator(".ls-run button")
    page.wait_for_function("b => !b.disabled", arg=button.element_handle(), timeout=60_000)
    before = probe(page)
    t0 = time.monotonic()
    button.click()
    wait_probe(page, lambda s: s.get("status") in ("starting", "queued", "running", "stopping")
               or s.get("run_id") != before.get("run_id") or s.get("events") != before.get("events"),
               60, "the server to start the run")
    return t0


_COMPARE_EXPLORER = """
() => {
  // the explorer's plot in Compare & export (under .ls-runs-panel; Run & watch draws one too)
  const inside = (view) => { for (let v = view; v != null; v = v.parent)
                               if ((v.model.css_classes || []).includes("ls-runs-panel")) return true;
                             return false; };
  for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
    for (const m of doc._all_models.values()) {
      if (!(m.css_classes || []).includes("ls-embedding-plot") || !("renderers" in m)) continue;
      for (const view of Bokeh.index.find(m)) {
        if (!inside(view)) continue;
        const canvas = view.canvas_view.el.getBoundingClientRect(), f = view.frame.bbox;
        let points = 0;
        for (const r of m.renderers) {
          const d = r.data_source ? r.data_source.data : null, x = d ? (d instanceof Map ? d.get("x") : d.x) : null;
          if (x) points = Math.max(points, Array.from(x).filter((v) => isFinite(v)).length);
        }
        return {frame: {x: canvas.x + f.x, y: canvas.y + f.y, width: f.width, height: f.height}, points};
      }
    }
  }
  return null;
}
"""


def compare_explorer(page) -> dict | None:
    """Compare's explorer plot as the browser lays it out: its data frame's box in the viewport (0 x 0 when
    BokehJS never laid the plot out) and the points its data holds; None before it exists."""
    return page.evaluate(_COMPARE_EXPLORER)


def coloured_pixels(page, box: dict) -> int:
    """Pixels of the viewport's ``box`` in a saturated colour (the class colours of the points; the frame's
    background and grid are white and grey)."""
    import io

    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(page.screenshot(clip=box))).convert("RGB")).astype(int)
    return int(((rgb.max(axis=2) - rgb.min(axis=2)) > 80).sum())


def overlaps(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and \
        a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]


def record_timing(name: str, seconds: float) -> None:
    path = ARTIFACTS / "timings.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = round(seconds, 2)
    path.write_text(json.dumps(data, indent=2))


# ------------------------------------------------------------------ tests
def test_page_loads(page):
    page.screenshot(path=str(ARTIFACTS / "01-initial.png"), full_page=True)
    assert probe(page)["status"] == "idle"
    assert not page.errors, page.errors
    assert not page.elsewhere, f"the page asked another host: {page.elsewhere}"   # e.g. Fast's Google font


def test_tiny_run_streams_every_view(page):
    from playwright.sync_api import expect

    choose_preset(page, TINY)
    t0 = click_run(page)
    first = wait_probe(page, lambda s: s.get("metric_layers", 0) >= 1, 180, "the first layer metrics")
    record_timing("tiny_first_metrics_s", time.monotonic() - t0)
    state = wait_probe(page, lambda s: s.get("metric_layers", 0) >= 2 and s.get("heatmap_cells", 0) >= 2
                       and s.get("projection_points", 0) > 0, 240, "curves, heatmap and layout for 2 layers")
    deadline = time.monotonic() + 30        # the browser has the data a moment after the server
    while True:
        counts = bokeh_counts(page)
        if counts["curve_layers"] >= 2 and counts["heat_cells"] >= 2 and counts["points"] > 0:
            break
        assert time.monotonic() < deadline, f"the plots in the page do not show the data: {counts}"
        page.wait_for_timeout(250)
    page.screenshot(path=str(ARTIFACTS / "02-tiny-mid-run.png"), full_page=True)
    # the plots above painted with BokehJS's CSS lookup answered at once (app.base._css_visuals)
    assert page.evaluate("window.__layerscopeCssVisuals") is True
    state = wait_probe(page, lambda s: s.get("status") in ("finished", "failed", "cancelled"), 600, "the run's end")
    record_timing("tiny_total_s", time.monotonic() - t0)
    assert state["status"] == "finished", state
    page.wait_for_timeout(1500)
    page.screenshot(path=str(ARTIFACTS / "03-tiny-finished.png"), full_page=True)
    assert page.locator(".ls-best-layer").count() == 1
    best = page.locator(".ls-best-layer").inner_text().strip()
    assert probe(page)["layout_layer"] == best           # the layout follows the verdict's best layer
    # the player's header names it too (Panel's own value label kept the layer before a move from Python)
    player_title = page.locator(".ls-layer-player .pn-player-title")
    expect(player_title).to_have_text(f"Layer: {best}", timeout=10_000)
    # the label-free family (measured by default): its curve panels, and its rows in the agreement table
    from lab.catalogue import METRICS, metric_names

    titles = bokeh_titles(page)
    assert any(t.startswith(f"{METRICS['rankme'].label} (unseen") for t in titles), titles
    for name in ("rankme", "alpha_req", "twonn_id"):
        row = page.locator(f".ls-agreement tr[data-measure='{name}']")
        expect(row).to_have_count(1, timeout=10_000)
        expect(row).to_contain_text(f"{METRICS[name].label} (no labels)")
    marked = page.locator(".ls-agreement tr", has_text="(no labels)")
    assert marked.count() == len([m for m in metric_names(family="label_free") if m != "lidar"])  # lidar: off by default
    assert first["run_id"]
    assert not page.errors, page.errors


def test_the_plots_grow_with_the_page(page):
    """On a wide screen the curves and the layout take the page's width (they kept a fixed width, a third of a
    1920 px page empty). Runs after the Tiny run above: its plots are drawn."""
    widths = {}
    for viewport in (1280, 1920):
        page.set_viewport_size({"width": viewport, "height": 2300})
        page.wait_for_timeout(1500)
        boxes = [page.locator(sel).first.bounding_box() for sel in (".ls-curves", ".ls-embedding-plot")]
        widths[viewport] = [round(box["width"]) for box in boxes]
        curves = [page.locator(".ls-curves").nth(i).bounding_box() for i in range(page.locator(".ls-curves").count())]
        first_row = [box for box in curves if abs(box["y"] - curves[0]["y"]) < 5]
        right = max(box["x"] + box["width"] for box in first_row)
        page.screenshot(path=str(ARTIFACTS / f"03b-tiny-finished-{viewport}.png"), full_page=True)
    page.set_viewport_size({"width": 1600, "height": 2300})
    (curve_1280, layout_1280), (curve_1920, layout_1920) = widths[1280], widths[1920]
    assert curve_1280 >= 380 and layout_1280 >= 520, widths       # never below their least widths
    assert curve_1920 > curve_1280 + 40, widths                   # the curves share the wider page
    # at 1920 px the first row of curves reaches the page's right side (it ended at 1560 px, 3 plots of 380 px)
    assert len(first_row) >= 3 and right > 0.92 * 1920, (widths, first_row)
    assert layout_1920 > 600, widths
    assert not page.errors, page.errors


def test_compare_explorer_draws_a_selected_finished_run(page):
    """Compare's explorer draws the Tiny run selected in the runs' table: a laid-out frame with its points in
    colour, the legend beside the frame. (BokehJS left the plot at 0 x 0 behind a pn.FlexBox two computed
    layouts below the tabs: a blank canvas, the toolbar squashed to one dot and the legend floating over the
    'Colour by' and 'Layer' controls.) Runs after the Tiny run above; leaves nothing selected, Run & watch shown."""
    run_id = probe(page)["run_id"]
    page.locator(".bk-tab", has_text="Compare & export").click()
    row = page.locator(".ls-runs-table .tabulator-row", has_text=run_id)
    row.wait_for(timeout=30_000)
    row.locator("input[type=checkbox]").click()
    panel = page.locator(".ls-runs-panel")
    panel.locator(".ls-embedding-plot").scroll_into_view_if_needed()
    deadline = time.monotonic() + 30
    while True:
        plot = compare_explorer(page)
        if plot and plot["points"] > 0 and plot["frame"]["width"] > 0:
            break
        if time.monotonic() > deadline:
            break
        page.wait_for_timeout(250)
    page.wait_for_timeout(500)         # the canvas paints a frame after its layout
    page.screenshot(path=str(ARTIFACTS / "03c-compare-explorer.png"), full_page=True)
    assert plot is not None and plot["points"] > 0, plot
    frame = plot["frame"]
    assert frame["width"] >= 300 and frame["height"] >= 300, plot
    assert coloured_pixels(page, frame) > 200, plot           # the points drawn, not a blank canvas
    legend = panel.locator(".ls-embedding-plot .bk-Legend").bounding_box()
    top = panel.locator(".ls-embedding-plot").bounding_box()["y"]
    assert legend is not None and legend["y"] >= top, (legend, top)        # beside the frame, not above the plot
    for control in (".ls-color-by", ".ls-embedding-layer"):
        box = panel.locator(control).bounding_box()
        assert not overlaps(legend, box), (control, legend, box)
    row.locator("input[type=checkbox]").click()
    page.locator(".bk-tab", has_text="Run & watch").click()
    assert not page.errors, page.errors


def test_stop_cancels_a_second_run(page):
    choose_preset(page, DEFAULT)
    t0 = click_run(page)
    wait_probe(page, lambda s: s.get("status") == "running" and s.get("metric_layers", 0) >= 1, 300,
               "the default preset's first metrics")
    record_timing("default_first_metrics_s", time.monotonic() - t0)
    # Stop as soon as the run measures (the README's picture comes from docs/screenshots.py, not from here)
    page.screenshot(path=str(ARTIFACTS / "04-default-running.png"), full_page=True)
    t_stop = time.monotonic()
    page.locator(".ls-stop button").click()
    wait_probe(page, lambda s: s.get("status") in ("stopping", "cancelled", "finished", "failed"), 60,
               "the server to take the Stop click")
    record_timing("stop_to_stopping_shown_s", time.monotonic() - t_stop)
    state = wait_probe(page, lambda s: s.get("status") in ("cancelled", "finished", "failed"), 120, "cancellation")
    record_timing("stop_to_cancelled_s", time.monotonic() - t_stop)
    assert state["status"] == "cancelled", state
    page.wait_for_timeout(800)
    page.screenshot(path=str(ARTIFACTS / "05-cancelled.png"), full_page=True)
    assert page.get_by_text("Run cancelled").count() >= 1


def test_export_downloads_a_notebook(page):
    page.locator(".bk-tab", has_text="Compare & export").click()
    page.wait_for_selector(".ls-runs-table .tabulator-row", timeout=30_000)
    page.locator(".ls-runs-table .tabulator-row").first.locator("input[type=checkbox]").click()
    export = page.locator(".ls-export button")
    page.wait_for_function("b => !b.disabled", arg=export.element_handle(), timeout=30_000)
    export.click()
    download_button = page.locator(".ls-download button")
    download_button.wait_for(state="visible", timeout=120_000)
    page.wait_for_timeout(1000)
    page.screenshot(path=str(ARTIFACTS / "06-compare-export.png"), full_page=True)
    with page.expect_download(timeout=60_000) as info:
        download_button.click()
    target = ARTIFACTS / "exported.ipynb"
    info.value.save_as(str(target))
    nb = json.loads(target.read_text())
    assert nb["cells"], "the exported notebook has no cells"
    assert nb.get("nbformat") == 4


def test_bad_model_name_shows_a_readable_message(page):
    page.locator(".bk-tab", has_text="Run & watch").click()
    choose_preset(page, TINY)
    page.get_by_text("Backbone & layers").click()
    field = page.locator(".ls-backbone input")
    # the preset's backbone has come back from the server: typing before it did, the name typed was overwritten by it
    # and the run started with the preset's backbone (a loaded CI box)
    page.wait_for_function("el => el.value.startsWith('mlp:')", arg=field.element_handle(), timeout=60_000)
    field.fill("resnet1800")
    field.press("Enter")
    page.wait_for_timeout(500)
    before = probe(page)
    button = page.locator(".ls-run button")
    page.wait_for_function("b => !b.disabled", arg=button.element_handle(), timeout=60_000)
    button.click()
    # the name is resolved before anything loads: no run starts, the page says why and what is close
    state = wait_probe(page, lambda s: "Cannot start" in (s.get("notice") or ""), 60, "the refusal")
    assert "unknown backbone 'resnet1800'" in state["notice"], state
    assert "closest: 'resnet18'" in state["notice"], state
    assert state["status"] not in ("starting", "queued", "running"), state
    assert state["run_id"] == before.get("run_id"), state
    page.get_by_text("Cannot start: unknown backbone").first.wait_for(timeout=30_000)   # a loaded CI box is slow
    page.screenshot(path=str(ARTIFACTS / "07-bad-model.png"), full_page=True)
    assert not page.errors, page.errors


def test_two_sessions_queue_on_the_device_and_do_not_mix(browser, server):
    pages = []
    for _ in range(2):
        context = browser.new_context(viewport={"width": 1600, "height": 2300})
        p = context.new_page()
        p.goto(server["url"], timeout=180_000)
        p.wait_for_selector(".ls-run button", timeout=180_000)
        pages.append(p)
    first, second = pages
    choose_preset(first, DEFAULT)
    click_run(first)
    wait_probe(first, lambda s: s.get("status") == "running", 120, "the first session's run")
    choose_preset(second, TINY)
    click_run(second)
    queued = wait_probe(second, lambda s: s.get("status") == "queued", 60, "the second session to queue")
    second.get_by_text("Queued: the").first.wait_for(timeout=10_000)
    second.screenshot(path=str(ARTIFACTS / "08-second-session-queued.png"), full_page=True)
    assert queued["metric_layers"] == 0
    first.locator(".ls-stop button").click()
    wait_probe(first, lambda s: s.get("status") == "cancelled", 120, "the first run to stop")
    done = wait_probe(second, lambda s: s.get("status") == "finished", 600, "the queued run to run and finish")
    a, b = probe(first), done
    assert a["run_id"] != b["run_id"]
    assert a["layers"] != b["layers"]                  # resnet18 vs the tiny MLP: plots are not mixed
    for p in pages:
        p.context.close()
