"""A page for the embedding browser test and benchmark: ``EmbeddingView.from_arrays`` of random blobs.

Served with ``panel serve tests/browser/embedding_page.py``; ``?n=`` sets the number of points (default
20,000, rasterized), ``?images=0`` leaves the images out. Two layouts ("layer_a", "layer_b": the same
blobs, the second one shuffled per class) so that the side-by-side mode has something to link. A hidden
``.ls-embedding-probe`` element carries the view's selection and hovered index as Python sees them.
``?run=RUN_ID`` shows that stored run of ``$LAB_RUNS_DIR`` instead (with its per-image answers; the probe
then also carries the colour mode).
"""
import html
import json

import numpy as np
import panel as pn

import app
from app.explorer.embedding import EmbeddingView
from tests.fixtures.blobs import circle_layouts

app.extension()


@pn.cache          # per server process: a new session gets the data at once, as an app's loaded data would
def layouts_and_images(n: int, k: int = 6, seed: int = 0):
    """Two (n, 2) layouts of k Gaussian blobs, labels (n,) and uint8 images (n, 16, 16, 3): a bright square
    whose place and colour tell the class."""
    a, b, labels = circle_layouts(n, k, seed, radius=6, moved_scale=0.5, moved_noise=1.5)
    images = np.zeros((n, 16, 16, 3), dtype=np.uint8)
    for c in range(k):
        rows = labels == c
        images[rows, 2 + c: 8 + c, 2 + c: 8 + c, c % 3] = 255
    return {"layer_a": a, "layer_b": b}, labels, images


args = pn.state.session_args if pn.state.curdoc else {}
n = int(args.get("n", [b"20000"])[0])
with_images = args.get("images", [b"1"])[0] != b"0"
run = args.get("run", [b""])[0].decode()
if run:
    import lab

    view = EmbeddingView(store=lab.RunStore(), run_id=run)
else:
    coords, labels, images = layouts_and_images(n)
    view = EmbeddingView.from_arrays(coords, labels, images=images if with_images else None,
                                     names=[f"class {c}" for c in "ABCDEF"])


def _probe(selection, hovered, color_by):
    state = {"selection": len(selection), "first": selection[:5], "hovered": hovered}
    if run:
        state["color_by"] = color_by
    payload = html.escape(json.dumps(state), quote=True)
    return f"<div class='ls-embedding-probe' data-probe=\"{payload}\"></div>"


probe = pn.pane.HTML(pn.bind(_probe, view.param.selection, view.param.hovered, view.param.color_by), height=0,
                     width=0, margin=0)
pn.Column(view, probe).servable(title="EmbeddingView test page")
