"""The rollout's schedule: serial by default (``rollout.overlap: false``, the faster one measured on 2 cores in
docs/training.md), overlapped on request, and what each schedule does."""

from __future__ import annotations

import pytest
from conftest import requires_coq
from rl_support import problems


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    from proofrl.policy import build_tiny_model, load_policy
    from proofrl.policy.tiny import sample_corpus

    return load_policy(build_tiny_model(tmp_path_factory.mktemp("tiny"), sample_corpus()), device="cpu")


def test_the_default_is_serial():
    from proofrl.train.config import RolloutConfig, load_recipe

    assert RolloutConfig().overlap is False
    assert load_recipe("demo").rollout.overlap is False
    assert load_recipe("demo", ["rollout.overlap=true"]).rollout.overlap is True


def counting(calls: list[int], batches: list[int]):
    """An HF generator and a verifier (the real ones) that record each call's prompts and each submitted batch."""
    from proofrl.policy import HFGenerator
    from proofrl.verification import Verifier

    class Generator(HFGenerator):
        def generate(self, prompts, params):
            calls.append(len(prompts))
            return super().generate(prompts, params)

    class CountingVerifier(Verifier):
        def submit(self, items):
            batches.append(len(items))
            return super().submit(items)

    return Generator, CountingVerifier


@requires_coq
@pytest.mark.parametrize("overlap, calls, submits", [(True, [2, 2], 2), (False, [4], 1)])
def test_each_schedule_generates_and_verifies_as_it_says(tiny, overlap, calls, submits):
    from proofrl.policy import SamplingConfig, get_format
    from proofrl.rollout.proofs import first_turn, sample_and_verify

    sizes: list[int] = []
    batches: list[int] = []
    Generator, CountingVerifier = counting(sizes, batches)
    fmt = get_format("coq")
    items = [first_turn(p, fmt) for p in problems()[:4]]
    verifier = CountingVerifier(workers=1, timeout=10)
    try:
        groups, t = sample_and_verify(
            Generator(*tiny),
            items,
            SamplingConfig(n=2, max_tokens=8, seed=0),
            fmt,
            verifier,
            chunk_prompts=2,
            overlap=overlap,
        )
    finally:
        verifier.close()
    assert sizes == calls and len(batches) == submits
    assert [len(g.verdicts) for g in groups] == [2] * 4 and t.samples == 8


@requires_coq
@pytest.mark.parametrize("overrides, calls", [([], [4]), (["rollout.overlap=true"], [2, 2])])
def test_the_trainer_runs_the_recipes_schedule(tiny, tmp_path, overrides, calls):
    """The demo recipe as it is (serial: one generation call) and with the overlap asked for (chunks of 2)."""
    from proofrl.train.config import load_recipe
    from proofrl.train.whole_proof import Trainer

    sizes: list[int] = []
    Generator, CountingVerifier = counting(sizes, [])
    cfg = load_recipe(
        "demo",
        [
            f"out={tmp_path}",
            "rollout.problems_per_step=4",
            "rollout.group_size=2",
            "rollout.max_tokens=8",
            "rollout.chunk_prompts=2",
            *overrides,
        ],
    )
    model, tok = tiny
    verifier = CountingVerifier(workers=1, timeout=10)
    try:
        Trainer(cfg, model, tok, Generator(model, tok), verifier, problems()).rollout()
    finally:
        verifier.close()
    assert sizes == calls
