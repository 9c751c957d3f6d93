"""LeanListener's step reward softplus(G(before) − G(after)): the formula on hand-built states, its registration,
and the goal counts real Coq reports (a step that splits a goal, one that closes one, one that fails)."""

from __future__ import annotations

import math

import pytest

from proofrl.provers.backend import goal_count
from proofrl.provers.base import FailureKind, Goal, ProofState, StepFailure, StepResult, Theorem
from proofrl.rewards.combine import STEP_REWARDS
from proofrl.rewards.subgoal import softplus, subgoal_reward

TH = Theorem("t", "Theorem t : True /\\ True.", "")


def _state(fg: int, background: int = 0, shelved: int = 0, given_up: int = 0) -> ProofState:
    goals = tuple(Goal((), f"P{i}") for i in range(fg))
    return ProofState(TH, (), goals, background, shelved, given_up)


def test_reward_is_softplus_of_the_drop_in_goal_count():
    two, one, three = _state(2), _state(1), _state(3)
    assert subgoal_reward(two, StepResult("t.", one)) == pytest.approx(math.log1p(math.e))  # softplus(1) = 1.3133
    assert subgoal_reward(two, StepResult("t.", two)) == pytest.approx(math.log(2))  # no progress: ln 2
    assert subgoal_reward(two, StepResult("t.", three)) == pytest.approx(math.log1p(math.exp(-1)))  # one more goal
    assert subgoal_reward(two, StepResult("t.", _state(0))) == pytest.approx(math.log1p(math.exp(2)))
    # more progress is more reward, and any valid step beats a failed one
    assert subgoal_reward(two, StepResult("t.", _state(0))) > subgoal_reward(two, StepResult("t.", one)) > 0.0


def test_a_failed_step_gets_the_configured_penalty_whatever_its_kind():
    for kind in FailureKind:
        r = StepResult("t.", failure=StepFailure(kind, "no"))
        assert subgoal_reward(_state(2), r) == 0.0
        assert subgoal_reward(_state(2), r, failed=-0.5) == -0.5
    assert subgoal_reward(_state(2), StepResult("t.")) == 0.0  # no state at all: not valid


def test_every_goal_list_counts_given_up_included():
    assert goal_count(_state(1, background=2, shelved=1, given_up=1)) == 5
    # moving a goal to "given up" is no progress: same G, reward ln 2 (not softplus(1))
    assert subgoal_reward(_state(2), StepResult("t.", _state(1, given_up=1))) == pytest.approx(math.log(2))
    # unfocusing a goal (background) is no progress either
    assert subgoal_reward(_state(2), StepResult("t.", _state(1, background=1))) == pytest.approx(math.log(2))


def test_registered_as_subgoal_and_softplus_is_stable():
    assert STEP_REWARDS.get("subgoal") is subgoal_reward
    assert softplus(800.0) == 800.0 and softplus(-800.0) == 0.0


def test_goal_counts_from_real_coq(coq):
    th = Theorem("two", "Theorem two : True /\\ (1 = 1).", "Require Import Arith Lia.")
    s0 = coq.start(th)
    split = coq.step(s0, "split.")
    assert split.ok and goal_count(split.state) == 2
    assert subgoal_reward(s0, split) == pytest.approx(softplus(-1.0))
    first = coq.step(split.state, "exact I.")
    assert first.ok and subgoal_reward(split.state, first) == pytest.approx(softplus(1.0))
    bad = coq.step(split.state, "exact 0.")
    assert not bad.ok and subgoal_reward(split.state, bad) == 0.0
    # `intros.` never fails in Coq: at a goal with nothing to introduce it is valid and changes nothing
    noop = coq.step(split.state, "intros.")
    assert noop.ok and subgoal_reward(split.state, noop) == pytest.approx(math.log(2))  # the paper's reward
    assert subgoal_reward(split.state, noop, unchanged=0.0) == 0.0  # the option that removes the free ln 2
    assert subgoal_reward(split.state, first, unchanged=0.0) == pytest.approx(softplus(1.0))  # progress unaffected
