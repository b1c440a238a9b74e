"""Choose: the run settings, as a param-driven component that builds a :class:`lab.RunConfig`.

:class:`ConfigPanel` holds every choice in ``param`` parameters and turns them into a
validated :class:`lab.RunConfig` with :meth:`ConfigPanel.to_config` (ValueError with a
readable message on bad input). The parameters are built from the dataclass
(:mod:`app.choose._fields`): one per RunConfig field, with its type, default, choices
(:data:`lab.config.FIELD_CHOICES`) and the help text of its docstring
(:meth:`lab.RunConfig.field_docs`). The few values a fresh form deliberately starts from
instead of RunConfig's defaults are listed, each with its reason, in :data:`FORM_DEFAULTS`.
Presets fill the parameters; the widgets come from :mod:`app.choose._widgets`.
"""
from __future__ import annotations

import dataclasses
import html
import logging
from functools import partial

import panel as pn
import param

from lab.catalogue import METRICS, STRATEGIES
from lab.config import FIELD_CHOICES, RunConfig

from ._fields import (ADVANCED_FIELDS, DATASETS, FORM_DEFAULTS, OWN_WAY, PATH_KINDS, SPLIT_MODES,
                             TRAINING_FIELDS, FormDefault, RunConfigFields, fresh_form, to_field, to_parameter)
from ._widgets import (backbone_choices, device_choices, field_widget, gallery_html, generic_widget,
                              offline_backbones, offline_note_html)
from .presets import DEFAULT_PRESET, PRESETS
from app.base.resources import shared

__all__ = ["ConfigPanel", "DATASETS", "FORM_DEFAULTS", "FormDefault"]

_log = logging.getLogger(__name__)


def _trained(strategy) -> bool:
    """Whether a stored run's strategy trained weights (one this process has not registered may have)."""
    return strategy is not None and getattr(STRATEGIES.get(strategy), "trains", True)


class ConfigPanel(pn.viewable.Viewer, RunConfigFields):
    """Every choice of a run; :meth:`to_config` returns the :class:`lab.RunConfig`.

    One parameter per RunConfig field (built from the dataclass), plus the form's own:
    the preset, the run name, the dataset path and how classes are split.

    Examples
    --------
    >>> panel = ConfigPanel()
    >>> panel.apply_preset("Tiny demo (fast)")
    >>> panel.to_config().backbone
    'mlp:depth=3,width=64'
    """

    preset = param.Selector(default=DEFAULT_PRESET, objects=list(PRESETS), doc="The preset last applied.")
    run_name = param.String(default="", doc=RunConfig.field_docs()["name"])
    data_path = param.String(default="", doc="Folder (image folder) or CIFAR directory for on-disk datasets.")
    split_mode = param.Selector(default="paper default", objects=list(SPLIT_MODES),
                                doc="How classes are split into seen and unseen.")
    unseen_classes = param.ListSelector(default=[], objects=[], doc="Unseen classes picked by hand.")
    view = param.Dict(default={}, doc="View choices of the preset last applied (e.g. heatmap metric).")
    error = param.String(default="", doc="The last problem with the choices (shown in the panel).")
    layer_modules = param.Boolean(default=False, doc="Also offer the modules inside each layer (attention, MLP, "
                                                     "norms, convolutions): any module of the model can be measured.")

    def __init__(self, store=None, **params):
        super().__init__(**params)
        self._store = store
        self._dataset = None        # the loaded dataset (class list, thumbnails); per session
        self._loaded_spec = None
        self._catalogue: dict[str, list[str]] = {}   # layer -> modules inside it, of the backbone last listed
        self.param.device.objects = device_choices()
        for name, choices in FIELD_CHOICES.items():     # the catalogue's live tables: entries registered since import
            self.param[name].objects = list(choices)
        self._build_widgets()
        self.param.watch(self._on_dataset, ["dataset", "data_path"])
        self.param.watch(self._refresh_split_preview, ["split_mode", "n_unseen", "split_seed", "unseen_classes"])
        self.param.watch(self._on_strategy, ["strategy"])
        self.param.watch(self._on_error, ["error"])
        self.param.watch(self._refresh_layer_options, ["layer_modules"])
        self.apply_preset(self.preset)
        self._on_strategy()
        self._refresh_path_visibility()
        self._refresh_split_preview()

    # ------------------------------------------------------------------ public
    @classmethod
    def field_names(cls) -> list[str]:
        """The RunConfig fields that have a parameter of the same name."""
        return [f.name for f in dataclasses.fields(RunConfig) if f.name not in OWN_WAY]

    def apply_preset(self, name: str) -> None:
        """Fill the choices from a preset (see :mod:`app.choose.presets`); fields it does not set take the
        fresh form's value (RunConfig's default, or :data:`FORM_DEFAULTS`)."""
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {list(PRESETS)!r}. Got {name!r} instead.")
        preset = PRESETS[name]
        cfg = dict(preset["config"])
        values = fresh_form()
        values.update({k: to_parameter(k, v) for k, v in cfg.items() if k not in OWN_WAY})
        values.update(preset=name, data_path="", split_mode=preset.get("split_mode", "random"), layers=[],
                      unseen_classes=[], view=dict(preset.get("view", {})), error="",
                      run_name=cfg.get("name") or "", device=self.device)
        self.param.update(**values)
        self._about.object = f"<i>{html.escape(preset.get('about', ''))}</i>"
        self._preset_select.value = name

    def dataset_spec(self) -> str:
        """The ``lab.data.load`` spec of the current choice (ValueError when a path is missing)."""
        if self.dataset in PATH_KINDS:
            path = self.data_path.strip()
            if not path:
                raise ValueError(f"dataset '{self.dataset}' needs a path: type the folder into the path field "
                                 "(an image folder with one sub-folder per class, or the CIFAR directory).")
            return f"{self.dataset}:{path}"
        return self.dataset

    def load_dataset(self):
        """The chosen dataset (cached per process); ValueError/OSError with a readable message on failure."""
        spec = self.dataset_spec()
        return shared().datasets.get(spec)

    def split_lists(self, ds=None) -> tuple[list[str] | None, list[str] | None]:
        """(seen, unseen) for the config: explicit lists, or (None, None) for a random split."""
        if self.split_mode == "random":
            return None, None
        ds = ds or self.load_dataset()
        import lab.data

        if self.split_mode == "paper default":
            split = lab.data.Split.paper_default(ds)
            return list(split.seen), list(split.unseen)
        unseen = [c for c in ds.classes if c in set(self.unseen_classes)]
        if len(unseen) < 2:
            raise ValueError(f"pick at least 2 unseen classes by hand (got {len(unseen)}); "
                             "or choose the 'paper default' or 'random' split.")
        seen = [c for c in ds.classes if c not in unseen]
        if len(seen) < 2:
            raise ValueError(f"leave at least 2 seen classes to train on (got {len(seen)}).")
        return seen, unseen

    def config_dict(self) -> dict:
        """The RunConfig fields of the current choices (may still be invalid)."""
        out = {name: to_field(name, getattr(self, name)) for name in self.field_names()}
        defaults = RunConfig.defaults()
        if not STRATEGIES[self.strategy].trains:     # nothing is trained: training settings keep their defaults
            out.update({name: defaults[name] for name in TRAINING_FIELDS})
        if not STRATEGIES[self.strategy].needs_block:
            out["block"] = None
        seen, unseen = self.split_lists() if self.split_mode != "random" else (None, None)
        out.update(name=self.run_name.strip() or None, dataset=self.dataset_spec(), seen=seen, unseen=unseen,
                   backbone=self.backbone.strip(), metrics=out["metrics"] or list(defaults["metrics"]))
        return out

    def to_config(self):
        """A validated :class:`lab.RunConfig`; ValueError (readable) when a choice is wrong."""
        try:
            cfg = RunConfig(**self.config_dict())
            if cfg.name is None:      # a readable label for the runs table and comparison legends
                cfg = cfg.replace(name=cfg.describe())
        except ValueError as exc:
            self.error = str(exc)
            raise
        except OSError as exc:
            self.error = f"could not read the dataset: {exc}"
            raise ValueError(self.error) from exc
        self.error = ""
        return cfg

    def refresh_runs(self) -> None:
        """Refresh the 'weights of a previous run' choices from the run store."""
        options = {"—": ""}
        if self._store is not None:
            try:
                runs = self._store.list()
                for row in runs.itertuples():
                    if row.status == "finished" and _trained(row.strategy):
                        label = f"{row.name or row.run_id} · {row.backbone} · {row.dataset}"
                        options[label] = f"run:{row.run_id}"
            except Exception as exc:  # an unreadable store only empties this list
                _log.warning("could not list runs: %s", exc)
        self._previous.options = options

    # ------------------------------------------------------------------ reactions
    def _on_error(self, event) -> None:
        self._alert.param.update(object=html.escape(event.new), visible=bool(event.new))

    def _on_dataset(self, *_events) -> None:
        self._refresh_path_visibility()
        self._refresh_split_preview()

    def _on_strategy(self, *_events) -> None:
        trains = STRATEGIES[self.strategy].trains
        self._block_w.visible = STRATEGIES[self.strategy].needs_block
        for w in self._training_widgets:
            w.disabled = not trains

    def _refresh_path_visibility(self) -> None:
        self._path_w.visible = self.dataset in PATH_KINDS

    def _refresh_split_preview(self, *_events) -> None:
        """Class gallery (thumbnail per class) with the unseen classes of the current split highlighted."""
        self._hand_w.visible = self.split_mode == "by hand"
        self._random_row.visible = self.split_mode == "random"
        try:
            spec = self.dataset_spec()
        except ValueError as exc:
            self._gallery.object = f"<span style='color:#666'>{html.escape(str(exc))}</span>"
            return
        try:
            ds = shared().datasets.get(spec)
        except Exception as exc:  # unreadable folder, bad CIFAR files, ...
            self.error = f"could not load dataset {spec!r}: {exc}"
            self._gallery.object = ""
            return
        if self.error.startswith("could not load dataset"):
            self.error = ""
        if list(self.param.unseen_classes.objects) != list(ds.classes):
            self.param.unseen_classes.objects = list(ds.classes)
            self.unseen_classes = [c for c in self.unseen_classes if c in ds.classes]
            self._hand_w.options = list(ds.classes)
        try:
            if self.split_mode == "random":
                import lab.data

                unseen = set(lab.data.Split.random(ds.classes, n_unseen=min(self.n_unseen, len(ds.classes)),
                                                   seed=self.split_seed).unseen)
            else:
                unseen = set(self.split_lists(ds)[1])
        except ValueError as exc:
            unseen = set(self.unseen_classes)
            note = f"<div style='color:#b00'>{html.escape(str(exc))}</div>"
        else:
            note = ""
        self._gallery.object = note + gallery_html(ds, unseen)

    def load_catalogue(self, *_events) -> None:
        """Build the chosen backbone once (CPU) to list its layers for the layer and block choices."""
        import lab.backbones

        try:
            ds = self.load_dataset()
            bb = lab.backbones.load(self.backbone.strip(), pretrained=False, in_chans=ds.in_chans,
                                    img_size=self.img_size or ds.image_size, device="cpu")
        except Exception as exc:
            self.error = f"could not build backbone {self.backbone!r}: {exc}"
            return
        self.error = ""
        self._catalogue = {name: bb.submodules(name) for name in bb.layers}
        self.layers, self.projection_layers = [], []
        self._refresh_layer_options()
        self._block_w.options = [name for name, _module in bb.block_modules()]

    def layer_options(self) -> list[str]:
        """The layers offered: the listed backbone's catalogue, each layer followed by the modules inside it
        (:meth:`lab.backbones.Backbone.submodules`) when :attr:`layer_modules` is on; empty before a listing."""
        out = []
        for layer, inside in self._catalogue.items():
            out += [layer, *inside] if self.layer_modules else [layer]
        return out

    def _refresh_layer_options(self, *_events) -> None:
        if not self._catalogue:
            self._catalogue_note.object = ("<small>List the layers of the backbone first; then the modules "
                                           "inside them can be offered too.</small>" if self.layer_modules else
                                           "<small>All layers are measured unless you pick some.</small>")
            return
        options = self.layer_options()
        self.param.layers.objects = options
        self.param.projection_layers.objects = options
        self.layers = [name for name in self.layers if name in options]
        self.projection_layers = [name for name in self.projection_layers if name in options]
        self._layers_w.options = options
        self._projection_layers_w.options = options
        n_modules = sum(len(inside) for inside in self._catalogue.values())
        modules = (f", and the {n_modules} modules inside them" if self.layer_modules else
                   f"; {n_modules} modules inside them can be offered too")
        self._catalogue_note.object = (f"<small>{len(self._catalogue)} layers in {html.escape(self.backbone)}"
                                       f"{modules}; none chosen = all layers</small>")

    # ------------------------------------------------------------------ widgets
    def _build_widgets(self) -> None:
        w = partial(field_widget, self)      # a parameter's widget, its RunConfig docstring as tooltip
        self._preset_select = pn.widgets.Select(label="Preset", options=list(PRESETS), value=self.preset,
                                                css_classes=["ls-preset"], sizing_mode="stretch_width")
        self._preset_button = pn.widgets.Button(label="Apply preset", color="primary",
                                                sizing_mode="stretch_width", css_classes=["ls-apply-preset"])
        self._preset_button.on_click(lambda _e: self.apply_preset(self._preset_select.value))
        self._about = pn.pane.HTML("", sizing_mode="stretch_width", styles={"font-size": "12px"})
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["ls-config-alert"])
        dataset_w = w(pn.widgets.Select, "dataset", label="Dataset", options=dict(DATASETS),
                      sizing_mode="stretch_width")
        self._path_w = w(pn.widgets.TextInput, "data_path", label="Path on disk",
                         placeholder="/data/my_images or /data/cifar-100-python", sizing_mode="stretch_width",
                         visible=False)
        split_w = w(pn.widgets.RadioButtonGroup, "split_mode", sizing_mode="stretch_width", color="light")
        self._random_row = pn.Row(w(pn.widgets.IntInput, "n_unseen", label="Unseen classes", width=110),
                                  w(pn.widgets.IntInput, "split_seed", label="Split seed", width=110))
        self._hand_w = w(pn.widgets.MultiChoice, "unseen_classes", label="Unseen classes (by hand)",
                         sizing_mode="stretch_width", visible=False)
        self._gallery = pn.pane.HTML("", sizing_mode="stretch_width", max_height=350,
                                     styles={"overflow-y": "auto"})
        offline = offline_backbones()
        backbone_w = w(pn.widgets.AutocompleteInput, "backbone", label="Backbone (type to search timm)",
                       options=backbone_choices(offline), restrict=False, case_sensitive=False, search_strategy="includes",
                       min_characters=1, sizing_mode="stretch_width", css_classes=["ls-backbone"])
        offline_note = pn.pane.HTML(offline_note_html(offline), sizing_mode="stretch_width",
                                    css_classes=["ls-offline-models"], margin=(0, 10))
        pretrained_w = w(pn.widgets.Checkbox, "pretrained", label="pretrained weights (cached)")
        checkpoint_w = w(pn.widgets.TextInput, "checkpoint", label="Checkpoint (path or run:ID)",
                         placeholder="weights.safetensors or run:ID", sizing_mode="stretch_width")
        self._previous = pn.widgets.Select(label="…or the fine-tuned weights of a previous run", options={"—": ""},
                                           sizing_mode="stretch_width")
        self._previous.param.watch(lambda e: setattr(self, "checkpoint", e.new) if e.new else None, "value")
        catalogue_button = pn.widgets.Button(label="List layers of this backbone", sizing_mode="stretch_width")
        catalogue_button.on_click(self.load_catalogue)
        self._catalogue_note = pn.pane.HTML("<small>All layers are measured unless you pick some.</small>")
        self._layers_w = w(pn.widgets.MultiChoice, "layers", label="Layers (empty = all)", sizing_mode="stretch_width")
        self._modules_w = w(pn.widgets.Checkbox, "layer_modules", label="modules inside layers (attention, MLP, ...)")
        pooling_w = w(pn.widgets.Select, "pooling", label="Pooling", width=110)
        size_w = w(pn.widgets.IntInput, "img_size", label="Image size (empty = native)", width=150)
        strategy_w = w(pn.widgets.RadioButtonGroup, "strategy", sizing_mode="stretch_width", color="light")
        self._block_w = w(pn.widgets.AutocompleteInput, "block", label="Block to tune (tap name or index, -1 = last)",
                          options=[], restrict=False, min_characters=0, sizing_mode="stretch_width", visible=False)
        epochs_w = w(pn.widgets.IntInput, "epochs", label="Epochs (empty = default)", width=80)
        lr_w = w(pn.widgets.FloatInput, "lr", label="LR (empty = default)", width=110, step=1e-4, format="0.[00000]")
        batch_w = w(pn.widgets.IntInput, "batch_size", label="Batch", width=80)
        noise_w = w(pn.widgets.FloatSlider, "label_noise", label="Label noise", step=0.05, sizing_mode="stretch_width")
        contribution_w = w(pn.widgets.Checkbox, "contribution",
                           label="layer contribution (re-init each layer at the end)")
        advanced = {name: generic_widget(self, name) for name in ADVANCED_FIELDS}
        self._projection_layers_w = advanced["projection_layers"]
        self._training_widgets = [epochs_w, lr_w, batch_w, noise_w, contribution_w,
                                  *(advanced[name] for name in ADVANCED_FIELDS if name in TRAINING_FIELDS)]
        metrics_w = w(pn.widgets.MultiChoice, "metrics", label="Metrics",
                      options={METRICS[m].label: m for m in self.param.metrics.objects}, sizing_mode="stretch_width")
        unseen_w = w(pn.widgets.IntInput, "unseen_per_class", label="Unseen imgs/class (empty = all)", width=120)
        seen_w = w(pn.widgets.IntInput, "seen_per_class", label="Seen imgs/class (empty = all)", width=120)
        train_w = w(pn.widgets.IntInput, "train_per_class", label="Train imgs/class (empty = all)", width=120)
        seeds_w = w(pn.widgets.TextInput, "seeds", label="Seeds", width=90)
        device_w = w(pn.widgets.Select, "device", label="Device", width=90)
        projection_w = w(pn.widgets.Select, "projection", label="Layout", width=90)
        name_w = w(pn.widgets.TextInput, "run_name", label="Run name (optional)", sizing_mode="stretch_width")
        self._sections = pn.Accordion(
            ("Data & split", pn.Column(dataset_w, self._path_w, split_w, self._random_row, self._hand_w,
                                       self._gallery, sizing_mode="stretch_width")),
            ("Backbone & layers", pn.Column(backbone_w, offline_note, pretrained_w, checkpoint_w, self._previous,
                                            catalogue_button, self._catalogue_note, self._layers_w, self._modules_w,
                                            pn.Row(pooling_w, size_w), sizing_mode="stretch_width")),
            ("Fine-tuning", pn.Column(strategy_w, self._block_w, pn.Row(epochs_w, lr_w, batch_w), noise_w,
                                      contribution_w, sizing_mode="stretch_width")),
            ("Metrics, seeds & device", pn.Column(metrics_w, pn.Row(unseen_w, seen_w, train_w),
                                                  pn.Row(seeds_w, device_w, projection_w), name_w,
                                                  sizing_mode="stretch_width")),
            ("Advanced", pn.Column(*advanced.values(), sizing_mode="stretch_width")),
            active=[0], sizing_mode="stretch_width", toggle=False,
        )
        self._layout = pn.Column(
            pn.Row(self._preset_select, sizing_mode="stretch_width"), self._preset_button, self._about,
            self._alert, self._sections, sizing_mode="stretch_width",
        )
        self.refresh_runs()

    def __panel__(self):
        return self._layout
