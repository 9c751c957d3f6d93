"""LeanListener's step reward (arXiv:2503.09730 §3): how much one tactic shrank the goal list.

    r(a_t; s_t) = softplus(G(s_t) − G(s_{t+1}))   for a tactic the prover accepts,
    r(a_t; s_t) = ``failed`` (0 by default)        for one it rejects, refuses, times out on or crashes on.

G is :func:`proofrl.provers.backend.goal_count`, the one goal count: every goal still owed, in every list the
backend keeps (Coq: foreground, unfocused, shelved and given up; Lean reports foreground goals only). A given-up
goal still counts: moving a goal out of sight is no progress. softplus keeps the reward of a valid step positive —
softplus(0) = ln 2 ≈ 0.69 for a step that changes nothing, ≈ 0.31 for one that opens a goal, ≈ 1.31 for one that closes
one — so among the tactics of one group a valid tactic always beats an invalid one (with ``failed`` ≤ 0), and progress
beats validity.

A step that leaves no goals is accepted only when the judge accepts the proof it completes, with every question
``check`` asks (Coq: ``Qed``, then the statement's type and the assumptions by origin: a proof ended by ``apply
NNPP.`` under ``Classical`` or by a header's axiom earns ``failed``). A step that closes a goal while others
remain is accepted only when the term it completed keeps every recursive call guarded, however the call got
there (an earlier step that opened a goal, another goal's unfinished ``fix``): an unguarded ``fix IH 1. apply
IH.`` is a failed step of kind ``kernel`` and earns ``failed``, not the ≈ 1.31 of an honest closing step
(:meth:`proofrl.provers.coq.prover.CoqProver.step`). What such a step does not see is an axiom used to close a
goal while others remain: it is paid as a closing step, and the step that ends that proof is refused.

The failure kind of a failed step is what the caller records beside the reward (the trainer's step log).
Registered as ``subgoal`` in :data:`proofrl.rewards.combine.STEP_REWARDS`.
"""

from __future__ import annotations

import math

from ..provers.backend import goal_count
from ..provers.base import ProofState, StepResult
from .combine import STEP_REWARDS


def softplus(x: float) -> float:
    """log(1 + eˣ), computed without overflow for large |x|."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


@STEP_REWARDS.register("subgoal")
def subgoal_reward(
    before: ProofState, result: StepResult, *, failed: float = 0.0, unchanged: float | None = None
) -> float:
    """softplus(G(before) − G(after)) for a valid step; ``failed`` when ``result`` failed (or has no state).

    ``unchanged``: the reward of a valid step that leaves the state exactly as it was (same fingerprint), when
    given; None (the paper) gives it softplus(0) = ln 2 like any other valid step. In Coq ``intros.`` never fails,
    so without this a policy can earn ln 2 at every state by doing nothing (measured: docs/step_level.md)."""
    if not result.ok or result.state is None:
        return float(failed)
    if unchanged is not None and result.state.fingerprint == before.fingerprint:
        return float(unchanged)
    return softplus(float(goal_count(before) - goal_count(result.state)))
