"""Every view in every state: the state gallery (``docs/states.py``) walked in the browser, each view checked.

One store holds a run of each state walked (:mod:`tests.fixtures.gallery`; the suite walks :data:`SUITE_WALK`,
``LAYERSCOPE_ALL_STATES=1`` every state: running, finished with one seed and with three, failed before its first
evaluation and mid-run, cancelled before its first evaluation, interrupted, monitored in epochs with the loop's loss
and in steps without it, no trained head, module taps, embeddings off) and a study with a failed cell. One ``panel
serve`` serves the app and the JupyterLab component's page on it; one page walks Run & watch and Compare & export
for each run, then the Studies tab; a second page walks the component. The screenshots go to
``test-artifacts/states/<state>-<view>.png``, the seconds of each view to ``seconds.json`` there. For every
state x view:

- no page error (nor console error), and no traceback from app/ or lab/ in the server's log (``served.serve``);
- no two visible controls or plots overlap (Bokeh plots, Panel and Bokeh widgets, text panes, cards' headers;
  one inside another is no overlap);
- no plot with empty axes, and none left blank: a plot with nothing to draw gives way to a sentence saying why;
- the words are true to the state: no "recorded before" or "run it again" but the ones :data:`MAY_SAY` lists for it,
  nothing :data:`MUST_NOT_SAY` names for it (a run counted in steps labelled "epoch", a split that was not measured
  in a title ...), and what :data:`MUST_SAY` names for it.
"""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest
from served import ARTIFACTS, ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(1500)]

MODELS_BOUND = 1.2
"""At most this many times the models of a view's first state, for every later state of that view."""

sys.path.insert(0, str(ROOT / "docs"))
import states as gallery  # noqa: E402  (docs/states.py: the gallery's server, page and walk)

ALL_STATES = os.environ.get("LAYERSCOPE_ALL_STATES") == "1"
SUITE_WALK = ("finished", "monitored-steps", "embeddings-off", "running", "failed-diverged", "failed-early",
              "cancelled-early")
"""The runs the suite walks (each view of one costs the app 10-20 s to draw on 2 cores): one of each kind of path
through the views: every collapse panel and the terminal phase; a loop counted in steps without a seen split or a
loss; no embeddings; a run still training; one evaluation, then a failure; a failure before the run started; a
run that measured nothing. ``LAYERSCOPE_ALL_STATES=1`` walks every state of the gallery (``docs/states.py`` always
does): three seeds, module taps, no trained head, a loop counted in epochs, an interrupted run besides."""
SUITE_COMPONENT = ("monitored-steps",)
"""The runs the suite walks in the JupyterLab component's layout (all: ``docs/states.py``'s COMPONENT_STATES)."""

AGAIN = re.compile(r"[^.\n]*(recorded before|run it again)[^.\n]*", re.IGNORECASE)
MAY_SAY: dict[str, list[str]] = {
    "embeddings-off": [r"was stored without its 2-D layouts \(embeddings off"],     # how to get them: run it again
}
"""Per state, the "recorded before ..." / "run it again ..." sentences it may show (regular expressions)."""
NOT_EVALUATED = (r"Best layer", r"best in ", r"\bg = ", r"Layers drawn", r"The simplex, seen")
MUST_NOT_SAY = {
    "running": (r"\bfinished\b", r"Run cancelled", r"interrupted", r"The run failed"),
    "cancelled-early": NOT_EVALUATED,
    "failed-early": NOT_EVALUATED,
    "monitored-steps": (r"\b[Ee]pochs?\b",),          # counted in optimizer steps
}
"""Per state, what contradicts it in the text of its Run & watch tab (regular expressions; the sidebar and the other
runs Compare lists are left out)."""
PLOT_MUST_NOT_SAY = {
    "monitored-steps": (r"\b[Ee]poch\b", r"(?<!un)seen"),        # counted in steps; no seen split was given
}
"""Per state, what contradicts it in the titles and axis labels of its plots (regular expressions)."""
MUST_SAY = {
    ("running", "run-watch"): ("running",),
    ("interrupted", "run-watch"): ("The run was interrupted",),
    ("failed-diverged", "run-watch"): ("The run failed", "training diverged"),
    ("failed-early", "run-watch"): ("The run failed",),
    ("cancelled-early", "run-watch"): ("Run cancelled", "Nothing had been measured yet"),
    ("cancelled-early", "compare"): ("was cancelled before its first evaluation",),
    ("study-failed-cell", "studies"): ("failed",),
}
"""Per (state, view), what the view must say."""


def problems_of(state: str, view: str, seen: dict, errors: list[str]) -> list[str]:
    """What is wrong with the view ``view`` of the run (or study) in ``state``, from what the page shows
    (``docs/states.py``'s ``facts``) and its errors since the previous view."""
    out = [f"page error: {e}" for e in errors]
    for a, b in seen["overlaps"]:
        out.append(f"{a['kind']} {a['name']!r} ({a['x']}, {a['y']}, {a['w']}x{a['h']}) overlaps "
                   f"{b['kind']} {b['name']!r} ({b['x']}, {b['y']}, {b['w']}x{b['h']})")
    for plot in seen["plots"]:
        if not plot["drawn"]:
            out.append(f"plot {plot['title']!r} has empty axes (say why in a sentence instead)")
        if not plot["ink"]:
            out.append(f"plot {plot['title']!r} is blank: its canvas drew nothing")
    text = seen["text"]
    for match in AGAIN.finditer(text):
        if not any(re.search(ok, match.group(0)) for ok in MAY_SAY.get(state, [])):
            out.append(f"says {match.group(0).strip()!r}")
    for pattern in MUST_NOT_SAY.get(state, ()) if view.startswith("run-watch") else ():
        for line in seen["main_text"].splitlines():
            if re.search(pattern, line):
                out.append(f"says {line!r}, which is not true of a run in state {state}")
    plot_words = "\n".join(f"{p['title']} | {p['x_label']} | {p['y_label']}" for p in seen["plots"])
    for pattern in PLOT_MUST_NOT_SAY.get(state, ()):
        for line in plot_words.splitlines():
            if re.search(pattern, line):
                out.append(f"a plot says {line!r}, against {pattern!r}")
    for words in MUST_SAY.get((state, view.removesuffix("-jupyterlab")), ()):
        if words not in text:
            out.append(f"does not say {words!r}")
    return out


def test_every_view_of_every_state(chromium, free_port, tmp_path):
    from playwright.sync_api import sync_playwright

    found: dict[str, list[str]] = {}
    models: dict[str, list[tuple[str, int]]] = {}     # view -> (state, the session document's models), in order

    def check(state, view, seen, errors):
        found[f"{state}-{view}"] = problems_of(state, view, seen, errors)
        if view.startswith("run-watch"):       # the probe is in the Run & watch tab
            models.setdefault(view, []).append((state, seen["doc_models"]))

    walk, component = (gallery.WALK, gallery.COMPONENT_STATES) if ALL_STATES else (SUITE_WALK, SUITE_COMPONENT)
    t0 = time.monotonic()
    with sync_playwright() as p, gallery.gallery(tmp_path, free_port(), {*walk, *component,
                                                                        gallery.STUDY_STATE}) as g:
        browser = p.chromium.launch(executable_path=chromium, args=gallery.CHROMIUM_ARGS)
        walked = gallery.walk_all(browser, g, ARTIFACTS / "states", check, walk=walk, component_states=component)
        browser.close()
    print(f"{len(walked)} views of {len(g.ids)} states in {time.monotonic() - t0:.0f} s")
    runs = [(state, view) for state in walk for view in ("run-watch", "compare")]
    assert set(walked) >= {*runs, (gallery.STUDY_STATE, "studies")}, walked
    assert all((ARTIFACTS / "states" / f"{s}-{v}.png").exists() for s, v in walked)
    # the page stays the size of what it shows (tests/browser/test_page_growth_browser.py): Run & watch of every
    # later state holds at most MODELS_BOUND times the models it held for the first (each page its own document)
    for view, counts in models.items():
        if None in {n for _, n in counts}:
            found[f"document-{view}"] = [f"the probe gives no document model count: {counts}"]
            continue
        # the first state's count is written before its Neural collapse card, unfolded then, has drawn: the
        # baseline is the next state's (the card open from then on)
        base_state, base = counts[min(1, len(counts) - 1)]
        found[f"document-{view}"] = [
            f"the session's document holds {n} models after {state}, over {MODELS_BOUND} x the {base} after "
            f"{base_state} (all: {counts})" for state, n in counts[2:] if n > MODELS_BOUND * base]
    wrong = {view: problems for view, problems in found.items() if problems}
    assert not wrong, "\n".join(f"{view}:\n  " + "\n  ".join(problems) for view, problems in wrong.items())
