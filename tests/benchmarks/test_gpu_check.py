"""benchmarks/gpu_check.py: the CPU smoke run of the one GPU check (issue 32) goes through every section's
code on tiny sizes and writes its table; the GPU goals are reported, not judged, on CPU."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

from benchmarks.gpu import QUICK


@pytest.mark.slow
def test_quick_cpu_run_writes_one_table(repo_root, tmp_path):
    out = tmp_path / "gpu_check.txt"
    done = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--quick",
                           "--only", "metrics", "preset", "oom", "study", "--out", str(out)],
                          cwd=repo_root, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = out.read_text()
    assert re.search(r"^device: +cpu$", text, re.M), text
    table = text.split("-" * 40 + " log ")[0]
    n = f"N={QUICK['knn_n']:,}"            # the quick size of benchmarks/gpu.py
    assert re.search(rf"^metrics +kNN accuracy \+ purity, {n}, d=768 +\d+\.\d\d s vs X@X.T \d+\.\d\d s = "
                     r"\d+\.\d\dx +<= 1.5x +info$", table, re.M), table
    assert re.search(rf"^metrics +k-means NMI, {n}, d=768 .* +info$", table, re.M), table
    assert re.search(r"^preset +seen held-out accuracy +[01]\.\d{3} ", table, re.M), table
    assert re.search(r"^preset +answer +best layer \S+, g [01]\.\d{3} \[[01]\.\d{3}, [01]\.\d{3}\], best in \d+ % ", table,
                     re.M), table
    assert re.search(r"^oom .* skipped on CPU", table, re.M), table
    assert re.search(r"^study +two-cell study through Dask +2 of 2 cells finished .* ok$", table, re.M), table
    assert "every judged check passed" in table


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_line_and_exit_2(repo_root):
    done = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "gpu_check.py"), "--only", "metrics"],
                          cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "device 'cuda' was requested but CUDA is not available here" in done.stderr.strip().splitlines()[-1]
