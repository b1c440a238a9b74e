"""Build the shipped notebooks from one place, so that they stay consistent.

Run from the repository root after editing a notebook's text or code here::

    .venv/bin/python notebooks/_build.py            # writes notebooks/0*.ipynb (no outputs)
    .venv/bin/python notebooks/_build.py --check    # exit 1 if a committed notebook differs

The notebooks import ``lab`` and draw with ``app.plots``, the app's own plot module (the
quickstart also shows the ``app`` component); they never define the library: no code cell
holds a ``def`` or ``class`` (tests/lab/export/test_export.py checks), except 08's, which is the reader's
own training loop and LightningModule that ``lab.Monitor`` attaches to. Each has a ``FAST`` switch read
from the ``LAB_FAST`` environment variable that shrinks it to about a minute on a 2-core CPU
(the notebook tests run them that way); the text says what the full setting shows.

The notebooks' cells are written in the modules beside this script: ``_nb_cells.py`` (the
cell constructors and the cells every notebook shares), ``_nb_intro.py`` (01, 02),
``_nb_papers.py`` (03, 04), ``_nb_studies.py`` (05), ``_nb_images.py`` (06), ``_nb_collapse.py`` and
``_nb_law.py`` (07) and ``_nb_attach.py`` (08). This script lists the notebooks and writes or checks them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat import v4

HERE = Path(__file__).resolve().parent
# Run as a script, this folder is on sys.path already; imported another way (importlib, a test) it may not be.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _nb_attach import attach_training  # noqa: E402
from _nb_collapse import collapse_lesson  # noqa: E402
from _nb_images import which_images  # noqa: E402
from _nb_intro import neural_collapse, quickstart  # noqa: E402
from _nb_papers import utilization, which_layer  # noqa: E402
from _nb_studies import studies  # noqa: E402


NOTEBOOKS = {
    "01_quickstart.ipynb": quickstart,
    "02_neural_collapse_across_layers.ipynb": neural_collapse,
    "03_which_layer_generalizes.ipynb": which_layer,
    "04_layer_utilization.ipynb": utilization,
    "05_studies.ipynb": studies,
    "06_which_images.ipynb": which_images,
    "07_neural_collapse_lesson.ipynb": collapse_lesson,
    "08_attach_to_your_training.ipynb": attach_training,
}


def build(name: str):
    nb = v4.new_notebook(cells=NOTEBOOKS[name]())
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    # stable cell ids, so that rebuilding leaves unchanged notebooks byte-identical
    stem = name.split("_")[0]
    for i, cell in enumerate(nb.cells):
        cell.id = f"nb{stem}-{i:02d}"
    nbformat.validate(nb)
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed notebook is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name in NOTEBOOKS:
        text = nbformat.writes(build(name)) + "\n"
        path = HERE / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run notebooks/_build.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
