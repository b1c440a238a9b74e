"""Does the page grow with every run opened? Twelve openings of six stored runs in one browser session.

Six tiny stored runs (the engine on digits, an MLP, one epoch) go into a fresh store; ``panel serve app`` serves
it on 127.0.0.1 and one page (Debian's Chromium through Playwright) opens them in Run & watch one after another
from Compare & export ("Open in Run & watch"), then the same six again, the Neural collapse card unfolded from the
first opening on. After each opening (every plot drawn, the page quiet) it prints:

- ``server models``: ``len(doc.models)`` of the session's Bokeh document in the server (the live view's probe):
  what every message the server sends walks, and what the page must keep the size of what it shows;
- ``browser models``: ``Bokeh.documents[0].all_models.size`` in the page;
- ``RSS``: the server process's resident memory (psutil), MiB;
- ``seconds``: from the click on Open to the run drawn and the page quiet.

``tests/browser/test_page_growth_browser.py`` drives the same page (:func:`open_twelve`) and bounds the growth.

Run: ``.venv/bin/python benchmarks/page_growth.py [--save]`` (about two minutes on 2 cores).
``--deep-mlp``: instead, open one stored 48-layer MLP run (49 layer taps) and screenshot its Run & watch page to
``benchmarks/results/deep_mlp_49_layers.png`` (its layer axes print the names that fit, every name on hover).
"""
from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs"))
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from benchmarks._results import add_save_option, recording  # noqa: E402

N_RUNS = 6
"""Stored runs opened, each twice."""
WIDTH, HEIGHT = 1600, 2400


@dataclass
class Opening:
    run_id: str
    server_models: int | None
    browser_models: int
    rss_mib: float
    seconds: float


@dataclass
class Growth:
    openings: list[Opening] = field(default_factory=list)
    browser_quiet: int | None = None        # the browser's models once the page was quiet for BokehJS's 30 s
    quiet_patches: int | None = None        # patches the page received while it was left alone

    def added(self, n: int) -> int:
        """The models the page received from the ``n``-th opening (1-based) to the next: one opening's work."""
        return self.openings[n].browser_models - self.openings[n - 1].browser_models

    def lines(self) -> list[str]:
        out = [f"{'opening':>7}  {'run':<6} {'server models':>13} {'browser models':>14} {'RSS MiB':>8} "
               f"{'seconds':>7}"]
        for i, o in enumerate(self.openings, 1):
            out.append(f"{i:>7}  {o.run_id[-4:]:<6} {o.server_models!s:>13} {o.browser_models:>14} "
                       f"{o.rss_mib:>8.1f} {o.seconds:>7.2f}")
        return out


def make_runs(store, n: int = N_RUNS) -> list[str]:
    """``n`` finished tiny engine runs (1 epoch, a 2-layer MLP on digits; about a second each) in ``store``."""
    import torch

    from lab.config import RunConfig
    from lab.runs import run
    from tests.fixtures.configs import TINY

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ids = []
        for i in range(n):
            events = list(run(RunConfig(**{**TINY, "epochs": 1, "name": f"growth {i}"}), store=store))
            assert events[-1].kind == "run_finished", events[-1]
            ids.append(events[-1].run_id)
        return ids
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def served_app(runs: Path, port: int, log_dir: Path, artifact: str = "server-page-growth.log", *,
               env: dict | None = None):
    """``panel serve app`` on ``runs`` at 127.0.0.1:``port`` (``env``: more environment); yields (url, server
    process)."""
    from served import serve, with_repo_on_path

    url = f"http://127.0.0.1:{port}/app"
    cmd = [sys.executable, "-m", "panel", "serve", "app", "--address", "127.0.0.1", "--port", str(port),
           "--allow-websocket-origin", f"127.0.0.1:{port}"]
    env = with_repo_on_path({"LAB_RUNS_DIR": str(runs), **(env or {})})
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    with serve(cmd, url, log_path=log_dir / "server.log", artifact=artifact, what="panel serve", timeout=300,
               env=env) as proc:
        yield url, proc


QUIET_MS = 11_000
"""How long the page must go without a patch before the quiet count: longer than two periods of the page's one
periodic callback (the watch control's 5 s poll of the store, ``app.base.quiet_poll``)."""


def open_twelve(browser, url: str, pid: int, ids: list[str], *, quiet: str | None = None) -> Growth:
    """Open each run of ``ids`` in Run & watch from Compare, then each again, in one page; what each left.

    ``quiet``: then leave the page alone and count the browser's models again. BokehJS drops the models no root
    references only in a recompute it puts off until 30 s after the last patch. ``"wait"`` waits those 30 s
    out (32 s); ``"clock"`` waits until no patch has come for :data:`QUIET_MS` (so no periodic callback patches
    the page) and then runs the recompute BokehJS's timer would run (``app.base._upstream_panel``)."""
    import psutil

    import states as gallery
    from app.base._upstream_panel import BOKEHJS_PATCH_CLOCK, BOKEHJS_RECOMPUTE_NOW
    from served import probe

    server = psutil.Process(pid)
    page = gallery.new_page(browser, url, WIDTH)
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.evaluate(BOKEHJS_PATCH_CLOCK)
    walker = gallery.Walker(page, {i: i for i in ids}, Path(tempfile.gettempdir()))
    growth = Growth()
    walker.tab("Compare & export")
    order = [*ids, *ids]
    for n, run_id in enumerate(order):
        walker.tick(run_id)
        started = time.monotonic()
        walker.open_run(run_id)
        if n == 0:
            walker.unfold("watch")          # the Neural collapse card stays open from run to run
        seconds = time.monotonic() - started
        state = probe(page)
        growth.openings.append(Opening(run_id, state.get("doc_models"),
                                       page.evaluate("() => Bokeh.documents[0].all_models.size"),
                                       server.memory_info().rss / 2**20, seconds))
        if n < len(order) - 1:
            walker.tab("Compare & export")
            walker.tick(run_id, False)
    if quiet == "wait":
        walker.settle()
        patches = page.evaluate("() => window.__patches")
        page.wait_for_timeout(32_000)
        growth.quiet_patches = page.evaluate("() => window.__patches") - patches
        growth.browser_quiet = page.evaluate("() => Bokeh.documents[0].all_models.size")
    elif quiet == "clock":
        walker.settle()
        patches = page.evaluate("() => window.__patches")
        try:
            page.wait_for_function(f"() => performance.now() - window.__lastPatch > {QUIET_MS}", timeout=60_000,
                                   polling=500)
        except Exception:  # noqa: BLE001 - Playwright's timeout: say what kept the page busy
            raise AssertionError(f"the page never went {QUIET_MS / 1000:.0f} s without a patch in 60 s: "
                                 f"{page.evaluate('() => window.__patches') - patches} patches came") from None
        growth.quiet_patches = page.evaluate("() => window.__patches") - patches
        growth.browser_quiet = page.evaluate(BOKEHJS_RECOMPUTE_NOW)
    assert not page.errors, page.errors
    page.context.close()
    return growth


def measure(tmp: Path, port: int) -> Growth:
    from playwright.sync_api import sync_playwright

    from lab.store import RunStore

    runs = tmp / "runs"
    ids = make_runs(RunStore(runs))
    with served_app(runs, port, tmp) as (url, proc), sync_playwright() as p:
        import states as gallery

        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=gallery.CHROMIUM_ARGS)
        try:
            return open_twelve(browser, url, proc.pid, ids, quiet="wait")
        finally:
            browser.close()


def deep_mlp_screenshot(tmp: Path, port: int, out: Path) -> None:
    """One stored run of a 48-layer MLP (49 taps), opened in Run & watch, shot to ``out``."""
    import torch
    from playwright.sync_api import sync_playwright

    import states as gallery
    from lab.config import RunConfig
    from lab.runs import run
    from lab.store import RunStore
    from tests.fixtures.configs import TINY

    torch.set_num_threads(1)
    runs = tmp / "runs"
    events = list(run(RunConfig(**{**TINY, "backbone": "mlp:depth=48,width=16", "epochs": 1, "name": "deep mlp"}),
                      store=RunStore(runs)))
    run_id = events[-1].run_id
    print(f"{len(events[0].layers)} layers")
    with served_app(runs, port, tmp, "server-deep-mlp.log") as (url, _proc), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=gallery.CHROMIUM_ARGS)
        page = gallery.new_page(browser, url, WIDTH)
        page.set_viewport_size({"width": WIDTH, "height": 1800})
        walker = gallery.Walker(page, {run_id: run_id}, tmp)
        walker.tab("Compare & export")
        walker.tick(run_id)
        started = time.monotonic()
        walker.open_run(run_id)
        print(f"opened in {time.monotonic() - started:.1f} s")
        page.mouse.move(0, 0)
        page.screenshot(path=str(out), full_page=True)
        browser.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deep-mlp", action="store_true", help="screenshot a 48-layer MLP's run instead")
    add_save_option(parser)
    args = parser.parse_args(argv)
    import states as gallery

    if args.deep_mlp:
        with tempfile.TemporaryDirectory() as tmp:
            deep_mlp_screenshot(Path(tmp), gallery.free_port(), ROOT / "benchmarks" / "results" /
                                "deep_mlp_49_layers.png")
        return 0

    with recording(__file__, parser, args, argv=argv), tempfile.TemporaryDirectory() as tmp:
        growth = measure(Path(tmp), gallery.free_port())
        print("\n".join(growth.lines()))
        second, twelfth = growth.openings[1], growth.openings[-1]
        if second.server_models:
            print(f"server models: 2nd {second.server_models}, 12th {twelfth.server_models}, "
                  f"ratio {twelfth.server_models / second.server_models:.2f}")
        print(f"browser models: 2nd {second.browser_models}, 12th {twelfth.browser_models}, "
              f"ratio {twelfth.browser_models / second.browser_models:.2f}; {growth.browser_quiet} after 32 s more")
        print(f"RSS: 2nd {second.rss_mib:.1f} MiB, 12th {twelfth.rss_mib:.1f} MiB, "
              f"growth {twelfth.rss_mib - second.rss_mib:+.1f} MiB")
        print(f"models brought by an opening: 2nd {growth.added(1)}, 12th {growth.added(11)}; "
              f"patches while quiet: {growth.quiet_patches}")
        print(f"opening: 2nd {second.seconds:.2f} s, 12th {twelfth.seconds:.2f} s, "
              f"ratio {twelfth.seconds / second.seconds:.2f}; median of 2nd-6th "
              f"{statistics.median(o.seconds for o in growth.openings[1:6]):.2f} s, of 7th-12th "
              f"{statistics.median(o.seconds for o in growth.openings[6:]):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
