"""Rewarding the Unlikely's bench claims: the per-theorem uplift-over-rank slope on numbers worked by hand, and the
three claims at smoke size through ``proofrl bench`` (real Coq, one shared demo run per seed, the SFT model
taught once)."""

import json

import pytest
from conftest import requires_coq
from typer.testing import CliRunner

from proofrl.bench.unlikely import CLAIMS, UNLIKELY, UPLIFT, distinct_correct, rank_slope
from proofrl.cli import app
from proofrl.policy.generation import Completion
from proofrl.problems import Problem
from proofrl.provers.base import Status, Verdict
from proofrl.rollout.proofs import Group, PromptItem

INIT = [-1.0, -2.0, -3.0, -4.0]
"""π_0 log-probs of a group of 4: sample 0 the most likely"""


def lifted(*up: bool) -> list[float]:
    """The trained model's log-probs: sample i raised by 0.5 where ``up[i]``, else lowered by 0.5."""
    return [x + (0.5 if u else -0.5) for x, u in zip(INIT, up, strict=True)]


def test_the_settings_a_report_prints_never_repeat_the_size_a_plan_may_change() -> None:
    """The report writes "Size N a seed; settings: ..."; a plan that sets another size must not leave the default
    size in the settings beside it (the pass@N and PPO-epochs claims are sized in held-out theorems, the uplift
    claim in training theorems; the uplift claim still names the shared run's held-out count, which it does not
    size)."""
    got = {c.name: c.settings for c in CLAIMS}
    assert "eval_problems" not in got["unlikely-passN"] and "eval_problems" not in got["unlikely-ppo-epochs"]
    assert "uplift_train_theorems" not in got["unlikely-uplift-rank"]
    assert got["unlikely-uplift-rank"]["eval_problems"] == UNLIKELY["eval_problems"]
    assert got["unlikely-uplift-rank"]["uplift_group_size"] == UPLIFT["group_size"]


@pytest.mark.parametrize(
    ("up", "correct", "slope"),
    [
        ((1, 0, 0, 0), (1, 0, 1, 0), -1.0),  # the likely correct sample lifted, the rare one not: rank bias
        ((0, 0, 1, 0), (1, 0, 1, 0), 1.0),  # the reverse
        ((1, 0, 1, 0), (1, 0, 1, 0), 0.0),  # both lifted: flat
        ((1, 0, 0, 1), (1, 1, 1, 0), -1.0),  # ranks 0, ½, 1 lifted 1, 0, 0: the fit of (0,1) (½,0) (1,0) has slope −1
        ((1, 1, 0, 0), (1, 1, 1, 1), -1.2),  # 1,1,0,0 over 0,⅓,⅔,1: cov −1/6 over var 5/36
        ((1, 0, 1, 0), (1, 1, 1, 0), 0.0),  # 1,0,1: symmetric, flat
    ],
)
def test_the_slope_of_the_uplift_over_the_rank_of_the_correct_samples(up, correct, slope):
    assert rank_slope(INIT, lifted(*map(bool, up)), list(map(bool, correct))) == pytest.approx(slope)


def test_the_rank_is_pi_0_s_not_the_position_and_one_correct_sample_has_no_slope():
    # the same group listed in reverse: the most likely sample (log-prob −1) is now last; the slope is unchanged
    assert rank_slope(INIT[::-1], lifted(True, False, False, False)[::-1], [False, True, False, True]) == -1.0
    assert rank_slope(INIT, lifted(True, True, True, True), [True, False, False, False]) is None
    assert rank_slope(INIT, lifted(True, True, True, True), [False] * 4) is None


def test_copies_of_one_correct_sample_count_once_towards_distinct():
    problem = Problem(name="t", formal_statement="Theorem t : True.")
    valid, wrong = Verdict(Status.VALID), Verdict(Status.ERROR)

    def group(tokens, verdicts):
        comps = [Completion("x", tuple(t), (), "stop") for t in tokens]
        return Group(PromptItem(problem, "p"), comps, ["x"] * len(comps), list(verdicts))

    assert distinct_correct(group([(1, 2), (1, 2), (3,)], [valid, valid, wrong])) == 1
    assert distinct_correct(group([(1, 2), (1, 2), (3,)], [valid, valid, valid])) == 2


@requires_coq
def test_the_three_claims_share_one_demo_run_per_seed_at_smoke_size(tmp_path):
    names = ["unlikely-passN", "unlikely-uplift-rank", "unlikely-ppo-epochs"]
    r = CliRunner().invoke(
        app, ["bench", "--smoke", *(x for n in names for x in ("--claim", n)), "--seeds", "2", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [(x["claim"], x["seed"]) for x in lines] == [(n, s) for n in names for s in (0, 1)]
    rows = {(x["claim"], x["seed"]): x["arms"] for x in lines}
    shared = tmp_path / "unlikely-shared"
    for seed in (0, 1):
        passn, ppo = rows["unlikely-passN", seed], rows["unlikely-ppo-epochs", seed]
        assert set(passn) == {"GRPO", "GRPO + unlikeliness"} and len(passn["GRPO"]) == 2
        assert ppo["2 epochs"] == passn["GRPO"]  # the 2-epoch arm is the shared run's plain GRPO, not a rerun
        assert ppo["1 epoch"].keys() == ppo["2 epochs"].keys()
        assert all(x in (0.0, 1.0) for arms in (passn, ppo) for v in arms.values() for x in v.values())
        uplift = rows["unlikely-uplift-rank", seed]
        assert (
            set(uplift) == {"GRPO", "GRPO + unlikeliness"}
            and uplift["GRPO"].keys() == uplift["GRPO + unlikeliness"].keys()
        )
        one = shared / f"seed-{seed}-smoke-ppo-epochs-1"
        assert "epochs: 1" in (one / "grpo" / "config.yaml").read_text()
        assert "epochs: 2" in (shared / f"seed-{seed}-smoke" / "grpo" / "config.yaml").read_text()
        assert not (one / "grpo-unlikeliness").exists()
    # taught once, by seed 0; seed 1 and the 1-epoch runs loaded it
    assert json.loads((shared / "seed-0-smoke" / "summary.json").read_text())["sft_loss"]
    assert json.loads((shared / "seed-1-smoke" / "summary.json").read_text())["sft_loss"] == []
    assert json.loads((shared / "seed-0-smoke-ppo-epochs-1" / "summary.json").read_text())["sft_loss"] == []
    assert "| unlikely-ppo-epochs |" in (tmp_path / "report.md").read_text()


def test_a_plan_s_pass_at_n_size_sets_the_held_out_draw_and_its_own_shared_run(tmp_path):
    """The demo's 48 keep the shared run's folder as it was; another size (a plan's 69) gets its own, whose
    held-out theorems hold the 48; a size past the held-out side is one line naming what it holds."""
    from proofrl.bench.claim import ClaimRun
    from proofrl.bench.unlikely import _demo_config, _shared
    from proofrl.demo.whole_proof import demo_problems
    from proofrl.errors import ConfigError

    def run(size: int) -> ClaimRun:
        return ClaimRun(seed=3, size=size, out=tmp_path / "c" / "seed-3", workers=1, assets=None, console=None)

    assert _shared(run(48), 48)[1] == "seed-3" == _shared(run(160))[1]
    assert _shared(run(69), 69)[1] == "seed-3-eval-69"
    held = {}
    for n in (48, 69):
        cfg, kw = _demo_config(run(n), tmp_path / "w", sft_model=None, held_out=n)
        held[n] = {p.name for p in demo_problems(cfg, seed=kw["seed"])[1]}
    assert len(held[69]) == 69 and held[48] < held[69]
    cfg, kw = _demo_config(run(500), tmp_path / "w", sft_model=None, held_out=500)
    with pytest.raises(ConfigError, match=r"data.eval_limit=500: the held-out side holds \d+ theorems"):
        demo_problems(cfg, seed=kw["seed"])
