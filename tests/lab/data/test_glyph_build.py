"""Rendering the glyph dataset from an installed CJK font (CI installs fonts-arphic-uming)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lab.data import build_glyphs, glyphs


@pytest.fixture(scope="module")
def face(installed_face):
    """The first face of glyphs.FACES found on this machine, UMing first."""
    return installed_face(glyphs.FACES, "fonts-arphic-uming", "no CJK font from lab.data.glyphs.FACES")


def test_candidate_characters_are_shared_by_all_scripts():
    chars = build_glyphs.candidate_characters()
    assert len(chars) == 1583 and len(set(chars)) == len(chars)
    assert {"永", "人", "火"} <= set(chars) and "这" not in chars and "這" not in chars


def test_glyph_status_detects_tofu_and_blank(face):
    font = build_glyphs.open_font(*build_glyphs.find_font(face), size=40)
    assert build_glyphs.glyph_status(font, "永") == "ok"
    assert build_glyphs.glyph_status(font, "\U0010FFFD") in ("tofu", "blank")   # no face defines it
    assert build_glyphs.glyph_status(font, " ") == "blank"


def test_render_glyph_is_deterministic_with_mild_variation(face):
    font = build_glyphs.open_font(*build_glyphs.find_font(face))
    a = build_glyphs.render_glyph(font, "永", np.random.default_rng(1))
    b = build_glyphs.render_glyph(font, "永", np.random.default_rng(1))
    c = build_glyphs.render_glyph(font, "永", np.random.default_rng(2))
    assert np.array_equal(a, build_glyphs.render_glyph(font, "永", np.random.default_rng(1), stroke_jitter=False))
    assert a.shape == (64, 64) and a.dtype == np.uint8
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() < 64 and a[0, 0] == 255                     # dark ink on white paper
    ink = np.argwhere(a < 128)
    assert ink.min() >= 1 and ink.max() <= 62                  # glyph fits in the image


def test_render_glyph_without_stroke_jitter_keeps_the_font_width_and_the_other_draws(face):
    font = build_glyphs.open_font(*build_glyphs.find_font(face))
    stroke_draw = {seed: int(np.random.default_rng(seed).choice(len(build_glyphs.STROKE_P), p=list(build_glyphs.STROKE_P)))
                   for seed in range(40)}
    plain = next(s for s, d in stroke_draw.items() if d == 1)       # drew "the font's own width"
    bold = next(s for s, d in stroke_draw.items() if d == 3)        # drew "much bolder"
    same = [build_glyphs.render_glyph(font, "永", np.random.default_rng(plain), stroke_jitter=j) for j in (True, False)]
    assert np.array_equal(*same)                 # nothing else about the image changes
    jittered, kept = (build_glyphs.render_glyph(font, "永", np.random.default_rng(bold), stroke_jitter=j)
                      for j in (True, False))
    ink = lambda img: float((255 - img.astype(float)).sum())
    assert ink(jittered) > 1.15 * ink(kept)      # the bold draw thickens strokes only with jitter


def test_build_tiny_archive_and_read_it(face, tmp_path):
    twin = dataclasses.replace(face, name=face.name + " copy")
    out = tmp_path / "tiny.npz"
    pool = build_glyphs.candidate_characters()[:40]
    meta = build_glyphs.build(out, faces=(face, twin), n_chars=4, candidates=pool, log=lambda msg: None)
    assert meta["stroke_jitter"] is False                      # strokes keep the font's width by default
    data = glyphs.read(out)
    assert data["images"].shape == (8, 64, 64) and data["styles"].tolist() == [face.name, twin.name]
    assert data["style"].tolist() == [0] * 4 + [1] * 4 and data["char"].tolist() == [0, 1, 2, 3] * 2
    assert np.array_equal(data["images"][:4], glyphs.read(out)["images"][:4])
    assert meta["fonts"][0]["package"] == face.package and out.with_suffix(".json").is_file()
    assert set(meta["characters"]) <= set(pool) and meta["candidates"] == 40
    # the same (seed, style, character) gives the same image, whatever else is built
    again = build_glyphs.build(tmp_path / "again.npz", faces=(face, twin), n_chars=4, candidates=pool,
                         log=lambda msg: None)
    assert again["characters"] == meta["characters"]
    assert np.array_equal(glyphs.read(tmp_path / "again.npz")["images"], data["images"])


def test_build_names_missing_fonts_and_packages(tmp_path):
    nope = glyphs.Face("Nope", "No Such Family", "fonts-nope", "/nonexistent/nope.ttf")
    with pytest.raises(ValueError, match=r"fonts not found: Nope. Install them with "
                                         r"`apt-get install fonts-nope`"):
        build_glyphs.build(tmp_path / "x.npz", faces=(nope,), n_chars=2)


def test_rebuild_with_other_fonts_is_refused_unless_out_is_a_new_file(face, tmp_path):
    twin, other = (dataclasses.replace(face, name=face.name + suffix) for suffix in (" copy", " other"))
    pool = build_glyphs.candidate_characters()[:40]
    out = tmp_path / "g.npz"
    build_glyphs.build(out, faces=(face, twin), n_chars=4, candidates=pool, log=lambda msg: None)
    before = out.read_bytes()
    with pytest.raises(ValueError, match=rf"drops {twin.name}; adds {other.name}.*--out NEW.npz"):
        build_glyphs.build(out, faces=(face, other), n_chars=4, candidates=pool, log=lambda msg: None)
    assert out.read_bytes() == before                            # the old archive is untouched
    build_glyphs.build(out, faces=(face, twin), n_chars=4, candidates=pool, log=lambda msg: None)   # same fonts: fine
    build_glyphs.build(tmp_path / "new.npz", faces=(face, other), n_chars=4, candidates=pool, log=lambda msg: None)
    assert glyphs.read(tmp_path / "new.npz")["styles"].tolist() == [face.name, other.name]


def test_command_line_refusal_is_one_line_not_a_traceback(face, tmp_path, capsys, monkeypatch):
    twin = dataclasses.replace(face, name=face.name + " copy")
    out = tmp_path / "g.npz"
    build_glyphs.build(out, faces=(face, twin), n_chars=4, candidates=build_glyphs.candidate_characters()[:40],
                 log=lambda msg: None)
    monkeypatch.setattr(build_glyphs, "FACES", (face,))                # the code now lists other fonts
    assert build_glyphs.main(["build", "--out", str(out), "--chars", "4"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--out NEW.npz" in err and "Traceback" not in err


def test_read_missing_archive_says_how_to_rebuild(tmp_path):
    with pytest.raises(ValueError, match=r"glyph archive not found at .*python -m lab.data.build_glyphs build"):
        glyphs.read(tmp_path / "none.npz")
