"""MkDocs hook (mkdocs.yml ``hooks:``): the two lessons as pages of the docs site, to open without installing anything.

With ``LAYERSCOPE_DOCS_LESSONS=1`` (``make docs`` sets it) the build runs ``lab.lessons.NC_LESSON`` and
``lab.lessons.SEPARATION_LAW_LESSON`` (about 25 s on 2 cores) into a temporary run store and adds each run's page
(``lab.export.to_html``) to the site at :data:`LESSONS`. Without it (the test suite's strict build, which must stay
fast) each address holds one paragraph that says how to build the real page, so that the guide's links hold.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mkdocs.structure.files import File

LESSONS = {"lessons/nc_lesson.html": "NC_LESSON", "lessons/separation_law_lesson.html": "SEPARATION_LAW_LESSON"}
"""Site address of each lesson's page: the name of its config in :mod:`lab.lessons`."""
SWITCH = "LAYERSCOPE_DOCS_LESSONS"

_PLACEHOLDER = ("<!DOCTYPE html><meta charset='utf-8'><title>{name}</title><p>This page is built by "
                "<code>make docs</code> (which sets {switch}=1): it runs <code>lab.lessons.{name}</code> and writes "
                "it here with <code>lab.export.to_html</code>.</p>")


def build_lessons(folder: Path, configs: dict | None = None) -> dict[str, Path]:
    """Run each lesson into a temporary store and write its page under ``folder`` at its :data:`LESSONS` address;
    ``configs``: {address: RunConfig} in place of the lessons' own (the tests shrink them)."""
    import lab
    import lab.lessons
    from lab.store import RunStore

    written = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "runs")
        for address, name in LESSONS.items():
            config = (configs or {}).get(address) or getattr(lab.lessons, name)
            for event in lab.run(config, store=store):
                pass
            if event.kind != "run_finished":
                raise RuntimeError(f"the lesson {name} did not finish: {event}")
            written[address] = lab.export.to_html([event.run_id], folder / address, store=store)
    return written


def on_files(files, config):
    built = os.environ.get(SWITCH) == "1"
    pages = build_lessons(Path(tempfile.mkdtemp(prefix="lessons-"))) if built else {}
    for address, name in LESSONS.items():
        content = (pages[address].read_bytes() if built
                   else _PLACEHOLDER.format(name=name, switch=SWITCH).encode("utf-8"))
        files.append(File.generated(config, address, content=content))
    return files
