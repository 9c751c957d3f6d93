"""Rewarding the Unlikely's toy claims (§3.5, App. A.3, A.4): the exact pass@k on a policy worked by hand, and the
claims' run at smoke size (the toy's real GRPO, one run per seed for all three claims)."""

import json

import pytest
import torch

from proofrl.bench.claim import ClaimRun
from proofrl.bench.claims import CLAIMS
from proofrl.bench.unlikely_toy import INITIAL, toy_pass_at_32, toy_uplift_slope
from proofrl.toy import experiment
from proofrl.toy.env import BatchedMLP, ToyEnv
from proofrl.toy.experiment import VARIANTS, ToyConfig, exact_pass_at_k, run_variant


def test_exact_pass_at_k_is_one_minus_the_miss_chance_to_the_k():
    gen = torch.Generator().manual_seed(0)
    policy = BatchedMLP(1, 2, 4, 4, generator=gen)
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()  # every logit 0: π uniform over the 4 actions
    env = ToyEnv(torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [0.0, 9.0]]]))
    states = torch.tensor([[[1.0, 0.0], [0.0, 0.0]]])  # sᵀv = 1, 2, 3, 0 for the first; all 0 for the second
    got = exact_pass_at_k(policy, env, states, tau=2.0, k=3)  # two of four actions reach τ = 2 on the first
    assert got.shape == (1, 2)
    assert got[0].tolist() == pytest.approx([1 - 0.5**3, 0.0])


def test_both_variants_start_from_the_same_initial_policy_and_environment():
    cfg = ToyConfig(seeds=1, steps=2, eval_states=3, eval_every=2, seed=7)
    a, b = (run_variant(VARIANTS[v], cfg).trained for v in ("grpo-default", "grpo-unlikeliness-1"))
    assert a is not None and b is not None
    assert torch.equal(a.env.action_vectors, b.env.action_vectors) and torch.equal(a.eval_states, b.eval_states)
    for x, y in zip(a.initial.parameters(), b.initial.parameters(), strict=True):
        assert torch.equal(x, y)
    assert not all(torch.equal(x, y) for x, y in zip(a.policy.parameters(), a.initial.parameters(), strict=True))


def test_the_toy_claims_measure_three_arms_on_the_same_states_once_per_seed(tmp_path):
    run = ClaimRun(seed=5, size=3, out=tmp_path / "c" / "seed-5", workers=1, assets=None, smoke=True)
    out = toy_pass_at_32(run)
    assert set(out) == {INITIAL, "GRPO", "GRPO + unlikeliness"}
    assert all(list(v) == ["state-0000", "state-0001", "state-0002"] for v in out.values())
    assert all(0.0 <= x <= 1.0 for v in out.values() for x in v.values())
    # the arms are trained, and trained differently: the reward is the one difference between them
    assert out["GRPO"] != out[INITIAL] and out["GRPO + unlikeliness"] != out["GRPO"]
    cached = tmp_path / "unlikely-toy-shared" / "seed-5-size-3-smoke-toy.json"
    assert json.loads(cached.read_text())["pass@32"] == out
    kept = {"pass@32": {"kept": {"state-0000": 0.5}}, "uplift slope": {"kept": {"state-0000": -1.0}}}
    cached.write_text(json.dumps(kept))  # a second claim reads the seed's run, not a new one
    assert toy_pass_at_32(run) == kept["pass@32"] and toy_uplift_slope(run) == kept["uplift slope"]


def test_the_uplift_slope_is_measured_on_the_states_with_two_distinct_correct_actions(tmp_path, monkeypatch):
    """The toy's uplift groups, scored by hand with ``rank_slope``: the claim keeps exactly the states whose π_0 draw
    holds two distinct correct actions, with the slope of each variant's trained policy."""
    from proofrl.bench import unlikely_toy
    from proofrl.bench.unlikely import rank_slope

    trained: list = []
    real = experiment.run_variant

    def spy(variant, cfg):
        r = real(variant, cfg)
        trained.append(r.trained)
        return r

    monkeypatch.setattr(experiment, "run_variant", spy)
    run = ClaimRun(seed=6, size=24, out=tmp_path / "c" / "seed-6", workers=1, assets=None, smoke=True)
    got = unlikely_toy.toy_uplift_slope(run)
    assert list(got) == ["GRPO", "GRPO + unlikeliness"] and len(trained) == 2
    g = trained[0].uplift_groups
    assert torch.equal(g.actions, trained[1].uplift_groups.actions)  # both variants scored on the same π_0 draw
    want_states = {f"state-{i:04d}" for i in range(24) if len(set(g.actions[0, i][g.correct[0, i]].tolist())) >= 2}
    assert want_states and set(got["GRPO"]) == set(got["GRPO + unlikeliness"]) == want_states
    for arm, t in zip(got, trained, strict=True):
        with torch.no_grad():
            new = t.policy(t.eval_states).gather(-1, g.actions)[0]
        for name, value in got[arm].items():
            i = int(name.split("-")[1])
            assert value == pytest.approx(rank_slope(g.init_logps[0, i], new[i], g.correct[0, i]))


def test_the_toy_claims_name_their_arms_and_directions():
    a3, a4 = CLAIMS["unlikely-toy-grpo-pass32"], CLAIMS["unlikely-toy-unlikeliness-pass32"]
    assert (a3.arms, a3.direction, a3.unit) == ((INITIAL, "GRPO"), -1, "states")
    assert (a4.arms, a4.direction, a4.unit) == (("GRPO", "GRPO + unlikeliness"), 1, "states")
    uplift = CLAIMS["unlikely-toy-uplift-rank"]
    assert (uplift.arms, uplift.direction, uplift.run) == (("GRPO", "GRPO + unlikeliness"), 1, toy_uplift_slope)
