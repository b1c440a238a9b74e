"""Render the glyph dataset of lab.data.glyphs from installed fonts: a build tool, not runtime code.

Rendering needs the fonts and is done once, at build time::

    apt-get install fonts-arphic-ukai fonts-arphic-uming ...   # see lab.data.glyphs.FACES
    python -m lab.data.build_glyphs build            # writes lab/data/glyphs.npz (+ .json)
    python -m lab.data.build_glyphs sheet out.png    # contact sheet of the shipped file

The result ships inside the package and :func:`lab.data.glyphs.read` loads it without
fonts; loading a dataset never imports this module. The zoo's source task
(:mod:`lab.zoo`) renders its images with the same :func:`render_glyph`.

Characters are drawn from those common to GB 2312 level 1, Big5 common and
JIS X 0208 level 1 (so simplified, traditional and Japanese faces all have them),
and each is checked in every face: blank glyphs, the face's ``.notdef`` box (tofu)
and placeholder glyphs shared by several code points are rejected and reported.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from lab.data.glyphs import DEFAULT_PATH, FACES, IMAGE_SIZE, N_CHARS, SEED, Face, read

__all__ = [
    "candidate_characters", "find_font", "open_font", "glyph_status",
    "STROKE_P", "render_glyph", "build", "contact_sheet", "main",
]

_RENDER_PX = 256     # font size of the high-resolution drawing that is later reduced
_CANVAS_PX = 384
_CHECK_PX = 40       # font size of the tofu / blank check


# ---------------------------------------------------------------------------
# Fonts

def _decode_pairs(leads, trails, encoding: str) -> list[str]:
    out = []
    for a in leads:
        for b in trails:
            try:
                out.append(bytes([a, b]).decode(encoding))
            except UnicodeDecodeError:
                pass
    return out


def candidate_characters() -> list[str]:
    """Characters common to the everyday sets of Chinese (both scripts) and Japanese.

    The intersection of GB 2312 level 1 (3755 common simplified characters),
    Big5 common characters (5401, A440-C67E) and JIS X 0208 level 1 (2965), in
    Big5 order (stroke count). These code points look alike in all three locales,
    so every face below draws them.
    """
    gb = set(_decode_pairs(range(0xB0, 0xD8), range(0xA1, 0xFF), "gb2312"))
    jis = set(_decode_pairs(range(0xB0, 0xD0), range(0xA1, 0xFF), "euc_jp"))
    trails = [*range(0x40, 0x7F), *range(0xA1, 0xFF)]
    big5 = [c for c in _decode_pairs(range(0xA4, 0xC7), trails, "big5")
            if 0xA440 <= int.from_bytes(c.encode("big5"), "big") <= 0xC67E]
    return [c for c in big5 if c in gb and c in jis]


def _fc_list(family: str) -> list[str]:
    if shutil.which("fc-list") is None:
        return []
    res = subprocess.run(["fc-list", "--format", "%{file}\n", f":family={family}"],
                         capture_output=True, text=True, check=False)
    return sorted(line for line in res.stdout.splitlines() if line)


def find_font(face: Face) -> tuple[str, int] | None:
    """Locate ``face`` on this machine: ``(file, index in collection)`` or None."""
    from PIL import ImageFont

    paths = [face.path] if Path(face.path).is_file() else []
    paths += [p for p in _fc_list(face.family) if p not in paths]
    for path in paths:
        for index in range(16):
            try:
                font = ImageFont.truetype(path, 12, index=index)
            except OSError:
                break
            family, style = font.getname()
            if family == face.family and (not face.style or style == face.style):
                return path, index
    return None


def open_font(path: str, index: int = 0, size: int = _RENDER_PX):
    """Open a font with the basic layout engine (same result with or without raqm)."""
    from PIL import ImageFont

    return ImageFont.truetype(path, size, index=index, layout_engine=ImageFont.Layout.BASIC)


# ---------------------------------------------------------------------------
# Checking and drawing glyphs

def _draw(font, ch: str, canvas: int) -> np.ndarray:
    from PIL import Image, ImageDraw

    img = Image.new("L", (canvas, canvas), 0)
    ImageDraw.Draw(img).text((canvas // 2, canvas // 2), ch, font=font, fill=255, anchor="mm")
    return np.asarray(img)  # (canvas, canvas) ink = 255


def glyph_status(font, ch: str, notdef: np.ndarray | None = None) -> str:
    """Classify how ``font`` draws ``ch``: ``"ok"``, ``"blank"`` or ``"tofu"``.

    ``font`` should be opened at a small size (e.g. 40 px). Tofu means the
    drawing equals the face's ``.notdef`` glyph, obtained by drawing a code point
    no font defines (U+10FFFD); pass it as ``notdef`` to avoid redrawing it.
    """
    canvas = 2 * _CHECK_PX
    img = _draw(font, ch, canvas)
    if img.max() == 0:
        return "blank"
    if notdef is None:
        notdef = _draw(font, "\U0010FFFD", canvas)
    if notdef.max() > 0 and np.array_equal(img, notdef):
        return "tofu"
    return "ok"


def _check_face(path: str, index: int, chars: list[str]) -> dict[str, str]:
    """Status of every character in one face; placeholders drawn for several
    code points (e.g. a face's own fallback symbol) count as tofu."""
    font = open_font(path, index, size=_CHECK_PX)
    notdef = _draw(font, "\U0010FFFD", 2 * _CHECK_PX)
    status, seen = {}, {}
    for ch in chars:
        status[ch] = glyph_status(font, ch, notdef)
        if status[ch] == "ok":
            key = hashlib.sha1(_draw(font, ch, 2 * _CHECK_PX).tobytes()).hexdigest()
            seen.setdefault(key, []).append(ch)
    for group in seen.values():
        if len(group) > 1:
            status.update({ch: "tofu" for ch in group})
    return status


STROKE_P = (0.25, 0.4, 0.25, 0.1)
"""Probabilities of the stroke draw in :func:`render_glyph`: thinner, the font's own, bolder, much bolder."""


def render_glyph(font, ch: str, rng: np.random.Generator, size: int = IMAGE_SIZE,
                 stroke_jitter: bool = False) -> np.ndarray:
    """Draw one character with mild random variation: dark ink on white.

    Parameters
    ----------
    font : PIL FreeTypeFont
        Opened with :func:`open_font` at the default (high) size.
    ch : str
        One character.
    rng : numpy Generator
        Source of the variation: stroke width (a 3 or 5 px min/max filter at about
        five times the output resolution, so strokes change by 0.4-0.8 px),
        rotation (+-6 degrees), scale (longer side 42-54 px of 64) and position
        (+-4 px).
    size : int
        Output width and height.
    stroke_jitter : bool
        True varies the stroke width as described above; False (default) keeps every stroke
        at the font's own width (the other variation, and every random draw, stay the same).
        Stroke weight is part of a typeface's style, so the target dataset keeps it; the zoo's
        source task turns it on as augmentation.

    Returns
    -------
    numpy.ndarray
        uint8 (size, size), 255 = background.
    """
    from PIL import Image, ImageFilter, ImageOps

    ink = Image.fromarray(_draw(font, ch, _CANVAS_PX))
    box = ink.getbbox()
    if box is None:
        raise ValueError(f"{ch!r} is blank in {font.getname()}: nothing to render.")
    pad = 8
    ink = ink.crop((box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad))
    stroke = rng.choice(len(STROKE_P), p=list(STROKE_P))
    if not stroke_jitter:
        stroke = 1
    if stroke == 0:
        ink = ink.filter(ImageFilter.MinFilter(3))     # thinner
    elif stroke >= 2:
        ink = ink.filter(ImageFilter.MaxFilter(3 if stroke == 2 else 5))   # bolder
    ink = ink.rotate(float(rng.uniform(-6, 6)), resample=Image.Resampling.BICUBIC, expand=True)
    ink = ink.crop(ink.getbbox())
    scale = float(rng.uniform(42, 54)) / max(ink.size)
    w, h = (max(1, round(s * scale)) for s in ink.size)
    ink = ink.resize((w, h), Image.Resampling.LANCZOS)
    x = (size - w) // 2 + int(rng.integers(-4, 5))
    y = (size - h) // 2 + int(rng.integers(-4, 5))
    out = Image.new("L", (size, size), 0)
    out.paste(ink, (min(max(x, 0), size - w), min(max(y, 0), size - h)))
    return np.asarray(ImageOps.invert(out))


# ---------------------------------------------------------------------------
# Building the archive

def _package_version(package: str) -> str | None:
    if shutil.which("dpkg-query") is None:
        return None
    res = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                         capture_output=True, text=True, check=False)
    return res.stdout.strip() or None


def build(out: str | Path = DEFAULT_PATH, faces: tuple[Face, ...] = FACES,
          n_chars: int = N_CHARS, seed: int = SEED, candidates: list[str] | None = None,
          log=print, stroke_jitter: bool = False) -> dict:
    """Render the glyph dataset and write ``out`` (npz) and ``out`` with ``.json``.

    Parameters
    ----------
    out : str or Path
        Archive to write.
    faces : tuple of Face
        The classes, in order.
    n_chars : int
        Characters drawn with ``seed`` from ``candidates``; those some face lacks are dropped,
        so an archive may hold fewer (the same draw whatever the faces).
    seed : int
        Seeds the character choice and every image's variation.
    candidates : list of str, optional
        Characters to choose from; default :func:`candidate_characters`.
    log : callable
        Receives progress lines.
    stroke_jitter : bool
        Vary each image's stroke width (see :func:`render_glyph`); recorded in the metadata.

    Raises
    ------
    ValueError
        A face is not installed (names the packages and the ``apt-get install`` line), too few
        characters are drawn by every face, or ``out`` is an archive of other faces (a rebuild
        may not silently change the classes of an existing file: name a new ``out``).

    Returns
    -------
    dict
        The metadata written next to the archive (fonts, characters, rejections).
    """
    import PIL
    from PIL import features

    _refuse_other_faces(Path(out), faces)
    found = {face.name: find_font(face) for face in faces}
    missing = [face for face in faces if found[face.name] is None]
    if missing:
        pkgs = " ".join(sorted({f.package for f in missing}))
        raise ValueError(
            f"fonts not found: {', '.join(f.name for f in missing)}. "
            f"Install them with `apt-get install {pkgs}` and run the build again.")

    candidates = list(candidates) if candidates is not None else candidate_characters()
    rejected = {}
    usable = set(candidates)
    for face in faces:
        status = _check_face(*found[face.name], candidates)
        bad = {ch: s for ch, s in status.items() if s != "ok"}
        rejected[face.name] = bad
        usable -= set(bad)
        log(f"{face.name:20s} {found[face.name][0]}: {len(bad)} tofu/blank of {len(candidates)}")
    pool = [c for c in candidates if c in usable]
    # Characters are drawn from all candidates, whatever the faces, then those some face lacks are
    # dropped: a new set of faces keeps the characters (so the zoo's source characters, the
    # candidates minus these, stay disjoint from them) instead of drawing a new sample.
    pick = np.random.default_rng(seed).choice(len(candidates), min(n_chars, len(candidates)), replace=False)
    chars = sorted((candidates[i] for i in pick if candidates[i] in usable), key=ord)
    if len(chars) < n_chars // 2:
        raise ValueError(f"only {len(chars)} of the {n_chars} characters picked are drawn by every face; "
                         f"drop the face that lacks most of them (see the lines above) or pass other candidates.")
    if len(chars) < n_chars:
        log(f"{n_chars - len(chars)} of the {n_chars} characters picked are missing in some face: "
            f"{len(chars)} characters per style")
    n_chars = len(chars)

    images = np.empty((len(faces) * n_chars, IMAGE_SIZE, IMAGE_SIZE), np.uint8)
    for s, face in enumerate(faces):
        font = open_font(*found[face.name])
        for c, ch in enumerate(chars):
            rng = np.random.default_rng([seed, s, ord(ch)])
            images[s * n_chars + c] = render_glyph(font, ch, rng, stroke_jitter=stroke_jitter)
        log(f"rendered {face.name}")
    style = np.repeat(np.arange(len(faces), dtype=np.int16), n_chars)
    char = np.tile(np.arange(n_chars, dtype=np.int16), len(faces))

    meta = {
        "description": "CJK typefaces as calligraphy styles; one image per (style, character).",
        "seed": seed, "image_size": IMAGE_SIZE, "n_chars": n_chars,
        "ink": "dark on white (0 = ink, 255 = paper)", "stroke_jitter": bool(stroke_jitter),
        "pillow": PIL.__version__, "freetype": features.version("freetype2"),
        "candidates": len(candidates), "usable": len(pool),
        "fonts": [{"name": f.name, "family": f.family, "package": f.package,
                   "package_version": _package_version(f.package),
                   "file": Path(found[f.name][0]).name, "index": found[f.name][1]}
                  for f in faces],
        "rejected": {name: dict(sorted(bad.items())) for name, bad in rejected.items() if bad},
        "characters": "".join(chars),
    }
    out = Path(out)
    np.savez_compressed(out, images=images, style=style, char=char,
                        styles=np.array([f.name for f in faces]), characters=np.array(chars),
                        meta=np.array(json.dumps(meta, ensure_ascii=False)))
    out.with_suffix(".json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n",
                                        encoding="utf-8")
    n_rejected = sum(len(b) for b in rejected.values())
    log(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): {len(faces)} styles x {n_chars} "
        f"characters; {n_rejected} tofu/blank glyphs rejected, {len(pool)} characters usable")
    return meta


def _refuse_other_faces(out: Path, faces: tuple[Face, ...]) -> None:
    """Raise when ``out`` already holds an archive whose classes are other faces than ``faces``."""
    sidecar = out.with_suffix(".json")
    if not sidecar.is_file():
        return
    try:
        old = [(f["name"], f["family"], f["package"]) for f in json.loads(sidecar.read_text("utf-8"))["fonts"]]
    except (ValueError, KeyError, TypeError):
        return      # not our metadata: nothing to compare with
    new = [(f.name, f.family, f.package) for f in faces]
    if old != new:
        gone = [n for n, *_ in old if n not in {m for m, *_ in new}]
        added = [n for n, *_ in new if n not in {m for m, *_ in old}]
        what = "; ".join(filter(None, (gone and f"drops {', '.join(gone)}", added and f"adds {', '.join(added)}")))
        raise ValueError(
            f"{out} holds an archive of other fonts than this build ({what or 'same fonts, other order'}); "
            f"rebuilding it in place would change the classes of every run that uses it. "
            f"Write the new archive to a new file with --out NEW.npz.")


def contact_sheet(out: str | Path, path: str | Path | None = None, per_class: int = 10) -> None:
    """Save a PNG with ``per_class`` images of every style, one row per style, named on the left."""
    from PIL import Image, ImageDraw

    data = read(path)
    n_styles, size = len(data["styles"]), data["images"].shape[-1]
    label = 150
    sheet = np.full((n_styles * size, label + per_class * size), 255, np.uint8)
    for s in range(n_styles):
        idx = np.flatnonzero(data["style"] == s)[:: max(1, (data["style"] == s).sum() // per_class)]
        for j, i in enumerate(idx[:per_class]):
            sheet[s * size:(s + 1) * size, label + j * size:label + (j + 1) * size] = data["images"][i]
    img = Image.fromarray(sheet)
    draw = ImageDraw.Draw(img)
    for s, name in enumerate(data["styles"]):
        draw.text((4, s * size + size // 2), str(name), fill=0, anchor="lm")
    img.save(out)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``build [--out PATH] [--chars N] [--stroke-jitter]`` or ``sheet OUT.png``."""
    parser = argparse.ArgumentParser(prog="python -m lab.data.build_glyphs", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="render the dataset from installed fonts")
    b.add_argument("--out", default=str(DEFAULT_PATH))
    b.add_argument("--chars", type=int, default=N_CHARS)
    b.add_argument("--stroke-jitter", action="store_true",
                   help="vary each image's stroke width (off: strokes keep the font's own width)")
    s = sub.add_parser("sheet", help="write a contact sheet PNG of an archive")
    s.add_argument("png")
    s.add_argument("--archive", default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(args.out, n_chars=args.chars, stroke_jitter=args.stroke_jitter)
        else:
            contact_sheet(args.png, args.archive)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
