"""The state gallery: every view of the app for a run in every state, one screenshot each.

Run from the repository root with the project's Python::

    .venv/bin/python docs/states.py            # -> test-artifacts/states/<state>-<view>.png (about a minute)

A fresh store gets one run of each state (:mod:`tests.fixtures.gallery`: the real engine, ``lab.Monitor`` and the
study runner on tiny data, one thread) while ``panel serve app tests/browser/layerscope_page.py`` starts on it.
One page (Debian's Chromium through Playwright, never ``playwright install``) then walks the runs one after the
other, without reloading:

- ``<state>-run-watch``: the run opened from Compare ("Open in Run & watch"): status and verdict, the curves, the
  heatmap, the explorer, training, utilization and CKA, and the Neural collapse card (unfolded) with its simplex;
- ``<state>-compare``: Compare & export with the run ticked together with the next run of the walk: the table,
  the overlay and the CKA of the pair, the run's layouts and per-image answers (its Neural collapse card stays
  folded: Run & watch shows the same card unfolded);
- ``study-failed-cell-studies``: the Studies tab on the study whose third cell failed;
- ``<state>-jupyterlab-run-watch`` / ``-jupyterlab-compare``: the JupyterLab component, ``LayerScope(store=...)``
  laid out as a notebook cell shows it (its ``__panel__``, 1200 px wide) and served as a page
  (``tests/browser/layerscope_page.py``), for :data:`COMPONENT_STATES`; a real JupyterLab costs a minute more
  (``tests/browser/test_jupyterlab.py`` runs one).

It prints, per view, the controls or plots that overlap and the plots drawn with nothing in them (read from the
page by ``docs/_page_facts.js``). ``tests/browser/test_states_browser.py`` walks the same with :class:`Walker` and
checks each view. Nothing leaves localhost.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "tests" / "browser"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from served import ARTIFACTS, probe, serve, with_repo_on_path  # noqa: E402
from tests.fixtures.gallery import RUN_STATES, STUDY_STATE, filled_store  # noqa: E402

OUT = ARTIFACTS / "states"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDTH, HEIGHT = 1600, 4200
COMPONENT_WIDTH = 1200
WALK = ("finished", "finished-3-seeds", "module-taps", "no-head", "embeddings-off", "monitored-epochs",
        "monitored-steps", "running", "interrupted", "failed-diverged", "failed-early", "cancelled-early")
"""The runs in the order walked: each is compared with the next (the last with the first)."""
assert sorted(WALK) == sorted(RUN_STATES)
COMPONENT_STATES = ("finished", "monitored-steps")
"""The states walked in the JupyterLab component too: a run with every neural-collapse panel, and a plain loop
counted in steps without a seen split (the component lays the same views out narrower)."""
STATUS = {"running": "running", "interrupted": "interrupted", "failed-diverged": "failed", "failed-early": "failed",
          "cancelled-early": "cancelled"}
"""The live view's status for each state (default "finished")."""
FACTS_JS = (Path(__file__).with_name("_page_facts.js")).read_text()

# The time of the page's last change (any node, attribute or text, in shadow roots too): a view has settled once
# nothing changed for a while.
_WATCH_CHANGES = """
window.__lastChange = performance.now();
(() => {
  const mark = () => { window.__lastChange = performance.now(); };
  const watch = (root) => new MutationObserver(mark).observe(root,
    {subtree: true, childList: true, attributes: true, characterData: true});
  const attach = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (init) { const root = attach.call(this, init); watch(root); return root; };
  watch(document);
})();
"""
# The template's busy spinner turns (Panel: a callback of the page is running on the server).
_BUSY = """
() => { for (const doc of (window.Bokeh ? Bokeh.documents : [])) for (const m of doc._all_models.values()) {
          const c = m.css_classes; if (Array.isArray(c) && c.includes("loader") && c.includes("spin")) return true; }
        return false; }
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Gallery:
    app_url: str
    component_url: str
    ids: dict            # state -> run id (the study's: its spec's path)


@contextlib.contextmanager
def gallery(tmp: Path, port: int, wanted=None):
    """Serve the app and the component page on 127.0.0.1:``port`` and a fresh store in ``tmp`` filled with every
    state (``wanted``: those only), filled while the server starts and builds a first page; yield a
    :class:`Gallery`. The server's log goes to ``test-artifacts/server-states.log``; a traceback from app/ or lab/
    in it fails on exit."""
    from lab.store import RunStore

    runs, studies = tmp / "runs", tmp / "studies"
    runs.mkdir()
    studies.mkdir()
    env = with_repo_on_path({"LAB_RUNS_DIR": str(runs), "LAB_STUDIES_DIR": str(studies)})
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "panel", "serve", "app", "tests/browser/layerscope_page.py", "--address",
           "127.0.0.1", "--port", str(port), "--allow-websocket-origin", f"127.0.0.1:{port}"]
    with serve(cmd, base + "/app", log_path=tmp / "server.log", artifact="server-states.log", what="panel serve",
               timeout=300, env=env, wait=False) as server:
        up: list[BaseException] = []
        warm = threading.Thread(target=lambda: _catch(server.wait_up, up), daemon=True)
        warm.start()                     # its first page imports the app's libraries while the store fills
        with filled_store(RunStore(runs), studies, wanted) as ids:
            warm.join()
            if up:
                raise up[0]
            yield Gallery(base + "/app", base + "/layerscope_page", ids)


def _catch(fn, errors: list) -> None:
    try:
        fn()
    except BaseException as exc:          # noqa: BLE001 - handed to the main thread
        errors.append(exc)


def new_page(browser, url: str, width: int):
    """A page at ``url`` (``width`` x :data:`HEIGHT`), ready once its Run button is; its page errors and console
    errors gather in ``page.errors``."""
    context = browser.new_context(viewport={"width": width, "height": HEIGHT})
    context.add_init_script(_WATCH_CHANGES)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    # console errors too, except resources the page asks of the internet (web fonts): nothing leaves localhost
    page.on("console", lambda msg: page.errors.append(f"console: {msg.text}")
            if msg.type == "error" and not msg.text.startswith("Failed to load resource") else None)
    page.goto(url, timeout=240_000)
    page.wait_for_selector(".ls-run button", timeout=240_000)
    return page


def facts(page) -> dict:
    """What the page shows now (``docs/_page_facts.js``): boxes, overlaps, plots and visible text; and
    ``doc_models``, the models of the session's document in the server (the live view's probe; None where the
    Run & watch tab, and so the probe, is not on the page)."""
    shown = page.locator(".ls-probe").count() > 0
    return {**page.evaluate(FACTS_JS), "doc_models": probe(page).get("doc_models") if shown else None}


class Walker:
    """Walks one page through the gallery's states and views, shooting each view to ``out/<state>-<view>.png``.

    ``on_view(state, view, seen, errors)``: called on every view once it has settled and been shot, with what the
    page shows (:func:`facts`) and the page errors since the previous view (the test's checks; the script prints
    what it finds)."""

    def __init__(self, page, ids: dict, out: Path, on_view=None, suffix: str = ""):
        self.page, self.ids, self.out, self.suffix = page, ids, out, suffix
        self.on_view = on_view or (lambda *args: None)
        self.walked: list[tuple[str, str]] = []
        self.seconds: dict[str, float] = {}     # "<state>-<view>": seconds from the previous view to its shot
        self._last = time.monotonic()
        self._errors_seen = 0
        self._unfolded: set[str] = set()

    # -- waiting -------------------------------------------------------------------------------------------------
    def settle(self, quiet_ms: int = 300, timeout: float = 120) -> None:
        """Wait until no callback of the page runs on the server and nothing in the page changed for ``quiet_ms``."""
        page = self.page
        page.wait_for_function(f"() => !({_BUSY})() && performance.now() - window.__lastChange > {quiet_ms}",
                               timeout=timeout * 1000, polling=100)

    def _until(self, check, what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
            self.page.wait_for_timeout(100)

    # -- moving ---------------------------------------------------------------------------------------------------
    def tab(self, name: str) -> None:
        self.page.locator(".bk-tab", has_text=name).click()

    def _row(self, run_id: str, timeout: float = 120):
        """The runs table's row of ``run_id``, turning its pages as needed (they turn in the browser); the table may
        still be filling when the page opens."""
        table = self.page.locator(".ls-runs-table")
        deadline = time.monotonic() + timeout
        while True:
            row = table.locator(".tabulator-row", has_text=run_id)
            if row.count():
                return row.first
            for step in ("next", "first"):
                button = table.locator(f".tabulator-page[data-page={step}]")
                if button.count() and button.is_enabled():
                    button.click()
                    break
            else:
                if time.monotonic() > deadline:
                    raise AssertionError(f"run {run_id} is not in the runs table")
                self.page.wait_for_timeout(200)

    def _layout_options(self) -> str:
        return " ".join(self.page.locator(".ls-layout-run select option").all_inner_texts())

    def tick(self, state: str, on: bool = True) -> None:
        """Tick (or untick) the run of ``state`` in Compare's table; wait until the page shows the new selection."""
        run_id = self.ids[state]
        self._row(run_id).locator("input[type=checkbox]").click()
        self._until(lambda: (run_id in self._layout_options()) == on, f"Compare to take the tick of {state}")
        self.settle()

    def open_run(self, state: str) -> None:
        """Open the run of ``state`` (the one ticked) in Run & watch; wait until all of it is drawn."""
        run_id, status = self.ids[state], STATUS.get(state, "finished")
        self.page.locator(".ls-open-run button").click()
        self._until(lambda: (lambda s: s.get("run_id") == run_id and s.get("status") == status
                             and s.get("redraws") == 0)(probe(self.page)), f"Run & watch to draw {state}")
        self.settle()

    def unfold(self, tab: str) -> None:
        """Open the visible Neural collapse card (once per tab: it stays open from run to run)."""
        if tab not in self._unfolded:
            self.page.locator(".ls-collapse:visible .card-header").first.click()
            self._unfolded.add(tab)
            self.settle()

    def shoot(self, state: str, view: str) -> None:
        """Save the view to ``out/<state>-<view><suffix>.png`` (taller than the window: the window grows first)
        and hand it to ``on_view``."""
        page = self.page
        page.mouse.move(0, 0)                   # no hover tooltip in the picture
        seen = facts(page)
        bottom = max([b["y"] + b["h"] for b in seen["boxes"]], default=0)
        size = page.viewport_size
        if bottom > size["height"] - 20:
            page.set_viewport_size({"width": size["width"], "height": int(bottom) + 200})
            self.settle()
            seen = facts(page)
        name = f"{state}-{view}{self.suffix}"
        page.screenshot(path=str(self.out / f"{name}.png"))
        errors = page.errors[self._errors_seen:]
        self._errors_seen = len(page.errors)
        self.walked.append((state, view + self.suffix))
        self.seconds[name], self._last = round(time.monotonic() - self._last, 1), time.monotonic()
        self.on_view(state, view + self.suffix, seen, errors)

    # -- the walks ------------------------------------------------------------------------------------------------
    def walk_runs(self, states=WALK) -> None:
        """Each run of ``states`` in Run & watch, then in Compare ticked with the next (the last with the first; one
        run alone)."""
        self.tab("Compare & export")
        self.tick(states[0])
        for i, state in enumerate(states):
            self.open_run(state)
            self.unfold("watch")
            self.shoot(state, "run-watch")
            self.tab("Compare & export")
            if len(states) > 1:                 # the pair: its CKA, both in the overlay
                self.tick(states[(i + 1) % len(states)], True)
            self.settle()
            self.shoot(state, "compare")
            if len(states) > 1:
                self.tick(state, False)

    def walk_study(self) -> None:
        """The Studies tab on the gallery's study (its third cell failed)."""
        self.tab("Studies")
        self.page.locator(".ls-study-spec select").select_option(Path(self.ids[STUDY_STATE]).name)
        self._until(lambda: self.page.locator(".ls-study-table .tabulator-row").count() == 3, "the cells table")
        self.settle()
        self.shoot(STUDY_STATE, "studies")


def walk_all(browser, g: Gallery, out: Path, on_view=None, walk=WALK, component_states=COMPONENT_STATES,
             study: bool = True) -> list[tuple[str, str]]:
    """The gallery's states and views: the runs of ``walk`` in the served app, the study (``study``), then the runs
    of ``component_states`` on the component page; the (state, view) walked. The seconds each view took (from the
    previous view) go to ``out/seconds.json``."""
    out.mkdir(parents=True, exist_ok=True)
    app_page = new_page(browser, g.app_url, WIDTH)
    walker = Walker(app_page, g.ids, out, on_view)
    walker.walk_runs(walk)
    if study:
        walker.walk_study()
    component = Walker(new_page(browser, g.component_url, COMPONENT_WIDTH), g.ids, out, on_view,
                       suffix="-jupyterlab")
    # the component's own table: the walk opens and compares the states chosen, in the same way
    component.walk_runs(component_states)
    (out / "seconds.json").write_text(json.dumps({**walker.seconds, **component.seconds}, indent=1))
    return walker.walked + component.walked


def report(state: str, view: str, seen: dict, errors: list) -> None:
    """What the script prints for one view: page errors, overlapping boxes, plots drawn with nothing in them."""
    problems = [f"page error: {e}" for e in errors]
    problems += [f"overlap: {a['kind']} {a['name']!r} and {b['kind']} {b['name']!r}" for a, b in seen["overlaps"]]
    problems += [f"empty plot: {p['title']!r}" for p in seen["plots"] if not p["drawn"]]
    problems += [f"blank plot: {p['title']!r} in {p['where'][:2]}" for p in seen["plots"] if not p["ink"]]
    print(f"{state}-{view}: " + ("ok" if not problems else "\n  " + "\n  ".join(problems)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the screenshots (default: %(default)s)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="layerscope-states-") as tmp, sync_playwright() as p, \
            gallery(Path(tmp), free_port()) as g:
        print(f"store filled and server up after {time.monotonic() - t0:.0f} s", flush=True)
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        walked = walk_all(browser, g, args.out, report)
        browser.close()
    print(f"{len(walked)} views in {time.monotonic() - t0:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
