"""benchmarks/gpu.py: the CPU quick run finishes and prints every ratio line (CI's smoke test of the
GPU benchmark; the timings themselves are not judged)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

from benchmarks.gpu import QUICK


@pytest.mark.slow
def test_quick_cpu_run_finishes_and_prints_each_ratio(repo_root):
    done = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "gpu.py"), "--device", "cpu", "--quick"],
                          cwd=repo_root, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    number = r"\d+\.\d{3}"
    for model, layers in (("resnet18", 10), ("vit_tiny_patch16_224", 14)):      # --quick: the families' small models
        assert re.search(rf"^extraction  {model} +{layers} layers .* ratio {number}  goal >= 0.95: (met|NOT met)",
                         out, re.M), out
        assert re.search(rf"^fine-tuning {model} +full, AdamW .* ratio {number}  goal >= 0.9: (met|NOT met)",
                         out, re.M), out
    assert re.search(rf"^kNN metrics N={QUICK['knn_n']:,} d=768 .* ratio {number}  goal <= 1.5: (met|NOT met)", out,
                     re.M), out
    assert re.search(r"^evaluation  vit_tiny_patch16_224 13 layers, N=16 images.* = extract .* \+ metrics .*"
                     r"kNN .* k-means NMI .* collapse ", out, re.M), out
    assert out.rstrip().endswith("goals are GPU goals: on CPU they are reported, not enforced")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_line(repo_root):
    done = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "gpu.py"), "--quick"],
                          cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert ("device 'cuda' was requested but CUDA is not available here; use device='auto' or 'cpu'."
            in done.stderr.strip().splitlines()[-1])
