"""A run's status: the one owner of the words a run's state is spoken in (as Lightning's ``TrainerStatus`` and
MLflow's ``RunStatus``).

A ``str`` enum, so a status compares equal to the plain string that ``meta.json`` stores and serializes as it::

    >>> RunStatus.CANCELLED == "cancelled"
    True
    >>> RunStatus("interrupted").ended, RunStatus.RUNNING.active
    (True, True)
    >>> f"the run {RunStatus.CANCELLED.phrase}"
    'the run was cancelled'

Words that are no run status (a damaged run's "damaged", a view's own "idle" or "stopping") read as ``None``
through :meth:`RunStatus.read`; :meth:`RunStatus.has_ended` and :meth:`RunStatus.is_active` answer ``False``
for them.
"""
from __future__ import annotations

import enum

__all__ = ["RunStatus"]


class RunStatus(str, enum.Enum):
    """The status of a run: running, then finished, failed, cancelled or interrupted.

    ``interrupted`` is what the store reads for a run whose process died without saying how it ended (its
    ``meta.json`` still says "running"): it has ended, as the other three have.
    """

    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def ended(self) -> bool:
        """The run has ended: finished, failed, cancelled or interrupted."""
        return self is not RunStatus.RUNNING

    @property
    def active(self) -> bool:
        """The run is still going (running): the complement of :attr:`ended`."""
        return self is RunStatus.RUNNING

    @property
    def closed(self) -> bool:
        """The run closed its record itself (finished, failed, cancelled), writing its end time, summary and
        timings; an interrupted run has ended without closing it."""
        return self.ended and self is not RunStatus.INTERRUPTED

    @property
    def phrase(self) -> str:
        """The verb phrase a sentence says it with: "the run {phrase}" ("was cancelled", "is running" ...)."""
        return _PHRASES[self]

    @classmethod
    def read(cls, value: object) -> RunStatus | None:
        """The status ``value`` names (a stored or shown word, or a status), ``None`` for anything else: a
        damaged run's "damaged", a missing status's "unknown", a view's own state such as "idle"."""
        try:
            return cls(value)
        except (ValueError, TypeError):
            return None

    @classmethod
    def has_ended(cls, value: object) -> bool:
        """``value`` names an ended status; ``False`` for a word that is no run status."""
        status = cls.read(value)
        return status is not None and status.ended

    @classmethod
    def is_active(cls, value: object) -> bool:
        """``value`` names the active status (running); ``False`` for a word that is no run status."""
        status = cls.read(value)
        return status is not None and status.active

    @classmethod
    def phrase_of(cls, value: object) -> str:
        """The phrase of the status ``value`` names; for a word that is no run status, "ended (value)"."""
        status = cls.read(value)
        return status.phrase if status is not None else f"ended ({value})"


_PHRASES = {RunStatus.RUNNING: "is running", RunStatus.FINISHED: "finished", RunStatus.FAILED: "failed",
            RunStatus.CANCELLED: "was cancelled", RunStatus.INTERRUPTED: "was interrupted"}
