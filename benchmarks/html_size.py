"""How large is a run as one HTML file (``lab.export.to_html``, issue 62)?

Makes the runs the issue names and writes each as one self-contained page:

- the neural-collapse lesson (``lab.lessons.NC_LESSON``): budget 5 MB;
- the law-of-equi-separation lesson (``lab.lessons.SEPARATION_LAW_LESSON``): budget 5 MB;
- the app's default preset ("Which layer generalizes (glyphs, 15/5)", ``app.choose.presets``): the glyph-pretrained
  ResNet-18 fine-tuned 4 epochs, UMAP layouts of 1,500 unseen images at 10 layers and 5 epochs: budget 15 MB.

For each it prints the file's size against its budget, the time to write it, its size without the hover pictures
(``thumbnails=False``), and what the bytes are: the page's script and styles, then the page model's parts (layouts
with their pictures, simplex, the seed-mean grids, ...), largest first. With ``--runs-dir`` a finished run of the
same config found there is reused (the runs behind ``benchmarks/results/html_size.txt`` took 13 s, 10 s and 294 s).
``--screenshots DIR`` also opens the NC lesson's file in Chromium (network refused) and saves it at the epoch
player's last and first positions (``html_export_last.png``, ``html_export_first.png``).

Run (about 5 minutes on 2 cores, most of it the default preset's run)::

    .venv/bin/python benchmarks/html_size.py [--runs-dir DIR] [--out DIR] [--screenshots DIR] [--save]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._results import add_save_option, recording  # noqa: E402

MB = 1e6


def _runs():
    from app.choose.presets import DEFAULT_PRESET, PRESETS
    from lab.config import RunConfig
    from lab.lessons import NC_LESSON, SEPARATION_LAW_LESSON

    return [("nc_lesson", NC_LESSON, 5 * MB), ("separation_law_lesson", SEPARATION_LAW_LESSON, 5 * MB),
            ("default_preset", RunConfig(**dict(PRESETS[DEFAULT_PRESET]["config"])), 15 * MB)]


def _stored(store, config):
    """A finished run of ``config`` already in ``store`` (``--runs-dir`` kept from an earlier call), or None."""
    for run_id in reversed(store.ids()):
        record = store.load(run_id)
        if str(record.status) == "finished" and record.config == config:
            return run_id
    return None


def _run(store, config) -> tuple[str, float, bool]:
    import lab

    found = _stored(store, config)
    if found is not None:
        return found, 0.0, True
    t0 = time.perf_counter()
    for event in lab.run(config, store=store):
        pass
    if event.kind != "run_finished":
        raise SystemExit(f"the run did not finish: {event}")
    return event.run_id, time.perf_counter() - t0, False


def _parts(record) -> list[tuple[str, int]]:
    from lab.export.html import run_model

    model = run_model(record)
    sizes = [(key, len(json.dumps(value, separators=(",", ":")))) for key, value in model.items()]
    return sorted(sizes, key=lambda kv: -kv[1])


def _screenshots(path: Path, folder: Path) -> None:
    from playwright.sync_api import sync_playwright

    folder.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"))
        context = browser.new_context(viewport={"width": 1300, "height": 900})
        context.route("**/*", lambda r: r.continue_() if r.request.url == path.as_uri() else r.abort())
        page = context.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".ls-footer")

        def shoot(name: str) -> None:
            # from the simplex's heading to the end of the layouts: the players' figures
            top = page.eval_on_selector(".ls-collapse h4", "el => el.getBoundingClientRect().top + window.scrollY")
            end = page.eval_on_selector(".ls-layouts", "el => el.getBoundingClientRect().bottom + window.scrollY")
            page.screenshot(path=str(folder / name), full_page=True,
                            clip={"x": 0, "y": top - 8, "width": 1300, "height": end - top + 16})

        shoot("html_export_last.png")
        for selector in (".ls-nc-epoch input", ".ls-curves-player input", ".ls-layout-epoch input"):
            page.eval_on_selector(selector, "el => { el.value = 1; el.dispatchEvent(new Event('input')); }")
        page.eval_on_selector(".ls-layout-layer input", "el => { el.value = 0; el.dispatchEvent(new Event('input')); }")
        shoot("html_export_first.png")
        browser.close()
    print(f"screenshots of the simplex, the law and the layouts: {folder / 'html_export_last.png'} (every player at "
          f"its last position), {folder / 'html_export_first.png'} (epoch 1, the first layer's layout)")


def _measure(runs_dir: Path, out_dir: Path, shots: Path | None) -> int:
    import lab
    from lab.export import to_html
    from lab.store import RunStore

    store = RunStore(runs_dir)
    ok = True
    for name, config, budget in _runs():
        run_id, seconds, reused = _run(store, config)
        t0 = time.perf_counter()
        path = to_html([run_id], out_dir / f"{name}.html", store=store)
        write = time.perf_counter() - t0
        size = path.stat().st_size
        within = size <= budget
        ok &= within
        record = store.load(run_id)
        layouts = lab.export.html.run_model(record)["layouts"] or {}
        print(f"{name}: {config.backbone} on {config.dataset}, {config.epochs} epochs, projection {config.projection}"
              f" ({'run reused' if reused else f'run {seconds:.0f} s'})")
        bare = to_html([run_id], out_dir / f"{name}_no_thumbnails.html", store=store, thumbnails=False)
        print(f"  file {size / MB:.2f} MB (budget {budget / MB:.0f} MB): {'PASS' if within else 'FAIL'}; "
              f"written in {write:.1f} s; without the hover pictures {bare.stat().st_size / MB:.2f} MB")
        pictures = (layouts.get("thumbnails") or {}).get("images") or {}
        print(f"  layouts: {len(layouts.get('layers', []))} layers, {layouts.get('shown', 0)} of "
              f"{layouts.get('total', 0)} images each (at most {lab.export.html.MAX_LAYOUT_POINTS}); "
              f"{len(pictures)} hover pictures ({sum(map(len, pictures.values())) / 1e3:.0f} kB)")
        script = sum(len((REPO / "lab/export/html" / f).read_text(encoding="utf-8"))
                     for f in ("draw.js", "collapse.js", "page.js", "page.css"))
        print(f"  script and styles: {script / 1e3:.0f} kB")
        print("  page model, largest parts: " + ", ".join(f"{key} {n / 1e3:.0f} kB" for key, n in _parts(record)[:5]))
        if name == "nc_lesson" and shots is not None:
            _screenshots(path, shots)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs-dir", default=None,
                   help="keep the runs in this run store, and reuse finished ones found there (default: a "
                        "temporary folder)")
    p.add_argument("--out", default=None, help="write the HTML files here (default: a temporary folder)")
    p.add_argument("--screenshots", default=None, metavar="DIR",
                   help="also save the NC lesson's page at two player positions here (needs chromium)")
    add_save_option(p)
    args = p.parse_args(argv)
    with recording(__file__, p, args, argv=argv, device="cpu", ignore=("runs_dir", "out", "screenshots")):
        with tempfile.TemporaryDirectory() as tmp:
            runs = Path(args.runs_dir).resolve() if args.runs_dir else Path(tmp) / "runs"
            out = Path(args.out).resolve() if args.out else Path(tmp) / "html"
            return _measure(runs, out, Path(args.screenshots).resolve() if args.screenshots else None)


if __name__ == "__main__":
    sys.exit(main())
