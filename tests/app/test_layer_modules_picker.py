"""Component test of the Choose form's layer picker (no browser): the modules inside each layer on request."""
from __future__ import annotations


def test_the_layer_picker_offers_the_modules_inside_each_layer():
    from app.choose.config_panel import ConfigPanel
    from app.choose.presets import TINY_PRESET

    import lab.backbones

    panel = ConfigPanel()
    panel.apply_preset(TINY_PRESET)                  # mlp:depth=3,width=64 on digits
    panel.layer_modules = True                       # before any listing there is nothing to expand
    assert panel.layer_options() == [] and "List the layers of the backbone first" in panel._catalogue_note.object
    panel.load_catalogue()
    assert panel.error == ""
    assert panel.layer_options() == ["fc1", "fc1.0", "fc1.1", "fc1.2", "fc2", "fc2.0", "fc2.1", "fc2.2",
                                     "fc3", "fc3.0", "fc3.1", "fc3.2", "pre_logits"]
    assert panel._layers_w.options == panel.layer_options() == list(panel.param.layers.objects)
    assert "4 layers in mlp:depth=3,width=64, and the 9 modules inside them" in panel._catalogue_note.object

    panel.layers = ["fc2.0", "fc1"]
    cfg = panel.to_config()
    assert cfg.layers == ("fc2.0", "fc1")
    bb = lab.backbones.load(cfg.backbone, in_chans=1, img_size=8, device="cpu")   # the library takes them
    assert bb.resolve_layers(cfg.layers) == ["fc1", "fc2.0"]

    panel.layer_modules = False                      # back to the catalogue: chosen modules are dropped
    assert panel._layers_w.options == ["fc1", "fc2", "fc3", "pre_logits"] and panel.layers == ["fc1"]
    assert "9 modules inside them can be offered too" in panel._catalogue_note.object


def test_each_form_has_its_own_module_listing():
    from app.choose.config_panel import ConfigPanel
    from app.choose.presets import TINY_PRESET

    first, second = ConfigPanel(), ConfigPanel()
    first.apply_preset(TINY_PRESET)
    first.layer_modules = True
    first.load_catalogue()
    assert "fc1.0" in first.layer_options() and second.layer_options() == [] and not second.layer_modules
