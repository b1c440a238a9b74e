"""A page of the JupyterLab component: ``LayerScope(store=...)`` as a notebook cell shows it (its ``__panel__``:
the sidebar beside the tabs, no page template), on the store of ``$LAB_RUNS_DIR``.

Served with ``panel serve tests/browser/layerscope_page.py`` (next to ``app``: ``panel serve app
tests/browser/layerscope_page.py``) for the state gallery (``docs/states.py``) and its browser test: the component's
own layout walked in a browser without the cost of a real JupyterLab (``tests/browser/test_jupyterlab.py`` runs
one, on the quickstart notebook).
"""

import app
import lab
from app import LayerScope

app.extension()
LayerScope(store=lab.RunStore()).servable(title="LayerScope component")
