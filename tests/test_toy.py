"""The toy environment of Appendix A, its policy, and short end-to-end runs."""

import json

import pytest
import torch

from proofrl.toy.env import BatchedMLP, ToyEnv, sample_actions
from proofrl.toy.experiment import VARIANTS, ToyConfig, get_variants, run_variant
from proofrl.toy.run import run_experiment


def test_reward_is_threshold_on_hidden_dot_product_by_hand():
    env = ToyEnv(torch.tensor([[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]]))  # (S=1, A=3, D=2)
    s = torch.tensor([[[2.0, 0.5]]])  # s.v = [2, 1, 2.5]
    assert env.correct(s, 2.0).tolist() == [[[True, False, True]]]
    assert env.correct(s, 2.5).tolist() == [[[False, False, True]]]  # >= is inclusive
    actions = torch.tensor([[[0, 1, 2, 1]]])
    assert env.reward(s, actions, 2.0).tolist() == [[[1.0, 0.0, 1.0, 0.0]]]


def test_sampling_follows_the_policy():
    g = torch.Generator().manual_seed(0)
    logps = torch.log(torch.tensor([[[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]]]))  # (1, 2, 3)
    a = sample_actions(logps, 200, generator=g)
    assert a.shape == (1, 2, 200)
    assert (a[0, 0] == 1).all() and set(a[0, 1].tolist()) == {0, 2}


def test_runs_of_the_batched_mlp_are_independent():
    g = torch.Generator().manual_seed(0)
    mlp = BatchedMLP(2, 10, 8, 5, generator=g)
    out = mlp(torch.randn(2, 3, 10, generator=g))
    assert out.shape == (2, 3, 5) and torch.allclose(out.exp().sum(-1), torch.ones(2, 3))
    out[0].sum().backward()
    assert mlp.w1.grad[1].abs().sum() == 0 and mlp.w1.grad[0].abs().sum() > 0


def test_unknown_variant_lists_choices():
    with pytest.raises(ValueError, match="grpo-unlikeliness-2"):
        get_variants(["grpo-fast"])
    assert [v.epochs for v in VARIANTS.values()] == [1, 1, 2, 2, 3]


SMALL = ToyConfig(seeds=2, steps=40, eval_every=20, eval_states=64, eval_samples=32)


def test_short_run_training_reward_rises():
    res = run_variant(VARIANTS["grpo-default"], SMALL)
    train = [r for r in res.records if r["kind"] == "train"]
    first = [r["train/reward"] for r in train if r["step"] <= 5]
    last = [r["train/reward"] for r in train if r["step"] > SMALL.steps - 5]
    assert sum(last) / len(last) > sum(first) / len(first) + 0.05
    ev = {(r["step"], r["seed"]): r for r in res.records if r["kind"] == "eval"}
    for seed in (0, 1):
        assert ev[(40, seed)]["eval/tau=1/pass@1"] > ev[(0, seed)]["eval/tau=1/pass@1"]
        assert ev[(40, seed)]["eval/entropy"] < ev[(0, seed)]["eval/entropy"]


def test_variants_start_from_the_same_environment_and_policy():
    cfg = ToyConfig(seeds=2, steps=1, eval_every=1, eval_states=16, eval_samples=32)
    a = run_variant(VARIANTS["grpo-default"], cfg).records[0]
    b = run_variant(VARIANTS["grpo-unlikeliness-1"], cfg).records[0]
    assert a["step"] == b["step"] == 0 and a["eval/entropy"] == b["eval/entropy"]
    assert a["exact/tau=5/pass@32"] == b["exact/tau=5/pass@32"]


def test_experiment_writes_records_plots_and_report(tmp_path):
    cfg = ToyConfig(seeds=2, steps=4, eval_every=2, eval_states=16, eval_samples=32)
    run = run_experiment(cfg, ["grpo-default", "grpo-unlikeliness-1"], tmp_path, show_progress=False)
    lines = [json.loads(x) for x in run.results.read_text().splitlines()]
    assert lines[0]["kind"] == "config"
    assert {r["kind"] for r in lines} == {"config", "train", "eval", "uplift"}
    assert len([r for r in lines if r["kind"] == "train"]) == 2 * 2 * 4
    for name in ("pass32_tau5_vs_step.png", "pass1_tau1_vs_step.png", "entropy_vs_step.png", "uplift_vs_rank.png"):
        assert (tmp_path / name).stat().st_size > 1000
    text = run.report.read_text()
    assert "## τ = 5" in text and "| grpo-unlikeliness-1 |" in text and "(b)" in text
    assert run.timings.steps == 8
