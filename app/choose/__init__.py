"""The Choose form: dataset, backbone, split and training, as a user fills them in before a run.

:class:`ConfigPanel` is the form (presets, validation, layout) and builds a ``lab.RunConfig``;
:mod:`app.choose.presets` holds the presets it offers (``PRESETS``, ``DEFAULT_PRESET``), which
notebooks and benchmarks reuse. ``_fields`` makes the form's parameters from RunConfig's fields and
``_widgets`` one widget per field; :func:`offline_backbones` lists the models that load here offline.
"""
from app.base import lazy_exports

__all__ = ["ConfigPanel", "PRESETS", "DEFAULT_PRESET", "offline_backbones"]
__getattr__, __dir__ = lazy_exports(__name__, {"ConfigPanel": ".config_panel:ConfigPanel", "PRESETS": ".presets:PRESETS",
                                               "DEFAULT_PRESET": ".presets:DEFAULT_PRESET",
                                               # the models this machine loads offline: the form's and the study
                                               # composer's list
                                               "offline_backbones": "._widgets:offline_backbones"})
