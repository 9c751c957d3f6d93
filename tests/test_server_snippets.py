"""Snippet headers through the server are untrusted: a header may load libraries, open scopes and set
options, and nothing else. Each attack below made `valid` out of a false or changed statement before."""

import pytest
from conftest import requires_coq

from proofrl.provers.base import Status
from proofrl.provers.coq.header import header_refusal
from proofrl.provers.coq.snippet import coq_job
from proofrl.provers.snippets import Job, make_job

HEADER_ATTACKS = {
    "notation False := True": (
        "Notation \"'False'\" := True.\n",
        "Theorem t : False.\nProof. exact I. Qed.",
        "forbidden: Notation",
    ),
    "local notation for +": (
        'Require Import Arith.\nLocal Notation "x + y" := (x * y).\n',
        "Theorem t : 2 + 2 = 4 /\\ 3 + 3 = 9.\nProof. split; reflexivity. Qed.",
        "forbidden: Notation",
    ),
    "equality redefined": (
        'Notation "x = y" := (x <> y) : type_scope.\n',
        "Theorem t : 0 = 1.\nProof. discriminate. Qed.",
        "forbidden: Notation",
    ),
    "coercion bool to Prop": (
        "Definition is_true (b : bool) : Prop := b = true.\nCoercion is_true : bool >-> Sortclass.\n",
        "Theorem t : true.\nProof. reflexivity. Qed.",
        "forbidden: Definition",
    ),
    "axiom named like an allowed one": (
        "Axiom sig_forall_dec : False.\n",
        "Theorem t : False.\nProof. exact sig_forall_dec. Qed.",
        "forbidden: Axiom",
    ),
    "admitted definition named like an allowed one": (
        "Definition sig_not_dec : False.\nAdmitted.\n",
        "Theorem t : False.\nProof. exact sig_not_dec. Qed.",
        "forbidden: Definition",
    ),
    "module named like a library": (
        "Module ClassicalDedekindReals.\nAxiom sig_forall_dec : False.\nEnd ClassicalDedekindReals.\n",
        "Theorem t : False.\nProof. exact ClassicalDedekindReals.sig_forall_dec. Qed.",
        "forbidden: Module",
    ),
    "functor parameter": (
        "Module Type T.\nAxiom sig_forall_dec : False.\nEnd T.\nModule F (ClassicalDedekindReals : T).\n",
        "Theorem t : False.\nProof. exact ClassicalDedekindReals.sig_forall_dec. Qed.",
        "forbidden: Module",
    ),
    "parameter": ("Parameter p : False.\n", "Theorem t : False.\nProof. exact p. Qed.", "forbidden: Parameter"),
    "unset guard checking": (
        "Unset Guard Checking.\nFixpoint f (n : nat) : False := f n.\n",
        "Theorem t : False.\nProof. exact (f 0). Qed.",
        "forbidden: Unset Guard Checking",
    ),
}
HEADER_ATTACKS["hint"] = (
    "Hint Extern 1 => exact I : core.\n",
    "Theorem t : True.\nProof. auto. Qed.",
    "forbidden: Hint Extern",
)
HEADER_ATTACKS["tactic notation"] = (
    'Tactic Notation "done" := idtac.\n',
    "Theorem t : True.\nProof. exact I. Qed.",
    "forbidden: Tactic Notation",
)
HEADER_ATTACKS["arguments scope"] = (
    "Require Import Reals.\nArguments Nat.add (_ _)%R_scope.\n",
    "Theorem t : True.\nProof. exact I. Qed.",
    "forbidden: Arguments",
)
HEADER_ATTACKS["attribute on a declaration"] = (
    "#[local] Axiom a : False.\n",
    "Theorem t : False.\nProof. exact a. Qed.",
    "forbidden: Axiom",
)


@pytest.mark.parametrize("name", list(HEADER_ATTACKS))
def test_a_header_that_declares_anything_is_refused_with_its_reason(name):
    header, rest, reason = HEADER_ATTACKS[name]
    v = coq_job(header + rest)
    assert not isinstance(v, Job) and v.status is Status.REJECTED and v.reasons == (reason,), v
    assert "snippet header may only" in v.messages[0].text and v.messages[0].start is not None


@pytest.mark.parametrize(
    "sentence",
    [
        "Require Import Arith Lia.",
        "From Coq Require Import Reals Psatz.",
        "Require Coq.Reals.Reals.",
        "Import Nat.",
        "Open Scope R_scope.",
        "Local Open Scope Z_scope.",
        "Close Scope nat_scope.",
        "Set Implicit Arguments.",
        "Unset Printing Notations.",
        "Set Printing Width 100.",
        'Set Default Goal Selector "!".',
        "(* a comment *) Require Import Lia.",
    ],
)
def test_a_header_may_load_libraries_open_scopes_and_set_options(sentence):
    assert header_refusal(sentence) is None


@pytest.mark.parametrize(
    "option",
    ["Guard Checking", "Positivity Checking", "Universe Checking", "Definitional UIP", "Nested Proofs Allowed"],
)
def test_options_that_switch_checks_off_are_refused(option):
    assert header_refusal(f"Unset {option}.") is not None and header_refusal(f"Set {option}.") is not None


def test_a_lone_surrogate_gets_a_precise_verdict_not_an_internal_error():
    for backend in ("coq", "lean"):
        v = make_job("Theorem t : \ud800 = 1.\nProof. Qed.", backend)
        assert not isinstance(v, Job) and v.status is Status.ERROR and v.reasons == ("not UTF-8",)


@requires_coq
def test_header_attacks_are_rejected_through_real_http():
    from test_server import InProcess, post

    with InProcess(workers=1) as srv:
        codes = [h + r for h, r, _ in HEADER_ATTACKS.values()]
        r = post(
            srv.url, "/api/check", {"snippets": [{"id": str(i), "code": c} for i, c in enumerate(codes)], "timeout": 20}
        )
        got = [(x["proofrl"]["status"], x["proofrl"]["reasons"]) for x in r.json()["results"]]
        assert got == [("rejected", [reason]) for _, _, reason in HEADER_ATTACKS.values()]
        # a lone surrogate in a JSON string (an escaped \ud800) reaches the server as such
        raw = '{"snippets": [{"id": "s", "code": "Theorem t : \\ud800 = 1.\\nProof. Qed."}], "timeout": 5}'
        r = post(srv.url, "/api/check", raw)
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["proofrl"]["reasons"] == ["not UTF-8"]
