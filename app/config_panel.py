"""Choose: the run settings, as a param-driven component that builds a :class:`lab.RunConfig`.

:class:`ConfigPanel` holds every choice in ``param`` parameters (dataset, split,
backbone, layers, strategy, training settings, metrics, seeds, device) and turns
them into a validated :class:`lab.RunConfig` with :meth:`ConfigPanel.to_config`
(ValueError with a readable message on bad input). Presets fill the parameters.
"""
from __future__ import annotations

import html
import logging
from types import MappingProxyType

import panel as pn
import param

from lab.config import COLLAPSE_METRICS, DEFAULT_METRICS, POOLINGS, PROJECTIONS, SEPARABILITY_METRICS, STRATEGIES

from .presets import DEFAULT_PRESET, PRESETS, SEED_ARCHITECTURES
from .resources import shared

__all__ = ["ConfigPanel", "DATASETS"]

_log = logging.getLogger(__name__)

DATASETS = MappingProxyType({
    "Glyphs · 20 calligraphy styles (embedded)": "glyphs",
    "Glyphs · characters (embedded)": "glyphs:character",
    "Digits · scikit-learn 8×8 (embedded)": "digits",
    "Image folder on disk…": "folder",
    "CIFAR-10 on disk…": "cifar10",
    "CIFAR-100 on disk…": "cifar100",
})
"""Dataset choices (label -> kind); the last three need a path."""

_PATH_KINDS = ("folder", "cifar10", "cifar100")
_SPLIT_MODES = ("paper default", "random", "by hand")


def _device_choices() -> list[str]:
    choices = ["auto", "cpu"]
    try:
        import torch

        if torch.cuda.is_available():
            choices.append("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            choices.append("mps")
    except Exception:  # torch broken: cpu still listed, the run reports the problem
        pass
    return choices


def _backbone_choices() -> list[str]:
    try:
        import timm

        names = timm.list_models()
    except Exception:
        names = []
    try:  # zoo models first, then the Hugging Face families; any typed 'hf:ORG/NAME' or 'zoo:NAME' works too
        from lab.backbones import HF_FAMILIES, zoo_names

        first = list(zoo_names()) + [f"hf:{family}" for family in HF_FAMILIES]
    except Exception:
        first = []
    return first + list(SEED_ARCHITECTURES) + [n for n in names if n not in SEED_ARCHITECTURES and n not in first]


def _parse_seeds(text: str) -> list[int]:
    parts = [p for p in str(text).replace(";", ",").replace(" ", ",").split(",") if p]
    try:
        seeds = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"seeds must be integers separated by commas, e.g. '0' or '0, 1, 2'. Got {text!r} instead.")
    if not seeds:
        raise ValueError("seeds must list at least one seed, e.g. '0' or '0, 1, 2'.")
    return seeds


class ConfigPanel(pn.viewable.Viewer):
    """Every choice of a run; :meth:`to_config` returns the :class:`lab.RunConfig`.

    Examples
    --------
    >>> panel = ConfigPanel()
    >>> panel.apply_preset("Tiny demo (fast)")
    >>> panel.to_config().backbone
    'mlp:depth=3,width=64'
    """

    preset = param.Selector(default=DEFAULT_PRESET, objects=list(PRESETS), doc="The preset last applied.")
    run_name = param.String(default="", doc="Optional label of the run in the runs table.")
    dataset = param.Selector(default="glyphs", objects=list(DATASETS.values()), doc="Dataset kind.")
    data_path = param.String(default="", doc="Folder (image folder) or CIFAR directory for on-disk datasets.")
    split_mode = param.Selector(default="paper default", objects=list(_SPLIT_MODES),
                                doc="How classes are split into seen and unseen.")
    n_unseen = param.Integer(default=5, bounds=(2, None), doc="Unseen classes of a random split.")
    split_seed = param.Integer(default=0, bounds=(0, None), doc="Seed of the random split and partitions.")
    unseen_classes = param.ListSelector(default=[], objects=[], doc="Unseen classes picked by hand.")
    backbone = param.String(default="resnet18", doc="timm model name, 'mlp' / 'mlp:depth=8,width=256', a zoo name, or 'hf:FAMILY|ORG/NAME|DIR'.")
    pretrained = param.Boolean(default=False, doc="Load timm's pretrained weights (needs them cached).")
    checkpoint = param.String(default="", doc="Weights file (.safetensors / torch) or 'run:ID' of a stored run.")
    img_size = param.Integer(default=0, bounds=(0, 1024), doc="Resize images to this size; 0 = native.")
    layers = param.ListSelector(default=[], objects=[], doc="Layers to measure; empty = all.")
    pooling = param.Selector(default="auto", objects=list(POOLINGS), doc="Pooling of maps/tokens.")
    strategy = param.Selector(default="full", objects=list(STRATEGIES), doc="Fine-tuning strategy.")
    block = param.String(default="-1", doc="Block trained by Layer / SCL FT: a tap name or an index.")
    epochs = param.Integer(default=3, bounds=(0, 1000), doc="Training epochs (epoch 0 is always evaluated).")
    lr = param.Number(default=0.0, bounds=(0, None), doc="Learning rate; 0 = the strategy's default.")
    batch_size = param.Integer(default=64, bounds=(1, 4096), doc="Training batch size.")
    label_noise = param.Number(default=0.0, bounds=(0.0, 1.0), doc="Fraction of seen labels corrupted.")
    contribution = param.Boolean(default=False, doc="Measure each layer's contribution at the end.")
    metrics = param.ListSelector(default=list(DEFAULT_METRICS),
                                 objects=list(SEPARABILITY_METRICS + COLLAPSE_METRICS), doc="Metrics.")
    unseen_per_class = param.Integer(default=60, bounds=(2, None), doc="Unseen images per class.")
    seen_per_class = param.Integer(default=30, bounds=(2, None), doc="Seen held-out images per class.")
    seeds = param.String(default="0", doc="Seeds, comma separated; one full run each.")
    device = param.Selector(default="auto", objects=["auto", "cpu"], doc="Compute device.")
    projection = param.Selector(default="umap", objects=list(PROJECTIONS), doc="2-D layout of embeddings.")
    view = param.Dict(default={}, doc="View choices of the preset last applied (e.g. heatmap metric).")
    error = param.String(default="", doc="The last problem with the choices (shown in the panel).")

    def __init__(self, store=None, **params):
        super().__init__(**params)
        self._store = store
        self._dataset = None        # the loaded dataset (class list, thumbnails); per session
        self._loaded_spec = None
        self.param.device.objects = _device_choices()
        self._build_widgets()
        self.param.watch(self._on_dataset, ["dataset", "data_path"])
        self.param.watch(self._refresh_split_preview, ["split_mode", "n_unseen", "split_seed", "unseen_classes"])
        self.param.watch(self._on_strategy, ["strategy"])
        self.param.watch(self._on_error, ["error"])
        self.apply_preset(self.preset)
        self._on_strategy()
        self._refresh_path_visibility()
        self._refresh_split_preview()

    # ------------------------------------------------------------------ public
    def apply_preset(self, name: str) -> None:
        """Fill the choices from a preset (see :mod:`app.presets`)."""
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {list(PRESETS)!r}. Got {name!r} instead.")
        preset = PRESETS[name]
        cfg = dict(preset["config"])
        values = {
            "preset": name, "dataset": cfg.get("dataset", "glyphs"), "data_path": "",
            "split_mode": preset.get("split_mode", "random"), "n_unseen": cfg.get("n_unseen", 5),
            "split_seed": cfg.get("split_seed", 0), "backbone": cfg.get("backbone", "resnet18"),
            "pretrained": cfg.get("pretrained", False), "checkpoint": cfg.get("checkpoint") or "",
            "img_size": cfg.get("img_size") or 0, "layers": [], "pooling": cfg.get("pooling", "auto"),
            "strategy": cfg.get("strategy", "full"), "block": str(cfg.get("block", "-1") or "-1"),
            "epochs": cfg.get("epochs", 3) if cfg.get("epochs") is not None else 3,
            "lr": cfg.get("lr") or 0.0, "batch_size": cfg.get("batch_size", 64),
            "label_noise": cfg.get("label_noise", 0.0), "contribution": cfg.get("contribution", False),
            "metrics": list(cfg.get("metrics", DEFAULT_METRICS)),
            "unseen_per_class": cfg.get("unseen_per_class", 60), "seen_per_class": cfg.get("seen_per_class", 30),
            "seeds": ", ".join(str(s) for s in cfg.get("seeds", (0,))),
            "projection": cfg.get("projection", "umap"), "view": dict(preset.get("view", {})),
            "unseen_classes": [], "error": "",
        }
        self.param.update(**values)
        self._about.object = f"<i>{html.escape(preset.get('about', ''))}</i>"
        self._preset_select.value = name

    def dataset_spec(self) -> str:
        """The ``lab.data.load`` spec of the current choice (ValueError when a path is missing)."""
        if self.dataset in _PATH_KINDS:
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
        seen, unseen = self.split_lists() if self.split_mode != "random" else (None, None)
        block = self.block.strip() if self.strategy in ("layer", "scl") else None
        if block is not None:
            try:
                block = int(block)
            except ValueError:
                pass
        trains = self.strategy != "none"
        checkpoint = self.checkpoint.strip() or None
        return dict(
            name=self.run_name.strip() or None, dataset=self.dataset_spec(), seen=seen, unseen=unseen,
            n_unseen=self.n_unseen, split_seed=self.split_seed, backbone=self.backbone.strip(),
            pretrained=self.pretrained, checkpoint=checkpoint, img_size=self.img_size or None,
            layers=list(self.layers) or None, pooling=self.pooling, strategy=self.strategy, block=block,
            epochs=self.epochs if trains else 0, lr=(self.lr or None) if trains else None,
            batch_size=self.batch_size, label_noise=self.label_noise if trains else 0.0,
            contribution=self.contribution and trains, metrics=list(self.metrics) or list(DEFAULT_METRICS),
            unseen_per_class=self.unseen_per_class, seen_per_class=self.seen_per_class,
            seeds=_parse_seeds(self.seeds), device=self.device, projection=self.projection,
        )

    def to_config(self):
        """A validated :class:`lab.RunConfig`; ValueError (readable) when a choice is wrong."""
        from lab.config import RunConfig

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
                    if row.status == "finished" and row.strategy not in ("none", None):
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
        trains = self.strategy != "none"
        self._block_w.visible = self.strategy in ("layer", "scl")
        for w in self._training_widgets:
            w.disabled = not trains

    def _refresh_path_visibility(self) -> None:
        self._path_w.visible = self.dataset in _PATH_KINDS

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
        self._gallery.object = note + self._gallery_html(ds, unseen)

    def _gallery_html(self, ds, unseen: set) -> str:
        cells = []
        limit = 120
        for name in list(ds.classes)[:limit]:
            try:
                uri = ds.class_thumbnail(name)
            except Exception:
                uri = ""
            mark = unseen and name in unseen
            style = ("border:2px solid #08519c;background:#deebf7" if mark else "border:1px solid #ddd")
            cells.append(
                f"<div title='{html.escape(name)}' style='{style};border-radius:4px;padding:2px;width:58px;"
                f"text-align:center;font-size:9px;overflow:hidden'>"
                f"<img src='{uri}' width='40' height='40' style='image-rendering:pixelated'><br>"
                f"{html.escape(name[:14])}</div>")
        more = f"<div style='font-size:10px'>… {len(ds.classes) - limit} more</div>" if len(ds.classes) > limit else ""
        n_unseen = len(unseen)
        head = (f"<div style='font-size:11px;margin-bottom:4px'>{len(ds.classes)} classes · "
                f"<span style='color:#08519c'><b>{n_unseen} unseen</b></span> (blue) · "
                f"{len(ds.classes) - n_unseen} seen</div>")
        return head + "<div style='display:flex;flex-wrap:wrap;gap:3px'>" + "".join(cells) + "</div>" + more

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
        layers = list(bb.layers)
        self.param.layers.objects = layers
        self.layers = []
        self._layers_w.options = layers
        self._block_w.options = [name for name, _module in bb.block_modules()]
        self._catalogue_note.object = f"<small>{len(layers)} layers in {html.escape(self.backbone)}; none chosen = all</small>"

    # ------------------------------------------------------------------ widgets
    def _build_widgets(self) -> None:
        self._preset_select = pn.widgets.Select(label="Preset", options=list(PRESETS), value=self.preset, css_classes=["ls-preset"],
                                                sizing_mode="stretch_width")
        self._preset_button = pn.widgets.Button(label="Apply preset", color="primary",
                                                sizing_mode="stretch_width", css_classes=["ls-apply-preset"])
        self._preset_button.on_click(lambda _e: self.apply_preset(self._preset_select.value))
        self._about = pn.pane.HTML("", sizing_mode="stretch_width", styles={"font-size": "12px"})
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["ls-config-alert"])
        dataset_w = pn.widgets.Select.from_param(self.param.dataset, label="Dataset", options=dict(DATASETS),
                                                 sizing_mode="stretch_width")
        self._path_w = pn.widgets.TextInput.from_param(
            self.param.data_path, label="Path on disk", placeholder="/data/my_images or /data/cifar-100-python",
            sizing_mode="stretch_width", visible=False)
        split_w = pn.widgets.RadioButtonGroup.from_param(self.param.split_mode, sizing_mode="stretch_width",
                                                         color="light")
        self._random_row = pn.Row(pn.widgets.IntInput.from_param(self.param.n_unseen, label="Unseen classes", width=110),
                                  pn.widgets.IntInput.from_param(self.param.split_seed, label="Split seed", width=110))
        self._hand_w = pn.widgets.MultiChoice.from_param(self.param.unseen_classes, label="Unseen classes (by hand)",
                                                         sizing_mode="stretch_width", visible=False)
        self._gallery = pn.pane.HTML("", sizing_mode="stretch_width", max_height=260,
                                     styles={"overflow-y": "auto"})
        backbone_w = pn.widgets.AutocompleteInput.from_param(
            self.param.backbone, label="Backbone (type to search timm)", options=_backbone_choices(),
            restrict=False, case_sensitive=False, search_strategy="includes", min_characters=1,
            sizing_mode="stretch_width", css_classes=["ls-backbone"])
        pretrained_w = pn.widgets.Checkbox.from_param(self.param.pretrained, label="pretrained weights (cached)")
        checkpoint_w = pn.widgets.TextInput.from_param(self.param.checkpoint, label="Checkpoint (path or run:ID)",
                                                       placeholder="weights.safetensors or run:ID",
                                                       sizing_mode="stretch_width")
        self._previous = pn.widgets.Select(label="…or the fine-tuned weights of a previous run", options={"—": ""},
                                           sizing_mode="stretch_width")
        self._previous.param.watch(lambda e: setattr(self, "checkpoint", e.new) if e.new else None, "value")
        catalogue_button = pn.widgets.Button(label="List layers of this backbone", sizing_mode="stretch_width")
        catalogue_button.on_click(self.load_catalogue)
        self._catalogue_note = pn.pane.HTML("<small>All layers are measured unless you pick some.</small>")
        self._layers_w = pn.widgets.MultiChoice.from_param(self.param.layers, label="Layers (empty = all)",
                                                           sizing_mode="stretch_width")
        pooling_w = pn.widgets.Select.from_param(self.param.pooling, label="Pooling", width=110)
        size_w = pn.widgets.IntInput.from_param(self.param.img_size, label="Image size (0 = native)", width=150)
        strategy_w = pn.widgets.RadioButtonGroup.from_param(self.param.strategy, sizing_mode="stretch_width",
                                                            color="light")
        self._block_w = pn.widgets.AutocompleteInput.from_param(
            self.param.block, label="Block to tune (tap name or index, -1 = last)", options=[], restrict=False,
            min_characters=0, sizing_mode="stretch_width", visible=False)
        epochs_w = pn.widgets.IntInput.from_param(self.param.epochs, label="Epochs", width=80)
        lr_w = pn.widgets.FloatInput.from_param(self.param.lr, label="LR (0 = default)", width=110, step=1e-4,
                                                format="0.[00000]")
        batch_w = pn.widgets.IntInput.from_param(self.param.batch_size, label="Batch", width=80)
        noise_w = pn.widgets.FloatSlider.from_param(self.param.label_noise, label="Label noise", step=0.05,
                                                    sizing_mode="stretch_width")
        contribution_w = pn.widgets.Checkbox.from_param(self.param.contribution,
                                                        label="layer contribution (re-init each layer at the end)")
        self._training_widgets = [epochs_w, lr_w, batch_w, noise_w, contribution_w]
        metrics_w = pn.widgets.MultiChoice.from_param(self.param.metrics, label="Metrics",
                                                      sizing_mode="stretch_width")
        unseen_w = pn.widgets.IntInput.from_param(self.param.unseen_per_class, label="Unseen imgs/class", width=120)
        seen_w = pn.widgets.IntInput.from_param(self.param.seen_per_class, label="Seen imgs/class", width=120)
        seeds_w = pn.widgets.TextInput.from_param(self.param.seeds, label="Seeds", width=90)
        device_w = pn.widgets.Select.from_param(self.param.device, label="Device", width=90)
        projection_w = pn.widgets.Select.from_param(self.param.projection, label="Layout", width=90)
        name_w = pn.widgets.TextInput.from_param(self.param.run_name, label="Run name (optional)",
                                                 sizing_mode="stretch_width")
        self._sections = pn.Accordion(
            ("Data & split", pn.Column(dataset_w, self._path_w, split_w, self._random_row, self._hand_w,
                                       self._gallery, sizing_mode="stretch_width")),
            ("Backbone & layers", pn.Column(backbone_w, pretrained_w, checkpoint_w, self._previous,
                                            catalogue_button, self._catalogue_note, self._layers_w,
                                            pn.Row(pooling_w, size_w), sizing_mode="stretch_width")),
            ("Fine-tuning", pn.Column(strategy_w, self._block_w, pn.Row(epochs_w, lr_w, batch_w), noise_w,
                                      contribution_w, sizing_mode="stretch_width")),
            ("Metrics, seeds & device", pn.Column(metrics_w, pn.Row(unseen_w, seen_w),
                                                  pn.Row(seeds_w, device_w, projection_w), name_w,
                                                  sizing_mode="stretch_width")),
            active=[0], sizing_mode="stretch_width", toggle=False,
        )
        self._layout = pn.Column(
            pn.Row(self._preset_select, sizing_mode="stretch_width"), self._preset_button, self._about,
            self._alert, self._sections, sizing_mode="stretch_width",
        )
        self.refresh_runs()

    def __panel__(self):
        return self._layout
