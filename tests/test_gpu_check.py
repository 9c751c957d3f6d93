"""``benchmarks/gpu_check.py`` at its CPU size (``--smoke``: a tiny Qwen2, 8 rows x 16 tokens, bf16 autocast on
the CPU): the trainer's update runs with the reference on the same device and parked, and the three checks
pass; a machine that cannot run it answers in one line. The GPU size itself needs a CUDA GPU (not in CI)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import gpu_check


def test_the_cpu_sized_check_runs_the_update_and_passes_its_checks(capsys):
    assert gpu_check.main(["--smoke", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "model: Qwen2" in out and "reference same:" in out and "reference  cpu:" in out
    assert "tokens/s" in out and "peak" in out
    assert "ratio: ref_cpu_over_same_seconds " in out
    passed = [x for x in out.splitlines() if x.startswith("PASS: ")]
    assert [x.split(" (")[0] for x in passed] == [
        "PASS: no device mismatch",
        "PASS: weights move at lr 1e-6",
        "PASS: accumulation equals the full batch",
    ], out
    assert "FAIL" not in out and "all checks passed" in out


def test_a_gpu_without_bf16_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla V100-SXM2-32GB")
    assert gpu_check.main(["--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "gpu_check: Tesla V100-SXM2-32GB (compute capability 7.0) has no bf16: the trainer's update computes "
        "in bf16 (it needs compute capability 8.0 or newer, e.g. A100, H100)"
    ]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_no_cuda_device_without_smoke_is_one_line(capsys):
    assert gpu_check.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no CUDA device here" in err[0] and "--smoke" in err[0]
