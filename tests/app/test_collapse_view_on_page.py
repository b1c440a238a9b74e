"""The neural-collapse view on a page (rendered into a Bokeh document, no browser): its widgets are live, and the
simplex still opens at the head input's class means at the last epoch."""
from __future__ import annotations

import holoviews as hv
from bokeh.document import Document

hv.extension("bokeh")

from tests.fixtures.live_runs import HEAD, synthetic_run  # noqa: E402


def test_on_a_page_the_simplex_opens_at_the_head_input_and_the_last_epoch():
    from app.collapse import CollapseView
    from app.live._model import RunModel

    model = RunModel()
    view = CollapseView.for_live(lambda: model, collapsed=True)
    view.__panel__().get_root(Document())          # the layer Select takes its first option when its options change
    for event in synthetic_run(collapse=True, epochs=3):
        model.apply(event)
        view.observe(event)
        view.refresh()
    view.collapsed = False
    assert view.simplex_layer == HEAD
    assert view.simplex_result()["epoch"] == 3 and view.player.value == view.player.end == 3
