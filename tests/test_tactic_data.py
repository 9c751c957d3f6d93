"""Tactic data: human stdlib proofs stepped through real Coq into state -> tactic transitions, the module split
shared with the whole-proof split, a proof failing midway, and the LeanDojo Benchmark reader on a file
written here."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from conftest import requires_coq

from proofrl.data.splits import HELD_OUT, TRAIN, coq_stdlib_problems, problem_set
from proofrl.data.tactics import (
    build_tactic_data,
    extract_transitions,
    main,
    proof_tactics,
    read_leandojo,
    read_transitions,
    stdlib_tactic_problems,
)
from proofrl.problems import Problem
from proofrl.provers.backend import get_backend, state_text
from proofrl.provers.base import Goal, Hypothesis, ProofState, Theorem
from proofrl.provers.lean.backend import goal_count_text

is_structural = get_backend("coq").is_structural

T = Theorem("t", "Theorem t : True.")


def test_state_text_shows_goals_and_counts():
    g1 = Goal((Hypothesis(("n", "m"), "nat"),), "n + m = m + n")
    g2 = Goal((), "True")
    assert state_text(ProofState(T, (), ())) == "no goals"
    assert state_text(ProofState(T, (), (g1,))) == "n, m : nat\n⊢ n + m = m + n"
    assert (
        state_text(ProofState(T, (), (g1, g2), background=2))
        == "n, m : nat\n⊢ n + m = m + n\n\n⊢ True\n\n(+ 2 unfocused, 0 shelved)"
    )
    assert state_text(ProofState(T, (), (), background=1)) == "(+ 1 unfocused, 0 shelved)"


def test_proof_tactics_and_structural_sentences():
    assert proof_tactics("Proof.\nintros n.\ninduction n.\n-\nreflexivity.\n- simpl. auto.\nQed.") == [
        "intros n.",
        "induction n.",
        "-",
        "reflexivity.",
        "-",
        "simpl.",
        "auto.",
    ]
    assert [is_structural(t) for t in ("-", "++", "{", "}", "2: {", "auto.", "- auto.")] == [True] * 5 + [False] * 2


@requires_coq
def test_stepping_human_proofs_gives_chained_transitions():
    probs = [p for p in coq_stdlib_problems(prefixes=("Coq.Bool.Bool",)) if 2 <= len(proof_tactics(p.proof)) <= 6][:4]
    assert len(probs) == 4
    results, summary = extract_transitions(probs, splits=["train"] * 4, workers=1)
    assert summary.proofs == 4 and summary.clean == 4 and summary.failed == 0
    assert summary.transitions == sum(len(proof_tactics(p.proof)) for p in probs)
    for p, r in zip(probs, results, strict=True):
        ts = r.transitions
        assert [t["step"] for t in ts] == list(range(len(ts))) and [t["tactic"] for t in ts] == proof_tactics(p.proof)
        assert all(a["state_after"] == b["state_before"] for a, b in pairwise(ts))
        assert all(a["goals_after"] == b["goals_before"] for a, b in pairwise(ts))
        assert ts[-1]["state_after"] == "no goals" and ts[-1]["goals_after"] == 0 and ts[0]["goals_before"] == 1
        assert "⊢" in ts[0]["state_before"]
        assert {t["theorem"] for t in ts} == {p.name} and {t["module"] for t in ts} == {"Coq.Bool.Bool"}
        assert {t["header"] for t in ts} == {p.header} and {t["split"] for t in ts} == {"train"}


@requires_coq
def test_a_proof_failing_midway_keeps_its_transitions_and_is_counted():
    header = "Require Import Arith."
    good = Problem(
        "ok", "Theorem ok : forall n : nat, 0 + n = n.", header, proof="Proof.\nintros n.\nreflexivity.\nQed."
    )
    bad = Problem(
        "bad",
        "Theorem bad : forall n : nat, 0 + n = n.",
        header,
        proof="Proof.\nintros n.\nexact no_such_lemma.\nreflexivity.\nQed.",
    )
    short = Problem("short", "Theorem short : True /\\ True.", header, proof="Proof.\nsplit.\nexact I.\nQed.")
    wrong = Problem("wrong", "Theorem wrong : 0 = 1 +.", header, proof="Proof.\nreflexivity.\nQed.")
    results, s = extract_transitions([good, bad, short, wrong], workers=2)
    by = {r.problem.name: r for r in results}
    assert [r.problem.name for r in results] == ["ok", "bad", "short", "wrong"]  # input order
    assert by["ok"].clean and len(by["ok"].transitions) == 2
    assert by["bad"].failure.startswith("step 1: error") and [t["tactic"] for t in by["bad"].transitions] == [
        "intros n."
    ]
    assert by["short"].failure.startswith("goals left") and len(by["short"].transitions) == 2
    assert by["wrong"].failure.startswith("statement") and by["wrong"].transitions == []
    assert (s.proofs, s.clean, s.failed, s.transitions) == (4, 1, 3, 5)
    assert s.failures == {"step: error": 1, "goals left": 1, "statement": 1}


def test_split_is_the_whole_proof_split():
    probs = stdlib_tactic_problems()
    held = {p.module for p in probs if p.split == HELD_OUT}
    train = {p.module for p in probs if p.split == TRAIN}
    assert held and train and not held & train
    assert held == {p.module for p in problem_set("coq-stdlib:held-out")}
    # a proof-length cut splits the list it cuts, exactly as problem_set does with the same cut
    short = stdlib_tactic_problems(max_proof_chars=60)
    assert {p.module for p in short if p.split == HELD_OUT} == {
        p.module for p in problem_set("coq-stdlib:held-out", max_proof_chars=60)
    }
    limited = stdlib_tactic_problems(limit=5)
    assert [(p.key, p.split) for p in limited] == [(p.key, p.split) for p in probs[:5]]


@requires_coq
def test_build_tactic_data_writes_both_sides_and_a_summary(tmp_path):
    s = build_tactic_data(tmp_path, limit=3, workers=1, prefixes=("Coq.Bool.Bool",), progress=False)
    train, held = read_transitions(tmp_path / "train.jsonl"), read_transitions(tmp_path / "held-out.jsonl")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(train) + len(held) == s.transitions == summary["transitions"] > 0
    assert summary["proofs"] == 3 and summary["limit"] == 3 and summary["transitions_per_s"] > 0
    keys = {
        "theorem",
        "header",
        "module",
        "step",
        "state_before",
        "tactic",
        "state_after",
        "goals_before",
        "goals_after",
    }
    assert all(keys <= set(t) for t in train + held)


@requires_coq
def test_cli(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--limit", "2", "--workers", "1", "--prefix", "Coq.Bool.Bool"]) == 0
    assert "2 proofs" in capsys.readouterr().out
    assert (tmp_path / "train.jsonl").exists() and (tmp_path / "held-out.jsonl").exists()


@requires_coq
def test_cli_teaches_the_tiny_tactic_model_it_names(tmp_path, capsys):
    from proofrl.policy.tactic import make_tactic_policy

    model = tmp_path / "model"
    assert (
        main(
            [
                "--out",
                str(tmp_path / "data"),
                "--limit",
                "6",
                "--workers",
                "1",
                "--prefix",
                "Coq.Bool.Bool",
                "--teach",
                str(model),
                "--epochs",
                "1",
            ]
        )
        == 0
    )
    assert f"--policy hf:{model}" in capsys.readouterr().out
    assert make_tactic_policy(f"hf:{model}", max_tokens=8, seed=0).propose("⊢ True", 2) is not None


# -- LeanDojo Benchmark ------------------------------------------------------------------------------------

LEANDOJO = [
    {
        "url": "https://example.invalid/toy",
        "commit": "0" * 40,
        "file_path": "Toy/Basic.lean",
        "full_name": "Toy.add_zero'",
        "start": [3, 1],
        "end": [6, 10],
        "traced_tactics": [
            {
                "tactic": "induction n with\n| zero => rfl\n| succ k ih => simp [Nat.add_succ, ih]",
                "annotated_tactic": [
                    "induction n with\n| zero => rfl\n| succ k ih => simp [<a>Nat.add_succ</a>, ih]",
                    [
                        {
                            "full_name": "Nat.add_succ",
                            "def_path": "Init/Nat.lean",
                            "def_pos": [1, 1],
                            "def_end_pos": [1, 2],
                        }
                    ],
                ],
                "state_before": "n : ℕ\n⊢ n + 0 = n",
                "state_after": "no goals",
            }
        ],
    },
    {
        "url": "https://example.invalid/toy",
        "commit": "0" * 40,
        "file_path": "Toy/Pair.lean",
        "full_name": "Toy.both",
        "start": [8, 1],
        "end": [11, 10],
        "traced_tactics": [
            {
                "tactic": "constructor",
                "annotated_tactic": ["constructor", []],
                "state_before": "p q : Prop\nhp : p\nhq : q\n⊢ p ∧ q",
                "state_after": (
                    "case left\np q : Prop\nhp : p\nhq : q\n⊢ p\n\ncase right\np q : Prop\nhp : p\nhq : q\n⊢ q"
                ),
            },
            {
                "tactic": "exact hp",
                "annotated_tactic": ["exact hp", []],
                "state_before": (
                    "case left\np q : Prop\nhp : p\nhq : q\n⊢ p\n\ncase right\np q : Prop\nhp : p\nhq : q\n⊢ q"
                ),
                "state_after": "case right\np q : Prop\nhp : p\nhq : q\n⊢ q",
            },
        ],
    },
    {"full_name": "Toy.untraced", "file_path": "Toy/Pair.lean", "traced_tactics": []},
]


def test_leandojo_reader(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps(LEANDOJO, ensure_ascii=False))
    rows = list(read_leandojo(path, split="train"))
    assert len(rows) == 3
    a, b, c = rows
    assert (a["theorem"], a["module"], a["step"], a["split"], a["header"]) == (
        "Toy.add_zero'",
        "Toy/Basic.lean",
        0,
        "train",
        "",
    )
    assert a["tactic"].startswith("induction n with") and "<a>Nat.add_succ</a>" in a["annotated_tactic"]
    assert a["premises"] == ["Nat.add_succ"] and (a["goals_before"], a["goals_after"]) == (1, 0)
    assert (b["goals_before"], b["goals_after"]) == (1, 2) and (c["goals_before"], c["goals_after"]) == (2, 1)
    assert [r["step"] for r in (b, c)] == [0, 1] and c["state_before"] == b["state_after"]
    keys = {
        "theorem",
        "header",
        "module",
        "step",
        "state_before",
        "tactic",
        "state_after",
        "goals_before",
        "goals_after",
    }
    assert all(keys <= set(r) for r in rows)
    # the same theorems one per line (JSONL) read the same
    jl = tmp_path / "train.jsonl"
    jl.write_text("\n".join(json.dumps(t, ensure_ascii=False) for t in LEANDOJO) + "\n")
    assert list(read_leandojo(jl, split="train")) == rows


def test_lean_goal_count_of_a_state_text():
    assert [goal_count_text(s) for s in ("no goals", "", "⊢ True", "2 goals\ncase a\n⊢ p\n\ncase b\n⊢ q")] == [
        0,
        0,
        1,
        2,
    ]


def test_a_bad_leandojo_file_says_so(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('"just a string"')
    with pytest.raises(ValueError, match="list of theorems"):
        list(read_leandojo(path))
