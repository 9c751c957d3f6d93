"""The Coq backend against a real coqidetop: verdicts, bad input, stepping, backtracking, final check."""

import pytest
from conftest import NAT

from proofrl.provers.base import FailureKind, Status, Theorem

ADD = Theorem("add_comm2", "Theorem add_comm2 : forall n m : nat, n + m = m + n /\\ True.", NAT)


def test_valid_proof_with_bullets(coq):
    v = coq.check(ADD, "Proof.\n  intros n m. split.\n  - lia.\n  - exact I.\nQed.")
    assert v.status is Status.VALID and v.reasons == () and v.prover.startswith("coq 8.")


def test_missing_qed_is_added_and_restated_identical_statement_is_accepted(coq):
    assert coq.check(ADD, "intros n m. split; [lia | exact I].").valid
    assert coq.check(ADD, ADD.statement + " Proof. intros n m. split; [lia | exact I]. Qed.").valid


def test_error_location_is_in_characters_of_the_users_text(coq):
    v = coq.check(ADD, "Proof.\n  intros n m. (* ∀ αβγ *) split.\n  - foo.\nQed.")
    assert v.status is Status.ERROR and "foo was not found" in v.reasons[0]
    (m,) = v.messages
    assert (m.start.line, m.start.column, m.end.column) == (3, 4, 7)


def test_error_location_on_a_line_after_unicode(coq):
    v = coq.check(ADD, "intros n m. (* λ *) bogus_tac.")
    assert v.messages[0].start.column == len("intros n m. (* λ *) ")


def test_incomplete_proof_lists_what_is_left(coq):
    v = coq.check(ADD, "Proof. intros n m. split. - lia. Qed.")
    assert v.status is Status.REJECTED and v.reasons == ("incomplete: 0 focused, 1 unfocused, 0 shelved, 0 given up",)


@pytest.mark.parametrize(
    "proof, reason",
    [
        ("Proof. intros. Admitted.", "admitted"),
        ("Proof. intros. admit. Qed.", "forbidden: admit"),
        ("Proof. Axiom oops : forall n m : nat, n + m = m + n /\\ True. exact oops. Qed.", "forbidden: Axiom"),
        ("Proof. Unset Guard Checking. Qed.", "forbidden: Unset"),
        ("Proof. Abort. Theorem add_comm2 : True. exact I. Qed.", "forbidden: Abort"),
        ('Proof. Notation "x + y" := (x * y). intros. lia. Qed.', "forbidden: Notation"),
        ("Theorem add_comm2 : True. Proof. exact I. Qed.", "statement changed"),
    ],
)
def test_cheats_are_rejected_with_their_reason(coq, proof, reason):
    v = coq.check(ADD, proof)
    assert v.status is Status.REJECTED and v.reasons[0] == reason


def test_kernel_rejects_unchecked_term_at_qed(coq):
    th = Theorem("k", "Theorem k : forall n : nat, n + 1 = 1 + n.", NAT)
    v = coq.check(th, "Proof. intros n. exact_no_check (eq_refl (n + 1)). Qed.")
    assert v.status is Status.REJECTED and v.reasons == ("kernel rejected the proof",)


def test_axioms_from_the_header_are_caught_by_print_assumptions():
    from proofrl.provers.coq import CoqProver

    header = NAT + "\nAxiom lem : forall P : Prop, P \\/ ~ P."
    th = Theorem("em", "Theorem em : forall P : Prop, P \\/ ~ P.", header)
    p = CoqProver(header)
    try:
        v = p.check(th, "Proof. exact lem. Qed.")
        assert v.status is Status.REJECTED and v.reasons == ("axiom: lem",) and v.axioms == ("lem",)
    finally:
        p.close()


@pytest.mark.parametrize(
    "proof, status, reason",
    [
        ("Proof. intros. (* never closed", Status.ERROR, "parse_error: unterminated comment"),
        ('Proof. idtac "never closed. Qed.', Status.ERROR, "parse_error: unterminated string"),
        ("Proof. intros. lia", Status.ERROR, "parse_error: missing final period"),
        ("Proof. intros. \udc80 lia. Qed.", Status.ERROR, "not UTF-8"),
        ("Proof. " + "idtac. " * 150_000 + "Qed.", Status.ERROR, "proof too long"),
    ],
)
def test_malformed_input_gets_a_clear_verdict_without_running(coq, proof, status, reason):
    v = coq.check(ADD, proof)
    assert v.status is status and v.reasons == (reason,) and v.seconds < 1


def test_loop_times_out_and_the_session_keeps_working(coq):
    v = coq.check(ADD, "Proof. intros. repeat (assert True by exact I). Qed.", timeout=2)
    assert v.status is Status.TIMEOUT and 1.5 < v.seconds < 6
    assert coq.check(ADD, "Proof. intros. split; [lia | exact I]. Qed.").valid


def test_vm_compute_bomb_times_out(coq):
    bomb = "assert (Nat.iter 1000 (fun f x => f (f x)) S 0 = 0) by (vm_compute; reflexivity)."
    v = coq.check(ADD, f"Proof. {bomb} intros. split; [lia | exact I]. Qed.", timeout=2)
    assert v.status is Status.TIMEOUT and v.seconds < 6


def test_statement_that_does_not_elaborate(coq):
    v = coq.check(Theorem("bad", "Theorem bad : undefined_thing = 0.", NAT), "Proof. reflexivity. Qed.")
    assert v.status is Status.ERROR and v.reasons == ("statement does not elaborate",)


# -- tactic by tactic ----------------------------------------------------------------------------------


def test_start_and_step_report_structured_goals(coq):
    s0 = coq.start(ADD)
    assert s0.foreground == 1 and s0.goals[0].hypotheses == ()
    s1 = coq.step(s0, "intros n m.").state
    assert [h.names for h in s1.goals[0].hypotheses] == [("n", "m")] and s1.goals[0].hypotheses[0].type == "nat"
    s2 = coq.step(s1, "split.").state
    assert (s2.foreground, s2.background, s2.goal_count) == (2, 0, 2)
    s3 = coq.step(s2, "-").state
    assert (s3.foreground, s3.background) == (1, 1)
    assert str(s3.goals[0]) == "n, m : nat\n⊢ n + m = m + n"


def test_failed_step_keeps_the_old_state_usable(coq):
    s1 = coq.step(coq.start(ADD), "intros n m.").state
    bad = coq.step(s1, "left.")
    assert bad.failure.kind is FailureKind.ERROR and "constructors" in bad.failure.message
    assert coq.step(s1, "split.").ok


def test_going_back_to_a_discarded_sibling_replays_instead_of_an_anomaly(coq):
    s1 = coq.step(coq.start(ADD), "intros n m.").state
    a = coq.step(s1, "split.").state
    b = coq.step(s1, "constructor.").state  # discards a's branch in the STM
    a2 = coq.step(a, "-").state  # a is re-reached by replay
    assert a2.foreground == 1 and a2.background == 1
    assert coq.step(b, "all: try exact I.").state.goals[0].conclusion == "n + m = m + n"


def test_duplicate_states_share_a_fingerprint(coq):
    s1 = coq.step(coq.start(ADD), "intros n m.").state
    x = coq.step(s1, "split.").state
    y = coq.step(s1, "constructor.").state
    z = coq.step(coq.start(ADD), "intros n m.").state  # the same state reached again from the start
    assert x.fingerprint == y.fingerprint and x.tactics != y.tactics and z.fingerprint == s1.fingerprint


@pytest.mark.parametrize(
    "tactic, kind",
    [
        ("intros. split.", FailureKind.PARSE_ERROR),
        ("intros", FailureKind.PARSE_ERROR),
        ("admit.", FailureKind.FORBIDDEN),
        ("Admitted.", FailureKind.FORBIDDEN),
        ("Qed.", FailureKind.FORBIDDEN),
    ],
)
def test_bad_steps(coq, tactic, kind):
    assert coq.step(coq.start(ADD), tactic).failure.kind is kind


def test_step_timeout(coq):
    r = coq.step(coq.start(ADD), "repeat (assert True by exact I).", timeout=1)
    assert r.failure.kind is FailureKind.TIMEOUT


def test_admit_in_state_counts_as_given_up_and_never_solves(coq):
    from proofrl.provers.coq import CoqConfig, CoqProver

    p = CoqProver(NAT, CoqConfig(forbidden_tactics=()))  # let admit through to see the given-up list
    try:
        s = p.step(p.step(p.start(ADD), "intros n m.").state, "split.").state
        s = p.step(p.step(s, "admit.").state, "admit.").state
        assert s.given_up == 2 and not s.solved
        assert p.check(ADD, "Proof. intros. split; admit. Qed.").reasons[0] == "admitted"
    finally:
        p.close()


# -- the fresh-process judge -----------------------------------------------------------------------------


def test_final_check_replays_in_coqc(coq):
    v = coq.final_check(ADD, ["intros n m.", "split.", "-", "lia.", "-", "exact I."])
    assert v.status is Status.VALID
    bad = coq.final_check(ADD, ["intros n m.", "split.", "-", "lia."])
    assert bad.status is Status.REJECTED
    assert coq.final_check(ADD, ["intros.", "admit."]).reasons == ("forbidden: admit",)


def test_final_check_times_out_and_kills_coqc(coq):
    v = coq.final_check(ADD, ["intros.", "repeat (assert True by exact I)."], timeout=2)
    assert v.status is Status.TIMEOUT and v.seconds < 5
