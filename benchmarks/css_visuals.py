"""How much painting costs Chromium with BokehJS's CSS lookup per visual property, and with it answered at once.

One browser, one static page of 24 line plots (6 lines and a legend each, 200 text panes beside them, like
the app's pages), 20 of its texts and its data changed 10 times (the text dirties the page's styles, as the
app's updates do); Chromium's task time (CDP ``Performance.getMetrics``, ``TaskDuration``) over those
repaints, first as BokehJS paints them, then after the page ran ``app.base._css_visuals.SKIP_CSS_VISUALS``.
Same page, same process: the ratio is what the script saves.

Run: ``python benchmarks/css_visuals.py [--save]`` (needs Debian's chromium); ``--save`` writes
benchmarks/results/css_visuals.txt.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bokeh.embed import file_html  # noqa: E402
from bokeh.layouts import column, gridplot  # noqa: E402
from bokeh.models import ColumnDataSource, Div  # noqa: E402
from bokeh.plotting import figure  # noqa: E402
from bokeh.resources import INLINE  # noqa: E402

from app.base._css_visuals import SKIP_CSS_VISUALS  # noqa: E402
from benchmarks._results import add_save_option, recording  # noqa: E402

REPAINTS = 10


def page() -> str:
    plots = []
    for i in range(24):
        fig = figure(width=300, height=220, title=f"plot {i}", output_backend="canvas")
        for j in range(6):
            source = ColumnDataSource({"x": list(range(20)), "y": [((k * (j + 1)) % 7) for k in range(20)]},
                                      name=f"s{i}-{j}")
            fig.line("x", "y", source=source, legend_label=f"line {j}", line_width=2)
        plots.append(fig)
    texts = [Div(text=f"<p class='t'>text pane {i}</p>") for i in range(200)]
    return file_html(column(gridplot(plots, ncols=4), *texts), INLINE, "css visuals")


REPAINT_JS = """async (n) => {
  const doc = Bokeh.documents[0];
  const models = [...doc._all_models.values()];
  const sources = models.filter(m => m.name && m.name.startsWith("s"));
  const texts = models.filter(m => m.type == "Div" || (m.constructor && m.constructor.__name__ == "Div"));
  for (let r = 0; r < n; r++) {
    // text changes as the app's status lines change: they leave the page's styles to recompute
    for (const [i, t] of texts.slice(0, 20).entries()) t.text = `<p class='t'>text pane ${i}, repaint ${r}</p>`;
    for (const s of sources) s.data = {x: s.data.x, y: s.data.y.map(v => (v + 1) % 7)};
    await new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)));
  }
  await new Promise(done => setTimeout(done, 300));
}"""


def task_seconds(cdp) -> float:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}["TaskDuration"]


def measure() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "page.html"
        html.write_text(page())
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            tab = browser.new_page(viewport={"width": 1600, "height": 1200})
            tab.goto(html.as_uri())
            tab.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0")
            tab.wait_for_timeout(1500)
            cdp = tab.context.new_cdp_session(tab)
            cdp.send("Performance.enable")
            seconds = {}
            for mode in ("BokehJS as released", "lookup answered at once"):
                if mode != "BokehJS as released":
                    tab.evaluate(SKIP_CSS_VISUALS)
                    assert tab.evaluate("window.__layerscopeCssVisuals") is True
                tab.evaluate(REPAINT_JS, 3)                      # warm up this mode
                before = task_seconds(cdp)
                tab.evaluate(REPAINT_JS, REPAINTS)
                seconds[mode] = task_seconds(cdp) - before
                print(f"{mode:26s} {seconds[mode]:6.2f} s of Chromium task time for {REPAINTS} repaints")
            browser.close()
    base, skip = seconds.values()
    print(f"ratio {skip / base:.2f} (24 plots x 6 lines, 200 text panes; one browser, one page)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv):
        measure()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
