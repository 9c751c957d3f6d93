"""The tiny model's pace: the wall seconds of one fixed generation, with the libraries' versions, so seeds run
on several machines say how fast each sampled; the bench keeps it, once a sitting, with every seed it runs."""

from __future__ import annotations

import torch

from proofrl.bench.run import pace_sentence, paces
from proofrl.policy import pace


def test_the_model_pace_times_a_fixed_generation_and_leaves_torch_as_it_was(monkeypatch) -> None:
    threads, state = torch.get_num_threads(), torch.random.get_rng_state()
    got = pace.model_pace()
    assert 0 < got["model_pace_s"] < 60
    assert got["versions"]["torch"] == torch.__version__ and got["versions"]["transformers"] != "-"
    # the build as the caller runs it, not the job's one thread
    build = {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": threads}
    assert got["torch_build"] == build
    assert torch.get_num_threads() == threads and torch.equal(torch.random.get_rng_state(), state)
    monkeypatch.setattr(pace, "NEW_TOKENS", 2)  # less work is a faster pace: the job is what is timed
    assert pace.model_pace()["model_pace_s"] < got["model_pace_s"]


def test_the_bench_reports_the_range_of_the_seeds_paces_and_says_how_many_were_timed() -> None:
    versions = {"torch": "2", "transformers": "5.1", "tokenizers": "0"}
    rows = [
        {"seed": 0},  # kept before paces were
        {"seed": 1, "machine": {"coq_pace_s": 1.2, "model_pace_s": 0.5, "versions": versions}},
        {"seed": 2, "machine": {"coq_pace_s": None, "model_pace_s": 0.9, "versions": versions}},
    ]
    p = paces(rows)
    want = {"coq_s": [1.2, 1.2], "model_s": [0.5, 0.9], "timed": 2, "of": 3, "transformers": ["5.1"], "cpu": []}
    assert p == want
    said = " Machine paces (2 of 3 seeds timed; transformers 5.1): Coq 1.2–1.2 s, the model 0.5–0.9 s."
    assert pace_sentence(p) == said
    build = {"torch": "2", "cpu_capability": "AVX2", "threads": 2}
    machine = {"coq_pace_s": 1.4, "model_pace_s": 0.6, "versions": versions, "torch_build": build}
    rows.append({"seed": 3, "machine": machine})
    assert paces(rows)["cpu"] == ["AVX2"]  # kept since the torch build was
    assert "transformers 5.1; CPU kernels AVX2):" in pace_sentence(paces(rows))
    assert paces(rows[:1]) is None and pace_sentence(None) == ""
