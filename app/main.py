"""Entry point of ``panel serve app``: one LayerScope per browser session."""
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:      # `panel serve app` from a checkout that is not pip-installed
    sys.path.insert(0, _ROOT)

import holoviews as hv  # noqa: E402
import panel as pn  # noqa: E402

from app.layerscope import LayerScope  # noqa: E402

pn.extension("tabulator", notifications=True, disconnect_notification="Connection to the server lost.")
hv.extension("bokeh", logo=False)

LayerScope().template().servable(title="layerscope")
