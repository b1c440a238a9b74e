"""The types the parts of the Hugging Face source share: how a model type is built (:class:`Plan`) and
what was built (:class:`Loaded`). Here, apart from :mod:`lab.backbones._hf`, so that
:mod:`~lab.backbones._hf_input` and :mod:`~lab.backbones._hf_taps`, which ``_hf`` imports, can name them
without importing ``_hf`` back.
"""
from __future__ import annotations

from dataclasses import dataclass

from lab.backbones._hf_families import Family

__all__ = ["Plan", "Loaded"]


@dataclass(frozen=True)
class Plan:
    """How one model type is built: the model class, the config it takes, how it pools."""

    model_type: str                # config.model_type as saved (``clip`` for a full CLIP checkpoint)
    cls: type
    config: object                 # the config the model is built from (a dual encoder's vision config)
    pool: str                      # "logits" or "output" (see HFNet)
    family: Family | None          # table entry, None for the general rule
    adapter: str | None


@dataclass
class Loaded:
    """What :func:`lab.backbones._hf.create` built, for the input size, the catalogue and the normalization."""

    config: object                 # the transformers config the model was built from
    plan: Plan
    processor: dict                # the directory's preprocessor_config.json (empty without one)
    img_size: int | None = None    # the caller's image side, which overrides the processor's size

    @property
    def model_type(self) -> str:
        return self.config.model_type
