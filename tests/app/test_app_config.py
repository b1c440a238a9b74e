"""Component tests of the Choose form (no browser): its params, presets and checks build a RunConfig."""
from __future__ import annotations

import pytest


# ------------------------------------------------------------------ ConfigPanel
def test_preset_fills_the_config():
    from app.choose.config_panel import ConfigPanel
    from app.choose.presets import TINY_PRESET

    panel = ConfigPanel()
    panel.apply_preset(TINY_PRESET)
    cfg = panel.to_config()
    assert (cfg.dataset, cfg.backbone, cfg.strategy, cfg.n_epochs) == ("digits", "mlp:depth=3,width=64", "full", 2)
    assert cfg.seen is None and cfg.unseen is None and cfg.n_unseen == 3


def test_a_fresh_form_is_runconfig_except_the_listed_differences():
    import dataclasses

    from app.choose.config_panel import FORM_DEFAULTS, ConfigPanel

    import lab
    from lab.config import RunConfig

    panel = ConfigPanel()
    cfg, default = panel.to_config(), RunConfig()
    differing = {f.name for f in dataclasses.fields(RunConfig) if getattr(cfg, f.name) != getattr(default, f.name)}
    assert differing <= set(FORM_DEFAULTS), differing - set(FORM_DEFAULTS)
    assert differing == {"name", "seen", "unseen", "unseen_per_class", "seen_per_class", "backbone", "epochs", "lr"}
    assert all(entry.reason for entry in FORM_DEFAULTS.values())
    split = lab.data.Split.paper_default(lab.data.load("glyphs"))
    assert (cfg.seen, cfg.unseen) == (tuple(split.seen), tuple(split.unseen))
    assert cfg.name == cfg.replace(name=None).describe()
    assert (cfg.unseen_per_class, cfg.seen_per_class) == (FORM_DEFAULTS["unseen_per_class"].value,
                                                          FORM_DEFAULTS["seen_per_class"].value)
    panel.strategy = "layer"                         # block: held ready, sent only for Layer / SCL FT
    assert panel.to_config().block == FORM_DEFAULTS["block"].value


def test_form_fields_come_from_the_dataclass():
    import dataclasses

    from app.choose.config_panel import ConfigPanel

    from lab.catalogue import METRICS
    from lab.config import FIELD_CHOICES, RunConfig

    panel = ConfigPanel()
    docs = RunConfig.field_docs()
    assert set(panel.field_names()) == {f.name for f in dataclasses.fields(RunConfig)} - {"name", "seen", "unseen"}
    for name in panel.field_names():
        assert panel.param[name].doc == docs[name].replace("``", ""), name
    assert panel.param.run_name.doc == docs["name"]
    for name, choices in FIELD_CHOICES.items():
        assert list(panel.param[name].objects) == list(choices), name
    # None is None, not 0: an empty optional number sends None
    panel.param.update(img_size=None, lr=None, epochs=None, unseen_per_class=None)
    cfg = panel.to_config()
    assert (cfg.img_size, cfg.lr, cfg.epochs, cfg.unseen_per_class) == (None, None, None, None)
    assert panel._sections.objects[-1].objects[0].description == docs["heldout_fraction"]
    metrics_w = panel._sections.objects[3].objects[0]
    assert metrics_w.options == {METRICS[m].label: m for m in FIELD_CHOICES["metrics"]}


def test_default_preset_uses_the_papers_split():
    from app.choose.config_panel import ConfigPanel

    cfg = ConfigPanel().to_config()
    assert cfg.dataset == "glyphs" and len(cfg.unseen) == 5 and len(cfg.seen) == 15


def test_params_drive_the_config():
    from app.choose.config_panel import ConfigPanel

    panel = ConfigPanel()
    panel.param.update(strategy="layer", block="layer3", seeds="0, 1, 2", epochs=5, lr=0.001, label_noise=0.2,
                       device="cpu", split_mode="random", n_unseen=4, split_seed=7)
    cfg = panel.to_config()
    assert (cfg.strategy, cfg.block, cfg.seeds, cfg.n_epochs, cfg.lr) == ("layer", "layer3", (0, 1, 2), 5, 0.001)
    assert (cfg.label_noise, cfg.device, cfg.n_unseen, cfg.split_seed) == (0.2, "cpu", 4, 7)
    panel.param.update(strategy="scl", block="-2")
    assert panel.to_config().block == -2
    panel.strategy = "none"
    cfg = panel.to_config()
    assert cfg.n_epochs == 0 and cfg.block is None and cfg.label_noise == 0.0


def test_split_by_hand():
    from app.choose.config_panel import ConfigPanel

    panel = ConfigPanel()
    panel.apply_preset("Tiny demo (fast)")
    panel.param.update(split_mode="by hand", unseen_classes=["3", "7"])
    cfg = panel.to_config()
    assert cfg.unseen == ("3", "7") and "3" not in cfg.seen
    assert "<b>2 unseen</b>" in panel._gallery.object


@pytest.mark.parametrize("change, message", [
    ({"split_mode": "by hand", "unseen_classes": ["3"]}, "pick at least 2 unseen classes"),
    ({"dataset": "folder"}, "needs a path"),
    ({"seeds": "zero"}, "seeds must be integers"),
    ({"backbone": ""}, "backbone must be a model name"),
])
def test_bad_choices_raise_readable_errors_and_show_them(change, message):
    from app.choose.config_panel import ConfigPanel

    panel = ConfigPanel()
    panel.apply_preset("Tiny demo (fast)")
    panel.param.update(**change)
    with pytest.raises(ValueError, match=message):
        panel.to_config()
    assert message in panel.error or change.get("dataset") == "folder"


def test_unreadable_folder_shows_an_alert(tmp_path):
    from app.choose.config_panel import ConfigPanel

    panel = ConfigPanel()
    panel.param.update(dataset="folder", data_path=str(tmp_path / "missing"))
    assert panel._alert.visible and "could not load dataset" in panel._alert.object


def test_two_config_panels_do_not_share_state():
    from app.choose.config_panel import ConfigPanel

    a, b = ConfigPanel(), ConfigPanel()
    a.param.update(backbone="vit_tiny_patch16_224", split_mode="by hand", unseen_classes=[])
    assert b.backbone == "glyph_resnet18" and b.split_mode == "paper default"
    assert a._layout is not b._layout


def test_gallery_names_every_glyph_style_and_marks_a_cut_name():
    from app.choose.config_panel import ConfigPanel

    panel = ConfigPanel()            # the default preset: the 20 glyph styles
    html = panel._gallery.object
    assert "title='Kanji Stroke Orders'" in html and ">Kanji Stroke…</div>" in html   # cut, with a mark
    assert ">Smiley Sans</div>" in html                                                 # short names whole
