"""The Coq judge under attack: `Theorem t : False` must never come out valid, whatever the proof text does.

Four walls stand between proof text and a ``valid`` (see ``proofrl.provers.coq.rules``). Each attack below is
tried against the whole judge (``check``, ``step``, ``final_check``), and each wall is shown to close its class
on its own: the tests switch the other walls off (a deliberate mutation) and the attack must still fail.
"""

import pytest
from conftest import requires_coq

from proofrl.provers.base import FailureKind, Status, Theorem
from proofrl.provers.coq import CoqProver
from proofrl.provers.coq import plan as plan_module
from proofrl.provers.coq import prover as prover_module
from proofrl.provers.coq.rules import Outgoing, forbidden_reason, outgoing
from proofrl.provers.coq.session import CoqFailure, CoqSession

pytestmark = requires_coq

FALSE = Theorem("t", "Theorem t : False.", "")

ATTACKS = {
    # 1. attributes hide commands from a capitalised-first-word rule
    "abort and prove something else": "Proof.\n#[] Abort.\n#[] Theorem t : True.\nexact I.\nQed.",
    "local axiom named like an allowed one": (
        "Proof.\n#[local] Axiom sig_forall_dec : False.\nexact sig_forall_dec.\nQed."
    ),
    "nested definition of the same name": (
        "Proof.\n#[] Set Nested Proofs Allowed.\n#[] Abort.\n#[] Definition t : True := I.\nQed."
    ),
    "attribute with spaces": "Proof.\n#[ ] Abort.\n#[ ] Lemma t : True.\nexact I.\nQed.",
    "attribute after a selector": "Proof.\nall: #[] Abort.\n#[] Theorem t : True.\nexact I.\nQed.",
    "control prefix": "Proof.\nTime Abort.\nTime Theorem t : True.\nexact I.\nQed.",
    "period and no-break space": "Proof.\nidtac.\u00a0#[] Abort.\n#[] Theorem t : True.\nexact I.\nQed.",
}


@pytest.fixture(scope="module")
def prover():
    p = CoqProver("")
    yield p
    p.close()


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_never_valid_in_check_or_final_check(prover, name):
    proof = ATTACKS[name]
    v = prover.check(FALSE, proof)
    assert v.status is not Status.VALID, (name, v)
    f = prover.final_check(FALSE, proof.split("\n"))
    assert f.status is not Status.VALID, (name, f)


def test_attribute_commands_are_refused_as_steps(prover):
    s0 = prover.start(FALSE)
    for tactic in (
        "#[] Abort.",
        "#[local] Axiom sig_forall_dec : False.",
        "#[] Set Nested Proofs Allowed.",
        "2: #[] Abort.",
    ):
        r = prover.step(s0, tactic)
        assert r.failure is not None and r.failure.kind is FailureKind.FORBIDDEN, tactic
    assert prover.step(s0, "exfalso.").ok  # the session is still on the theorem


@pytest.fixture
def wall(monkeypatch):
    """Switch walls off by name, as a mutation: 1 = what the proof text may hold (the tactic allowlist, no
    citation of the theorem itself), 2 = the wrapped form."""

    def off(*walls: int) -> None:
        if 1 in walls:
            for module in (plan_module, prover_module):
                monkeypatch.setattr(module, "forbidden_reason", lambda *a, **k: None)
                monkeypatch.setattr(module, "self_citation", lambda *a, **k: None)
        if 2 in walls:
            identity = lambda text, timeout=None, first=False: Outgoing(text)  # noqa: E731
            monkeypatch.setattr(plan_module, "outgoing", identity)
            monkeypatch.setattr(prover_module, "outgoing", identity)

    return off


@pytest.mark.parametrize(
    "name", ["abort and prove something else", "local axiom named like an allowed one", "attribute with spaces"]
)
def test_wall_2_alone_coqs_parser_refuses_commands_sent_as_tactics(prover, wall, name):
    wall(1)
    v = prover.check(FALSE, ATTACKS[name])
    assert v.status is Status.ERROR and "Syntax error" in v.messages[0].text, v
    assert prover.final_check(FALSE, ATTACKS[name].split("\n")).status is Status.ERROR
    r = prover.step(prover.start(FALSE), "#[] Abort.")
    assert r.failure is not None and "Syntax error" in r.failure.message


@pytest.mark.parametrize(
    "proof",
    [
        ATTACKS["abort and prove something else"],
        "Proof.\nAbort.\nTheorem t : True.\nexact I.\nQed.",
        "Proof.\nAbort.\nLemma t (n : nat) : n = n.\nreflexivity.\nQed.",
    ],
)
def test_wall_3_alone_the_proved_constant_must_have_the_statements_type(prover, wall, proof):
    wall(1, 2)
    v = prover.check(FALSE, proof)
    assert v.status is Status.REJECTED and v.reasons[0].startswith("statement changed"), v
    f = prover.final_check(FALSE, proof.split("\n"))
    assert f.status is Status.REJECTED and f.reasons[0].startswith("statement changed"), f


def test_wall_3_alone_no_other_proof_or_section_may_be_open(prover, wall):
    wall(1, 2)
    nested = "Proof.\nSet Nested Proofs Allowed.\nDefinition u : True.\nexact I.\nQed."
    v = prover.check(FALSE, nested)
    assert v.status is not Status.VALID
    section = "Proof.\nAbort.\nSection S.\nTheorem t : False.\nAdmitted.\nEnd S.\nTheorem t : False.\nexact t.\nQed."
    assert prover.check(FALSE, section).status is not Status.VALID


def test_wall_3_alone_stepping_refuses_a_step_that_changes_the_open_proofs(prover, wall):
    wall(1, 2)
    s0 = prover.start(FALSE)
    r = prover.step(s0, "Abort.")
    assert r.failure is not None and r.failure.kind is FailureKind.FORBIDDEN and "open" in r.failure.message


HEADER_AXIOM = Theorem("t", "Theorem t : False.", "Axiom sig_forall_dec : False.")
REALS = Theorem("r", "Theorem r : forall x : R, x = x \\/ x <> x.", "Require Import Reals.")


def test_wall_4_an_axiom_named_like_an_allowed_one_is_refused_by_origin():
    p = CoqProver(HEADER_AXIOM.header)
    try:
        v = p.check(HEADER_AXIOM, "exact sig_forall_dec.")
        assert v.status is Status.REJECTED and v.reasons == ("axiom: sig_forall_dec",)
        f = p.final_check(HEADER_AXIOM, ["exact sig_forall_dec."])
        assert f.status is Status.REJECTED and f.reasons == ("axiom: sig_forall_dec",)
    finally:
        p.close()


def test_wall_4_the_real_allowed_axioms_still_pass_even_beside_a_namesake():
    th = Theorem(REALS.name, REALS.statement, REALS.header + "\nAxiom sig_forall_dec : True.")
    p = CoqProver(th.header)
    try:
        proof = "intros x. destruct (Req_dec x x); auto."
        v = p.check(th, proof)
        assert v.status is Status.VALID, v
        assert "ClassicalDedekindReals.sig_forall_dec" in v.axioms
        assert p.final_check(th, [proof]).status is Status.VALID
    finally:
        p.close()


# -- the whole class: every command, however it is dressed, is refused by wall 1 and by Coq's parser --------------

COMMANDS = [
    "Abort.",
    "Abort All.",
    "Admitted.",
    "Axiom a : False.",
    "Axioms a b : False.",
    "Parameter a : False.",
    "Hypothesis a : False.",
    "Conjecture a : False.",
    "Variable a : False.",
    "Context (a : False).",
    "Theorem t : True.",
    "Lemma t : True.",
    "Fact t : True.",
    "Remark t : True.",
    "Example t : True.",
    "Corollary t : True.",
    "Proposition t : True.",
    "Goal True.",
    "Definition t : True := I.",
    "Let t := I.",
    "Fixpoint f (n : nat) : nat := 0.",
    "Inductive i := c.",
    "Record r := { x : nat }.",
    "Qed.",
    "Defined.",
    "Save t.",
    "Set Nested Proofs Allowed.",
    "Unset Guard Checking.",
    "Unset Universe Checking.",
    "Notation \"'False'\" := True.",
    "Local Notation \"'False'\" := True.",
    'Infix "+" := mult.',
    "Coercion f : bool >-> Sortclass.",
    "Module M.",
    "End t.",
    "Section S.",
    "Ltac x := idtac.",
    'Tactic Notation "x" := idtac.',
    "Hint Resolve I : core.",
    "Instance i : True := I.",
    "Existing Instance i.",
    "Arguments id {A} x.",
    "Require Import Arith.",
    "Import Nat.",
    "Open Scope nat_scope.",
    "Reset t.",
    "Back.",
    "Undo.",
    "Restart.",
    "Focus 1.",
    "Unfocus.",
    "Opaque id.",
    "Transparent id.",
    "Canonical Structure x.",
    "Program Definition x := 0.",
    "Obligation 1.",
    "Next Obligation.",
    "Declare Scope s.",
    "Universe u.",
    "Constraint u < v.",
    "Scheme s := Induction for nat Sort Prop.",
    "Derive x SuchThat True As y.",
    "Eval compute in 1.",
    "Check I.",
    "Print t.",
    "Search True.",
    "Locate I.",
    'Redirect "f" Print t.',
    'Load "f".',
    'Cd "/".',
    "Drop.",
    "Extraction nat.",
    'Declare ML Module "x".',
    'Add LoadPath "x" as X.',
    "Guarded.",
    "Strategy 1 [id].",
    "Typeclasses Opaque id.",
    "Create HintDb h.",
    "Register I as x.",
    "Primitive x := #int63_add.",
    "Number Notation nat Nat.of_num_uint Nat.to_num_uint : nat_scope.",
    "Generalizable All Variables.",
    "Implicit Types n : nat.",
    "Identity Coercion f : a >-> b.",
]
DRESSES = [
    "{}",
    "#[] {}",
    "#[local] {}",
    "#[ global ] {}",
    "Local {}",
    "Global {}",
    "Time {}",
    "Fail {}",
    "Succeed {}",
    "Timeout 5 {}",
    "Polymorphic {}",
    "2: {}",
    "all: {}",
    "(* c *) #[] {}",
    "#[]{}",
    "#[program] {}",
]


def test_every_dressed_command_is_refused_by_the_allowlist():
    accepted = [
        d.format(c) for c in COMMANDS for d in DRESSES if forbidden_reason(d.format(c).split("*)")[-1].strip()) is None
    ]
    assert accepted == []


def test_coqs_parser_rejects_every_dressed_command_in_its_wrapped_form():
    """Wall 2, measured on Coq itself: in proof mode, each dressed command sent as ``outgoing`` gives it is
    refused (a syntax error at ``Add``, or a failing tactic when run); none runs as a command. As a control,
    the same sentences unwrapped are accepted by the parser (so the probe can see a command)."""
    s = CoqSession("")
    try:
        sid = s.add("Theorem t : False.", s.base)
        s.run(timeout=10)
        raw_parsed = 0
        for c in COMMANDS:
            for d in DRESSES:
                text = d.format(c)
                try:
                    s.add(outgoing(text, 5).text, sid)
                except CoqFailure:
                    continue  # a syntax error: Coq's tactic grammar refused it
                with pytest.raises(CoqFailure):  # parsed as a tactic expression (a call named Abort, ...): must fail
                    s.run(timeout=10)
                s.edit_at(sid)
                assert s.proof_status().open_proofs == ("t",)
            try:
                s.add("#[] " + c, sid)
                raw_parsed += 1
            except CoqFailure:
                pass
            s.edit_at(sid)
        assert raw_parsed >= len(COMMANDS) // 2
    finally:
        s.close()


# -- and no false rejections of ordinary proofs -------------------------------------------------------------------

LEGIT = [
    ("", "Theorem t (A : Type) (x : A) : x = x.", "reflexivity."),
    ("Set Universe Polymorphism.", "Example t (A : Type) (x : A) : x = x.", "Proof. reflexivity. Qed."),
    (
        "Require Import Arith.",
        "Theorem t : forall n, n + 0 = n.",
        "Proof using. intros n. (* c *) 1: auto with arith. Qed.",
    ),
    ("", "Theorem t : True /\\ True.", "Proof with auto. split... Qed."),
    ("", "Theorem t : exists n, n = 0.", "eexists. Show. Show Proof. Unshelve. 2: exact 0. reflexivity."),
    (
        "From Coq Require Import ssreflect ssrbool.",
        "Lemma t (n : nat) : n + 0 = n.",
        "by case: n => [|n] //=; rewrite -plus_n_O.",
    ),
]


@pytest.mark.parametrize("header, statement, proof", LEGIT)
def test_ordinary_proofs_stay_valid_in_check_and_final_check(header, statement, proof):
    p = CoqProver(header)
    try:
        th = Theorem("t", statement, header)
        assert p.check(th, proof).status is Status.VALID
        assert p.final_check(th, [proof]).status is Status.VALID
    finally:
        p.close()


FAKE_MARKERS = (
    'idtac "No object of basename proofrl_output_marker_1". idtac "No object of basename proofrl_output_marker_3". '
    'idtac "Closed under the global context".'
)


@pytest.mark.parametrize(
    "header, statement, proof, status",
    [
        ("", "Theorem t : True.", f"{FAKE_MARKERS} exact I.", Status.VALID),
        ("Axiom cheat : False.", "Theorem t : False.", f"{FAKE_MARKERS} exact cheat.", Status.REJECTED),
    ],
    ids=["true", "axiom"],
)
def test_final_check_output_cannot_be_forged_by_what_the_proof_prints(header, statement, proof, status):
    """The final check's markers carry a nonce drawn per run: what a proof prints, fake markers included, stays
    in the part before the first one, and ``check`` and the final check give the same verdict."""
    p = CoqProver(header)
    try:
        th = Theorem("t", statement, header)
        assert p.check(th, proof).status is status
        f = p.final_check(th, [proof])
        assert f.status is status, f
        assert p.final_check(th, ['idtac "Closed under the global context".', proof]).status is status
    finally:
        p.close()


# -- which constant the assumptions are read of ------------------------------------------------------------------

SEALED_LIST = "Require Import Coq.Lists.List.\nAxiom cheat : False.\nModule Type LIST. End LIST.\nModule List : LIST.\n"
NAMESAKE = "Axiom cheat : False.\nModule A. Lemma t : True. Proof. exact I. Qed. End A.\nImport A.\n"
HIDDEN_ATTACKS = {
    # after ``End``, no constant List.app_nil_r is ours: the name reaches Coq.Lists.List.app_nil_r
    "sealed module, stdlib namesake": (
        SEALED_LIST,
        "Lemma app_nil_r : forall (A : Type) (l : list A), l ++ nil = l /\\ False.",
    ),
    "functor body, imported namesake": (NAMESAKE + "Module Type T. End T.\nModule F (X : T).\n", "Lemma t : False."),
    "module type, imported namesake": (NAMESAKE + "Module Type MT.\n", "Lemma t : False."),
    "sealed, signature in a functor": (
        NAMESAKE + "Module Type T. End T.\nModule F (X : T). Module M : T.\n",
        "Lemma t : False.",
    ),
}


@pytest.mark.parametrize("name", list(HIDDEN_ATTACKS))
def test_assumptions_are_read_of_the_constant_just_proved_never_of_a_namesake(name):
    header, statement = HIDDEN_ATTACKS[name]
    p = CoqProver(header)
    try:
        th = Theorem("t", statement, header)
        proof = "Proof. intros. destruct cheat. Qed."
        for v in (p.check(th, proof), p.final_check(th, [proof])):
            assert v.status is Status.REJECTED and v.reasons == ("axiom: cheat",), (name, v)
    finally:
        p.close()


@pytest.mark.parametrize("name", list(HIDDEN_ATTACKS))
def test_identity_alone_refuses_a_namesake_when_the_header_is_misread(name, monkeypatch):
    """Mutation: the header's modules taken for plain ones (assumptions read after ``End`` by the qualified
    name). The absolute path ``About`` prints then differs from the one the lemma had, and the judge refuses
    to read rather than read another constant; with that check off too, the namesake's assumptions pass."""
    from proofrl.provers.coq import blocks

    monkeypatch.setattr(blocks, "_hides", lambda module: False)
    blocks.open_blocks.cache_clear()
    header, statement = HIDDEN_ATTACKS[name]
    p = CoqProver(header)
    try:
        th = Theorem("t", statement, header)
        proof = "Proof. intros. destruct cheat. Qed."
        v = p.check(th, proof)
        assert v.status is Status.ERROR and v.reasons[0].startswith("assumptions unreadable"), (name, v)
        # coqc: ``About`` names another object, or ``Print Assumptions`` finds none and the file fails
        v = p.final_check(th, [proof])
        assert v.status is Status.ERROR, (name, v)
        assert v.reasons[0] == "statement check failed" or v.reasons[0].startswith("assumptions unreadable"), v
    finally:
        p.close()
        blocks.open_blocks.cache_clear()


HONEST_IN_BLOCKS = [
    ("Module Type LIST. End LIST.\nModule L : LIST.\n", "Lemma t : 1 = 1."),
    ("Module M.\n", "Lemma t : 1 = 1."),
    ("Module Type S. End S.\nModule M <: S.\n", "Lemma t : 1 = 1."),
    ("Module Type T. Parameter x : nat. End T.\nModule F (X : T).\n", "Lemma t : 1 = 1."),
    ("Module Type MT.\n", "Lemma t : 1 = 1."),
    ("Module M. Section S. Variable n : nat.\n", "Lemma t : n = n."),
    (
        "Module Type S. Parameter x : nat. End S.\nModule N : S. Definition x := 0. End N.\nModule M.\n",
        "Lemma t : N.x = N.x.",
    ),
]


@pytest.mark.parametrize("header, statement", HONEST_IN_BLOCKS)
def test_honest_lemmas_in_functors_module_types_and_sealed_modules_are_valid(header, statement):
    """These were ``error`` (``The reference F.t was not found``): a lemma whose name does not survive ``End`` is
    judged inside its modules, once its sections are closed."""
    p = CoqProver(header)
    try:
        th = Theorem("t", statement, p.header)
        for v in (p.check(th, "Proof. reflexivity. Qed."), p.final_check(th, ["Proof. reflexivity. Qed."])):
            assert v.status is Status.VALID, (header, v)
    finally:
        p.close()


# -- a proof that cites its own theorem -------------------------------------------------------------------------

SELF = Theorem(
    "app_nil_r",
    "Theorem app_nil_r : forall (A : Type) (l : list A), l ++ nil = l.",
    "Require Import Coq.Lists.List.\nImport ListNotations.",
)


@pytest.mark.parametrize(
    "proof", ["apply app_nil_r.", "intros. rewrite List.app_nil_r. reflexivity.", "exact @Coq.Lists.List.app_nil_r."]
)
def test_a_proof_that_names_the_theorem_it_proves_is_refused_everywhere(proof):
    """The header makes the library's own ``app_nil_r`` visible: naming it, bare or qualified, is refused by
    ``check``, the final check and a step alike; the honest proof stays valid."""
    p = CoqProver(SELF.header)
    try:
        for v in (p.check(SELF, proof), p.final_check(SELF, [proof])):
            assert v.status is Status.REJECTED and v.reasons == ("forbidden: cites app_nil_r",), v
        cite = next(x.rstrip(".") + "." for x in proof.split(". ") if "app_nil_r" in x)
        r = p.step(p.start(SELF), cite)
        assert not r.ok and r.failure.kind is FailureKind.FORBIDDEN and "cites app_nil_r" in r.failure.message
        honest = "intros A l. induction l as [|x l IH]. reflexivity. simpl. rewrite IH. reflexivity."
        assert p.check(SELF, honest).status is Status.VALID
        assert p.check(SELF, "(* app_nil_r *) " + honest).status is Status.VALID
    finally:
        p.close()
