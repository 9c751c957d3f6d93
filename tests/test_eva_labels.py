"""The prover-labelled EVA data: real Coq judges the four kinds of proposal; the short search that decides
"the proof then closes" is the search's own best-first engine, and its proof passes the fresh-process check."""

from __future__ import annotations

import pytest
from conftest import NAT, requires_coq

from proofrl.data.eva_labels import Facts, broken_step, label_theorem, scores_from_facts, write_labels
from proofrl.policy.tactic import Proposal
from proofrl.search.config import load_search_config


def test_the_score_table():
    assert scores_from_facts(Facts(True, goals_before=1, goals_after=0, closes=True), "lia.") == {
        "logic": 5.0,
        "align": 5.0,
        "clarity": pytest.approx(4.96),
    }
    assert scores_from_facts(Facts(True, goals_before=1, goals_after=3), "split.") == {
        "logic": 3.0,
        "align": 3.5,
        "clarity": pytest.approx(4.94),
    }
    assert scores_from_facts(Facts(True, goals_before=2, goals_after=1, same_state=False), "auto.")["align"] == 4.0
    assert scores_from_facts(Facts(False, "syntax"), "x (.") == {"logic": 1.0, "align": 1.0, "clarity": 1.0}
    assert scores_from_facts(Facts(False, "unknown"), "apply nope.")["logic"] == 1.5
    assert broken_step("rewrite H.") == "rewrite H (."


class Scripted:
    """A tactic policy that always proposes the same tactic (search tests use such policies)."""

    name = "scripted"

    def __init__(self, tactic: str):
        self.tactic = tactic

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        return [Proposal(self.tactic, -0.1, -0.1, 1)]


def _steps() -> list[dict]:
    common = {
        "theorem": "eva_add0",
        "statement": "Theorem eva_add0 : forall n : nat, n + 0 = n.",
        "header": NAT,
        "module": "Test.Eva",
        "split": "train",
    }
    return [{**common, "step": 0, "tactic": "intros n."}, {**common, "step": 1, "tactic": "now rewrite Nat.add_0_r."}]


@requires_coq
def test_coq_labels_each_kind_of_proposal(coq, tmp_path):
    s = load_search_config(
        None,
        "algorithm=best-first",
        "width=1",
        "max_steps=1",
        "seconds=30.0",
        "tactic_timeout=5.0",
    )
    recs = label_theorem(coq, _steps(), [0], ["reflexivity."], Scripted("now rewrite Nat.add_0_r."), s)
    by_kind = {r["kind"]: r for r in recs}
    assert set(by_kind) == {"human", "other", "ghost", "broken"}
    human = by_kind["human"]
    assert (
        human["facts"]["accepted"] and human["facts"]["closes"]
    )  # intros, then the search's rewrite: coqc says the whole proof is valid
    assert human["scores"]["logic"] == 5.0 and "goals 1 -> 1" in human["critique"]
    assert by_kind["ghost"]["facts"]["reason"] == "unknown" and "was not found" in by_kind["ghost"]["critique"]
    assert by_kind["broken"]["facts"]["reason"] == "syntax" and by_kind["broken"]["scores"]["clarity"] == 1.0
    assert not by_kind["other"]["facts"]["accepted"]  # reflexivity does not prove forall n, n + 0 = n
    assert all(r["state"] == "⊢ forall n : nat, n + 0 = n" for r in recs)
    # without a search only a state with no goals closes: the same human step is then "accepted, not closed"
    plain = label_theorem(coq, _steps(), [0], ["reflexivity."], None, s)
    assert plain[0]["facts"]["closes"] is False and plain[0]["scores"]["logic"] == 4.0
    # the last step closes the goal itself: checked by the fresh-process final check
    last = label_theorem(coq, _steps(), [1], ["reflexivity."], None, s)
    assert last[0]["kind"] == "human" and last[0]["facts"]["closes"] is True
    paths = write_labels([*recs, {**last[0], "split": "held-out"}], tmp_path)
    assert len(paths["train"].read_text().splitlines()) == 4 and len(paths["held-out"].read_text().splitlines()) == 1
