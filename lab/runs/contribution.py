"""Layer contribution (Wang & Yang): re-initialise each tap's module to its epoch-0 weights,
measure the model, restore it exactly."""
from __future__ import annotations

from typing import Generator

from lab.catalogue import HEAD_LAYER
from lab.events import Event, LayerContribution, Progress
from lab.runs.compute import few_threads
from lab.runs.context import RunContext, SeedState

__all__ = ["Contribution"]


class Contribution:
    """Measures, for one seed's trained model, what each tap's training contributes."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx

    def run(self, state: SeedState) -> Generator[Event, None, None]:
        """LayerContribution per weighted tap: the probe's values with the tap re-initialised, and
        their change against the trained model (``*_delta``)."""
        from lab.finetune import reinitialized

        ctx, bb, seed = self.ctx, state.bb, state.seed
        base = yield from self._probe(state)
        taps = [name for name in state.weighted if name in state.initial_modules]
        for i, layer in enumerate(taps):
            ctx.check()
            yield Progress(ctx.run_id, "contribution", i, len(taps), seed=seed)
            with reinitialized(bb.tap_module(layer), state.initial_modules[layer]):
                vals = yield from self._probe(state)
            for key in list(base):
                if key in vals and vals[key] is not None and base[key] is not None:
                    vals[f"{key}_delta"] = vals[key] - base[key]
            vals = {k: float(v) for k, v in vals.items() if v is not None}
            ctx.recorder.contribution([{"seed": seed, "layer": layer, "metric": k, "value": v}
                                       for k, v in vals.items()])
            yield LayerContribution(ctx.run_id, seed=seed, layer=layer, values=vals)
        yield Progress(ctx.run_id, "contribution", len(taps), len(taps), seed=seed)

    def _probe(self, state: SeedState) -> Generator[Event, None, dict]:
        """Held-out loss/accuracy and unseen NMI (pre-logits, and g over the chosen layers)."""
        import lab.metrics

        ctx, ft = self.ctx, state.ft
        out: dict[str, float | None] = {}
        layers = [HEAD_LAYER] + ([ft.block] if ft.strategy.skip and ft.block != HEAD_LAYER else [])
        feats = yield from ctx.extract(state, ctx.data.heldout, layers, stage="contribution", epoch=None,
                                       pooling="auto")
        logits = ft.logits_from_features(feats[HEAD_LAYER], feats.get(ft.block) if ft.strategy.skip else None)
        out["heldout_loss"], out["heldout_accuracy"] = ft.score(logits, ctx.heldout_labels)
        ulayers = list(dict.fromkeys(ctx.layers + [HEAD_LAYER]))
        feats = yield from ctx.extract(state, ctx.data.unseen, ulayers, stage="contribution", epoch=None)
        y = ctx.unseen_labels.to(state.bb.device)
        nmis = {}
        for layer in ulayers:
            ctx.check()
            with few_threads(feats[layer]):
                nmis[layer] = float(lab.metrics.nmi(feats[layer], y, protocol=ctx.cfg.protocol))
        out["unseen_nmi"] = nmis[HEAD_LAYER]
        out["unseen_g"] = _g(nmis, ctx.layers)
        return out


def _g(nmis: dict[str, float], layers: list[str]) -> float | None:
    """g of one measurement, by :func:`lab.analysis.latest_generalization` (None when undefined)."""
    import pandas as pd

    from lab import analysis

    rows = pd.DataFrame({"seed": 0, "epoch": 0, "layer": list(layers), "split": "unseen", "metric": "nmi",
                         "value": [nmis[name] for name in layers]})
    gen = analysis.latest_generalization(rows, layers=layers) if layers else None
    return None if gen is None else gen["g"]
