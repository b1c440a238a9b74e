"""The answer per image behind :class:`app.EmbeddingView`, without Panel: one evaluation's per-image record.

:class:`ImageAnswers` reads one evaluation (run, seed, epoch) once: the arrival layer and forgetting of every
image (:func:`lab.analysis.image_table`) and the record itself, on which every new selection is measured
(:func:`lab.analysis.selection_measures`). Every number comes from :mod:`lab.analysis`; this module only
looks them up by image and turns them into text. A run without a record gives the one line
:func:`lab.analysis.image_record_problem` says, never an exception.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from lab import analysis
from lab.export import tables

from app.base import plots

__all__ = ["ImageAnswers", "NO_RUN", "answers_note_html", "arrival_legend_html"]

NO_RUN = "these layouts come from arrays, not from a stored run: there is no per-image record to read"
"""Why a view of arrays (``EmbeddingView.from_arrays``) has no per-image answers."""


class ImageAnswers:
    """One evaluation's per-image answers, read once (``problem`` says why not, in one line).

    Parameters
    ----------
    store, run_id : the run (``store.load(run_id)``)
    seed, epoch : the evaluation (None: the run's first seed, its latest record)

    Attributes
    ----------
    problem : str or None
        Why the run has no record there (:func:`lab.analysis.image_record_problem`), or None.
    table : DataFrame or None
        :func:`lab.analysis.image_table` of the evaluation (index: image position).
    seed, epoch : the evaluation read (from the table)
    axis : what the run's epoch numbers count, "epoch" or "step" (:func:`lab.export.tables.run_axis`)
    """

    def __init__(self, store, run_id: str, seed: int | None = None, epoch: int | None = None):
        from lab.errors import user_message

        self.store, self.run_id = store, run_id
        self.table: pd.DataFrame | None = None
        self.record = None
        self.class_names: list[str] = []
        self.seed, self.epoch = seed, epoch
        self.axis = "epoch"
        try:
            self.problem = analysis.image_record_problem(run_id, seed=seed, epoch=epoch, store=store)
            if self.problem is None:
                rec = store.load(run_id)                 # read once: the table and every selection use it
                self.axis = tables.run_axis(rec)
                self.record = rec.image_record(seed, epoch)
                self.table = analysis.record_table(rec, self.record)
                self.seed, self.epoch = int(self.table.attrs["seed"]), int(self.table.attrs["epoch"])
                self.class_names = list(self.table.attrs["class_names"])
        except Exception as exc:    # a run gone, a damaged file: one line (a bug: the file keeping its traceback)
            self.problem, self.table, self.record = user_message(exc), None, None

    @classmethod
    def unavailable(cls, reason: str) -> "ImageAnswers":
        """Answers that are not there, for ``reason`` (one line)."""
        answers = cls.__new__(cls)
        answers.store = answers.run_id = answers.table = answers.record = answers.seed = answers.epoch = None
        answers.class_names, answers.problem, answers.axis = [], reason, "epoch"
        return answers

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def layers(self) -> list[str]:
        return list(self.table.attrs["layers"]) if self.ok else []

    def check_images(self, indices: np.ndarray) -> str | None:
        """Why the images ``indices`` (a layout's) cannot be looked up in this record, or None."""
        n = len(self.table)
        outside = np.asarray(indices)[(np.asarray(indices) < 0) | (np.asarray(indices) >= n)]
        if outside.size:
            return (f"the layouts hold images the per-image record of {self.axis} {self.epoch} does not "
                    f"({outside.size} outside positions 0-{n - 1})")
        return None

    def arrival(self, indices: np.ndarray) -> pd.Categorical:
        """The arrival layer of each image ``indices`` (:data:`app.base.plots.NEVER` when the final layer has it
        wrong), categorical over the layers in order, then "never"."""
        names = [plots.plot_text(layer) for layer in self.layers]
        values = self.table["arrival_layer"].to_numpy(dtype=object)[np.asarray(indices, dtype=np.int64)]
        shown = [plots.NEVER if v is None or pd.isna(v) else plots.plot_text(v) for v in values]
        return pd.Categorical(shown, categories=list(dict.fromkeys([*names, plots.NEVER])))

    def forgotten(self) -> list[int]:
        """The images right at the evaluation's best layer and wrong at the final one (image_table's
        ``forgotten``; none where the table could not name a best layer)."""
        return self.table.index[self.table["forgotten"].fillna(False).to_numpy(dtype=bool)].tolist()

    def counts(self) -> pd.Series:
        """How many images arrive at each layer, then never (:func:`lab.analysis.arrival_counts`)."""
        return analysis.arrival_counts(self.table)

    def measures(self, indices) -> pd.DataFrame:
        """:func:`lab.analysis.selection_measures` of the images ``indices`` on this record."""
        return analysis.selection_measures(self.record, list(indices), class_names=self.class_names)


# ---------------------------------------------------------------------- text (names reach it escaped)
def answers_note_html(answers: ImageAnswers | None) -> str:
    """One line next to the per-image controls: which evaluation they read, or why they are off."""
    if answers is None:
        return ""
    if not answers.ok:
        return (f"<span class='ls-answers-note' data-ok='0' style='color:#777;font-size:12px'>"
                f"Per-image answers off: {html.escape(answers.problem)}</span>")
    t = answers.table
    best, final = t.attrs.get("best_layer"), t.attrs.get("final_layer")
    forgotten = len(answers.forgotten())
    where = (f"right at the best layer {html.escape(str(best))}, wrong at the final layer {html.escape(str(final))}"
             if best is not None else f"no best layer at this {html.escape(answers.axis)}")
    return (f"<span class='ls-answers-note' data-ok='1' style='color:#555;font-size:12px'>Per-image answers of "
            f"seed {answers.seed}, {html.escape(answers.axis)} {answers.epoch} (leave-one-out kNN votes): "
            f"{forgotten} of {len(t)} images forgotten ({where})</span>")


def arrival_legend_html(answers: ImageAnswers, colors: dict[str, str]) -> str:
    """The colours of the arrival layers in layer order, each with its count of images."""
    counts = answers.counts()
    items = "".join(
        f"<span class='ls-arrival-item' style='margin-right:10px'><span style='color:{colors.get(name, '#333')}'>"
        f"&#9679;</span> {html.escape(name)} {int(n)}</span>"
        for name, n in zip([plots.plot_text(x) for x in counts.index], counts.to_numpy()))
    return (f"<div class='ls-arrival-legend' style='font-size:12px'><b>Arrival layer</b> "
            f"({html.escape(answers.axis)} {answers.epoch}): "
            f"the first layer from which an image's kNN vote is right at every later layer; never: wrong at the "
            f"final layer. {items}</div>")
