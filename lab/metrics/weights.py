"""How far each layer's weights moved from where the run started.

Definition: ``docs/METRICS.md`` ("Weights"), after Wang & Yang, "With greater
distance comes worse performance": a layer's utilization is ‖W_L − W_L⁰‖₂ over all
parameters of its module (Frobenius norm of the flattened difference), also reported
relative to ‖W_L⁰‖₂.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
import torch

from ._device import _float64_device

__all__ = ["utilization"]


def _module_name(model: torch.nn.Module, module, tap: str) -> str:
    if isinstance(module, str):
        return module
    if isinstance(module, torch.nn.Module):
        for name, m in model.named_modules():
            if m is module:
                return name
        raise ValueError(f"the module given for layer {tap!r} is not part of the model.")
    raise ValueError(
        f"modules must map layer names to module names (str) or modules; got {type(module).__name__} "
        f"for layer {tap!r}."
    )


def utilization(model: torch.nn.Module, initial_state: Mapping[str, torch.Tensor],
                modules: Mapping[str, str | torch.nn.Module | None]) -> pd.DataFrame:
    """Distance of each layer's module weights from their initial values.

    Parameters
    ----------
    model : torch.nn.Module
        The model now (e.g. after some fine-tuning epochs).
    initial_state : mapping of str to torch.Tensor
        ``model.state_dict()`` (or any mapping with the parameter names) captured when
        the run started, e.g. ``{k: v.detach().clone() for k, v in model.state_dict().items()}``.
    modules : mapping of str to (str, torch.nn.Module or None)
        Layer (tap) name → the module whose weights it reflects, as a dotted name in
        ``model`` (``Backbone.tap_module(name)`` may be passed directly). Layers mapped
        to ``None`` (e.g. the input) have no weights and are left out.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``layer`` (in the given order), columns ``module`` (str),
        ``utilization`` = ‖W − W⁰‖ (float ≥ 0, Frobenius over all the module's
        parameters, buffers excluded), ``relative_utilization`` = ‖W − W⁰‖ / ‖W⁰‖
        (0 when both are 0, inf when weights moved away from an all-zero start), and
        ``n_params`` (int).

    Raises
    ------
    ValueError
        When a module name is not in the model, a module has no parameters, or
        ``initial_state`` lacks one of its parameters or has a different shape.

    References
    ----------
    Wang & Yang, "With greater distance comes worse performance".
    """
    rows = []
    for tap, module in modules.items():
        if module is None:
            continue
        name = _module_name(model, module, tap)
        try:
            sub = model.get_submodule(name) if name else model
        except AttributeError:
            raise ValueError(
                f"module {name!r} (layer {tap!r}) is not in the model; use a name from "
                "model.named_modules()."
            ) from None
        params = list(sub.named_parameters())
        if not params:
            raise ValueError(f"module {name!r} (layer {tap!r}) has no parameters, so it has no utilization.")
        diff_sq = 0.0
        init_sq = 0.0
        count = 0
        with torch.no_grad():
            for pname, p in params:
                key = f"{name}.{pname}" if name else pname
                if key not in initial_state:
                    raise ValueError(
                        f"initial_state has no entry {key!r} (layer {tap!r}); pass the model's "
                        "state_dict() captured at the start of the run."
                    )
                # float64 where the parameter is, or on the CPU where that device has none (MPS)
                where = _float64_device(p.device)
                w0 = initial_state[key].detach().to(where).to(torch.float64)     # moved, then widened
                if w0.shape != p.shape:
                    raise ValueError(
                        f"initial_state[{key!r}] has shape {tuple(w0.shape)} but the parameter has "
                        f"shape {tuple(p.shape)}."
                    )
                diff_sq += float(((p.detach().to(where).to(torch.float64) - w0) ** 2).sum())
                init_sq += float((w0 ** 2).sum())
                count += p.numel()
        dist, init = math.sqrt(diff_sq), math.sqrt(init_sq)
        if init > 0:
            rel = dist / init
        else:
            rel = 0.0 if dist == 0 else math.inf
        rows.append({"layer": tap, "module": name, "utilization": dist,
                     "relative_utilization": rel, "n_params": count})
    frame = pd.DataFrame(rows, columns=["layer", "module", "utilization", "relative_utilization", "n_params"])
    return frame.set_index("layer")
