"""The quickstart notebook in a real JupyterLab, driven by Playwright in Debian's Chromium.

Starts ``jupyter lab`` on a free localhost port (random token, temporary run store,
settings and notebook copy), opens ``01_quickstart.ipynb``, runs all cells in FAST mode
and then presses Run in both renderings of the app: ``LayerScope()`` through Panel's
notebook comms and the live view of one run through ``pn.ipywidget``. Every request that
would leave localhost is aborted and fails the test (CI has no internet either), as do
JavaScript errors and Python errors in the kernel's output. Needs ``chromium``
(``apt-get install chromium``), never ``playwright install``; without it the test skips,
except on CI (``CI=true``). Screenshots go to ``test-artifacts/``.

It runs twice: with JupyterLab's ``commsOverSubshells`` off, through the same settings override ``make lab``
installs (``jupyter-config/``), and with it on (JupyterLab's default, set explicitly as a user would), where
comm messages reach the kernel on subshell threads (app/base/_doclock.py). With it off the ipywidget route's
view is rendered and checked but not run: its comm messages then take the main thread's path that the
LayerScope route's run already walks, and the thread hazards it guards exist only with subshells on.
"""
from __future__ import annotations

import atexit
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import urlopen

import nbformat
import pytest
from served import ARTIFACTS, ROOT, serve

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(1800)]  # JupyterLab on 2 busy cores

NOTEBOOK = "01_quickstart.ipynb"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
KERNELS_PLUGIN = "@jupyterlab/apputils-extension:kernels-settings"
OVERRIDE = ROOT / "jupyter-config" / "lab" / "settings" / "overrides.d" / "layerscope.json"
SUBSHELLS = {"subshells-off": "disabled", "subshells-on": "perCommTarget"}
"""The two ways the test runs, and the ``commsOverSubshells`` value JupyterLab must report for each."""


@pytest.fixture(scope="module")
def chromium(chromium) -> str:
    pytest.importorskip("jupyterlab")      # and Debian's chromium (conftest)
    return chromium


def lab_command(tmp: Path, work: Path, port: int, token: str, *, subshells: bool = False) -> tuple[list[str], dict]:
    """The `jupyter lab` command line and environment on 127.0.0.1:``port``, rooted at ``work``, with its
    settings, config and runtime under ``tmp`` (nothing of the user's Jupyter set-up is read); also used by
    docs/screenshots.py. ``subshells=False``: ``commsOverSubshells`` off by the override ``make lab`` installs,
    in application settings of its own; True: on, in the user's settings."""
    settings = tmp / "settings"
    app_settings = tmp / "app-settings"
    (app_settings / "overrides.d").mkdir(parents=True, exist_ok=True)
    user = {
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "notebook-extension/tracker": {"windowingMode": "none"},       # render every cell, even off screen
    }
    if subshells:
        user["apputils-extension/kernels-settings"] = {"commsOverSubshells": "perCommTarget"}
    else:
        shutil.copy(OVERRIDE, app_settings / "overrides.d" / OVERRIDE.name)
    for plugin, values in user.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    # the kernels' connection files, and on POSIX their channels as Unix sockets named after them, in a short
    # folder of their own: a socket's path is at most 107 bytes, and pytest's folders are long
    runtime = tempfile.mkdtemp(prefix="jupyter-runtime-")
    atexit.register(shutil.rmtree, runtime, ignore_errors=True)
    env = dict(os.environ, LAB_FAST="1", LAB_RUNS_DIR=str(tmp / "runs"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTER_RUNTIME_DIR=runtime,
               IPYTHONDIR=str(tmp / "ipython"), MPLBACKEND="Agg")
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
           "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           f"--LabApp.user_settings_dir={settings}", f"--LabApp.app_settings_dir={app_settings}",
           f"--LabApp.workspaces_dir={tmp / 'workspaces'}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")          # CI containers run as root
    if os.name == "posix":
        # Unix sockets, not TCP: over TCP the server picks five free ports that the kernel binds later, and a
        # kernel, server or Dask cluster another test worker starts meanwhile can take one (the kernel died at its
        # start; six kernels in one run). No KernelManager.ip: each kernel's sockets are then named after its
        # connection file. With one shared ip, two kernels started together (JupyterLab opening the notebook
        # twice and closing one) both found "kernel-1" to "kernel-5" free and shared them: the survivor got the
        # other's messages ("Invalid Signature") and never answered; its first cell waited 20 minutes.
        cmd += ["--KernelManager.transport=ipc"]
    return cmd, env


@pytest.fixture(scope="module", params=list(SUBSHELLS))
def lab_server(request, chromium, free_port, tmp_path_factory):
    """`jupyter lab` on 127.0.0.1 with a copy of the quickstart, ``commsOverSubshells`` off or on (checked through
    JupyterLab's settings API); nothing of the user's Jupyter set-up is read."""
    tmp = tmp_path_factory.mktemp("jupyterlab")
    work = tmp / "notebooks"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, work / NOTEBOOK)    # JupyterLab autosaves: never the repo's copy
    port, token = free_port(), secrets.token_hex(24)
    cmd, env = lab_command(tmp, work, port, token, subshells=request.param == "subshells-on")
    with serve(cmd, f"http://127.0.0.1:{port}/api/status?token={token}", log_path=tmp / "jupyterlab.log",
               artifact=f"jupyterlab-{request.param}.log", what="jupyter lab", timeout=240, env=env, cwd=work,
               tracebacks_from=()):
        with urlopen(f"http://127.0.0.1:{port}/lab/api/settings/{KERNELS_PLUGIN}?token={token}", timeout=60) as r:
            plugin = json.load(r)       # the user's settings, over the schema whose defaults the overrides set
        value = plugin["settings"].get("commsOverSubshells",
                                       plugin["schema"]["properties"]["commsOverSubshells"]["default"])
        assert value == SUBSHELLS[request.param], plugin["settings"]
        yield {"url": f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}", "runs": tmp / "runs",
               "subshells": request.param}


# ------------------------------------------------------------------ helpers
# Per Bokeh document (one per Panel output; the ipywidget has its own), each plot's title and
# how many finite numbers its glyph sources hold.
_PLOTS = """
() => {
  const docs = new Set(window.Bokeh ? Bokeh.documents : []);
  for (const view of Object.values((window.Bokeh && Bokeh.index) || {})) {
    if (view && view.model && view.model.document) docs.add(view.model.document);
  }
  const out = [];
  let i = 0;
  for (const doc of docs) {
    for (const m of doc._all_models.values()) {
      // a model still being built throws on its unset properties: skip it until the next poll
      let title, renderers;
      let text;
      try { title = m.title; renderers = m.renderers; text = title ? title.text : undefined; } catch (e) { continue; }
      if (!renderers || !title || text === undefined) continue;
      let points = 0;
      for (const r of renderers) {
        let source;
        try { source = r.data_source; } catch (e) { continue; }
        if (!source || !source.data) continue;
        const d = source.data;
        const cols = d instanceof Map ? [...d.values()] : Object.values(d);
        let best = 0;
        for (const col of cols) {
          if (!col || typeof col.length !== "number") continue;
          best = Math.max(best, Array.from(col).filter((v) => typeof v === "number" && isFinite(v)).length);
        }
        points += best;
      }
      out.push({doc: i, title: String(text), points});
    }
    i += 1;
  }
  return out;
}
"""

# A plot kind is "filled" when a plot whose title contains its marker shows data.
CURVES = {"curves": "NMI (unseen)", "knn": "kNN accuracy (unseen)", "collapse": "NC1 (unseen & seen)"}
# the embedding explorer titles its plot "METHOD · layer · epoch E"
EVERY_PLOT = {**CURVES, "heatmap": "layer × epoch", "projection": ("UMAP · ", "PCA · ")}


def filled_documents(page, kinds: dict) -> list[dict]:
    """Documents in which every plot kind of ``kinds`` (a title marker, or a tuple of alternatives) has data,
    with their per-kind point counts."""
    by_doc: dict[int, dict[str, int]] = {}
    for plot in page.evaluate(_PLOTS):
        for kind, markers in kinds.items():
            if any(m in plot["title"] for m in ((markers,) if isinstance(markers, str) else markers)):
                counts = by_doc.setdefault(plot["doc"], {})
                counts[kind] = max(counts.get(kind, 0), plot["points"])
    return [c for c in by_doc.values() if all(c.get(k, 0) > 0 for k in kinds)]


def probes(page) -> list[dict]:
    out = []
    for i in range(page.locator(".ls-probe").count()):
        raw = page.locator(".ls-probe").nth(i).get_attribute("data-probe")
        out.append(json.loads(raw) if raw else {})
    return out


def wait_for(page, check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        page.wait_for_timeout(500)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}; "
                         f"probes: {probes(page)}; plots: {page.evaluate(_PLOTS)}")


def cell_states(page) -> list[str]:
    """The execution prompt of every code cell ("[*]:" while queued or running)."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt'))
                                   .map(e => e.innerText.trim())""")


def kernel_errors(page) -> list[str]:
    """Tracebacks and error text in the notebook's outputs (error outputs and stderr)."""
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        '.jp-RenderedText[data-mime-type="application/vnd.jupyter.error"],'
        + '.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]'))
        .map(e => e.innerText).filter(t => /Traceback|Error|Exception/.test(t)).map(t => t.slice(0, 2000))""")


def press_run(page, index: int, timeout: float, what: str) -> dict:
    """Press the ``index``-th Run button of the notebook and wait for that view's run to finish."""
    button = page.locator(".ls-run button").nth(index)
    button.scroll_into_view_if_needed()
    page.wait_for_function("b => !b.disabled", arg=button.element_handle(), timeout=60_000)
    before = probes(page)[index]
    for press in range(2):
        for attempt in range(3):
            try:
                button.click(timeout=10_000)
                break
            except Exception:
                if attempt == 2 or not accept_dialog(page):     # only a dialog in the way earns a retry
                    raise
        # Seen once under a load of 7: the click reached the page but no event reached the kernel (the view stayed
        # idle for 600 s). A user would press again; so does the test, once, and says so in the log.
        moved = lambda s: s.get("status") != before.get("status") or s.get("run_id") != before.get("run_id") \
            or s.get("notice") != before.get("notice")
        try:
            wait_for(page, lambda: moved(probes(page)[index]), 90, "the view to take the press")
            break
        except AssertionError:
            if press:
                raise
            print(f"press_run: the press of Run button {index} did not reach the kernel in 90 s; pressing again")
    return wait_for(page, lambda: (lambda s: s if s.get("status") in ("finished", "failed", "cancelled")
                                   and s.get("run_id") != before.get("run_id") else None)(probes(page)[index]),
                    timeout, what)


DIALOGS: list[str] = []      # the text of every dialog the test closed, for failure messages


def accept_dialog(page) -> bool:
    """Close a dialog if one is open: accept it ("Select Kernel" on a fresh set-up), or press its
    last button when it has no accept button. Its text goes to ``DIALOGS``."""
    dialog = page.locator(".jp-Dialog")
    if not dialog.count():
        return False
    try:
        DIALOGS.append(dialog.first.inner_text(timeout=2_000)[:500])
        buttons = dialog.first.locator(".jp-mod-accept")
        if not buttons.count():
            buttons = dialog.first.locator("button")
        if buttons.count():
            buttons.last.click(timeout=5_000)
        else:
            page.keyboard.press("Escape")
    except Exception:           # the dialog closed or re-rendered under us: look again next time
        page.keyboard.press("Escape")
    page.wait_for_timeout(500)
    return True


def kernel_ready(page) -> bool:
    accept_dialog(page)
    return page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").count() > 0


def notebook_ready(page, code_cells: int) -> bool:
    """The kernel is idle and every code cell is on the page. A Run All pressed while the notebook was
    still loading was lost in 1 of 3 tries here (cells left at "[ ]:", the kernel idle): 30 s gone."""
    return kernel_ready(page) and len(cell_states(page)) == code_cells


def run_all_cells(page) -> None:
    """Run > Run All Cells, until the first code cell is queued or has run. A dialog that opens
    late (kernel selection, a reconnect notice) can eat the click: close it and try again."""
    for _ in range(8):
        accept_dialog(page)
        try:
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click(timeout=5_000)
            page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click(timeout=5_000)
            # JupyterLab marks the cells queued ("[*]:") as soon as the menu is clicked, kernel busy or not
            wait_for(page, lambda: (lambda s: s and s[0] != "[ ]:")(cell_states(page)), 10, "cells to start")
            return
        except Exception:       # Playwright's TimeoutError or ours
            page.keyboard.press("Escape")
    raise AssertionError(f"Run All Cells did not start the notebook: {cell_states(page)}; dialogs: {DIALOGS}")


def wait_for_all_cells(page, timeout: float) -> None:
    """Wait until every code cell has run. On a loaded machine JupyterLab can drop the queue of a Run
    All whose kernel connection was replaced while it ran (cells left at "[ ]:", none queued or
    running, the kernel idle): then, once the kernel is idle, run all again, at most three times."""
    deadline = time.monotonic() + timeout
    idle_since, reruns = None, 0
    while time.monotonic() < deadline:
        states = cell_states(page)
        if states and all(x.startswith("[") and x[1:-2].isdigit() for x in states):
            return
        if states and "[*]:" not in states and "[ ]:" in states and kernel_ready(page):
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 20 and reruns < 3:
                reruns += 1
                idle_since = None
                run_all_cells(page)
        else:
            idle_since = None
        page.wait_for_timeout(500)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for every cell to run; last: {cell_states(page)!r}; "
                         f"probes: {probes(page)}")


def scroll_to_top(page, selector: str, index: int) -> None:
    """Scroll the notebook so that the ``index``-th match of ``selector`` is at the top (for a screenshot)."""
    for _ in range(5):              # Panel may re-render the element while we scroll
        try:
            page.locator(selector).nth(index).evaluate("e => e.scrollIntoView({block: 'start'})", timeout=10_000)
            break
        except Exception:
            page.wait_for_timeout(500)
    page.wait_for_timeout(1500)


# ------------------------------------------------------------------ the test
def test_quickstart_in_jupyterlab_offline(chromium, lab_server):
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    external, page_errors, console_errors = [], [], []

    def only_localhost(route):
        url = route.request.url
        if url.startswith(("data:", "blob:")) or urlparse(url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            external.append(url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1600, "height": 1150})
        context.route("**/*", only_localhost)
        page = context.new_page()
        page.on("pageerror", lambda exc: page_errors.append(str(exc)))
        page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
        try:
            page.goto(lab_server["url"], timeout=180_000)
            page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=180_000)
            cells = nbformat.read(ROOT / "notebooks" / NOTEBOOK, as_version=4).cells
            code_cells = sum(c.cell_type == "code" for c in cells)
            wait_for(page, lambda: notebook_ready(page, code_cells), 180, "the kernel to start and every cell to show")
            page.keyboard.press("Control+b")                      # hide the file browser: room for the app
            run_all_cells(page)
            page.screenshot(path=str(ARTIFACTS / "jupyterlab-00-running.png"))
            wait_for_all_cells(page, 1200)
            assert not kernel_errors(page), kernel_errors(page)

            # both renderings are there: the widgets of LayerScope and of the ipywidget live view
            page.wait_for_selector(".ls-run button", timeout=120_000)
            assert page.locator(".ls-run button").count() == 2
            assert page.locator(".ls-preset select").count() == 1
            assert page.locator(".jp-OutputArea-output .widget-progress, .jp-OutputArea-output progress").count() \
                >= 1, "lab.run's tqdm.auto progress bar did not render as an ipywidget"
            assert page.locator("canvas").count() >= 1         # the hvplot scatter of step 6
            # app.extension() sent the script that answers BokehJS's CSS lookup at once (app.base._css_visuals)
            assert page.evaluate("window.__layerscopeCssVisuals") is True

            # route 1: LayerScope through Panel's notebook comms
            state = press_run(page, 0, 600, "the LayerScope run to finish")
            assert state["status"] == "finished", state
            scope_kinds = {**EVERY_PLOT, "cdnv": "CDNV (unseen & seen)"}
            wait_for(page, lambda: filled_documents(page, scope_kinds), 60,
                     "LayerScope's curves, collapse curves, heatmap and projection to show points")
            scroll_to_top(page, ".ls-run button", 0)
            page.screenshot(path=str(ARTIFACTS / "jupyterlab-01-layerscope.png"))

            # route 2: the live view of one lab.run through pn.ipywidget (jupyter_bokeh); run with subshells on only
            # (see the module's docstring)
            routes = 2 if lab_server["subshells"] == "subshells-on" else 1
            if routes == 2:
                state = press_run(page, 1, 600, "the ipywidget live view's run to finish")
                assert state["status"] == "finished", state
                filled = wait_for(page, lambda: (lambda f: f if len(f) >= 2 else None)(
                    filled_documents(page, EVERY_PLOT)), 60, "the ipywidget's plots to show points too")
                assert len(filled) >= 2, filled
                scroll_to_top(page, ".ls-run button", 1)
                page.screenshot(path=str(ARTIFACTS / "jupyterlab-02-ipywidget.png"))
            # in each route the layout is at the verdict's best layer, and the layer player's header says so
            # (Panel's own value label kept the player's first layer after a move from Python)
            bests = [page.locator(".ls-best-layer").nth(i).inner_text().strip() for i in range(routes)]
            # the probe is another model than the header and may arrive a moment later: it gets the header's 20 s.
            # The message names each view's follow_best: False there means something picked a layer by hand
            def shown():
                return [{k: state.get(k) for k in ("run_id", "layout_layer", "best_layer", "follow_best", "picked")}
                        for state in probes(page)][:routes]
            try:
                wait_for(page, lambda: [s["layout_layer"] for s in shown()] == bests, 20, "the layouts at best")
            except AssertionError:
                raise AssertionError(f"layouts {shown()} vs the headers' best layers {bests}") from None
            for i, best in enumerate(bests):
                expect(page.locator(".ls-layer-player .pn-player-title").nth(i)).to_have_text(
                    f"Layer: {best}", timeout=20_000)
            assert any(lab_server["runs"].iterdir()), "no run was stored"
            assert not kernel_errors(page), kernel_errors(page)
        finally:
            page.screenshot(path=str(ARTIFACTS / "jupyterlab-99-last.png"))
            # shown with a failure that happens before the asserts below (pytest prints captured output)
            print("browser console errors:", console_errors[:20], "page errors:", page_errors[:20])
            context.close()
            browser.close()
    assert not external, f"requests left localhost (a CDN?): {sorted(set(external))[:10]}"
    assert not page_errors, page_errors
    assert not console_errors, console_errors[:10]
