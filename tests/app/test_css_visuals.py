"""The plots' CSS lookup answered at once (app.base._css_visuals): safe only while no stylesheet restyles a
visual through a ``--bk-...`` custom property, and sent to the served page and to the notebook."""
from __future__ import annotations

import re
from pathlib import Path

import bokeh
import holoviews
import panel

import app

# a definition of a visual's custom property as BokehJS reads it: --bk-<prefix>line-color: ..., --bk-fill-alpha: ...
DEFINES = re.compile(r"--bk-[a-z-]*(line|fill|text|hatch|image)-[a-z-]+\s*:")


def test_no_stylesheet_restyles_a_visual_through_a_css_property():
    roots = [Path(m.__file__).parent for m in (bokeh, panel, holoviews, app)]
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if path.suffix in (".css", ".js", ".py", ".html") and path.is_file():
                text = path.read_text(errors="ignore")
                if "--bk-" in text and DEFINES.search(text):
                    found.append(str(path))
    assert not found, f"these define a --bk- visual property, which the skipped lookup would ignore: {found}"


class _Session:
    session = None


def test_a_served_page_runs_the_script_once_ready_and_a_plain_document_gets_nothing():
    from bokeh.document import Document

    from app.base import skip_css_visuals
    from app.base._css_visuals import SKIP_CSS_VISUALS

    served = Document()
    served._session_context = lambda: _Session()          # what a served session's document has
    skip_css_visuals(served)
    sent = dict(served.to_json().content["callbacks"]["entries"])      # what the page's BokehJS gets
    assert [c["attributes"]["code"] for c in sent["document_ready"]] == [SKIP_CSS_VISUALS]
    plain = Document()
    skip_css_visuals(plain)
    assert "callbacks" not in plain.to_json().content or not plain.to_json().content["callbacks"]["entries"]
    skip_css_visuals(None)


def test_the_notebook_set_up_sends_the_script_as_panel_sends_bokehjs(monkeypatch):
    import IPython
    import IPython.display

    from app.base._css_visuals import SKIP_CSS_VISUALS

    sent = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())       # as inside a kernel
    monkeypatch.setattr(IPython.display, "publish_display_data", lambda data, **kw: sent.append(data))
    app.extension()
    mine = [d for d in sent if d.get("application/vnd.holoviews_load.v0+json") == SKIP_CSS_VISUALS]
    assert len(mine) == 1 and mine[0]["application/javascript"] == SKIP_CSS_VISUALS
