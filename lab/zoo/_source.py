"""The source task of the glyph zoo: fonts and characters disjoint from ``glyphs``, rendered.

The zoo's backbones (:mod:`lab.zoo.pretrain`) are trained on CJK glyphs rendered from
fonts packaged in Debian that are **not** among the 20 typefaces of ``glyphs`` (nor
other weights, ancestors or derivatives of them), with characters that are not among its
characters either. This module names those fonts, checks them against the targets
and renders the source images with :func:`lab.data.glyphs.render_glyph`, the renderer
of the target dataset.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lab.data import glyphs

__all__ = ["SOURCE_FACES", "EXCLUDED_PACKAGES", "SourceData", "target_conflicts", "source_characters",
           "render_source"]

_T = "/usr/share/fonts/truetype"
_F = glyphs.Face
# Distinct designs: gothic, mincho and ming, kai, handwriting (pen, pencil, brush-pen),
# retro, bitmap-like and display faces. None is a target typeface or related to one.
SOURCE_FACES: tuple[glyphs.Face, ...] = (
    _F("BIZ UDGothic", "BIZ UDGothic", "fonts-morisawa-bizud-gothic",
       f"{_T}/bizud-gothic/BIZUDGothic-Regular.ttf", "Regular"),
    _F("BIZ UDGothic Bold", "BIZ UDGothic", "fonts-morisawa-bizud-gothic",
       f"{_T}/bizud-gothic/BIZUDGothic-Bold.ttf", "Bold"),
    _F("BIZ UDMincho", "BIZ UDMincho", "fonts-morisawa-bizud-mincho",
       f"{_T}/bizud-mincho/BIZUDMincho-Regular.ttf"),
    _F("cwTeX Kai", "cwTeXKai", "fonts-cwtex-kai", f"{_T}/cwtex/cwkai.ttf"),
    _F("cwTeX Ming", "cwTeXMing", "fonts-cwtex-ming", f"{_T}/cwtex/cwming.ttf"),
    _F("Dejima Mincho", "Dejima", "fonts-dejima-mincho", f"{_T}/dejima-mincho/dejima-mincho-r227.ttf"),
    _F("DotGothic16", "DotGothic16", "fonts-dotgothic16", f"{_T}/dotgothic16/DotGothic16-Regular.ttf"),
    _F("Hanazono Mincho", "HanaMinA", "fonts-hanazono", f"{_T}/hanazono/HanaMinA.ttf"),
    _F("Ume Gothic", "Ume Gothic", "fonts-horai-umefont", f"{_T}/horai-umefont/ume-tgo4.ttf"),
    _F("Ume Gothic C5", "Ume Gothic C5", "fonts-horai-umefont", f"{_T}/horai-umefont/ume-tgc5.ttf"),
    _F("Ume Mincho", "Ume Mincho", "fonts-horai-umefont", f"{_T}/horai-umefont/ume-tmo3.ttf"),
    _F("Kiloji", "kiloji", "fonts-kiloji", f"{_T}/kiloji/kiloji.ttf"),
    _F("Kiloji B", "kiloji - B", "fonts-kiloji", f"{_T}/kiloji/kiloji_b.ttf"),
    _F("Kiloji D", "kiloji - D", "fonts-kiloji", f"{_T}/kiloji/kiloji_d.ttf"),
    _F("Klee One", "Klee One", "fonts-klee", f"{_T}/klee/KleeOne-Regular.ttf", "Regular"),
    _F("Klee One SemiBold", "Klee One", "fonts-klee", f"{_T}/klee/KleeOne-SemiBold.ttf", "SemiBold"),
    _F("Konatu", "Konatu", "fonts-konatu", f"{_T}/konatu/Konatu.ttf"),
    _F("Mona", "Mona", "fonts-mona", f"{_T}/mona/mona.ttf"),
    _F("Oradano Mincho", "Oradano-mincho-GSRR", "fonts-oradano-mincho-gsrr",
       f"{_T}/oradano-mincho/OradanoGSRR.ttf"),
    _F("Reggae One", "Reggae One", "fonts-reggae", f"{_T}/reggae/ReggaeOne-Regular.ttf"),
    _F("Sawarabi Gothic", "Sawarabi Gothic", "fonts-sawarabi-gothic",
       f"{_T}/sawarabi-gothic/sawarabi-gothic-medium.ttf"),
    _F("Sawarabi Mincho", "Sawarabi Mincho", "fonts-sawarabi-mincho",
       f"{_T}/sawarabi-mincho/sawarabi-mincho-medium.ttf"),
    _F("Seto", "SetoFont", "fonts-seto", f"{_T}/seto/setofont.ttf"),
    _F("Train One", "Train One", "fonts-train", f"{_T}/train/TrainOne-Regular.ttf"),
    _F("YOz", "YOzN", "fonts-yozvox-yozfont", f"{_T}/yozvox-yozfont/YOzRN_.ttf"),
    _F("YOz Bold", "YOzNb", "fonts-yozvox-yozfont", f"{_T}/yozvox-yozfont/YOzBN_.ttf"),
)
"""Source fonts, one class each for the ``"font"`` task."""

EXCLUDED_PACKAGES: dict[str, str] = {
    "fonts-noto-cjk": "other weights of Noto Serif CJK Black (target, from fonts-noto-cjk-extra)",
    "fonts-arphic-bkai00mp": "AR PL KaitiM Big5, the design AR PL UKai (target) grew from",
    "fonts-arphic-gkai00mp": "AR PL KaitiM GB, the design AR PL UKai (target) grew from",
    "fonts-arphic-bsmi00lp": "AR PL Mingti2L Big5, the design AR PL UMing (target) grew from",
    "fonts-arphic-gbsn00lp": "AR PL SungtiL GB, the design AR PL UMing (target) grew from",
    "fonts-babelstone-han": "built on the Arphic Ming/Sung designs of AR PL UMing (target)",
    "fonts-wqy-microhei": "same project as WenQuanYi Zen Hei (target)",
    "fonts-ipafont-gothic": "same IPA font set as IPA Mincho (target)",
    "fonts-ipaexfont-mincho": "derived from IPA Mincho (target)",
    "fonts-ipaexfont-gothic": "same IPA font set as IPA Mincho (target)",
    "fonts-ipamj-mincho": "derived from IPA Mincho (target)",
    "fonts-takao-mincho": "a fork of IPA Mincho (target)",
    "fonts-takao-gothic": "a fork of the IPA fonts (target: IPA Mincho)",
    "fonts-migmix": "M+ and IPA glyphs (targets: M PLUS 1, IPA Mincho)",
    "fonts-umeplus": "M+ glyphs (target: M PLUS 1)",
    "fonts-umeplus-cl": "M+ glyphs (target: M PLUS 1)",
    "fonts-vlgothic": "M+ glyphs (target: M PLUS 1)",
    "fonts-monapo": "IPA glyphs (target: IPA Mincho)",
    "fonts-motoya-l-cedar": "the gothic that Motoya L Maruberi (target) rounds",
}
"""Debian CJK font packages left out of the source although they are not target
packages themselves: other weights, ancestors or derivatives of a target typeface."""

_TARGET_JSON = Path(glyphs.__file__).with_name("glyphs.json")
_FAMILY_SUFFIX = re.compile(r"(cn|tw|hk|sc|tc|jp|kr|light|regular|medium|bold|thin|mbe)$")


def _family_key(family: str) -> str:
    key = re.sub(r"[^a-z0-9]", "", family.lower())
    while (short := _FAMILY_SUFFIX.sub("", key)) != key and short:
        key = short
    return key


def target_conflicts(faces=SOURCE_FACES, target_meta: dict | None = None) -> list[str]:
    """Why each face in ``faces`` may not enter pretraining; empty when all are allowed.

    A face conflicts when its package is a target package or in
    :data:`EXCLUDED_PACKAGES`, or its family names the same typeface as a target
    family (compared without case, spaces, region and weight suffixes).

    Parameters
    ----------
    faces : sequence of lab.data.glyphs.Face
    target_meta : dict, optional
        The ``glyphs`` metadata (``fonts`` list); default the shipped ``glyphs.json``.
    """
    meta = target_meta or json.loads(_TARGET_JSON.read_text(encoding="utf-8"))
    packages = {f["package"] for f in meta["fonts"]}
    families = {_family_key(f["family"]): f["name"] for f in meta["fonts"]}
    out = []
    for face in faces:
        key = _family_key(face.family)
        if face.package in packages:
            out.append(f"{face.name}: package {face.package} ships a target typeface")
        elif face.package in EXCLUDED_PACKAGES:
            out.append(f"{face.name}: package {face.package} is excluded ({EXCLUDED_PACKAGES[face.package]})")
        elif any(key.startswith(k) or k.startswith(key) for k in families):
            match = next(v for k, v in families.items() if key.startswith(k) or k.startswith(key))
            out.append(f"{face.name}: family {face.family!r} is the target typeface {match!r}")
    return out


def source_characters(target_meta: dict | None = None) -> list[str]:
    """:func:`lab.data.glyphs.candidate_characters` without the characters of ``glyphs``."""
    meta = target_meta or json.loads(_TARGET_JSON.read_text(encoding="utf-8"))
    taken = set(meta["characters"])
    return [c for c in glyphs.candidate_characters() if c not in taken]


# ----------------------------------------------------------------------------------------------- data


@dataclass
class SourceData:
    """Rendered source images.

    Attributes
    ----------
    images : uint8 (N, 64, 64), 255 = paper
    font, char : int64 (N,)
        Class indices into ``fonts`` / ``chars``.
    val : bool (N,)
        Held-out (font, character) pairs, drawn with their own variation.
    fonts : list of dict
        ``name``, ``family``, ``package``, ``package_version``, ``file``, ``index``.
    chars : str
    """

    images: np.ndarray
    font: np.ndarray
    char: np.ndarray
    val: np.ndarray
    fonts: list
    chars: str


def render_source(faces=SOURCE_FACES, n_chars: int = 400, seed: int = 0, val_fraction: float = 0.1,
                  candidates: list[str] | None = None, log=print) -> SourceData:
    """Render every face x ``n_chars`` characters drawn by all faces (none of ``glyphs``).

    A fraction ``val_fraction`` of the (face, character) pairs is held out for
    validation. Every image's variation comes from ``(seed, face, character)``.
    """
    conflicts = target_conflicts(faces)
    if conflicts:
        raise ValueError(f"source faces overlap the glyphs targets: {'; '.join(conflicts)}. "
                         f"Remove them from the source faces.")
    found = {face.name: glyphs.find_font(face) for face in faces}
    missing = [face for face in faces if found[face.name] is None]
    if missing:
        pkgs = " ".join(sorted({f.package for f in missing}))
        raise ValueError(f"source fonts not found: {', '.join(f.name for f in missing)}. "
                         f"Install them with `apt-get install {pkgs}` and run the recipe again.")
    pool = list(candidates) if candidates is not None else source_characters()
    usable = set(pool)
    for face in faces:
        status = glyphs._check_face(*found[face.name], pool)
        usable -= {ch for ch, s in status.items() if s != "ok"}
    pool = [c for c in pool if c in usable]
    if len(pool) < n_chars:
        raise ValueError(f"only {len(pool)} source characters are drawn by every face; "
                         f"expected at least n_chars={n_chars}. Lower --chars.")
    rng = np.random.default_rng(seed)
    chars = sorted((pool[i] for i in rng.choice(len(pool), n_chars, replace=False)), key=ord)
    n = len(faces) * n_chars
    images = np.empty((n, glyphs.IMAGE_SIZE, glyphs.IMAGE_SIZE), np.uint8)
    val = rng.random(n) < val_fraction
    val[int(rng.integers(n))] = True          # at least one held-out pair, even in tiny renders
    for f, face in enumerate(faces):
        font = glyphs.open_font(*found[face.name])
        for c, ch in enumerate(chars):
            i = f * n_chars + c
            images[i] = glyphs.render_glyph(font, ch, np.random.default_rng([seed, f, ord(ch), int(val[i])]),
                                             stroke_jitter=True)   # augmentation of the source task
        log(f"rendered {face.name} ({found[face.name][0]})")
    fonts = [{"name": f.name, "family": f.family, "package": f.package,
              "package_version": glyphs._package_version(f.package),
              "file": Path(found[f.name][0]).name, "index": found[f.name][1]} for f in faces]
    return SourceData(images=images, font=np.repeat(np.arange(len(faces)), n_chars),
                      char=np.tile(np.arange(n_chars), len(faces)), val=val, fonts=fonts, chars="".join(chars))
