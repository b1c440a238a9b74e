"""The embedded glyph dataset: 20 CJK typefaces as 20 "calligraphers".

The seed papers (Dyballa et al. 2024, arXiv 2405.01524) use a Chinese
calligraphy dataset with one class per calligrapher and 64x64 images of single
characters. This module mirrors it with free CJK fonts from Debian: each class is
one visibly distinct typeface or brush style, each image one character drawn in
it, with mild per-image variation (position, scale, rotation) from a fixed seed.
Strokes keep the font's own width: weight is part of a style.

The archive is rendered once, from the fonts, by :mod:`lab.data.build_glyphs`
(``python -m lab.data.build_glyphs build``). It ships inside the package, so
loading (:func:`read`) needs no fonts, and this module imports no font tools.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["FACES", "Face", "DEFAULT_PATH", "SEED", "IMAGE_SIZE", "N_CHARS", "read"]

DEFAULT_PATH = Path(__file__).with_name("glyphs.npz")
SEED = 20240502
IMAGE_SIZE = 64
N_CHARS = 320


@dataclass(frozen=True)
class Face:
    """One class of the glyph dataset: a typeface and where to find it.

    Parameters
    ----------
    name : str
        Class name shown to users.
    family : str
        Font family as FreeType reports it (selects the face inside a .ttc).
    package : str
        Debian package that installs the font.
    path : str
        Usual install path; when absent, ``fc-list`` is asked for ``family``.
    style : str
        Style as FreeType reports it (e.g. ``"Thin"``), when the family has several.
    """

    name: str
    family: str
    package: str
    path: str
    style: str = ""


_T = "/usr/share/fonts/truetype"
_O = "/usr/share/fonts/opentype"
# Twenty styles a person tells apart at a glance, at most one face of each look: kai, fangsong,
# palace script and old-style Korean hanja, a cursive brush hand, ming/song/mincho in light and
# black weights, hei in hairline, regular, bold and black, two rounded weights, a condensed
# oblique, a marker hand, a pop display face, 16-px and 8-px bitmaps and a stroke-order diagram.
# Faces benchmarks/seen_accuracy.py --all-styles measured taken for each other on more than 10 %
# of their images were dropped: TW-Kai / AR PL UKai, TW-Sung / AR PL UMing, the Kouzan and Aoyagi
# brush faces (Kouzan Brush kept Kouzan Sosho at 87 %), LXGW WenKai / cwTeX FangSong,
# Noto Sans CJK / cwTeX HeiBold.
FACES: tuple[Face, ...] = (
    Face("AR PL UKai", "AR PL UKai CN", "fonts-arphic-ukai", f"{_T}/arphic/ukai.ttc"),
    Face("cwTeX FangSong", "cwTeXFangSong", "fonts-cwtex-fs", f"{_T}/cwtex/cwfs.ttf"),
    Face("UnGungseo", "UnGungseo", "fonts-unfonts-core", f"{_T}/unfonts-core/UnGungseo.ttf"),
    Face("UnYetgul", "UnYetgul", "fonts-unfonts-extra", f"{_T}/unfonts-extra/UnYetgul.ttf"),
    Face("Kouzan Sosho", "KouzanBrushFontSousyo", "fonts-kouzan-mouhitsu",
         f"{_T}/kouzan-mouhitsu/KouzanBrushFontSousyo.ttf"),
    Face("AR PL UMing", "AR PL UMing CN", "fonts-arphic-uming", f"{_T}/arphic/uming.ttc"),
    Face("IPA Mincho", "IPAMincho", "fonts-ipafont-mincho", f"{_O}/ipafont-mincho/ipam.ttf"),
    Face("Noto Serif CJK Black", "Noto Serif CJK SC", "fonts-noto-cjk-extra",
         f"{_O}/noto/NotoSerifCJK-Black.ttc", "Black"),
    Face("M PLUS 1 Thin", "M PLUS 1", "fonts-mplus", f"{_O}/mplus/Mplus1-Thin.otf", "Thin"),
    Face("WenQuanYi Zen Hei", "WenQuanYi Zen Hei", "fonts-wqy-zenhei", f"{_T}/wqy/wqy-zenhei.ttc"),
    Face("cwTeX HeiBold", "cwTeXHeiBold", "fonts-cwtex-heib", f"{_T}/cwtex/cwheib.ttf"),
    Face("M PLUS 1 Black", "M PLUS 1", "fonts-mplus", f"{_O}/mplus/Mplus1-Black.otf", "Black"),
    Face("cwTeX Yen", "cwTeXYen", "fonts-cwtex-yen", f"{_T}/cwtex/cwyen.ttf"),
    Face("Motoya L Maru", "MotoyaLMaru", "fonts-motoya-l-maruberi",
         f"{_T}/motoya-l-maruberi/MTLmr3m.ttf"),
    Face("Smiley Sans", "Smiley Sans", "fonts-smiley-sans", f"{_T}/smiley-sans/SmileySans-Oblique.ttf"),
    Face("Yusei Magic", "Yusei Magic", "fonts-yusei-magic", f"{_T}/yusei-magic/YuseiMagic-Regular.ttf"),
    Face("RocknRoll One", "RocknRoll One", "fonts-rocknroll", f"{_T}/rocknroll/RocknRollOne-Regular.ttf"),
    Face("Unifont", "Unifont", "fonts-unifont", f"{_O}/unifont/unifont.otf"),
    Face("Misaki Gothic", "MisakiGothic", "fonts-misaki", f"{_T}/misaki/misaki_gothic.ttf"),
    Face("Kanji Stroke Orders", "KanjiStrokeOrders", "fonts-kanjistrokeorders",
         f"{_T}/kanjistrokeorders/KanjiStrokeOrders_v4.003.ttf"),
)


# ---------------------------------------------------------------------------
# Reading the shipped file (no fonts needed)

@functools.lru_cache(maxsize=4)
def _read_cached(path: str, mtime_ns: int) -> dict:
    with np.load(path, allow_pickle=False) as z:
        out = {k: z[k] for k in z.files}
    for value in out.values():
        value.setflags(write=False)
    out["meta"] = json.loads(str(out["meta"]))
    return out


def read(path: str | Path | None = None) -> dict:
    """Read a glyph archive, cached per process.

    Parameters
    ----------
    path : str or Path, optional
        An archive written by :func:`lab.data.build_glyphs.build`; default the shipped ``glyphs.npz``.

    Returns
    -------
    dict
        ``images`` uint8 (N, 64, 64), ``style`` int16 (N,), ``char`` int16 (N,),
        ``styles`` str (S,), ``characters`` str (C,), ``meta`` dict. Arrays are
        read-only and shared between callers: copy before modifying.
    """
    p = Path(path) if path is not None else DEFAULT_PATH
    if not p.is_file():
        raise ValueError(
            f"glyph archive not found at {p}. It ships with the package; rebuild it with "
            "`python -m lab.data.build_glyphs build` (needs the fonts listed in lab.data.glyphs.FACES).")
    return _read_cached(str(p.resolve()), p.stat().st_mtime_ns)
