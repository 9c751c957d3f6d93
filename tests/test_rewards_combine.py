"""The reward seam: sample terms multiplied, group shapers in order, new parts slot in by registration."""

from dataclasses import dataclass

import pytest
import torch

from proofrl.problems import Problem
from proofrl.provers.base import Status, Verdict
from proofrl.rewards import GROUP_SHAPERS, SAMPLE_TERMS, RewardConfig, RewardFn, Sample, UnlikelinessConfig

P = Problem("p", "Theorem p : True.", "")
VALID, WRONG = Verdict(Status.VALID), Verdict(Status.ERROR, ("x",))


def test_the_verifier_term_is_always_there_and_only_valid_counts():
    fn = RewardFn(RewardConfig())
    assert [n for n, _ in fn.terms] == ["verifier"] and fn.shapers == []
    got = fn.samples([Sample(P, "t", VALID), Sample(P, "t", WRONG), Sample(P, "t", Verdict(Status.TIMEOUT))])
    assert got == [1.0, 0.0, 0.0]


def test_a_new_term_and_shaper_slot_in_by_registration():
    @SAMPLE_TERMS.register("test_half_if_long")
    def half_if_long(s: Sample, limit: int) -> float:
        return 0.5 if len(s.text) > limit else 1.0

    @GROUP_SHAPERS.register("test_add_one")
    def add_one(r, lp, mask, settings):
        return r + settings

    @dataclass(frozen=True)
    class Cfg:
        test_half_if_long: int | None = None
        unlikeliness: UnlikelinessConfig | None = None
        test_add_one: float | None = None

    fn = RewardFn(Cfg(test_half_if_long=3, unlikeliness=UnlikelinessConfig(beta_rank=0.5), test_add_one=1.0))
    assert [n for n, _ in fn.terms] == ["verifier", "test_half_if_long"]
    assert [n for n, _ in fn.shapers] == ["unlikeliness", "test_add_one"]
    assert fn.samples([Sample(P, "short", VALID), Sample(P, "ok", VALID), Sample(P, "long text", WRONG)]) == [
        0.5,
        1.0,
        0.0,
    ]
    # shapers run in field order: the rank penalty first (most likely row 0 gets β), then +1
    out = fn.shape_group(torch.tensor([1.0, 1.0]), torch.tensor([[-0.1], [-2.0]]), torch.ones(2, 1))
    assert torch.allclose(out, torch.tensor([1.5, 1.75]))
    with pytest.raises(ValueError, match="already registered"):
        SAMPLE_TERMS.register("verifier")(lambda s, x: 1.0)
