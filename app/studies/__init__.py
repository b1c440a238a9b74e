"""Studies: many runs over a grid of settings, started, followed and drawn as the papers' figures.

:class:`StudiesPanel` is the tab; :class:`StudyComposer` builds a study axis by axis in it;
:func:`shipped_specs` lists the study specs shipped in ``studies/``; :mod:`app.studies.study_plots`
draws the figures, in the app and in exported study notebooks (``from app import study_plots``).
"""
from app.base import lazy_exports

__all__ = ["StudiesPanel", "StudyComposer", "shipped_specs"]
__getattr__, __dir__ = lazy_exports(__name__, {"StudiesPanel": ".studies_panel:StudiesPanel",
                                               "StudyComposer": ".composer:StudyComposer",
                                               "shipped_specs": ".studies_panel:shipped_specs"})
