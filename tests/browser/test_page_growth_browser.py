"""The page stays the size of what it shows: twelve openings of six stored runs in one browser session.

Its own ``panel serve app`` (not the shared one of ``shared_servers/``): the server's memory and its session's
document are measured, and no other test's page may add to them. Six tiny stored runs, opened in Run & watch from
Compare & export one after another, then the same six again (``benchmarks/page_growth.py`` drives the same page
and prints the figures). After the 12th opening, against the 2nd (the first pays for imports and first use):

- the session's document holds at most 1.2 times the models: counted on the server (``len(doc.models)``, read
  through the live view's probe), since that is what every message the server sends walks; and in the browser
  (``Bokeh.documents[0].all_models``) once the page is quiet. BokehJS adds the models a patch brings and drops
  the unreferenced ones only in a recompute it puts off until 30 s after the page's last patch (its
  ``recompute_timeout``, pinned by ``tests/app/test_upstream_contract.py``), so the page grows by about 900
  models per opening until then. The watch control's poll of the store every 5 s used to patch the page
  (Panel's busy spinner), and so the page never dropped them (``app.base.quiet_poll``). The test sees the page
  receive no patch for 11 s (two polls), then runs the recompute BokehJS's timer would run 19 s later;
  ``benchmarks/page_growth.py`` waits the 30 s out and finds the same count
  (``benchmarks/results/page_growth.txt``);
- an opening does no more work: the 12th brings the page at most 1.2 times the models the 2nd brought. Its time
  is measured by ``benchmarks/page_growth.py``, not here (no test depends on timing: the machine is shared);
- the server's resident memory grows by at most 20 MiB from the 2nd opening to the 12th, and by at most 20 MiB
  while the same six runs are opened again (6th to 12th). It grew by 40-58 MiB before each opening released what
  the last run's views freed (``app.base.release_memory``: reference cycles collected, then glibc's freed heap
  pages returned; ``benchmarks/results/page_growth.txt``).
"""
from __future__ import annotations

import sys

import pytest
from served import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]

sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "docs"))

MODELS_BOUND = 1.2
RSS_BOUND_MIB = 20


@pytest.fixture(scope="module")
def growth(chromium, free_port, tmp_path_factory):
    """The twelve openings' figures (:class:`page_growth.Growth`), the table printed."""
    from playwright.sync_api import sync_playwright

    import page_growth
    import states as gallery
    from lab.store import RunStore

    tmp = tmp_path_factory.mktemp("page_growth")
    runs = tmp / "runs"
    ids = page_growth.make_runs(RunStore(runs))
    with page_growth.served_app(runs, free_port(), tmp) as (url, server), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=gallery.CHROMIUM_ARGS)
        try:
            found = page_growth.open_twelve(browser, url, server.pid, ids, quiet="clock")
        finally:
            browser.close()
    print("\n".join(found.lines()))
    assert [o.run_id for o in found.openings] == [*ids, *ids]
    return found


def test_twelve_openings_of_six_runs_keep_the_document_its_size_and_do_no_more_work(growth):
    table = "\n".join(growth.lines())
    second, sixth, twelfth = growth.openings[1], growth.openings[5], growth.openings[-1]
    assert second.server_models and twelfth.server_models, table
    assert twelfth.server_models <= MODELS_BOUND * second.server_models, table
    quiet = f"{table}\nquiet: {growth.browser_quiet} models, {growth.quiet_patches} patches"
    assert growth.browser_quiet <= MODELS_BOUND * second.browser_models, quiet
    assert 0 < growth.added(11) <= MODELS_BOUND * growth.added(1), f"{table}\nadded: {growth.added(1)} by the 2nd, " \
        f"{growth.added(11)} by the 12th"
    assert twelfth.rss_mib - sixth.rss_mib <= RSS_BOUND_MIB, table


def test_twelve_openings_grow_the_server_by_at_most_20_mib_from_the_second(growth):
    second, twelfth = growth.openings[1], growth.openings[-1]
    assert twelfth.rss_mib - second.rss_mib <= RSS_BOUND_MIB, "\n".join(growth.lines())
