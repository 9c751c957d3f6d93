"""The rollout's schedule: verification overlapped with generation only where that pays (``rollout.overlap:
auto``: not for an in-process policy on the CPU, measured in docs/training.md), and what each schedule does."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import requires_coq
from rl_support import problems


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    from proofrl.policy import build_tiny_model, load_policy
    from proofrl.policy.tiny import sample_corpus

    return load_policy(build_tiny_model(tmp_path_factory.mktemp("tiny"), sample_corpus()), device="cpu")


def test_auto_overlaps_only_where_generation_leaves_the_cpu_free(tiny):
    from proofrl.policy import HFGenerator, OpenAIGenerator
    from proofrl.rollout import choose_overlap

    on_cpu = HFGenerator(*tiny)
    assert choose_overlap("auto", on_cpu) is False  # the sampler and the provers would share the cores
    assert choose_overlap(True, on_cpu) is True and choose_overlap(False, on_cpu) is False
    served = OpenAIGenerator("http://127.0.0.1:9", "policy")  # generation happens elsewhere (nothing is sent here)
    assert choose_overlap("auto", served) is True and choose_overlap(False, served) is False


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_auto_overlaps_for_a_policy_on_a_gpu(tiny):
    from proofrl.policy import HFGenerator
    from proofrl.rollout import choose_overlap

    model, tok = tiny
    assert choose_overlap("auto", HFGenerator(model.to("cuda"), tok)) is True
    model.to("cpu")


def test_the_default_is_auto():
    from proofrl.train.config import RolloutConfig, load_recipe

    assert RolloutConfig().overlap == "auto"
    assert load_recipe("demo").rollout.overlap == "auto"
    # a recipe's YAML spells the forced schedules as booleans (on/off read as true/false too)
    assert load_recipe("demo", ["rollout.overlap=on"]).rollout.overlap is True
    assert load_recipe("demo", ["rollout.overlap=false"]).rollout.overlap is False


@requires_coq
@pytest.mark.parametrize("overlap, calls, submits", [(True, [2, 2], 2), (False, [4], 1)])
def test_each_schedule_generates_and_verifies_as_it_says(tiny, overlap, calls, submits):
    from proofrl.policy import HFGenerator, SamplingParams, get_format
    from proofrl.rollout import first_turn, sample_and_verify
    from proofrl.verification import Verifier

    class Counting(HFGenerator):
        def generate(self, prompts, params):  # noqa: ANN001, ANN202
            sizes.append(len(prompts))
            return super().generate(prompts, params)

    class CountingVerifier(Verifier):
        def submit(self, items):  # noqa: ANN001, ANN202
            batches.append(len(items))
            return super().submit(items)

    sizes: list[int] = []
    batches: list[int] = []
    fmt = get_format("coq")
    items = [first_turn(p, fmt) for p in problems()[:4]]
    verifier = CountingVerifier(workers=1, timeout=10)
    try:
        groups, t = sample_and_verify(Counting(*tiny), items, SamplingParams(n=2, max_tokens=8, seed=0), fmt, verifier,
                                      chunk_prompts=2, overlap=overlap)  # fmt: skip
    finally:
        verifier.close()
    assert sizes == calls and len(batches) == submits
    assert [len(g.verdicts) for g in groups] == [2] * 4 and t.samples == 8
