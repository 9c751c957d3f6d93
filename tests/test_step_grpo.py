"""Online step-level GRPO (LeanListener): the recipe's numbers and its one-line config errors, premise dropout,
the GRPO wiring (one group = the tactics of one state), and short real runs over Coq with the tiny model
(rewards logged per tactic, the policy's own states collected, checkpoint and resume, the online DPO variant)."""

from __future__ import annotations

import json
import random

import pytest
import torch
from conftest import NAT
from typer.testing import CliRunner

from proofrl.provers.base import Theorem
from proofrl.rollout.tactics import StatePoint, coq_pool
from proofrl.train.step_grpo import StepLevelTrainer, group_ids, load_config, with_premises

PLUS = Theorem("plus_0", "Theorem plus_0 : forall n : nat, n + 0 = n.", NAT)
AND = Theorem("and_tt", "Theorem and_tt : True /\\ True.", NAT)
STATES = [
    StatePoint(PLUS, (), "⊢ forall n : nat, n + 0 = n"),
    StatePoint(PLUS, ("intros n.",), "n : nat\n⊢ n + 0 = n"),
    StatePoint(AND, (), "⊢ True /\\ True"),
]
PAIRS = [
    {
        "theorem": "plus_0",
        "statement": PLUS.statement,
        "header": NAT,
        "module": "T",
        "step": 0,
        "state_before": STATES[0].text,
        "tactic": "intros n.",
        "structural": False,
    },
    {
        "theorem": "plus_0",
        "statement": PLUS.statement,
        "header": NAT,
        "module": "T",
        "step": 1,
        "state_before": STATES[1].text,
        "tactic": "lia.",
        "structural": False,
    },
    {
        "theorem": "and_tt",
        "statement": AND.statement,
        "header": NAT,
        "module": "T",
        "step": 0,
        "state_before": STATES[2].text,
        "tactic": "split.",
        "structural": False,
    },
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from proofrl.policy.tactic import train_tiny_tactic_model

    out = tmp_path_factory.mktemp("tiny-tactic")
    return train_tiny_tactic_model(
        PAIRS * 4, out, epochs=3, lr=3e-3, batch=8, model={"hidden": 32, "layers": 1, "heads": 2, "vocab_size": 300}
    )


def _trainer(tiny_dir, out, *overrides):
    from proofrl.policy.model import load_policy

    cfg = load_config(
        "leanlistener",
        [
            "rollout.problems_per_step=3",
            "rollout.group_size=4",
            "verify.workers=1",
            "verify.timeout=3",
            "optim.lr=1e-3",
            "checkpoint_every=1",
            "rollout.max_tokens=16",
            *overrides,
        ],
    )
    model, tok = load_policy(tiny_dir, device="cpu")
    return cfg, model, tok


def test_the_recipe_carries_the_papers_numbers():
    cfg = load_config("leanlistener")
    assert (cfg.rollout.problems_per_step, cfg.rollout.group_size, cfg.rollout.sync_every, cfg.steps) == (
        16,
        8,
        50,
        10000,
    )
    assert cfg.optim.lr == pytest.approx(2.25e-6) and cfg.ppo.kl_coef > 0
    assert cfg.algorithm.step_reward == "subgoal" and cfg.algorithm.failed_reward == 0.0 and cfg.loop == "step-grpo"


def test_bad_keys_are_one_line_on_the_command_line():
    from proofrl.cli import app

    for override, msg in (
        ("rollout.grup_size=3", "unknown keys in rollout: ['grup_size']"),
        ("algorithm.step_reward=nope", "algorithm.step_reward must be one of"),
        ("rollout.group_size=1", "rollout.group_size must be >= 2"),
    ):
        res = CliRunner().invoke(app, ["train", "--recipe", "leanlistener", "--set", override])
        assert res.exit_code == 2, res.output
        assert len(res.stderr.strip().splitlines()) == 1 and msg in res.stderr, res.stderr
    shown = CliRunner().invoke(app, ["train", "--recipe", "leanlistener", "--show-config", "--set", "steps=3"])
    assert shown.exit_code == 0 and "steps: 3" in shown.output and "lr: 2.25e-06" in shown.output


def test_premise_dropout_only_where_premises_are_named():
    p = StatePoint(PLUS, (), "⊢ goal", premises=("Nat.add_0_r", "Nat.add_comm", "Nat.le_refl"))
    rng = random.Random(0)
    assert with_premises(p, 0.0, rng) == "premises: Nat.add_0_r, Nat.add_comm, Nat.le_refl\n\n⊢ goal"
    assert with_premises(p, 1.0, rng) == "⊢ goal"
    kept = [with_premises(p, 0.5, rng).count("Nat.") for _ in range(400)]
    assert 1.2 < sum(kept) / len(kept) < 1.8  # each of 3 premises kept half the time
    assert with_premises(STATES[0], 0.5, rng) == STATES[0].text


def test_one_grpo_group_is_the_tactics_of_one_state(tiny_dir, tmp_path):
    """Advantages normalised within each state's tactics; a state whose rewards are all equal is left out.
    (Mutation tried: ``group_ids`` giving every row the same id — this test fails.)"""
    from proofrl.policy.generation import encode_prompts

    cfg, model, tok = _trainer(tiny_dir, tmp_path)
    tr = StepLevelTrainer(cfg, model, tok, STATES, pool=None, out=tmp_path)
    comps = tr.sampler.sample([s.text for s in STATES], 4)
    prompts = encode_prompts(tok, [tr.sampler.prompt(s.text) for s in STATES])
    rewards = [[1.3, 0.0, 0.0, 0.7], [0.7, 0.7, 0.7, 0.7], [0.0, 0.31, 0.0, 0.0]]
    stats = tr.grpo_update(comps, prompts, rewards)
    assert stats["update/groups"] == 2 and stats["update/dropped_groups"] == 1
    adv = tr.last_advantages
    for i, r in enumerate([rewards[0], rewards[2]]):
        r = torch.tensor(r)
        assert torch.allclose(adv[4 * i : 4 * i + 4], (r - r.mean()) / (r.std() + 1e-6), atol=1e-5)
    assert group_ids([2, 3]).tolist() == [0, 0, 1, 1, 1]


def test_dr_grpos_horizon_is_the_tactic_budget(tiny_dir, tmp_path):
    """H of ``seq-mean-token-sum-norm`` is ``rollout.max_tokens``, not the padded width of each update (which would
    shrink a group's gradient next to long neighbours)."""
    cfg, model, tok = _trainer(
        tiny_dir, tmp_path, "ppo.agg_mode=seq-mean-token-sum-norm", "algorithm.advantage=dr_grpo"
    )
    assert StepLevelTrainer(cfg, model, tok, STATES, pool=None, out=tmp_path).ppo.horizon == 16


@pytest.mark.parametrize("setup", ["lora", "cpu-ref", "bf16"])
def test_step_level_shares_the_lm_update_reference_and_precision(tiny_dir, tmp_path, setup):
    """The one LM GRPO update: a LoRA policy's π_ref is its adapter switched off (no copy), a full model's can be
    parked in CPU memory, bf16 weights train under autocast over fp32 masters; each update moves the policy and
    leaves π_ref where it was."""
    from proofrl.policy.generation import encode_prompts
    from proofrl.policy.model import LoraConfig, load_policy

    cfg, model, tok = _trainer(
        tiny_dir, tmp_path, "ppo.kl_coef=0.5", *(["model.ref_device=cpu"] if setup == "cpu-ref" else [])
    )
    if setup == "lora":
        model, tok = load_policy(tiny_dir, device="cpu", lora=LoraConfig(r=4, alpha=8, dropout=0.0))
    if setup == "bf16":
        model = model.to(torch.bfloat16)
    tr = StepLevelTrainer(cfg, model, tok, STATES, pool=None, out=tmp_path)
    assert (tr.lm.ref_model == "adapter-off") == (setup == "lora")
    assert tr.lm.compute_dtype == (torch.bfloat16 if setup == "bf16" else torch.float32)
    assert all(p.dtype == torch.float32 for p in tr.lm.params)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    comps = tr.sampler.sample([s.text for s in STATES], 4)
    prompts = encode_prompts(tok, [tr.sampler.prompt(s.text) for s in STATES])
    stats = tr.grpo_update(comps, prompts, [[1.0, 0.0, 0.0, 0.5], [0.2, 0.2, 0.7, 0.7], [0.0, 0.3, 0.0, 0.0]])
    assert stats["update/groups"] == 3 and stats["loss/skipped"] == 0
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    if setup != "lora":
        assert next(tr.lm.ref_model.parameters()).device.type == "cpu"
        assert all(
            torch.equal(before[k].to(v.dtype), v) for k, v in tr.lm.ref_model.state_dict().items()
        )  # π_ref frozen


@pytest.mark.parametrize("objective", ["grpo", "dpo"])
def test_a_short_run_over_coq_logs_rewards_checkpoints_and_resumes(tiny_dir, tmp_path, objective):
    cfg, model, tok = _trainer(tiny_dir, tmp_path, "steps=1", f"algorithm.objective={objective}")
    with coq_pool(1, 3.0) as pool:
        tr = StepLevelTrainer(cfg, model, tok, STATES, pool, out=tmp_path)
        hist = tr.fit()
        assert len(hist) == 1 and (tmp_path / "checkpoints" / "step_000001" / "state.pt").is_file()
        rows = [json.loads(x) for x in (tmp_path / "tactics.jsonl").read_text().splitlines()]
        assert len(rows) == 3 * 4 and all(r["step"] == 1 for r in rows)
        assert all((r["reward"] > 0) == r["valid"] for r in rows)  # valid: softplus > 0; failed: 0
        assert all(r["failure"] is None if r["valid"] else r["failure"] for r in rows)
        assert hist[0]["tactics/valid"] == pytest.approx(sum(r["valid"] for r in rows) / 12)
        assert hist[0]["states/own_pool"] == len(tr.source.own)
        if objective == "grpo":
            assert "loss/loss" in hist[0] or hist[0]["update/groups"] == 0
        else:
            assert "dpo/pairs" in hist[0]
        own = len(tr.source.own)
        # a second run in the same folder resumes at step 1 and runs one more
        cfg2, model2, tok2 = _trainer(tiny_dir, tmp_path, "steps=2", f"algorithm.objective={objective}")
        tr2 = StepLevelTrainer(cfg2, model2, tok2, STATES, pool, out=tmp_path)
        hist2 = tr2.fit()
    assert [m["step"] for m in hist2] == [2] and tr2.step == 2
    assert [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert len(tr2.source.own) >= own  # the policy's own states came back with the checkpoint


def test_a_state_point_survives_the_checkpoints_json():
    p = StatePoint(
        Theorem("t", "Theorem t : True.", "Require Import Arith.", "coq"),
        ("intros.",),
        "⊢ True",
        premises=("Nat.add_0_r",),
        origin="policy",
    )
    assert StatePoint.from_json(json.loads(json.dumps(p.to_json()))) == p
