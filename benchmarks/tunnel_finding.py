"""The tunnel study's finding: per condition, the unseen best layer's relative depth and the tunnel share.

Reads the finished runs of ``studies/tunnel.yaml`` from the store (``$LAB_RUNS_DIR`` or ``--runs``; run the
study first: ``python -m lab study run studies/tunnel.yaml``). The table is ``lab.study.figures(study)["tunnel"]``
(:func:`lab.analysis.group_tunnel`: each seed read by :func:`lab.analysis.tunnel` at its last epoch, then per
condition the mean, std and 95 % Student-t interval over the seeds, and n); the per-run list below it is
:func:`lab.analysis.tunnel` of each run. It also prints the study's estimate on an empty store (what
``lab.study.estimate_line`` said before the study ran) against the span of its stored runs.

Run: ``.venv/bin/python benchmarks/tunnel_finding.py [--runs DIR] [--save] [--png PATH]``; ``--png`` also draws
the Studies tab's tunnel figure (:func:`app.studies.tunnel_plot.tunnel_plot`) of the same table and screenshots
it with Debian's chromium (``benchmarks/results/tunnel_finding.png``).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import add_save_option, recording  # noqa: E402

SPEC = ROOT / "studies" / "tunnel.yaml"
KEYS = ("backbone", "img_size", "train_per_class")


def _condition(values: dict) -> dict:
    """The settings of a condition that the table shows: its backbone, image size and training images."""
    fields = {}
    for axis, value in values.items():
        fields.update(value if isinstance(value, dict) else {axis: value})
    return {key: fields.get(key) for key in KEYS}


def table(runs: str | None):
    """(per condition: figures()["tunnel"] with its settings, per run: lab.analysis.tunnel, the study, its store,
    all its figures)."""
    import pandas as pd

    from lab.analysis import tunnel
    from lab.store import RunStore
    from lab.study import Study, figures, group_label

    study = Study.from_file(SPEC)
    store = RunStore(runs) if runs else RunStore()
    figs = figures(study, store=store)
    settings = {group_label(c.values, figs["axes"]): _condition(c.values) for c in study.cells()}
    summary = figs["tunnel"]
    summary = pd.concat([pd.DataFrame([settings[g] for g in summary["group"]]), summary], axis=1)
    rows = []
    for rec in study.records(store=store):
        found = tunnel(rec)
        rows.append({**{k: getattr(rec.config, k) for k in KEYS}, "seed": rec.config.seeds[0],
                     "best": found.best_layer, "relative_depth": found.relative_depth, "share": found.share,
                     "tunnel_layers": len(found.tunnel_layers), "probe_best": found.probe_best})
    return summary, pd.DataFrame(rows), study, store, figs


def _pm(row, q: str, digits: int = 2) -> str:
    low, high = row[f"{q}_low"], row[f"{q}_high"]
    return f"{row[q]:.{digits}f} ± {row[f'{q}_std']:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def timing(study, store) -> str:
    """The estimate on an empty store against the stored runs' span (first start to last end) and summed time."""
    import pandas as pd

    from lab.store import RunStore
    from lab.study import estimate_line

    with tempfile.TemporaryDirectory() as empty:
        before = estimate_line(study.estimate(store=RunStore(empty)))
    records = study.records(store=store)
    started = pd.to_datetime([r.meta.get("started") for r in records], utc=True)
    ended = pd.to_datetime([r.meta.get("ended") for r in records], utc=True)
    span = (ended.max() - started.min()).total_seconds() if len(records) else float("nan")
    busy = float(sum((e - s).total_seconds() for s, e in zip(started, ended)))
    return (f"estimate on an empty store: {before}\n"
            f"stored runs: {len(records)}; first start to last end {span:.0f} s ({span / 60:.1f} min); "
            f"the runs' own times summed {busy:.0f} s")


def screenshot(figs: dict, path: str) -> None:
    """The tunnel figure of ``figs`` as the app draws it, saved as one HTML page and screenshot to ``path``."""
    import shutil

    import holoviews as hv
    from playwright.sync_api import sync_playwright

    from app.studies.tunnel_plot import tunnel_plot

    hv.extension("bokeh")
    with tempfile.TemporaryDirectory() as folder:
        page_file = Path(folder) / "tunnel.html"
        hv.save(tunnel_plot(figs).opts(responsive=False, width=1300, height=520), page_file, resources="inline")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1340, "height": 560})
            page.goto(page_file.as_uri())
            page.wait_for_selector(".bk-Canvas, canvas", state="attached")
            page.wait_for_timeout(1500)                 # bokeh lays out after the canvas exists
            page.screenshot(path=path)
            browser.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=None, help="the run store (default: $LAB_RUNS_DIR or ./runs)")
    parser.add_argument("--png", default=None, help="also screenshot the tunnel figure to this PNG file")
    add_save_option(parser)
    args = parser.parse_args(argv)
    import pandas as pd

    with recording(__file__, parser, args, argv=argv, ignore=("runs", "png")), pd.option_context(
            "display.width", 200, "display.max_columns", 30, "display.float_format", "{:.3f}".format):
        summary, runs, study, store, figs = table(args.runs)
        print(f"{len(runs)} finished runs of studies/tunnel.yaml")
        print(timing(study, store))
        print()
        print("per condition, lab.study.figures(study)['tunnel']: mean ± std [95 % Student-t interval] over n seeds")
        shown = pd.DataFrame({
            **{k: summary[k] for k in KEYS}, "n": summary["n"], "layers": summary["n_layers"],
            "best layer's depth": [_pm(r, "relative_depth") for _, r in summary.iterrows()],
            "tunnel share": [_pm(r, "share") for _, r in summary.iterrows()],
            "tunnel layers": [f"{r['n_tunnel']:.1f} ± {r['n_tunnel_std']:.1f}" for _, r in summary.iterrows()],
            "seen NCC best": [f"{r['probe_best']:.3f} ± {r['probe_best_std']:.3f}" for _, r in summary.iterrows()],
            "most often best": [f"{b} ({k}/{n})" for b, k, n in zip(summary["best_layer"], summary["best_layer_n"],
                                                                    summary["n"])]})
        print(shown.to_string(index=False))
        print()
        print("best layer per run (lab.analysis.tunnel):")
        print(runs.to_string(index=False))
        if args.png:
            screenshot(figs, args.png)
            print(f"\nthe tunnel figure: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
