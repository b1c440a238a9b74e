"""The exported lesson opened from disk in Chromium with every request refused: the players move the law's fitted
line, the simplex's cosines and the layout's points, with no console error and no request leaving the page."""
from __future__ import annotations

import pytest

from lab.export import to_html
from lab.store import RunStore
from tests.fixtures.lesson_run import tiny_nc_lesson

pytestmark = [pytest.mark.browser]

HOSTILE = "</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def lesson_file(tmp_path_factory):
    """The NC lesson shrunk to seconds (16 units, 3 epochs, a few images a class) under a hostile name, exported."""
    store = RunStore(tmp_path_factory.mktemp("html") / "runs")
    run_id = tiny_nc_lesson(store, name=HOSTILE, epochs=3)
    return to_html([run_id], tmp_path_factory.mktemp("page") / "lesson.html", store=store)


def _move(page, selector: str, index: int) -> None:
    """Set a player (a range input) to ``index`` as a user's drag does: the value, then an input event."""
    page.eval_on_selector(selector, "(el, i) => { el.value = i; el.dispatchEvent(new Event('input')); }", index)


def test_the_lesson_plays_offline(chromium, lesson_file, tmp_path):
    from playwright.sync_api import sync_playwright

    from tests.browser.served import ARTIFACTS

    errors, refused = [], []

    def route(request_route):
        if request_route.request.url == lesson_file.as_uri():
            request_route.continue_()               # the file itself; anything else would leave the page
        else:
            refused.append(request_route.request.url)
            request_route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        try:
            context = browser.new_context(viewport={"width": 1300, "height": 900})
            context.route("**/*", route)
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(lesson_file.as_uri())
            page.wait_for_selector(".ls-footer", timeout=20_000)

            def fit():
                return page.eval_on_selector_all(".ls-law-fit", "els => els.map(e => e.getAttribute('d'))")

            def cosines():
                return page.eval_on_selector_all(".ls-cosines .ls-cell", "els => els.map(e => e.dataset.value)")

            def points():
                return page.eval_on_selector_all(".ls-layout-chart circle",
                                                 "els => els.map(e => e.getAttribute('cx') + ',' + e.getAttribute('cy'))")

            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            last = (fit(), cosines(), page.inner_text(".ls-nc-epoch output"))
            assert last[0] and last[1] and last[2] == "epoch 3"
            page.screenshot(path=str(ARTIFACTS / "html_export_last.png"), full_page=True)
            _move(page, ".ls-nc-epoch input", 0)
            assert page.inner_text(".ls-nc-epoch output") == "epoch 0"
            assert fit() != last[0], "the law's fitted line did not follow the epoch player"
            assert cosines() != last[1], "the simplex's cosines did not follow the epoch player"

            before = points()
            _move(page, ".ls-layout-layer input", 0)
            assert points() and points() != before, "the layout did not follow the layer player"
            page.screenshot(path=str(ARTIFACTS / "html_export_first.png"), full_page=True)

            # the collapse panels draw the layers ticked
            nc1_lines = ".ls-nc-nc1 path.ls-line"
            drawn = page.eval_on_selector_all(nc1_lines, "els => els.length")
            page.locator(".ls-nc-layer input").first.click()
            assert 0 < page.eval_on_selector_all(nc1_lines, "els => els.length") != drawn

            # printed: no slider, each figure whole on its page
            page.emulate_media(media="print")
            assert not page.locator(".ls-nc-epoch input").is_visible()
            assert page.eval_on_selector(".ls-block", "e => getComputedStyle(e).breakInside") == "avoid"
            page.emulate_media(media="screen")

            # resting on a point shows its picture, from inside the file
            page.locator(".ls-layout-chart circle[data-index]").last.hover()
            assert page.locator(".ls-hover").is_visible()
            assert page.eval_on_selector(".ls-hover img", "e => e.src").startswith("data:image/png;base64,")

            # the hostile run name is text: the title and the heading say it, and no image element came of it
            assert page.title() == HOSTILE
            assert page.inner_text(".ls-run-name") == HOSTILE
            assert page.eval_on_selector_all("img", "els => els.length") == 1      # the hover's picture only
        finally:
            browser.close()
    assert not errors, errors
    assert not refused, refused
