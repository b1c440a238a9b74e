"""Words that the library, the command line and the app write the same way (torch-free, no UI)."""
from __future__ import annotations

from collections.abc import Iterable

__all__ = ["join_words"]


def join_words(words: Iterable, conjunction: str = "and") -> str:
    """The words as a sentence lists them: "a", "a and b", "a, b and c" (no serial comma); "" for none.
    ``conjunction="or"`` lists choices: "a, b or c".

    >>> join_words(["training sample", "held-out", "unseen"])
    'training sample, held-out and unseen'
    >>> join_words(["'full'", "'layer'"], "or")
    "'full' or 'layer'"
    """
    words = [str(w) for w in words]
    return f" {conjunction} ".join(filter(None, (", ".join(words[:-1]), words[-1]))) if words else ""
