"""Widget pieces of the Choose form: a field's widget, the choice lists, the class gallery.

Plain functions of a Parameterized (the form) or of a dataset; :class:`app.choose.config_panel.ConfigPanel`
assembles them into its layout.
"""
from __future__ import annotations

import html

import panel as pn
import param

from .presets import SEED_ARCHITECTURES

__all__ = ["backbone_choices", "offline_backbones", "offline_note_html", "device_choices", "field_widget",
           "gallery_html", "generic_widget"]

_GALLERY_LIMIT = 120
"""Classes shown in the gallery; the rest are counted."""


def device_choices() -> list[str]:
    """"auto" and "cpu", then the accelerators torch can use on this machine (every GPU by index
    where there are several: :func:`lab.device.device_choices`)."""
    try:
        from lab.device import device_choices as choices

        return choices()
    except Exception:  # torch broken: cpu still listed, the run reports the problem
        return ["auto", "cpu"]


def offline_backbones() -> list:
    """The models that load here without a network and by name alone (:func:`lab.backbones.offline_models`:
    the zoo, the ImageNet backbones, timm and Hugging Face weights in the hub cache); a torch hub weight
    file is left out (it needs its checkpoint path too)."""
    try:
        from lab.backbones import offline_models

        return [m for m in offline_models() if m.loads and m.kind != "torch-hub"]
    except Exception:   # an unreadable cache: the picker still lists the rest
        return []


def offline_note_html(models) -> str:
    """One line under the backbone box naming the models of ``models`` (:func:`offline_backbones`), which
    the search lists first; timm weights need 'pretrained' ticked."""
    if not models:
        return ""
    names = ", ".join(f"<code>{html.escape(m.name)}</code>{' (tick pretrained)' if m.kind == 'timm' else ''}"
                      for m in models)
    return (f"<small>✓ available offline here, listed first: {names} "
            f"(<code>python -m lab models</code>)</small>")


def backbone_choices(offline=None) -> list[str]:
    """Backbone names for the search box: the models available offline here (``offline``, default
    :func:`offline_backbones`), the names the model sources list (:func:`lab.backbones.list_models`: the zoo,
    the ImageNet backbones, Hugging Face families, the MLP), the seed papers', then timm's."""
    offline = offline_backbones() if offline is None else offline
    try:  # any typed 'hf:ORG/NAME' or 'zoo:NAME' works too
        from lab.backbones import list_models

        named, every = list_models(fallback=False), list_models()
    except Exception:
        named, every = [], []
    first = list(dict.fromkeys([m.name for m in offline] + named))
    return first + [n for n in SEED_ARCHITECTURES if n not in first] + [
        n for n in every if n not in SEED_ARCHITECTURES and n not in first]


def field_widget(form: param.Parameterized, cls, name: str, **kwargs):
    """A ``cls`` widget for ``form``'s parameter ``name`` with its help text (RunConfig's docstring) as tooltip."""
    if "description" in cls.param:       # (checkboxes and button groups have no tooltip)
        kwargs.setdefault("description", form.param[name].doc or None)
    # ls-field-<name>: one selector per setting, for the browser tests and for users' own CSS
    kwargs["css_classes"] = [*kwargs.get("css_classes", []), f"ls-field-{name}"]
    return cls.from_param(form.param[name], **kwargs)


def generic_widget(form: param.Parameterized, name: str):
    """A widget chosen by the parameter's type, labelled with the field name."""
    p = form.param[name]
    label = name.replace("_", " ")
    if isinstance(p, param.Boolean):
        return field_widget(form, pn.widgets.Checkbox, name, label=label)
    if isinstance(p, param.ListSelector):
        return field_widget(form, pn.widgets.MultiChoice, name, label=f"{label} (empty = all)",
                            sizing_mode="stretch_width")
    if isinstance(p, param.Selector):
        return field_widget(form, pn.widgets.Select, name, label=label, width=150)
    if isinstance(p, param.Integer):
        return field_widget(form, pn.widgets.IntInput, name, label=label, width=150)
    if isinstance(p, param.Number):
        empty = " (empty = default)" if p.allow_None else ""
        return field_widget(form, pn.widgets.FloatInput, name, label=label + empty, width=150)
    return field_widget(form, pn.widgets.TextInput, name, label=label, sizing_mode="stretch_width")


def gallery_html(ds, unseen: set) -> str:
    """A thumbnail per class of ``ds``, the classes in ``unseen`` highlighted, with the seen/unseen counts."""
    cells = []
    for name in list(ds.classes)[:_GALLERY_LIMIT]:
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
            f"{html.escape(name if len(name) <= 14 else name[:13].rstrip() + '…')}</div>")   # full name in the tooltip
    more = (f"<div style='font-size:10px'>… {len(ds.classes) - _GALLERY_LIMIT} more</div>"
            if len(ds.classes) > _GALLERY_LIMIT else "")
    n_unseen = len(unseen)
    head = (f"<div style='font-size:11px;margin-bottom:4px'>{len(ds.classes)} classes · "
            f"<span style='color:#08519c'><b>{n_unseen} unseen</b></span> (blue) · "
            f"{len(ds.classes) - n_unseen} seen</div>")
    return head + "<div style='display:flex;flex-wrap:wrap;gap:3px'>" + "".join(cells) + "</div>" + more
