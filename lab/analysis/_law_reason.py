"""Why a row of :func:`lab.analysis.separation_law` fitted fewer layers than the run has, or has no law: codes
with their words, so that readers (the collapse card) branch on a code and never parse a sentence."""
from __future__ import annotations

import enum
from typing import Sequence

__all__ = ["LawCode", "LawReason"]


class LawCode(str, enum.Enum):
    """What one note of a :class:`LawReason` says; ``.words``: how a sentence says it."""

    TOO_FEW_LAYERS = "too_few_layers"
    """Fewer than :data:`lab.analysis.MIN_LAW_LAYERS` layers with a finite, positive NC1: the law is absent."""
    NOT_FINITE = "not_finite"
    """NC1 NaN, infinite or not positive at some layers: they are left out of the fit."""
    NOT_MEASURED = "not_measured"
    """NC1 not measured at some layers at this evaluation."""
    R_UNDEFINED = "r_undefined"
    """NC1 the same at every layer fitted: Pearson r is undefined."""

    @property
    def words(self) -> str:
        return _WORDS[self]


_WORDS = {LawCode.TOO_FEW_LAYERS: "no law", LawCode.NOT_FINITE: "NC1 not finite and positive",
          LawCode.NOT_MEASURED: "NC1 not measured", LawCode.R_UNDEFINED: "r undefined"}


class LawReason(str):
    """Why one row of :func:`lab.analysis.separation_law` fitted fewer layers than the run has, or has no law: the sentence
    (this ``str``, one line, as printed) with its codes, so that a reader branches on ``code``, never on the words.

    Attributes
    ----------
    notes : tuple of (LawCode, str)
        Each thing said, in order: its code and its words ("NC1 not measured at fc3").
    code : LawCode
        :attr:`LawCode.TOO_FEW_LAYERS` when the law is absent, else the first note's code.
    words : str
        The sentence without the words of an absent law's code (``"no law: "``): what a sentence that already
        says "no law" goes on with.
    """

    notes: tuple[tuple[LawCode, str], ...]

    def __new__(cls, notes: Sequence[tuple[LawCode, str]]):
        notes = tuple((LawCode(code), str(words)) for code, words in notes)
        if not notes:
            raise ValueError("LawReason needs at least one (LawCode, words) note. Got none; a row without a "
                             "reason has None.")
        head, *rest = notes
        if head[0] is LawCode.TOO_FEW_LAYERS:
            words = head[1] + (f" ({'; '.join(w for _c, w in rest)})" if rest else "")
            text = f"{LawCode.TOO_FEW_LAYERS.words}: {words}"
        else:
            words = text = "; ".join(w for _c, w in notes)
        self = super().__new__(cls, text)
        self.notes, self._words = notes, words
        return self

    def __getnewargs__(self):                    # pickles and copies rebuild it from its notes, not its text
        return (self.notes,)

    @property
    def code(self) -> LawCode:
        return self.notes[0][0]

    @property
    def codes(self) -> tuple[LawCode, ...]:
        """Every note's code, in order."""
        return tuple(code for code, _words in self.notes)

    @property
    def words(self) -> str:
        return self._words
