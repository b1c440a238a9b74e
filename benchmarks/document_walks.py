"""How much of opening a run in Run & watch is Bokeh walking the document, and what one walk per update saves.

Bokeh walks every model of a document again (``DocumentModelManager.recompute``) after each change that adds or
drops a model. The app's updates (``app.base._dispatch``: a flush of the live view, ``one_update`` around a
browser's selection or an unfolded card) now hold the document's events and walk it once, when the update ends.

One stored run of the neural-collapse lesson (3 epochs), replayed into a fresh ``LiveView`` whose layout sits in a
Bokeh document and whose Neural collapse card is open, the way Run & watch opens a stored run: first as Bokeh
does it (every change walks), then inside ``pn.io.hold(doc, freeze=True)`` (the dispatcher's flush), alternating, ``--repeats``
times each, in one process. Prints the walks and the seconds of each replay, and the ratio of the medians.

Run: ``python benchmarks/document_walks.py [--repeats N] [--save]``; ``--save`` writes
benchmarks/results/document_walks.txt.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._results import add_save_option, recording  # noqa: E402


def stored_run(folder: Path):
    """The lesson's events, 3 epochs (a few seconds on 2 cores)."""
    import lab
    from lab.lessons import NC_LESSON
    from lab.store import RunStore

    config = dataclasses.replace(NC_LESSON, epochs=3, name="document walks")
    return list(lab.run(config, store=RunStore(folder / "runs")))


def replay(events, frozen: bool) -> tuple[float, int]:
    """Seconds and document walks to replay ``events`` into a new live view placed in a document."""
    from bokeh.document import Document
    from bokeh.document.models import DocumentModelManager

    import panel as pn

    from app.live import LiveView

    doc = Document()
    view = LiveView()
    view.collapse.collapsed = False
    doc.add_root(view.__panel__().get_root(doc))
    walks = 0
    recompute = DocumentModelManager.recompute

    def counted(self):
        nonlocal walks
        walks += 1
        return recompute(self)

    DocumentModelManager.recompute = counted
    try:
        started = time.perf_counter()
        with pn.io.hold(doc, freeze=True) if frozen else contextlib.nullcontext():
            view.consume(events)
        return time.perf_counter() - started, walks
    finally:
        DocumentModelManager.recompute = recompute


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="replays of each kind (default: %(default)s)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv), tempfile.TemporaryDirectory() as tmp:
        events = stored_run(Path(tmp))
        replay(events, frozen=False)                # imports and first-use costs, in neither column
        seconds = {False: [], True: []}
        for _ in range(args.repeats):
            for frozen in (False, True):
                took, walks = replay(events, frozen)
                seconds[frozen].append(took)
                print(f"{'one walk per update' if frozen else 'every change walks':<22} {took:6.2f} s, "
                      f"{walks:4d} document walks", flush=True)
        plain, frozen = statistics.median(seconds[False]), statistics.median(seconds[True])
        print(f"median: every change walks {plain:.2f} s, one walk per update {frozen:.2f} s: ratio {frozen / plain:.2f} "
              f"({len(events)} events of a 3-epoch lesson run, collapse card open; one process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
