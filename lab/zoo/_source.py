"""The source task of the glyph zoo: fonts and characters disjoint from ``glyphs``, rendered.

The zoo's backbones (:mod:`lab.zoo.recipe`) are trained on CJK glyphs rendered from
fonts packaged in Debian that are **not** among the 20 typefaces of ``glyphs`` (nor
other weights, ancestors or derivatives of them), with characters that are not among its
characters either. This module names those fonts and the character pools, checks them
against the targets and renders the source images with :func:`lab.data.build_glyphs.render_glyph`,
the renderer of the target dataset. :func:`load_source` keeps a rendering in
``$LAB_CACHE_DIR/zoo-source`` under a key of its data parameters (:func:`render_key`), so a
resumed or repeated run does not render again.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lab.data import build_glyphs, glyphs
from lab.store import atomic_file

__all__ = ["SOURCE_FACES", "EXCLUDED_PACKAGES", "POOLS", "SourceData", "target_conflicts", "source_characters",
           "render_source", "render_key", "load_source"]

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


POOLS = ("common", "wide")
"""Candidate characters of the source task: ``"common"`` is :func:`lab.data.build_glyphs.candidate_characters`
(the 1583 of GB 2312 level 1, Big5 common and JIS X 0208 level 1 together, the pool ``glyphs`` draws
from); ``"wide"`` is every kanji of JIS X 0208 (levels 1 and 2), Big5 common or GB 2312 (both
levels), about 11 000, of which the source faces all draw a few thousand."""


def _wide_candidates() -> list[str]:
    decode = build_glyphs._decode_pairs
    jis = decode(range(0xB0, 0xF5), range(0xA1, 0xFF), "euc_jp")
    gb = decode(range(0xB0, 0xF8), range(0xA1, 0xFF), "gb2312")
    big5 = [c for c in decode(range(0xA4, 0xC7), [*range(0x40, 0x7F), *range(0xA1, 0xFF)], "big5")
            if 0xA440 <= int.from_bytes(c.encode("big5"), "big") <= 0xC67E]
    return sorted({*jis, *gb, *big5, *build_glyphs.candidate_characters()}, key=ord)


def source_characters(target_meta: dict | None = None, pool: str = "common") -> list[str]:
    """The characters of ``pool`` (one of :data:`POOLS`) without the characters of ``glyphs``.

    ``"common"`` keeps :func:`lab.data.build_glyphs.candidate_characters`' order (stroke count);
    ``"wide"`` is in code point order.
    """
    if pool not in POOLS:
        raise ValueError(f"unknown character pool {pool!r}; expected one of {', '.join(POOLS)}.")
    meta = target_meta or json.loads(_TARGET_JSON.read_text(encoding="utf-8"))
    taken = set(meta["characters"])
    candidates = build_glyphs.candidate_characters() if pool == "common" else _wide_candidates()
    return [c for c in candidates if c not in taken]


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
    pool : str
        The character pool (:data:`POOLS`) the characters were drawn from.
    render_seconds : float
        Wall time of the rendering (also when the images come from the cache).
    key : str
        The render cache key of these images (:func:`render_key`); empty when not cached.
    """

    images: np.ndarray
    font: np.ndarray
    char: np.ndarray
    val: np.ndarray
    fonts: list
    chars: str
    pool: str = "common"
    render_seconds: float = 0.0
    key: str = ""


def _locate(faces) -> dict[str, tuple[str, int]]:
    """Each face's ``(file, index)``; refuses target faces and names the packages of missing ones."""
    conflicts = target_conflicts(faces)
    if conflicts:
        raise ValueError(f"source faces overlap the glyphs targets: {'; '.join(conflicts)}. "
                         f"Remove them from the source faces.")
    found = {face.name: build_glyphs.find_font(face) for face in faces}
    missing = [face for face in faces if found[face.name] is None]
    if missing:
        pkgs = " ".join(sorted({f.package for f in missing}))
        raise ValueError(f"source fonts not found: {', '.join(f.name for f in missing)}. "
                         f"Install them with `apt-get install {pkgs}` and run the recipe again.")
    return found


def _font_records(faces, found) -> list[dict]:
    return [{"name": f.name, "family": f.family, "package": f.package,
             "package_version": build_glyphs._package_version(f.package),
             "file": Path(found[f.name][0]).name, "index": found[f.name][1]} for f in faces]


def render_source(faces=SOURCE_FACES, n_chars: int | None = 400, seed: int = 0, val_fraction: float = 0.1,
                  candidates: list[str] | None = None, log=print, *, pool: str = "common",
                  stroke_jitter: bool = False) -> SourceData:
    """Render every face x ``n_chars`` characters drawn by all faces (none of ``glyphs``).

    ``n_chars`` None takes every character of the pool that all faces draw. A fraction
    ``val_fraction`` of the (face, character) pairs is held out for validation. Every
    image's variation comes from ``(seed, face, character)``; ``stroke_jitter`` turns on
    :func:`lab.data.build_glyphs.render_glyph`'s stroke weight draw (the recipe leaves it off and
    varies weight per batch instead, :mod:`lab.zoo._augment`). ``candidates`` replaces the
    ``pool``'s characters.
    """
    t0 = time.perf_counter()
    found = _locate(faces)
    pool_chars = list(candidates) if candidates is not None else source_characters(pool=pool)
    usable = set(pool_chars)
    for face in faces:
        status = build_glyphs._check_face(*found[face.name], pool_chars)
        usable -= {ch for ch, s in status.items() if s != "ok"}
    pool_chars = [c for c in pool_chars if c in usable]
    n_chars = len(pool_chars) if n_chars is None else int(n_chars)
    if len(pool_chars) < n_chars:
        hint = " or use --pool wide" if pool == "common" and candidates is None else ""
        raise ValueError(f"only {len(pool_chars)} source characters of the {pool!r} pool are drawn by every "
                         f"face; expected at least --chars {n_chars}. Lower --chars{hint}.")
    log(f"{len(pool_chars)} characters of the {pool!r} pool are drawn by all {len(faces)} fonts; "
        f"rendering {n_chars} of them")
    rng = np.random.default_rng(seed)
    chars = sorted((pool_chars[i] for i in rng.choice(len(pool_chars), n_chars, replace=False)), key=ord)
    n = len(faces) * n_chars
    images = np.empty((n, glyphs.IMAGE_SIZE, glyphs.IMAGE_SIZE), np.uint8)
    val = rng.random(n) < val_fraction
    val[int(rng.integers(n))] = True          # at least one held-out pair, even in tiny renders
    for f, face in enumerate(faces):
        font = build_glyphs.open_font(*found[face.name])
        for c, ch in enumerate(chars):
            i = f * n_chars + c
            images[i] = build_glyphs.render_glyph(font, ch, np.random.default_rng([seed, f, ord(ch), int(val[i])]),
                                             stroke_jitter=stroke_jitter)
        log(f"rendered {face.name} ({found[face.name][0]})")
    return SourceData(images=images, font=np.repeat(np.arange(len(faces)), n_chars),
                      char=np.tile(np.arange(n_chars), len(faces)), val=val, fonts=_font_records(faces, found),
                      chars="".join(chars), pool=pool, render_seconds=time.perf_counter() - t0)


# ----------------------------------------------------------------------------------------------- cache

_CACHE_FORMAT = 1
"""Bump when the rendering changes (:func:`lab.data.build_glyphs.render_glyph`, the draw of characters)."""


def render_key(faces=SOURCE_FACES, *, n_chars: int | None, seed: int, pool: str, val_fraction: float = 0.1,
               stroke_jitter: bool = False) -> str:
    """The render cache key: a hash of everything the rendered images depend on.

    The fonts (name, family, package and its version, file name and size, index in the
    file), the character pool and count, the seed, the held-out fraction, the stroke
    jitter, the image size, the characters of ``glyphs`` (which the pool leaves out) and
    the renderer's format.
    """
    found = _locate(faces)
    fonts = [{**rec, "style": f.style, "bytes": Path(found[f.name][0]).stat().st_size}
             for f, rec in zip(faces, _font_records(faces, found))]
    target = json.loads(_TARGET_JSON.read_text(encoding="utf-8"))["characters"]
    params = {"format": _CACHE_FORMAT, "fonts": fonts, "n_chars": n_chars, "seed": int(seed), "pool": pool,
              "val_fraction": float(val_fraction), "stroke_jitter": bool(stroke_jitter),
              "image_size": glyphs.IMAGE_SIZE, "targets": hashlib.sha256("".join(target).encode()).hexdigest()}
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:24]


def load_source(faces=SOURCE_FACES, *, n_chars: int | None, seed: int, pool: str, val_fraction: float = 0.1,
                log=print) -> SourceData:
    """:func:`render_source`, cached: the rendered arrays are kept in ``$LAB_CACHE_DIR/zoo-source``.

    The entry is named by :func:`render_key`, so a resumed or repeated run with the same
    data parameters skips the rendering; any change of them renders anew. A cache folder
    that cannot be written only costs the rendering next time.
    """
    from lab.data import cache_dir

    key = render_key(faces, n_chars=n_chars, seed=seed, pool=pool, val_fraction=val_fraction)
    folder = cache_dir() / "zoo-source"
    npz, meta_path = folder / f"{key}.npz", folder / f"{key}.json"
    if npz.is_file() and meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            with np.load(npz, allow_pickle=False) as arrays:
                data = SourceData(**{k: arrays[k] for k in ("images", "font", "char", "val")},
                                  fonts=meta["fonts"], chars=meta["chars"], pool=meta["pool"],
                                  render_seconds=float(meta["render_seconds"]), key=key)
            if meta["key"] == key and len(data.images) == len(data.fonts) * len(data.chars):
                log(f"source images from the cache {npz} ({len(data.images)} images, rendered in "
                    f"{data.render_seconds:.0f} s)")
                return data
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log(f"the cached source images {npz} are unreadable ({exc}); rendering them again")
    data = render_source(faces, n_chars=n_chars, seed=seed, val_fraction=val_fraction, log=log, pool=pool)
    data.key = key
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_file(npz) as f:
            np.savez(f, images=data.images, font=data.font, char=data.char, val=data.val)
        meta = {"key": key, "fonts": data.fonts, "chars": data.chars, "pool": data.pool,
                "render_seconds": data.render_seconds}
        with atomic_file(meta_path) as f:
            f.write(json.dumps(meta, ensure_ascii=False).encode("utf-8"))
        log(f"cached the source images in {npz} ({npz.stat().st_size / 1e6:.0f} MB)")
    except OSError as exc:
        log(f"could not cache the source images in {folder} ({exc}); set LAB_CACHE_DIR to a writable "
            f"folder to keep them for the next run")
    return data
