"""The glyph zoo: shipped cards and weights, the pretraining recipe, disjointness from the targets."""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest
import torch

import lab.zoo
from lab.__main__ import main as cli
from lab.data import build_glyphs, glyphs
from lab.zoo import recipe

TARGET = json.loads(glyphs.DEFAULT_PATH.with_suffix(".json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def source_face(installed_face):
    """The first source face installed here, smallest package first (CI installs fonts-sawarabi-mincho)."""
    return installed_face(recipe.SOURCE_FACES, "fonts-sawarabi-mincho",
                          "no source font of lab.zoo.recipe.SOURCE_FACES")


# ------------------------------------------------------------------------------------------ disjointness


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def test_source_fonts_are_disjoint_from_the_target_typefaces():
    faces = recipe.SOURCE_FACES
    assert recipe.target_conflicts(faces) == []
    target_packages = {f["package"] for f in TARGET["fonts"]}
    target_files = {f["file"] for f in TARGET["fonts"]}
    assert len(TARGET["fonts"]) == 20
    for face in faces:
        assert face.package not in target_packages and face.package not in recipe.EXCLUDED_PACKAGES
        assert os.path.basename(face.path) not in target_files
        for t in TARGET["fonts"]:
            # no target family name (without its region/weight word) inside a source family, or back
            core = _norm(t["family"].rsplit(" ", 1)[0] if t["family"].endswith((" CN", " SC")) else t["family"])
            assert core not in _norm(face.family) and _norm(face.family) not in core, (face, t["family"])
    assert len({f.name for f in faces}) == len(faces) >= 20
    assert not set(recipe.EXCLUDED_PACKAGES) & target_packages


@pytest.mark.parametrize("face, why", [
    (glyphs.FACES[0], "ships a target typeface"),
    (glyphs.Face("Noto Serif CJK JP Bold", "Noto Serif CJK JP", "fonts-other", "/x.ttc", "Bold"),
     "is the target typeface 'Noto Serif CJK Black'"),
    (glyphs.Face("IPAex Mincho", "IPAexMincho", "fonts-ipaexfont-mincho", "/x.ttf"), "derived from IPA Mincho"),
])
def test_target_conflicts_catch_target_faces_their_weights_and_derivatives(face, why):
    (msg,) = recipe.target_conflicts([face])
    assert msg.startswith(face.name + ":") and why in msg


def test_source_characters_are_not_target_characters():
    chars = recipe.source_characters()
    assert not set(chars) & set(TARGET["characters"])
    assert len(chars) == len(build_glyphs.candidate_characters()) - len(TARGET["characters"])


def test_render_source_refuses_a_target_face():
    with pytest.raises(ValueError, match="overlap the glyphs targets: AR PL UKai: package fonts-arphic-ukai"):
        recipe.render_source((glyphs.FACES[0],), n_chars=2)


# ------------------------------------------------------------------------------------------ shipped zoo


def _load_shipped(card):
    import timm
    from safetensors.torch import load_file

    state = load_file(card["weights"])
    model = timm.create_model(card["architecture"], num_classes=card["num_classes"], **card["model_kwargs"])
    model.load_state_dict({k: v.to(model.state_dict()[k].dtype) for k, v in state.items()}, strict=True)
    return model.eval(), state


def test_zoo_ships_a_cnn_and_a_transformer_within_30_mb():
    names = lab.zoo.names()
    assert len(names) >= 2
    cards = [lab.zoo.card(n) for n in names]
    kinds = {"vit" if c["architecture"].startswith(("vit", "deit")) else "cnn" for c in cards}
    assert kinds == {"cnn", "vit"}
    assert sum(os.path.getsize(c["weights"]) for c in cards) <= 30e6


@pytest.mark.parametrize("name", lab.zoo.names())
def test_zoo_card_is_complete_and_fits_its_weights(name):
    card = lab.zoo.card(name)
    n = len(lab.zoo.CARD_KEYS)
    assert tuple(card)[:n] == lab.zoo.CARD_KEYS and card["name"] == name
    assert set(tuple(card)[n:]) <= set(lab.zoo.RECIPE_KEYS)          # older cards stop at CARD_KEYS
    model, state = _load_shipped(card)
    assert all(v.dtype == torch.float16 for v in state.values() if v.is_floating_point())
    c, h, w = card["input_size"]
    assert card["model_kwargs"]["in_chans"] == c == len(card["mean"]) == len(card["std"])
    with torch.no_grad():
        logits = model(torch.zeros(2, c, h, w))
    assert logits.shape == (2, card["num_classes"]) and torch.isfinite(logits).all()
    assert card["recipe"].startswith("python -m lab pretrain ")
    assert f"--epochs {card['epochs']} " in card["recipe"] and f"--seed {card['seed']} " in card["recipe"]
    assert f"--out lab/zoo/{name} " in card["recipe"]
    assert 1 / card["num_classes"] < card["source_accuracy"] <= 1
    md = (lab.zoo.ZOO_DIR / f"{name}.md").read_text(encoding="utf-8")
    assert card["recipe"] in md and f"{card['source_accuracy']:.3f}" in md
    assert all(f.package in md for f in recipe.SOURCE_FACES)


@pytest.mark.parametrize("name", lab.zoo.names())
def test_zoo_card_records_that_its_source_shares_nothing_with_the_targets(name):
    card = lab.zoo.card(name)
    record = card["disjoint_from_targets"]
    # recorded against today's targets (the shipped glyphs.json), not an older set of styles
    assert record["target_styles"] == [f["name"] for f in TARGET["fonts"]]
    assert record["target_characters"] == len(TARGET["characters"])
    assert record["shared_packages"] == record["shared_families"] == [] and record["shared_characters"] == 0
    # and the card's source fonts, checked here again by name and package
    sources = {f.name: f for f in recipe.SOURCE_FACES}
    assert set(card["data"]["font_names"]) <= set(sources) and len(card["data"]["font_names"]) == card["data"]["fonts"]
    assert not {sources[n].package for n in card["data"]["font_names"]} & {f["package"] for f in TARGET["fonts"]}


def test_zoo_card_typo_names_the_closest_models():
    name = lab.zoo.names()[0]
    with pytest.raises(ValueError, match=f"no zoo model '{name}x'.*Did you mean '{name}'"):
        lab.zoo.card(name + "x")


# ------------------------------------------------------------------------------------------ the recipe


def test_recipe_runs_end_to_end_and_is_reproducible(source_face, tmp_path):
    import timm
    from safetensors.torch import load_file

    faces = (source_face, dataclasses.replace(source_face, name=source_face.name + " twin"))
    pool = recipe.source_characters()[:30]
    data = recipe.render_source(faces, n_chars=6, seed=3, candidates=pool, log=lambda m: None)
    assert data.images.shape == (12, 64, 64) and data.images.dtype == np.uint8
    assert not set(data.chars) & set(TARGET["characters"]) and data.fonts[0]["package"] == source_face.package
    cards = [recipe.pretrain("vit_tiny", tmp_path / run / "m", task="both", epochs=1, seed=3, n_chars=6,
                               batch_size=4, faces=faces, data=data, log=lambda m: None) for run in ("a", "b")]
    card = cards[0]
    assert tuple(card) == lab.zoo.CARD_KEYS + lab.zoo.RECIPE_KEYS
    assert card["num_classes"] == 2 and card["epochs"] == 1              # the character rows are not shipped
    assert card["recipe"].endswith("--task both --epochs 1 --seed 3 --chars 6 --pool wide --batch-size 4 "
                                   "--lr 0.001 --augment 1")
    assert set(card["source_accuracies"]) == {"font", "char"}
    assert card["source_accuracy"] == card["source_accuracies"]["font"]              # the font head's
    assert set(card["history"][0]["val_accuracy"]) == {"font", "char"}
    assert card["data"]["fonts"] == 2 and card["data"]["characters"] == 6 and card["data"]["images"] == 12
    assert card["augment"] == recipe.Augment().to_dict() and card["wall_seconds"] > 0
    assert {k: v for k, v in cards[1].items() if k not in ("recipe", "wall_seconds", "training", "history")} == \
        {k: v for k, v in card.items() if k not in ("recipe", "wall_seconds", "training", "history")}
    a, b = (load_file(tmp_path / run / "m.safetensors") for run in ("a", "b"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)     # same seed, same weights
    model = timm.create_model(card["architecture"], num_classes=card["num_classes"], **card["model_kwargs"])
    model.load_state_dict({k: v.float() for k, v in a.items()}, strict=True)
    assert json.loads((tmp_path / "a" / "m.json").read_text()) == card
    md = (tmp_path / "a" / "m.md").read_text()
    assert source_face.package in md and card["recipe"] in md
    assert "0 font packages, 0 typeface families and 0 characters in common with the 20 styles" in md
    assert "| epoch | train loss | font accuracy | char accuracy | seconds |" in md
    assert f"(font {card['source_accuracies']['font']:.3f}, char {card['source_accuracies']['char']:.3f})" in md
    assert not (tmp_path / "a" / "m.partial").exists()                  # checkpoints go once the files are written


def test_pretrain_command_line_writes_the_zoo_files(source_face, tmp_path, monkeypatch, capsys):
    real = recipe.pretrain

    def few_fonts(*args, **kwargs):        # the real recipe, on one installed font and 3 characters
        return real(*args, faces=(source_face,), **kwargs)

    monkeypatch.setattr(recipe, "pretrain", few_fonts)
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "zoo" / "tiny"
    assert cli(["pretrain", "--arch", "vit_tiny", "--out", str(out), "--epochs", "1", "--chars", "3",
                "--task", "char", "--batch-size", "2", "--pool", "common"]) == 0
    assert "pretrained tiny: source accuracy" in capsys.readouterr().out
    assert {p.name for p in out.parent.iterdir()} == {"tiny.safetensors", "tiny.json", "tiny.md"}


def test_pretrain_bad_input_is_one_line(capsys, tmp_path):
    assert cli(["pretrain", "--arch", "resnet18", "--out", str(tmp_path / "m.json")]) == 2
    assert "--out must be DIR/NAME with a plain NAME" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:                     # argparse's own usage error
        cli(["pretrain", "--arch", "nope", "--out", str(tmp_path / "m")])
    assert exc.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown --task 'style'; expected one of font, char, both"):
        recipe.pretrain("resnet18", tmp_path / "m", task="style")
    with pytest.raises(ValueError, match="unknown recipe option n_char; expected fields of"):
        recipe.pretrain("resnet18", tmp_path / "m", n_char=3)
    with pytest.raises(SystemExit) as exc:
        cli(["pretrain", "--arch", "resnet18", "--out", str(tmp_path / "m"), "--chars", "many"])
    assert exc.value.code == 2
    assert "expected a number of characters or 'all'. Got 'many' instead" in capsys.readouterr().err
    assert cli(["pretrain", "--arch", "resnet18", "--out", str(tmp_path / "m"), "--augment", "-1"]) == 2
    assert "augment strength must be a finite number >= 0. Got -1.0 instead." in capsys.readouterr().err
