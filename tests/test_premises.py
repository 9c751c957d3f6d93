"""Premise retrieval as a tactic source (:mod:`proofrl.policy.premises`): the lemmas whose statements are most
like the state, proposed as ``apply``/``rewrite``, in a real search over Coq."""

from __future__ import annotations

import math

from conftest import requires_coq

from proofrl.policy.premises import TEMPLATES, PremisePolicy, unresolved
from proofrl.provers.base import Theorem

PLUS_N_O = ("Coq.Init.Peano.plus_n_O", "Lemma plus_n_O : forall n:nat, n = n + 0.")
LEMMAS = [
    ("Coq.Init.Peano.plus_n_Sm", "Lemma plus_n_Sm : forall n m:nat, S (n + m) = n + S m."),
    ("Coq.Init.Datatypes.negb_involutive", "Lemma negb_involutive : forall b : bool, negb (negb b) = b."),
    PLUS_N_O,
]


def test_the_nearest_statements_come_first_applied_and_rewritten_with_priors_that_sum_to_one():
    policy = PremisePolicy()
    assert policy.propose("n : nat\n⊢ n = n + 0", 6) == []  # nothing to cite yet
    policy.add_many(LEMMAS)
    props = policy.propose("n : nat\n⊢ n = n + 0", 6)
    assert [p.tactic for p in props[:3]] == [t.format(PLUS_N_O[0]) for t in TEMPLATES]
    assert {p.source for p in props} == {"premises"} and len(props) == 6
    assert math.isclose(sum(math.exp(p.logprob_sum) for p in props), 1.0)
    assert len(policy.propose("n : nat\n⊢ n = n + 0", 2)) == 2


@requires_coq
def test_a_search_proves_a_goal_by_a_retrieved_lemma_it_was_never_shown_a_proof_with():
    """No proof memory, no model: only the statements. The lemma's name is fully qualified, so it resolves
    without an Import."""
    from test_memory import bfs

    from proofrl.provers.coq import CoqProver
    from proofrl.search import search_one

    theorem = Theorem("n_plus_0", "Theorem n_plus_0 : forall k : nat, k = k + 0.", "")
    policy = PremisePolicy()
    policy.add_many(LEMMAS)
    prover = CoqProver("")
    try:
        r = search_one(theorem, prover, policy, bfs())
        assert r.status == "proved", r.reason
        assert r.proof_steps()[0][1] == "apply Coq.Init.Peano.plus_n_O." and r.line()["proof_sources"] == {
            "premises": 1
        }
        assert prover.check(theorem, r.proof).valid
        empty = search_one(theorem, prover, PremisePolicy(), bfs())
        assert empty.status == "failed"
        # a retrieved name Coq does not know (as a lemma of a module nested in its file): failed steps, counted
        nowhere = PremisePolicy()
        nowhere.add_many([("Coq.Nowhere.plus_n_O", PLUS_N_O[1]), *LEMMAS])
        r = search_one(theorem, prover, nowhere, bfs())
        assert r.status == "proved" and r.proof_steps()[0][1] == "apply Coq.Init.Peano.plus_n_O."
        assert unresolved(r.tree.edges) == len(TEMPLATES)
    finally:
        prover.close()
