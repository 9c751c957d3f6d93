"""Search gaps closed after the first version: the ``seconds`` budget bounds each tactic's timeout, two
theorems of one name keep two trees, and a Lean search over recorded REPL transcripts (tactic steps are real
Lean answers; the fresh-process final check has no recording, so nothing is ``proved``)."""

from __future__ import annotations

import json
import time

from conftest import NAT, requires_coq
from lean_replay_support import TRANSCRIPTS, needs_transcripts, replay_config
from search_support import ScriptedPolicy

from proofrl.provers.base import Theorem
from proofrl.search import load_search_config, search_one
from proofrl.search.run import search_many, tree_files

LOOP = "do 1000000000 idtac."  # minutes of work, and no stack to overflow
PLUS = Theorem("plus0", "Theorem plus0 : forall n : nat, n + 0 = n.", NAT)


@requires_coq
def test_the_seconds_budget_bounds_a_tactics_timeout(coq):
    """A 20 s tactic timeout, a 2 s budget, and a looping tactic: the loop is cut when the budget is spent
    (Coq's Timeout counts whole seconds, so within about a second of it), not after 20 s."""
    pol = ScriptedPolicy([("forall n", [LOOP, "intros n."])])
    cfg = load_search_config("reprover", width=2, seconds=2.0, tactic_timeout=20.0)
    t0 = time.monotonic()
    r = search_one(PLUS, coq, pol, cfg)
    took = time.monotonic() - t0
    assert took < 8.0, f"the search took {took:.1f} s against a 2 s budget"
    assert r.status == "failed" and r.reason == "seconds budget spent"
    (loop,) = [e for e in r.tree.edges if e.tactic == LOOP]
    assert loop.failure is not None and loop.failure.kind == "timeout"
    assert not any(e.tactic == "intros n." for e in r.tree.edges)  # the budget was spent: not stepped


def test_tree_files_are_unique_in_input_order():
    assert tree_files(["a", "b", "a", "a/b", "a_b", "A"]) == [
        "a.json",
        "b.json",
        "a-2.json",
        "a_b.json",
        "a_b-2.json",
        "A-3.json",
    ]


@requires_coq
def test_two_theorems_of_one_name_keep_two_trees(tmp_path):
    same = Theorem("plus0", "Theorem plus0 : forall n : nat, 0 + n = n + 1.", NAT)  # same name, false statement
    pol = ScriptedPolicy([("forall n", ["intros n."]), ("n + 0 = n", ["lia."])])
    search_many(
        [PLUS, same],
        pol,
        "best-first",
        {"width": 2, "max_steps": 3, "tactic_timeout": 5.0},
        tmp_path,
        workers=2,
        progress=False,
    )
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(x["tree"] for x in lines) == ["trees/plus0-2.json", "trees/plus0.json"]
    for x in lines:  # each line points at its own theorem's tree
        tree = json.loads((tmp_path / x["tree"]).read_text())
        assert tree["search"]["status"] == x["status"]
        want = PLUS if x["tree"] == "trees/plus0.json" else same
        assert tree["search"]["theorem"]["statement"] == want.statement
    assert {x["status"] for x in lines} == {"proved", "failed"}


@needs_transcripts
def test_lean_search_walks_recorded_states_keeps_goal_lists_whole_and_never_proves_without_the_final_check():
    """``proof_branching``: real Lean answers to ``apply And.intro`` (two goals), then one tactic per goal.
    Best-first keeps the two goals in one OR node (AND nodes for Lean goals under MCTS: test_lean_search.py).
    Every state reached is Lean's; the session reaches no goals, yet the
    final check in a fresh process has no recording (the replay crashes on its first request), so the search
    is ``unsound`` with the crash as the reason, never ``proved``."""
    from proofrl.provers.lean import LeanProver

    th = Theorem(
        "complex_and", "theorem complex_and (p q r : Prop) (h1 : p ∧ q) (h2 : q → r) : p ∧ r := by", "", "lean"
    )
    table = [
        ("⊢ p ∧ r", ["apply And.intro"]),
        ("⊢ p\n", ["exact h1.left"]),
        ("⊢ r", ["apply h2"]),
        ("⊢ q", ["exact h1.right"]),
    ]
    for cfg in (load_search_config("reprover", backend="lean", width=1, max_steps=8, tactic_timeout=10.0),):
        prover = LeanProver(replay_config(TRANSCRIPTS / "proof_branching.in"))
        try:
            r = search_one(th, prover, ScriptedPolicy(table), cfg)
        finally:
            prover.close()
        assert all(e.failure is None for e in r.tree.edges), cfg.algorithm
        assert [n.id for n in r.tree.nodes if n.unsound] == [4] and not r.tree.root.solved  # refused, kept dead
        assert [n.kind for n in r.tree.nodes] == ["OR"] * 5 and len(r.tree.nodes[1].state.goals) == 2
        assert r.proof.splitlines() == ["apply And.intro", "exact h1.left", "apply h2", "exact h1.right"]
        assert r.status == "unsound" and r.verdict is not None and not r.verdict.valid
        assert r.verdict.status.value == "crash", r.verdict
