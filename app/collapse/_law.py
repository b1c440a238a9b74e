"""The law of equi-separation in the neural-collapse view (He & Su 2023): log10 NC1 against depth at the player's
epoch, with the law's fitted line, and the law's r against epoch.

Every number is :mod:`lab.analysis.separation_law`'s: :func:`~lab.analysis.separation_law` (ratio and r per seed,
epoch and split), :func:`~lab.analysis.separation_law_points` (the points it fits and its line) and
:func:`~lab.analysis.separation_law_across_seeds` (r, mean over seeds). Nothing is fitted here. Where the law is
absent (fewer than three layers with a finite NC1) the plot is replaced by one sentence with the reason
separation_law gives.
"""
from __future__ import annotations

import html

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn

from lab import analysis, catalogue
from lab.text import join_words

from app.base import KEEP_SIZE, plots, wrap_row

from ._rows import SPLITS, Source

__all__ = ["LawSection", "LAW_INTRO", "NO_NC1", "law_intro"]


def law_intro(axis: str = "epoch") -> str:
    """What the law's two plots show; ``axis``: what the run's evaluations count ("epoch", or "step")."""
    return ("<b>The law of equi-separation, across layers</b> (He &amp; Su 2023). <span style='color:#555'>"
            f"Left: log10 NC1 at each layer at the {axis} of the player above, with the least-squares line through "
            "it (identical taps counted once); the legend gives NC1's factor per layer (10^slope: below 1, each "
            f"deeper layer separates the classes better) and Pearson r. Right: r at every {axis} (near −1: NC1 "
            f"falls by the same factor at every layer); the grey line is the {axis} shown.</span>")


LAW_INTRO = law_intro()
NO_NC1 = "this run recorded no NC1 (nc1 not among its metrics): no law of equi-separation to draw"
WAITING = "waiting for the first evaluation…"
_WIDTH = 360


def _sentence(text: str) -> pn.pane.HTML:
    return pn.pane.HTML(f"<div style='width:{_WIDTH}px;padding:30px 10px;color:#555'>{html.escape(text)}</div>",
                        css_classes=["ls-law-reason"])


def _split_list(splits) -> str:
    return join_words(catalogue.split_label(s) for s in splits)


def _why(reason: analysis.LawReason) -> str:
    """A reason of lab.analysis.separation_law without its code's words ("no law": the app's sentence says it)."""
    return reason.words


def _absent(reason) -> bool:
    """The row's law is absent, by its reason's code (a row without a reason reads back as None or NaN)."""
    return isinstance(reason, analysis.LawReason) and reason.code is analysis.LawCode.TOO_FEW_LAYERS


def _title_splits(splits) -> str:
    """The splits measured, short enough for a plot title."""
    return " · ".join(catalogue.split_label(s, "short_label") for s in splits)


class LawSection:
    """The two plots of the law and their notes; :meth:`update` reads a run, :meth:`show` moves to an epoch.

    ``figures()`` gives the HoloViews elements shown ("law_depth", "law_r"); ``sentences()`` the sentences shown
    in place of a plot.
    """

    def __init__(self):
        self.law = pd.DataFrame(columns=analysis.SEPARATION_LAW_COLUMNS)
        self.across = pd.DataFrame()
        self.points = pd.DataFrame(columns=analysis.SEPARATION_LAW_POINT_COLUMNS)
        self.splits: list[str] = []
        self.layers: list[str] = []
        self.seed: int | None = None
        self.n_seeds = 0
        self.terminal: list = []
        self.epoch: int | None = None
        self.axis = "epoch"                      # what the run's evaluation numbers count
        self.missing: list[str] = []
        self.streams: dict[str, hv.streams.Pipe] = {}
        self._structure = None
        self._empty_reason: str | None = None
        self._sentences: list[str] = []
        self._depth_pane = pn.pane.HoloViews(None, sizing_mode="fixed", margin=4, linked_axes=False,
                                             css_classes=["ls-law-depth"])
        self._r_pane = pn.pane.HoloViews(None, sizing_mode="fixed", margin=4, linked_axes=False,
                                         css_classes=["ls-law-r"])
        self._depth_box = pn.Column(margin=0, styles=KEEP_SIZE)
        self._r_box = pn.Column(margin=0, styles=KEEP_SIZE)
        self._notes = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["ls-law-notes"])
        self._intro = pn.pane.HTML(LAW_INTRO, sizing_mode="stretch_width")
        self.panel = pn.Column(self._intro, self._notes,
                               wrap_row(self._depth_box, self._r_box),     # not pn.FlexBox: it blanks plots
                               sizing_mode="stretch_width", css_classes=["ls-law"])

    # ------------------------------------------------------------------ reading a run
    def update(self, source: Source, terminal: dict[int, int | None], *, waiting: bool) -> None:
        """Read the law of ``source`` (every epoch); ``terminal``: {seed: terminal-phase epoch or None};
        ``waiting``: a live run that has not measured yet (told so rather than that it lacks NC1)."""
        metrics = source.metrics
        if source.axis != self.axis:
            self.axis = source.axis
            self._intro.object = law_intro(self.axis)
        kwargs = dict(layers=source.layers or None, aliases=dict(source.aliases or {}))
        self.law = analysis.separation_law(metrics, **kwargs)
        self.across = analysis.law_across_seeds(self.law)                   # the same fits, not fitted again
        seeds = sorted({int(s) for s in self.law["seed"]}) if len(self.law) else []
        self.seed, self.n_seeds = (seeds[0] if seeds else None), len(seeds)
        self.points = (analysis.separation_law_points(metrics, seed=self.seed, **kwargs) if seeds
                       else pd.DataFrame(columns=analysis.SEPARATION_LAW_POINT_COLUMNS))
        present = set(self.law["split"]) if len(self.law) else set()
        self.splits = [s for s in SPLITS if s in present] + sorted(present - set(SPLITS))
        self.missing = [s for s in SPLITS if s not in present] if present else []
        first = self.points[self.points["epoch"] == self.points["epoch"].min()] if len(self.points) else self.points
        self.layers = list(dict.fromkeys(first.sort_values("index")["layer"])) if len(first) else []
        self.terminal = [terminal.get(s) for s in (seeds or sorted(terminal) or [0])]
        self._empty_reason = None if len(self.law) else (WAITING if waiting else NO_NC1)
        structure = (tuple(self.layers), tuple(self.splits), self.seed, self.n_seeds)
        if structure != self._structure and len(self.law):
            self._structure = structure
            self.streams["law:depth"] = depth = hv.streams.Pipe(data=self._depth_data(self.epoch))
            self.streams["law:r"] = r = hv.streams.Pipe(data=self._r_data(self.epoch))
            self._depth_pane.object = hv.DynamicMap(self._render_depth, streams=[depth])
            self._r_pane.object = hv.DynamicMap(self._render_r, streams=[r])

    def epochs(self) -> list[int]:
        """The epochs with a row of the law for the seed drawn, ascending."""
        if not len(self.law):
            return []
        return sorted({int(e) for e in self.law.loc[self.law["seed"] == self.seed, "epoch"]})

    # ------------------------------------------------------------------ one epoch
    def _rows_at(self, epoch) -> tuple[pd.DataFrame, pd.DataFrame]:
        law = self.law[(self.law["seed"] == self.seed) & (self.law["epoch"] == epoch)] if len(self.law) else self.law
        points = self.points[self.points["epoch"] == epoch] if len(self.points) else self.points
        return law, points

    def _depth_data(self, epoch) -> dict:
        law, points = self._rows_at(epoch)
        seed = f" · seed {self.seed} of {self.n_seeds}" if self.n_seeds > 1 else ""
        title = (f"log10 NC1 against depth · {self.axis} {'–' if epoch is None else epoch}{seed}\n"
                 f"{_title_splits(self.splits)}" if self.splits else "log10 NC1 against depth")
        return {"law": law, "points": points, "title": title}

    def _r_data(self, epoch) -> dict:
        mean = f" · mean over {self.n_seeds} seeds" if self.n_seeds > 1 else ""
        title = (f"r against {self.axis}{mean}\n{_title_splits(self.splits)}" if self.splits
                 else f"r against {self.axis}")
        return {"across": self.across, "terminal": self.terminal, "epoch": epoch, "title": title}

    def _render_depth(self, data):
        return plots.law_depth(data["points"], data["law"], layers=self.layers, splits=self.splits,
                               title=data["title"], width=_WIDTH)

    def _render_r(self, data):
        return plots.law_r_curve(data["across"], splits=self.splits, terminal=data["terminal"], epoch=data["epoch"],
                                 title=data["title"], width=_WIDTH, axis=self.axis)

    def show(self, epoch: int | None) -> None:
        """Draw the law at ``epoch`` (None: the last epoch measured) and mark it on r against epoch."""
        epochs = self.epochs()
        if epoch not in epochs:
            epoch = epochs[-1] if epochs else None
        self.epoch = epoch
        self._sentences = []
        if self._empty_reason is not None:
            self._sentences = [self._empty_reason]
            self._depth_box.objects, self._r_box.objects = [_sentence(self._empty_reason)], []
            self._notes.object = ""
            return
        law, _points = self._rows_at(epoch)
        fitted = law[np.isfinite(law["ratio"].astype(float))] if len(law) else law
        if len(fitted):
            self.streams["law:depth"].send(self._depth_data(epoch))
            self._depth_box.objects = [self._depth_pane]
        else:
            self._sentences.append(self.absent_sentence(law, epoch))
            self._depth_box.objects = [_sentence(self._sentences[-1])]
        if len(self.across) and np.isfinite(self.across["r"].astype(float)).any():
            self.streams["law:r"].send(self._r_data(epoch))
            self._r_box.objects = [self._r_pane]
        else:
            last = self.law[self.law["epoch"] == self.law["epoch"].max()]
            self._sentences.append(f"No r at any {self.axis}: {self._reasons(last)}.")
            self._r_box.objects = [_sentence(self._sentences[-1])]
        self._notes.object = self.notes_html(law, epoch)

    def _reasons(self, law: pd.DataFrame) -> str:
        """separation_law's reasons (their "no law" left out: the sentences around them say it)."""
        reasons = (list(dict.fromkeys(_why(r) for r in law["reason"] if isinstance(r, analysis.LawReason)))
                   if len(law) else [])
        return "; ".join(reasons) if reasons else f"no NC1 at this {self.axis}"

    def absent_sentence(self, law: pd.DataFrame, epoch) -> str:
        """The one sentence shown in place of the law-against-depth plot: separation_law's reason."""
        return f"No law of equi-separation at {self.axis} {epoch}: {self._reasons(law)}."

    def notes_html(self, law: pd.DataFrame, epoch) -> str:
        """What was measured in this run at ``epoch``, one line per split, and which split the run lacks."""
        lines = []
        if self.missing:
            lines.append(f"Not measured in this run: {_split_list(self.missing)}; the law is drawn for "
                         f"{_split_list(self.splits)}.")
        seed = f" (seed {self.seed})" if self.n_seeds > 1 else ""
        first = self.epochs()[0] if self.epochs() else None
        start = self.law[(self.law["seed"] == self.seed) & (self.law["epoch"] == first)] if first is not None else None
        for row in law.itertuples():
            name = plots.SPLIT_NAMES.get(row.split, row.split)
            if _absent(row.reason):
                if not any(_why(row.reason) in sentence for sentence in self._sentences):   # said in its place
                    lines.append(f"{name}, {self.axis} {epoch}{seed}: no law ({_why(row.reason)}).")
                continue
            r = f"r = {row.r:+.3f}" if np.isfinite(row.r) else "r undefined"
            text = (f"{name}, {self.axis} {epoch}{seed}: NC1 multiplied by {row.ratio:.2f} per layer over "
                    f"{row.n_layers} layers, {r}")
            begin = start[start["split"] == row.split] if start is not None and first != epoch else None
            if begin is not None and len(begin) and np.isfinite(begin["r"].iloc[0]):
                text += f" ({self.axis} {first}: r = {float(begin['r'].iloc[0]):+.3f})"
            if isinstance(row.reason, analysis.LawReason):       # a missing reason reads back as NaN
                text += f"; {row.reason.words}"
            lines.append(text + ".")
        return "".join(f"<div class='ls-law-note' style='color:#555'>{html.escape(line)}</div>" for line in lines)

    # ------------------------------------------------------------------ for tests
    def figures(self) -> dict[str, hv.Element]:
        out = {}
        for key, box, pane in (("law_depth", self._depth_box, self._depth_pane), ("law_r", self._r_box, self._r_pane)):
            if pane in box.objects and isinstance(pane.object, hv.DynamicMap):
                out[key] = pane.object[()]
        return out

    def sentences(self) -> list[str]:
        """The sentences shown in place of a plot (the law absent, no NC1, waiting)."""
        return list(self._sentences)

    def clear(self) -> None:
        """Forget the run drawn."""
        self.law = pd.DataFrame(columns=analysis.SEPARATION_LAW_COLUMNS)
        self.across, self.points = pd.DataFrame(), pd.DataFrame(columns=analysis.SEPARATION_LAW_POINT_COLUMNS)
        self.splits, self.layers, self.missing, self.terminal = [], [], [], []
        self.seed, self.n_seeds, self.epoch, self._structure, self._empty_reason = None, 0, None, None, None
        self._sentences = []
        self.streams = {}
        self._depth_pane.object = self._r_pane.object = None
        self._depth_box.objects, self._r_box.objects = [], []
        self._notes.object = ""
