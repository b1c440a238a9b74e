"""The neural-collapse lesson preset: the Choose form starts exactly ``lab.lessons.NC_LESSON``, which the benchmark
(benchmarks/nc_lesson.py) and notebook 07 run too; the config itself needs no Panel."""
from __future__ import annotations

import dataclasses
import subprocess
import sys


def test_the_lesson_preset_starts_the_lessons_runconfig():
    from app.choose.config_panel import ConfigPanel
    from app.choose.presets import NC_LESSON_PRESET, PRESETS

    from lab.lessons import NC_LESSON

    assert NC_LESSON_PRESET == "Neural collapse: the terminal phase (lesson)"
    assert list(PRESETS).index(NC_LESSON_PRESET) < list(PRESETS).index("Tiny demo (fast)")
    panel = ConfigPanel()
    panel.apply_preset(NC_LESSON_PRESET)
    cfg = panel.to_config()
    differing = {f.name: (getattr(cfg, f.name), getattr(NC_LESSON, f.name)) for f in dataclasses.fields(cfg)
                 if getattr(cfg, f.name) != getattr(NC_LESSON, f.name)}
    assert not differing, differing
    assert panel.split_mode == "random" and panel.view == {"heatmap_metric": "nc1"}


def test_the_lesson_has_three_seen_classes_and_measures_both_collapse_families():
    from lab import catalogue
    from lab.lessons import NC_LESSON

    assert NC_LESSON.dataset == "digits" and NC_LESSON.n_unseen == 7          # 10 digits: K = 3 seen classes
    assert NC_LESSON.strategy == "full" and NC_LESSON.train_sample_per_class > 0
    assert set(catalogue.metric_names(family="classifier_collapse")) <= set(NC_LESSON.metrics)
    assert {"nc1", "nc2_equinorm", "nc2_equiangularity", "nc2_cosine_std"} <= set(NC_LESSON.collapse_metrics)


def test_the_lesson_config_imports_without_panel():
    code = "import sys, lab.lessons; assert 'panel' not in sys.modules and 'bokeh' not in sys.modules"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_the_law_lesson_preset_starts_the_lessons_runconfig_and_replaces_the_old_preset():
    from app.choose.config_panel import ConfigPanel
    from app.choose.presets import LAW_LESSON_PRESET, PRESETS

    from lab.lessons import SEPARATION_LAW_LESSON

    assert LAW_LESSON_PRESET == "Neural collapse across layers: the law of equi-separation (lesson)"
    assert LAW_LESSON_PRESET in PRESETS and "Neural collapse across layers (MLP on digits)" not in PRESETS
    panel = ConfigPanel()
    panel.apply_preset(LAW_LESSON_PRESET)
    cfg = panel.to_config()
    differing = {f.name: (getattr(cfg, f.name), getattr(SEPARATION_LAW_LESSON, f.name))
                 for f in dataclasses.fields(cfg) if getattr(cfg, f.name) != getattr(SEPARATION_LAW_LESSON, f.name)}
    assert not differing, differing
    assert panel.split_mode == "random" and panel.view == {"heatmap_metric": "nc1"}


def test_the_law_lesson_is_the_measured_run_and_its_text_quotes_the_saved_benchmark():
    from pathlib import Path

    from app.choose.presets import LAW_LESSON_PRESET, PRESETS

    from lab.lessons import SEPARATION_LAW_LESSON as cfg

    assert (cfg.dataset, cfg.backbone, cfg.epochs, cfg.train_sample_per_class) == ("digits", "mlp:depth=8,width=256",
                                                                                    8, 100)
    assert "nc1" in cfg.metrics and cfg.seeds == (0,)
    about = PRESETS[LAW_LESSON_PRESET]["about"]
    saved = (Path(__file__).resolve().parents[2] / "benchmarks/results/separation_law_lesson.txt").read_text()
    # every figure the text quotes is in the saved measurement
    for figure in ("+0.854", "-0.995", "0.639", "0.705", "-0.999", "1.357", "+0.959"):
        assert figure in saved, figure
    for quoted in ("+0.85", "-0.995", "0.64", "0.70", "-0.999", "1.36", "+0.96"):
        assert quoted in about, quoted
