"""Wang & Yang 2022, small CPU version: an MLP on digits at label noise 0, 0.2, 0.5; utilization of the
last layer vs noise, and held-out accuracy after re-initialising the last layer(s) (``contribution=True``)."""
from __future__ import annotations

from ._common import (
    MIXED, NOT_REPRODUCED, REPRODUCED, Row, Settings, fast_or, fmt, hidden_layers, last_epoch, run_logged,
    training_final,
)

__all__ = ["wang_yang"]


def wang_yang(settings: Settings, store) -> tuple[list[Row], dict, list[str]]:
    """Utilization of the last layer vs label noise; held-out accuracy after re-initialising layers."""
    import lab

    per_noise: dict[float, dict] = {}
    for noise in settings.wy_noise:
        # a constant rate as in the paper (a decay to zero stills the late epochs that memorise noise)
        cfg = lab.RunConfig(
            name=f"claims-wang-noise{noise:g}", dataset="digits", backbone=settings.wy_backbone, n_unseen=2,
            strategy="full", epochs=settings.wy_epochs, lr=settings.wy_lr, lr_schedule="constant",
            augment=False, label_noise=noise, contribution=True, metrics=("nmi",), projection="none",
            seen_per_class=None, unseen_per_class=None, device="cpu", save_weights=False)
        rec = run_logged(cfg, store, f"wang noise {noise:g}")
        layers = hidden_layers(rec)
        u = last_epoch(rec.utilization)
        util = {layer: float(u[u["layer"] == layer]["relative"].mean()) for layer in layers}
        util_abs = {layer: float(u[u["layer"] == layer]["absolute"].mean()) for layer in layers}
        c = rec.contribution
        reinit_acc = {layer: float(c[(c["layer"] == layer) & (c["metric"] == "heldout_accuracy")]["value"].mean())
                      for layer in layers}
        reinit_delta = {layer: float(c[(c["layer"] == layer) & (c["metric"] == "heldout_accuracy_delta")]["value"].mean())
                        for layer in layers}
        per_noise[noise] = {"run_id": rec.run_id, "layers": layers, "relative_utilization": util,
                            "absolute_utilization": util_abs, "reinit_heldout_accuracy": reinit_acc,
                            "reinit_heldout_accuracy_delta": reinit_delta, **training_final(rec)}

    noises = list(per_noise)
    layers = per_noise[noises[0]]["layers"]
    first, last, second_last = layers[0], layers[-1], layers[-2]
    lines = [f"[4] Wang & Yang — {settings.wy_backbone} on digits, full training {settings.wy_epochs} epochs (AdamW lr "
             f"{settings.wy_lr:g}, no augmentation), label noise {', '.join(f'{n:g}' for n in noises)}; "
             "contribution = re-initialise one layer to its epoch-0 weights"]
    lines.append("    (train acc is measured against the training labels as given, i.e. the noisy ones; resilience = "
                 "accuracy on the relabelled training images against their true labels)")
    lines.append("    noise  train acc  held-out acc  resilience  | relative utilization " + " ".join(f"{n:>6}" for n in layers)
                 + " | held-out acc after re-init " + " ".join(f"{n:>6}" for n in layers))
    for n, r in per_noise.items():
        lines.append(f"    {n:5.2f}  {fmt(r.get('train_accuracy')):>9}  {fmt(r.get('heldout_accuracy')):>12}  "
                     f"{fmt(r.get('resilience')):>10}  | {'':20}"
                     + " ".join(f"{r['relative_utilization'][x]:6.3f}" for x in layers) + " | " + " " * 27
                     + " ".join(f"{r['reinit_heldout_accuracy'][x]:6.3f}" for x in layers))
    lines.append("    runs: " + ", ".join(f"noise {n:g} {r['run_id']}" for n, r in per_noise.items()))

    util_last = [per_noise[n]["relative_utilization"][last] for n in noises]
    acc = [per_noise[n].get("heldout_accuracy", float("nan")) for n in noises]
    up = all(b > a for a, b in zip(util_last, util_last[1:]))
    down = all(b < a for a, b in zip(acc, acc[1:]))
    ends = util_last[-1] > util_last[0] and acc[-1] < acc[0]
    verdict = REPRODUCED if up and down else MIXED if ends or up else NOT_REPRODUCED
    rows = [Row(
        key="wang_utilization", source="Wang & Yang",
        claim=f"last-layer utilization ({last}) grows with label noise as held-out accuracy falls",
        paper="the distance of the final layers' weights from their initial values correlates with the generalization "
              "error (larger with label noise)",
        measured=("noise " + ", ".join(f"{n:g}" for n in noises) + f": relative utilization {last} "
                  + " / ".join(fmt(v) for v in util_last) + "; held-out acc " + " / ".join(fmt(v) for v in acc)
                  + f" (for comparison {first}: " + " / ".join(fmt(per_noise[n]["relative_utilization"][first])
                                                             for n in noises) + ")"),
        verdict=fast_or(settings, verdict, True),
        rule=("reproduced: utilization rises and held-out accuracy falls strictly with noise; mixed: only the "
              "utilization trend holds, or both hold from the lowest to the highest noise only; otherwise not reproduced. "
              "Fast mode: too few epochs to memorise the noise"),
        values={"relative_utilization_last": dict(zip(map(str, noises), util_last)),
                "heldout_accuracy": dict(zip(map(str, noises), acc))},
    )]
    d_last = [per_noise[n]["reinit_heldout_accuracy_delta"][last] for n in noises]
    d_second = [per_noise[n]["reinit_heldout_accuracy_delta"][second_last] for n in noises]
    d_first = [per_noise[n]["reinit_heldout_accuracy_delta"][first] for n in noises]
    noisiest = noises.index(max(noises))
    cheap = d_last[noisiest] >= -0.02
    later_matters_less = all(dl > df for dl, df in zip(d_last, d_first))
    verdict = REPRODUCED if cheap and later_matters_less else MIXED if cheap or later_matters_less else NOT_REPRODUCED
    rows.append(Row(
        key="wang_reinit", source="Wang & Yang",
        claim=f"re-initialising the final layer ({last}) costs little held-out accuracy under label noise, unlike "
              f"the first ({first})",
        paper="deeper layers only fit the training (and mislabeled) data; re-initialising the final layers works as a "
              "post-training regularizer, while early layers carry what generalizes",
        measured=("Δ held-out acc after re-init, noise " + ", ".join(f"{n:g}" for n in noises) + f": {last} "
                  + " / ".join(fmt(v) for v in d_last) + f"; {second_last} " + " / ".join(fmt(v) for v in d_second)
                  + f"; {first} " + " / ".join(fmt(v) for v in d_first)),
        verdict=fast_or(settings, verdict, True),
        rule=(f"reproduced: at the highest noise re-initialising {last} changes held-out accuracy by >= -0.02 AND at every "
              f"noise level it hurts less than re-initialising {first}; mixed: one of the two; otherwise not reproduced. "
              "Fast mode: too few epochs"),
        values={"delta_last": d_last, "delta_second_last": d_second, "delta_first": d_first},
    ))
    return rows, {"noise": {str(k): v for k, v in per_noise.items()}}, lines
