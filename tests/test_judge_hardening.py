"""The whole-proof judge after a second red team: a snippet header read by Coq's grammar, printing options that
cannot blind the final checks, ``coqc`` output capped, one status for one proof from ``check`` and from the
fresh ``coqc`` final check, and honest spellings (``Qed .``, ``Proof .``, a restatement differing in spacing,
a comment or the keyword) accepted without letting their look-alike attacks through.

Real parts: ``coqidetop`` through the pool, ``coqc`` for the final check, uvicorn and HTTP for the server."""

from __future__ import annotations

import sys
import time

import pytest
from conftest import requires_coq

from proofrl.provers.base import Status, Theorem
from proofrl.provers.coq import CoqConfig, coqc_check
from proofrl.provers.coq.header import HARMLESS_OPTIONS, header_refusal
from proofrl.provers.coq.snippet import coq_job
from proofrl.provers.process import run_once
from proofrl.provers.snippets import Job

# -- item: the snippet header by Coq's grammar (no prover needed) --------------------------------------------------
REFUSED = {
    # kernel switches, under every locality Coq accepts
    "Export Unset Guard Checking.": "forbidden: Unset Guard Checking",
    "Export Unset Universe Checking.": "forbidden: Unset Universe Checking",
    "Local Unset Guard Checking.": "forbidden: Unset Guard Checking",
    "Global Unset Positivity Checking.": "forbidden: Unset Positivity Checking",
    "#[local] Unset Guard Checking.": "forbidden: Unset Guard Checking",
    "#[export] Set Definitional UIP.": "forbidden: Set Definitional UIP",
    "Unset Guard (* a comment *) Checking.": "forbidden: Unset Guard Checking",
    "Export Set Nested Proofs Allowed.": "forbidden: Set Nested Proofs Allowed",
    # options whose value is a tactic, or that wait for a person
    "Set Firstorder Solver admit.": "forbidden: Set Firstorder Solver",
    "Set Ltac Debug.": "forbidden: Set Ltac Debug",
    "Set Ltac Batch Debug.": "forbidden: Set Ltac Batch Debug",
    "Set Default Timeout 1.": "forbidden: Set Default Timeout",
    "Set Universe Polymorphism.": "forbidden: Set Universe Polymorphism",
    # a harmless option with a value of the wrong kind
    "Set Printing Width 100000000000000000000.": "forbidden: Set Printing Width 100000000000000000000",
    'Set Default Goal Selector "admit".': 'forbidden: Set Default Goal Selector "admit"',
    "Set Implicit Arguments admit.": "forbidden: Set Implicit Arguments admit",
    "Unset Printing Width 3.": "forbidden: Unset Printing Width 3",
    "Set Printing Width \u0661\u0660\u0660.": "forbidden: Set Printing Width \u0661 \u0660 \u0660",  # not Coq's digits
    "Set\u00a0Printing All.": "forbidden: Set",  # a no-break space is no blank to Coq
    # attributes other than a locality, control prefixes, two localities
    "#[bypass_check(guard)] Set Printing All.": "forbidden: #[bypass_check(guard)]",
    "#[bypass_check(positivity)] Require Import Arith.": "forbidden: #[bypass_check(positivity)]",
    "#[local, export] Set Printing All.": "forbidden: local export (one locality at most)",
    "#[local] Require Import Arith.": "forbidden: Require",
    "Time Require Import Arith.": "forbidden: Time",
    # what declares or redefines: tactics, hints, notations, typeclass settings, plugins, files
    "Ltac lia := admit.": "forbidden: Ltac",
    'Tactic Notation "lia" := admit.': "forbidden: Tactic Notation",
    "Hint Extern 1 => admit : core.": "forbidden: Hint Extern",
    "Typeclasses eauto := 3.": "forbidden: Typeclasses",
    "Notation admit_free := admit.": "forbidden: Notation",
    'Declare ML Module "coq-core.plugins.ltac".': "forbidden: Declare ML Module",
    'Load "Check.v".': "forbidden: Load",
    'Fail Load "x".': "forbidden: Load",
    "Import -(notations) Nat.": "forbidden: Import",
}
ALLOWED = [
    "Require Import Arith Lia.",
    "From Coq Require Import Reals Psatz.",
    "Require Coq.Reals.Reals.",
    "Import Nat.",
    "Export Nat.",
    "Open Scope R_scope.",
    "Local Open Scope Z_scope.",
    "#[local] Open Scope nat_scope.",
    "Set Implicit Arguments.",
    "Unset Printing Notations.",
    "Set Printing Width 100.",
    "Unset Printing Width.",
    "Export Set Printing Depth 2.",
    "#[global] Set Printing Universes.",
    'Set Default Goal Selector "!".',
    'Set Bullet Behavior "Strict Subproofs".',
    'Set Warnings "-deprecated".',
    "Set Printing All .",
    "(* a comment *) Require Import Lia.",
]


@pytest.mark.parametrize("sentence", list(REFUSED))
def test_header_grammar_refuses_what_changes_the_judge_under_any_spelling(sentence):
    assert header_refusal(sentence) == REFUSED[sentence]


@pytest.mark.parametrize("sentence", ALLOWED)
def test_header_grammar_accepts_libraries_scopes_and_harmless_options(sentence):
    assert header_refusal(sentence) is None


def test_every_harmless_option_is_one_coq_knows():
    """A listed name that Coq does not know would be a dead entry (and a typo could hide a real option)."""
    import subprocess
    import tempfile
    from pathlib import Path

    from proofrl.provers.coq.session import coq_library

    if not coq_library():
        pytest.skip("coqc is not installed")
    with tempfile.TemporaryDirectory() as d:
        Path(d, "O.v").write_text("".join(f"Test {name}.\n" for name in HARMLESS_OPTIONS))
        out = subprocess.run(["coqc", "-q", "O.v"], cwd=d, capture_output=True, text=True, timeout=60)
    assert "There is no flag" not in out.stderr + out.stdout, out.stderr


@requires_coq
def test_every_allowed_sentence_is_one_coq_runs(tmp_path):
    """The allowlist's shapes are Coq's: each allowed sentence loads in a real ``coqc``, the
    ``Export Set``/``#[local]`` forms included."""
    import subprocess

    (tmp_path / "H.v").write_text("\n".join(ALLOWED) + "\n")
    out = subprocess.run(["coqc", "-q", "H.v"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Warning" not in out.stderr, out.stderr


@pytest.mark.parametrize(
    "sentence", ["Export Unset Guard Checking.", "Set Firstorder Solver admit.", "Set Ltac Debug."]
)
def test_a_snippet_with_such_a_header_is_rejected_before_coq_runs(sentence):
    v = coq_job(sentence + "\nTheorem t : False.\nProof. firstorder. Qed.")
    assert not isinstance(v, Job) and v.status is Status.REJECTED and v.reasons == (REFUSED[sentence],), v


# -- the rest runs Coq ----------------------------------------------------------------------------------------------
CONFIG = CoqConfig(timeout=20)
PLUS0 = "Theorem t : forall n : nat, n + 0 = n."
PLUS0_PROOF = "Proof. intros n. induction n; simpl; auto. Qed."


@pytest.fixture(scope="module")
def pool():
    from proofrl.provers.factory import make_pool
    from proofrl.provers.pool import PoolConfig

    p = make_pool("coq", pool=PoolConfig(workers=1, timeout=20))
    yield p
    p.close()


def both(pool, theorem: Theorem, proof: str):
    """The session's verdict and the fresh ``coqc`` final check's, for one proof."""
    return pool.check(theorem, proof), coqc_check(theorem, proof, CONFIG)


# -- item: printing options cannot blind the comparisons or the markers --------------------------------------------
@requires_coq
@pytest.mark.parametrize(
    "header, statement",
    [
        ("Set Printing Depth 2.", PLUS0),  # the final check's markers were elided: error where check() said valid
        ("Set Printing Depth 3.", PLUS0),
        ("Set Printing Width 1.", PLUS0),
        ("Set Printing Universes.", "Theorem t : forall A : Type, A -> A."),  # universe names differed
    ],
)
def test_a_trusted_headers_printing_options_leave_an_honest_proof_valid(pool, header, statement):
    proof = PLUS0_PROOF if statement == PLUS0 else "Proof. auto. Qed."
    v, f = both(pool, Theorem("t", statement, header), proof)
    assert (v.status, f.status) == (Status.VALID, Status.VALID), (v, f)


@requires_coq
@pytest.mark.parametrize("depth", [2, 3, 4])
def test_printing_depth_cannot_blind_the_type_comparison(monkeypatch, depth):
    """Walls 1 and 2 switched off (a deliberate mutation), so only the kernel-type comparison stands between
    ``Abort.`` and a true statement proved in place of the false one: under ``Printing Depth 3`` both ``Check``
    outputs of the final check were elided alike (``valid``), under ``Printing Depth 2`` its markers were."""
    from proofrl.provers.coq import CoqProver
    from proofrl.provers.coq import plan as plan_module
    from proofrl.provers.coq.rules import Outgoing

    monkeypatch.setattr(plan_module, "forbidden_reason", lambda *a, **k: None)
    monkeypatch.setattr(plan_module, "self_citation", lambda *a, **k: None)  # the restated ``Theorem t``
    monkeypatch.setattr(plan_module, "outgoing", lambda text, timeout=None, first=False: Outgoing(text))
    theorem = Theorem("t", "Theorem t : forall n : nat, n + 0 = S n.", f"Set Printing Depth {depth}.")
    proof = "Proof.\nAbort.\nTheorem t : forall n : nat, n + 0 = n + 0.\nintros n.\nreflexivity.\nQed."
    prover = CoqProver(theorem.header)
    try:
        v = prover.check(theorem, proof)
    finally:
        prover.close()
    f = coqc_check(theorem, proof, CONFIG)
    for verdict in (v, f):
        assert verdict.status is Status.REJECTED and verdict.reasons[0].startswith("statement changed"), verdict


# -- item: coqc's output is capped -----------------------------------------------------------------------------------
def test_run_once_kills_a_command_past_its_output_cap(tmp_path):
    t0 = time.monotonic()
    r = run_once(
        [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"],
        timeout=60,
        cwd=str(tmp_path),
        max_output=1 << 20,
    )
    assert r.too_large and not r.timed_out and len(r.stdout) <= 1 << 20, (r.too_large, len(r.stdout))
    assert time.monotonic() - t0 < 30
    small = run_once([sys.executable, "-c", "print('ok')"], timeout=60, cwd=str(tmp_path), max_output=1 << 20)
    assert (small.returncode, small.stdout, small.too_large) == (0, "ok\n", False)


@requires_coq
def test_a_proof_that_floods_is_rejected_by_both_checks_without_reading_it_all(pool):
    """About 40 MB of ``idtac`` output: the session's reply is capped; ``coqc``'s was read whole."""
    proof = 'Proof. do 40 (do 1000 idtac "' + "x" * 1000 + '"). exact I. Qed.'
    v, f = both(pool, Theorem("t", "Theorem t : True.", ""), proof)
    assert (v.status, v.reasons) == (Status.REJECTED, ("output too large",)), v
    assert (f.status, f.reasons) == (Status.REJECTED, ("output too large",)), f


# -- item: one proof, one status ------------------------------------------------------------------------------------
@requires_coq
@pytest.mark.parametrize(
    "statement, proof, status, reason",
    [
        (
            "Theorem t : forall n : nat, n + 1 = 1 + n.",
            "Proof. intros n. exact_no_check (eq_refl (n + 1)). Qed.",
            Status.REJECTED,
            "kernel rejected the proof",
        ),
        (
            "Theorem t : forall n : nat, n = 0.",
            "Proof. fix IH 1. apply IH. Qed.",
            Status.REJECTED,
            "kernel rejected the proof",
        ),
        ("Theorem t : forall n : nat, n = n.", "Proof. intros n. Qed.", Status.REJECTED, None),
        ("Theorem t : True.", "Proof. exact 0. Qed.", Status.ERROR, None),
        (
            "Theorem t : True.",
            'Proof. fail "given up, incomplete, pending". Qed.',
            Status.ERROR,
            None,
        ),  # a tactic's words
        ("Theorem t : True.", "Proof. shelve. Qed.", Status.REJECTED, None),
        (
            "Theorem t : forall n : nat, n = n.",
            "Proof. Fail idtac. intros n; reflexivity. Qed.",
            Status.REJECTED,
            "forbidden: Fail",
        ),
        ("Theorem t : Ture.", "Proof. exact I. Qed.", Status.ERROR, "statement does not elaborate"),
    ],
)
def test_check_and_the_final_check_give_one_proof_one_status(pool, statement, proof, status, reason):
    v, f = both(pool, Theorem("t", statement, ""), proof)
    assert (v.status, f.status) == (status, status), (v, f)
    if reason:
        assert v.reasons == f.reasons == (reason,), (v, f)


# -- item: honest spellings accepted, their look-alikes refused -----------------------------------------------------
HONEST = {
    "Qed with a space": "Proof. intros n. induction n; simpl; auto. Qed .",
    "Proof with a space": "Proof . intros n. induction n; simpl; auto. Qed.",
    "comment in Proof using": "Proof (* c *) using Type. intros n. induction n; simpl; auto. Qed.",
    "comment before Qed's period": "Proof. intros n. induction n; simpl; auto. Qed (* done *).",
    "restated with other spacing": "Theorem t : forall n:nat, n+0=n.\nProof. intros n. induction n; simpl; auto. Qed.",
    "restated with a comment": (
        "Theorem t : forall n : nat, (* n *) n + 0 = n.\nProof. intros n. induction n; simpl; auto. Qed."
    ),
    "restated as a Lemma": "Lemma t : forall n : nat, n + 0 = n.\nProof. intros n. induction n; simpl; auto. Qed.",
    "restated as a Lemma with other spacing": (
        "Lemma t: forall n: nat,\n  n + 0 = n.\nProof. intros n. induction n; simpl; auto. Qed."
    ),
    "Proof using with a tactic": "Proof using Type with auto. intros n. induction n; simpl... Qed.",
}
ATTACKS = {
    "Qed then another theorem": (
        "Proof. intros n. induction n; simpl; auto. Qed. Theorem u : False. Admitted.",
        "admitted",
    ),
    "Qed then a tactic": ("Proof. intros n. Qed. induction n; simpl; auto.", "forbidden: Qed"),
    "Qed with a word after it": ("Proof. intros n. induction n; simpl; auto. Qed t.", "forbidden: Qed"),
    "Qed with a string after it": ('Proof. intros n. induction n; simpl; auto. Qed "x".', "forbidden: Qed"),
    "Admitted with a space": ("Proof. intros n. Admitted .", "admitted"),
    "restated as another statement": (
        "Theorem t : forall n : nat, 0 + n = n.\nProof. intros n. reflexivity. Qed.",
        "statement changed",
    ),
    "Lemma restating another statement": ("Lemma t : True.\nProof. exact I. Qed.", "statement changed"),
    "restated under another name": (
        "Lemma u : forall n : nat, n + 0 = n.\nProof. intros n. induction n; simpl; auto. Qed.",
        "statement changed",
    ),
    "a comment hides the difference": (
        "Theorem t : (* forall n : nat, n + 0 = n *) True.\nProof. exact I. Qed.",
        "statement changed",
    ),
    "restated with universe binders": (
        "Theorem t@{u} : forall n : nat, n + 0 = n.\nProof. intros n. induction n; simpl; auto. Qed.",
        "statement changed",
    ),
    "Proof using with admit": ("Proof using Type with admit. intros n... Qed.", "forbidden: admit"),
    "Proof using with a command": ("Proof using Type with Abort. exact I. Qed.", "forbidden: Abort"),
    "comment in Proof with admit": ("Proof (* c *) with admit. intros n... Qed.", "forbidden: admit"),
}


@requires_coq
@pytest.mark.parametrize("name", list(HONEST))
def test_honest_spellings_are_valid_in_check_and_final_check(pool, name):
    v, f = both(pool, Theorem("t", PLUS0, ""), HONEST[name])
    assert (v.status, f.status) == (Status.VALID, Status.VALID), (v, f)


@requires_coq
@pytest.mark.parametrize("name", list(ATTACKS))
def test_their_look_alikes_are_refused_with_their_reason(pool, name):
    proof, reason = ATTACKS[name]
    v, f = both(pool, Theorem("t", PLUS0, ""), proof)
    assert (v.status, f.status) == (Status.REJECTED, Status.REJECTED), (v, f)
    assert v.reasons[0] == f.reasons[0] == reason, (v, f)


# -- the same through the server ---------------------------------------------------------------------------------------
@requires_coq
def test_through_the_server():
    from test_server import InProcess, post

    snippets = {
        f"h{i}": h + "\n" + PLUS0 + "\n" + PLUS0_PROOF
        for i, h in enumerate(
            ["Export Unset Guard Checking.", "Set Firstorder Solver admit.", "Set Ltac Debug.", "Set Ltac Batch Debug."]
        )
    }
    snippets |= {f"ok{i}": PLUS0 + "\n" + p for i, p in enumerate(HONEST.values())}
    snippets |= {f"no{i}": PLUS0 + "\n" + p for i, (p, _) in enumerate(ATTACKS.values())}
    snippets["depth"] = "Set Printing Depth 2.\n" + PLUS0 + "\n" + PLUS0_PROOF
    snippets["universes"] = "Set Printing Universes.\nTheorem t : forall A : Type, A -> A.\nProof. auto. Qed."
    with InProcess(workers=1) as srv:
        t0 = time.monotonic()
        r = post(
            srv.url, "/api/check", {"snippets": [{"id": k, "code": c} for k, c in snippets.items()], "timeout": 10}
        )
        elapsed = time.monotonic() - t0
    got = {x["id"]: (x["proofrl"]["status"], x["proofrl"]["reasons"]) for x in r.json()["results"]}
    assert [got[f"h{i}"] for i in range(4)] == [
        ("rejected", ["forbidden: Unset Guard Checking"]),
        ("rejected", ["forbidden: Set Firstorder Solver"]),
        ("rejected", ["forbidden: Set Ltac Debug"]),
        ("rejected", ["forbidden: Set Ltac Batch Debug"]),
    ]
    assert all(got[f"ok{i}"] == ("valid", []) for i in range(len(HONEST))), got
    assert [got[f"no{i}"][0] for i in range(len(ATTACKS))] == ["rejected"] * len(ATTACKS), got
    assert [got[f"no{i}"][1][0] for i in range(len(ATTACKS))] == [reason for _, reason in ATTACKS.values()]
    assert got["depth"] == got["universes"] == ("valid", [])
    assert elapsed < 60  # Set Ltac Debug made the prover wait for a debugger until twice the timeout
