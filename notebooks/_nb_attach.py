"""The attach notebook: 08, lab.Monitor inside a plain PyTorch loop and a PyTorch Lightning Trainer."""
from __future__ import annotations

from _nb_cells import FAST_SWITCH, PLOTS, code, md

__all__ = ["attach_training"]


# ----------------------------------------------------------------------------------------------
# 08 attach to your training
# ----------------------------------------------------------------------------------------------

def attach_training():
    return [
        md('''
# Attach layerscope to your own training

`lab.run` fine-tunes a backbone with lab's own strategies. When the training is **yours** (your model,
your loss, your optimizer, your loop, or a trainer such as PyTorch Lightning that owns the loop), attach a
**`lab.Monitor`** to it instead. Each time your loop calls `mon.evaluate(epoch)`, the monitor measures every
layer of your model exactly as an epoch of `lab.run` does (the engine's own evaluation, not a copy):

- **separability of held-out classes** at every layer: NMI of k-means against the true classes, kNN
  accuracy, with bootstrap intervals over the images (`docs/METRICS.md`);
- **collapse**: NC1 and its relatives on the unseen classes, and on held-out images of the training
  classes when you pass them (`seen=`);
- **the answer per image**: each unseen image's kNN vote per layer, from which the layer where it becomes
  right is read;
- PCA layouts, CKA of every layer to its first evaluation, and how far each layer's weights moved.

The run is written to the run store like any run of `lab.run` (status "running" while the with-block is
open, then "finished"; "failed" if your code raises): `python -m lab runs list`, the app, the Compare tab
and exported notebooks read it. **When to use which:** `lab.run` when lab's fine-tuning strategies are
what you want to study (it also trains, repeats seeds and measures seen accuracy); `lab.Monitor` when the
training is the thing you already have and you want the layer-by-layer view of it. The monitor trains
nothing and leaves your loop as it was: it restores every module's train/eval flag, the grad mode and the
random number generators after each evaluation.

This notebook trains one small network on 15 of the 20 glyph styles twice, first with a plain PyTorch loop
and then with a Lightning `Trainer`, with a monitor on each that measures the 5 styles the network never
sees. Everything below describes these two runs of one seed.

**FAST vs full.** The full setting trains a timm ResNet-18 from random initialisation (no download) on 100
images per seen style for 5 epochs and evaluates 100 images per unseen style with the runs' default
metrics. FAST mode (`LAB_FAST=1`) swaps in timm's tiny `test_resnet`, 8 training images per style, 2
epochs, 5 held-out and 20 unseen images per style and three metrics (NMI, kNN accuracy, NC1): the same
cells, toy numbers.
'''),
        code(FAST_SWITCH),
        md('''
## The data: seen styles to train on, unseen styles to measure

The glyph dataset ships with the package: 20 typefaces ("styles") of 313 CJK characters, 64 × 64 px,
grayscale. The papers' split holds out 5 styles. The network trains on the **seen** styles' training
images; the monitor measures the **unseen** styles (never trained on) and, for collapse on the training
classes, held-out images of the seen styles (`seen=`, never trained on either).
'''),
        code('''
import timm
import torch

ds = lab.data.load("glyphs")
split = lab.data.Split.paper_default(ds)              # 15 seen styles, 5 unseen ones
train = ds.subset(split.seen).partition("train")      # what the network learns from
heldout = ds.subset(split.seen).partition("test")     # the same styles, other characters: never trained on
unseen = ds.subset(split.unseen)                      # styles the network never learns
ARCH, EPOCHS, LR, METRICS = "resnet18", 5, 1e-3, None  # METRICS None: the runs' default metrics
if FAST:
    ARCH, EPOCHS, METRICS = "test_resnet", 2, ("nmi", "knn_accuracy", "nc1")
    train, heldout, unseen = train.sample_per_class(8), heldout.sample_per_class(5), unseen.sample_per_class(20)
else:
    train, heldout, unseen = train.sample_per_class(100), heldout.sample_per_class(30), unseen.sample_per_class(100)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(f"train {len(train)} images of {len(split.seen)} styles; held-out seen {len(heldout)}; "
      f"unseen {len(unseen)} images of {split.unseen}; {ARCH} on {device}")
'''),
        md('''
## Part 1: a plain PyTorch loop

Your model is any `torch` module; here a timm model at random initialisation with a 15-way classifier. The
loop below is ordinary training code. The monitor adds two things: the `with lab.Monitor(...) as mon:`
block around it, and one `mon.evaluate(epoch, train_loss=...)` per epoch (epoch 0 before training, as the
reference). `train_loss` is your loop's own number, kept in the run's training table.
'''),
        code('''
import torch.nn.functional as F

torch.manual_seed(0)
model = timm.create_model(ARCH, pretrained=False, num_classes=len(split.seen), in_chans=ds.in_chans).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
loader = train.train_loader(batch_size=32, seed=0)    # shuffled, mildly augmented (images, labels) batches
store = lab.RunStore()                                # $LAB_RUNS_DIR, else ./runs: where lab.run writes too

with lab.Monitor(model, unseen=unseen, seen=heldout, metrics=METRICS, store=store,
                 name="attach: plain loop") as mon:
    print(mon)
    mon.evaluate(0)                                   # before training
    for epoch in range(1, EPOCHS + 1):
        model.train()                                 # your training code, unchanged ...
        losses = []
        for images, labels in loader:
            loss = F.cross_entropy(model(images.to(device)), labels.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        train_loss = sum(losses) / len(losses)
        rows = mon.evaluate(epoch, train_loss=train_loss)   # ... and one line: every layer, now
        print(f"epoch {epoch}: train loss {train_loss:.3f}")
plain = mon.record()
print(plain.run_id, plain.status)
'''),
        md('''
**What `evaluate` returns.** The evaluation's metric rows, as the store keeps them (seed, epoch, layer,
split, metric, value). The last epoch's unseen rows, one row per layer from input to output; `_low` and
`_high` are the bootstrap interval over the unseen images, `_best_share` the share of resamples in which
that layer is best.
'''),
        code('''
rows[rows["split"] == "unseen"].pivot_table(index="layer", columns="metric", values="value").reindex(mon.layers)
'''),
        md('''
**Per layer, from the stored run.** The same plots the app draws, read back from the store: unseen NMI per
layer after each epoch (light to dark, the last in bold), and the layer × epoch heatmap.
'''),
        code(PLOTS),
        code('''
(plots.epoch_curves(plain, "nmi", width=520, height=320)
 + plots.layer_epoch_heatmap(plain, "nmi", width=420, height=320)).cols(2)
'''),
        md('''
Collapse on the held-out images of the seen styles (NC1, log scale: lower means tighter classes):
'''),
        code('''
plots.epoch_curves(plain, "nc1", split="seen", width=520, height=320)
'''),
        md('''
**The answer per image.** `lab.analysis.image_table` reads the per-image record of the last evaluation:
for every unseen image, whether its kNN vote is right at each layer, and its **arrival layer**, the layer
from which it stays right. `arrival_counts` counts the images arriving at each layer ("never": wrong at
the final layer). Notebook `06_which_images` goes further with the same table.
'''),
        code('''
images = lab.analysis.image_table(plain)
print(f"epoch {images.attrs['epoch']}; best layer by NMI {images.attrs['best_layer']}")
lab.analysis.arrival_counts(images).to_frame().T
'''),
        md('''
## Part 2: PyTorch Lightning

When a trainer owns the loop, a callback calls `evaluate` for you. `lab.monitor.LightningCallback(mon)`
evaluates before training (epoch 0) and after every training epoch (epoch `current_epoch + 1`), on global
rank 0 only. Below: the same architecture from the same initial weights (`torch.manual_seed(0)` again),
wrapped in a `LightningModule`, trained by a `Trainer` on the same batches. The monitor is given the
network itself (`lit.model`), so its layers are named as in Part 1. Lightning is not a dependency of lab:
`pip install "layerscope[trainers]"` brings it (and accelerate, for the Hugging Face Trainer's callback).
`LightningCallback(mon, every=2)` evaluates every second epoch, `every=50, unit="step"` every 50 optimizer steps.
'''),
        code('''
import logging
import warnings

import lightning.pytorch as pl

# the glyphs are in memory, so the loader needs no worker processes; Lightning would suggest some
warnings.filterwarnings("ignore", ".*does not have many workers.*")
logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)    # Lightning's start-up notes (devices, tips)


class GlyphClassifier(pl.LightningModule):
    """Your LightningModule: any network, loss and optimizer."""

    def __init__(self, model, lr):
        super().__init__()
        self.model, self.lr = model, lr

    def training_step(self, batch, batch_idx):
        images, labels = batch
        return F.cross_entropy(self.model(images), labels)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


torch.manual_seed(0)
lit = GlyphClassifier(timm.create_model(ARCH, pretrained=False, num_classes=len(split.seen), in_chans=ds.in_chans),
                      lr=LR)
with lab.Monitor(lit.model, unseen=unseen, seen=heldout, metrics=METRICS, store=store,
                 name="attach: Lightning") as mon:
    trainer = pl.Trainer(max_epochs=EPOCHS, accelerator="auto", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[lab.monitor.LightningCallback(mon)])
    trainer.fit(lit, train.train_loader(batch_size=32, seed=0))
lightning_run = mon.record()
print(lightning_run.run_id, lightning_run.status, "epochs evaluated:",
      sorted(lightning_run.metrics["epoch"].unique().tolist()))
'''),
        md('''
## Part 3: watched in the app

A monitored run is a run of the store from its first evaluation on, so the app sees it **while your loop is
still training**: start the app with `make app` (it serves `http://localhost:5006/app` and reads the same
store: `./runs`, or `$LAB_RUNS_DIR`), and in the sidebar pick the running run under **Watch a run**. The
**Run & watch** view then follows it: every layer's curves, the heatmap and the layout fill in as each
`mon.evaluate` finishes, just as they do for a run started with the app's ▶ Run button. When the with-block
closes, the run's status turns "finished" and it joins the stored runs under **Compare & export**.

From Python, `lab.RunStore(...).list()` finds the monitored runs beside every other run, with their status
(here both blocks have closed, so both are "finished"). Their backbone reads `monitor:<model class>` and
their strategy `none`: lab trained nothing, your loop did.
'''),
        code('''
runs = store.list()
ours = runs[runs["run_id"].isin([plain.run_id, lightning_run.run_id])]
ours[["run_id", "name", "status", "backbone", "strategy", "epochs", "best_layer", "g"]]
'''),
        md('''
## The two runs side by side

The best layer by unseen NMI at the last epoch and its value (the generalization index g), as the run
summary reports them, with the bootstrap interval of g and the share of resamples in which that layer is
best; then the NMI curves of both runs. The two runs share the architecture, the initial weights, the
optimizer and the order of the batches; whether Lightning's loop reproduces the plain loop's numbers
exactly depends on details such as the device and its kernels, so read the differences below as what these
two runs show, not as a difference between the two ways of training.
'''),
        code('''
import pandas as pd

summaries = {"plain loop": plain.summary(), "Lightning": lightning_run.summary()}
pd.DataFrame(summaries).T[["status", "epoch", "best_layer", "g", "g_low", "g_high", "best_share", "final_layer"]]
'''),
        code('''
plots.layer_curves({"plain loop": plain, "Lightning": lightning_run}, "nmi", width=560, height=340)
'''),
        md('''
**Checks.** What the monitor promises, on these two runs: each is stored as "finished" and listed by the
store; the plain loop's run holds one evaluation per `evaluate` call (epochs 0 to `EPOCHS`) and the
Lightning run one before training and one per epoch; what the last `evaluate` returned is what the store
holds for that epoch (one set of numbers, computed once); and the summary's g is the highest unseen NMI
over the layers of the NMI curve drawn above, reached at the summary's best layer (a tie between a
ResNet's last block and `pre_logits`, its pooled output, goes to the deeper one).
'''),
        code('''
import numpy as np

for record in (plain, lightning_run):
    assert record.status == "finished", record.status
    assert sorted(record.metrics["epoch"].unique().tolist()) == list(range(EPOCHS + 1)), record.run_id
    nmi = tables.curve_table([record], "nmi").set_index("layer")["mean"]
    assert np.isclose(record.summary()["g"], nmi.max()) and np.isclose(nmi[record.summary()["best_layer"]], nmi.max())
assert set(ours["status"]) == {"finished"} and len(ours) == 2
stored = plain.metrics[plain.metrics["epoch"] == EPOCHS]
key = ["seed", "epoch", "layer", "split", "metric"]
joined = rows.merge(stored, on=key, suffixes=("_returned", "_stored"))
assert len(joined) == len(rows) == len(stored) and np.allclose(joined["value_returned"], joined["value_stored"],
                                                                equal_nan=True)
print(f"plain loop: best layer {summaries['plain loop']['best_layer']} (g {summaries['plain loop']['g']:.3f}); "
      f"Lightning: best layer {summaries['Lightning']['best_layer']} (g {summaries['Lightning']['g']:.3f})")
''', "claim"),
        md('''
## Exercises

1. **Your own model.** Replace the timm model with any `torch` module of yours. Which layers does the
   monitor pick by default? Name others with `layers=["..."]` (any name of `dict(model.named_modules())`).
2. **More often than once per epoch.** Call `mon.evaluate(step)` every few hundred steps instead: the run's
   epoch axis then counts steps.
3. **Seeds.** Repeat Part 1 with `torch.manual_seed(1)` and `train_loader(seed=1)`. Does the best layer
   stay where it is? One seed per run: compare the runs in the app's Compare tab.
4. **Against `lab.run`.** Train the same architecture with `lab.run(lab.RunConfig(backbone=ARCH, ...))` and
   compare its curves with the monitored runs'.
'''),
    ]
