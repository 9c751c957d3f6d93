"""Lean in search: AND nodes for independent Lean goals (several, none with a metavariable), focused as views
of the REPL's states (:mod:`proofrl.provers.lean.goals`), over real recorded REPL answers.

``proof_branching`` (v4.33) is Lean answering ``apply And.intro`` with two goals, then a proof of each in goal
order. AND-OR MCTS walks exactly those recorded states: the AND node's first goal is the main goal of the
recorded state, and its second is the main goal of the state the first goal's proof reached. The search ends
``proved`` only when the fresh-process final check answers (a SYNTHETIC recording of that check: Lean's answer
to the bullet proof and to ``#print axioms`` are not in the recordings), ``unsound`` without one.
"""

from __future__ import annotations

import json

import pytest
from lean_replay_support import (
    TRANSCRIPTS,
    needs_transcripts,
    recorded,
    replay_config,
    synthetic_axioms,
    write_transcript,
)
from search_support import ScriptedPolicy

from proofrl.provers.base import FailureKind, Theorem
from proofrl.provers.lean import LeanConfig, LeanProver
from proofrl.provers.lean.goals import bullets, decomposable, focus_tactic, has_metavariable
from proofrl.provers.lean.models import parse_response
from proofrl.provers.lean.prover import assemble
from proofrl.search import SearchConfig, search_one
from proofrl.search.tree import refusal

BRANCHING = Theorem(
    "complex_and", "theorem complex_and (p q r : Prop) (h1 : p ∧ q) (h2 : q → r) : p ∧ r := by", "", "lean"
)
TABLE = [
    ("⊢ p ∧ r", ["apply And.intro"]),
    ("⊢ p\n", ["exact h1.left"]),
    ("⊢ r", ["apply h2"]),
    ("⊢ q", ["exact h1.right"]),
]
PROOF = ["apply And.intro", "· exact h1.left", "· apply h2", "  exact h1.right"]
MCTS = SearchConfig(algorithm="mcts", backend="lean", width=1, max_steps=12, tactic_timeout=10.0)


def _goals(name: str, i: int) -> list[str]:
    return list(parse_response(json.loads(recorded(name, i)[1])).goals)


@needs_transcripts
def test_independent_goals_are_read_from_the_goal_texts_lean_prints() -> None:
    two = _goals("proof_branching", 2)  # case left ⊢ p, case right ⊢ r
    assert len(two) == 2 and decomposable(two)
    assert decomposable(_goals("Mathlib/test/induction", 3))  # case zero / case succ with n✝, n_ih✝
    assert not decomposable(two[:1])  # one goal: nothing to split
    for mv in ("⊢ ?a = 1", "x : Nat\n⊢ x = ?m.12", "h : f ?_ = 0\n⊢ True", "⊢ Sort ?u.1"):
        assert has_metavariable(mv) and not decomposable([two[0], mv]), mv
    for plain in ("⊢ exact? = 1", "h' : p\n⊢ q ∧ p", "⊢ a.b? = c"):  # a name ending in ? is no metavariable
        assert not has_metavariable(plain), plain
    assert bullets([["exact a"], ["apply h", "exact b"]]) == ["· exact a", "· apply h", "  exact b"]
    assert refusal(focus_tactic(2), "lean") == "forbidden: focus steps are managed by the search"


def _final_check(tmp_path):
    """SYNTHETIC: the fresh process's conversation for the bullet proof (no message, no axioms)."""
    plan = assemble(BRANCHING, "\n".join(PROOF), "", LeanConfig(command=("x",)))
    return write_transcript(
        tmp_path,
        "final",
        [
            ({"cmd": plan.code}, {"env": 0}),
            ({"cmd": "#print axioms complex_and", "env": 0}, synthetic_axioms("complex_and", [], 1)),
        ],
    )


@needs_transcripts
@pytest.mark.parametrize("final", [True, False], ids=["final-check-recorded", "no-final-check"])
def test_mcts_proves_through_an_and_node_over_recorded_states(tmp_path, final) -> None:
    flags = ("--also", str(_final_check(tmp_path))) if final else ()
    prover = LeanProver(replay_config(TRANSCRIPTS / "proof_branching.in", *flags))
    try:
        r = search_one(BRANCHING, prover, ScriptedPolicy(TABLE), MCTS)
    finally:
        prover.close()
    tree = r.tree
    assert all(e.failure is None for e in tree.edges)  # every request was a recorded one (no crash, no rotate)
    assert [n.kind for n in tree.nodes[:4]] == ["OR", "AND", "OR", "OR"]
    assert [(e.tactic, e.kind) for e in tree.edges if e.src == 1] == [
        ("focus_goal 1", "focus"),
        ("focus_goal 2", "focus"),
    ]
    assert [len(n.state.goals) for n in tree.nodes[2:4]] == [1, 1] and tree.nodes[2].state.background == 1
    assert r.proof.splitlines() == PROOF
    if final:
        assert r.status == "proved" and r.verdict.valid, r.verdict
    else:
        assert r.status == "unsound" and r.verdict.status.value == "crash", r.verdict
        assert not tree.root.solved and any(n.unsound for n in tree.nodes)


def _and_state(tmp_path, answers: list[tuple[dict, dict]]):
    """A prover at ``proof_branching``'s AND state (recorded answers), then ``answers`` (SYNTHETIC)."""
    ex = [(recorded("proof_branching", i)[0], json.loads(recorded("proof_branching", i)[1])) for i in (1, 2)]
    prover = LeanProver(replay_config(write_transcript(tmp_path, "and", ex + answers)))
    s = prover.step(prover.start(BRANCHING), "apply And.intro").state
    return prover, s


@needs_transcripts
def test_a_focused_step_that_touches_a_sibling_goal_fails(tmp_path) -> None:
    """`all_goals` closes both goals from the first one's view: the goal behind it did not come back."""
    prover, s = _and_state(
        tmp_path,
        [
            (
                {"tactic": "all_goals assumption", "proofState": 1},
                {"proofStatus": "Completed", "proofState": 2, "goals": []},
            )
        ],
    )
    first = prover.step(s, focus_tactic(1)).state
    r = prover.step(first, "all_goals assumption")
    assert r.state is None and r.failure.kind is FailureKind.ERROR and "outside the focused one" in r.failure.message


@needs_transcripts
def test_a_later_goal_stepped_first_is_brought_to_the_front(tmp_path) -> None:
    """Goal 2 before goal 1 is proved: `rotate_left 1` on the AND state (its answer must be the goals rotated),
    then the tactic on the new state; the goal behind is goal 1."""
    left, right = _goals("proof_branching", 2)
    prover, s = _and_state(
        tmp_path,
        [
            (
                {"tactic": "rotate_left 1", "proofState": 1},
                {"proofStatus": "Incomplete: open goals remain", "proofState": 2, "goals": [right, left]},
            ),
            (
                {"tactic": "apply h2", "proofState": 2},
                {
                    "proofStatus": "Incomplete: open goals remain",
                    "proofState": 3,
                    "goals": [right.replace("⊢ r", "⊢ q"), left],
                },
            ),
        ],
    )
    second = prover.step(s, focus_tactic(2)).state
    assert second.handle.proof_state is None and second.background == 1  # no request yet
    r = prover.step(second, "apply h2")
    assert r.ok and str(r.state.goals[0]).endswith("⊢ q") and r.state.background == 1
    assert r.state.handle.history == ("apply And.intro", "rotate_left 1", "apply h2")


@needs_transcripts
def test_a_rotation_lean_answers_otherwise_fails(tmp_path) -> None:
    left, right = _goals("proof_branching", 2)
    prover, s = _and_state(
        tmp_path,
        [
            (
                {"tactic": "rotate_left 1", "proofState": 1},
                {"proofStatus": "Incomplete: open goals remain", "proofState": 2, "goals": [left, right]},
            )
        ],
    )
    r = prover.step(prover.step(s, focus_tactic(2)).state, "apply h2")
    assert r.state is None and "did not bring goal 2 to the front" in r.failure.message


@needs_transcripts
def test_on_a_legacy_repl_the_last_focused_goal_is_confirmed_with_the_tactics_lean_ran(tmp_path) -> None:
    """A v4.9-shaped REPL (``proof_branching``'s answers without ``proofStatus``): the last goal's closing step
    leaves no goals and cannot be trusted alone, so the tactics Lean actually ran to reach it (goal 1's proof
    included, no ``focus_goal``) are elaborated as one command (SYNTHETIC answer: no message)."""
    from lean_replay_support import legacy_shape

    ex = [
        (recorded("proof_branching", i)[0], legacy_shape(json.loads(recorded("proof_branching", i)[1])))
        for i in range(1, 6)
    ]
    whole = "\n".join(("apply And.intro", "exact h1.left", "apply h2", "exact h1.right"))
    plan = assemble(BRANCHING, whole, "", LeanConfig(command=("x",)))
    ex.append(({"cmd": plan.code}, {"env": 1}))
    prover = LeanProver(replay_config(write_transcript(tmp_path, "legacy", ex, framing="\n"), version="v4.9.0"))
    s = prover.step(prover.start(BRANCHING), "apply And.intro").state
    first = prover.step(s, focus_tactic(1)).state
    assert prover.step(first, "exact h1.left").state.goals == ()
    second = prover.step(s, focus_tactic(2)).state
    s3 = prover.step(second, "apply h2").state  # in the state goal 1's proof reached (recorded proofState 2)
    r = prover.step(s3, "exact h1.right")
    assert (
        r.ok
        and r.state.solved
        and r.state.handle.history == ("apply And.intro", "exact h1.left", "apply h2", "exact h1.right")
    )
