"""Library replay reads a proof's end as Coq does (under any nesting of control prefixes, comments and
attributes), and a proof whose end Coq refuses (a term the kernel rejects, goals left) is skipped with its
reason while the session goes on with the rest of the file."""

from __future__ import annotations

from conftest import requires_coq

from proofrl.data.file_steps import Replayer, command_of
from proofrl.provers.coq.session import CoqFailure, CoqSession


def _replay(source: str):
    r = Replayer(source, file="x.v", module="x", timeout=10.0).run()
    assert r.error is None, r.error
    return r, {lem.name: lem for lem in r.lemmas}


def test_command_of_strips_any_nesting_of_controls_comments_and_attributes():
    assert command_of("Qed.") == ("Qed.", False)
    assert command_of('Time Timeout 5 Redirect "a ""b""" (* c (* d *) *) #[local] Qed.') == ("Qed.", False)
    assert command_of("Time Fail Qed.") == ("Qed.", True)  # runs Qed and drops its effect: closes nothing
    assert command_of("Succeed (* x *) Time Admitted.") == ("Admitted.", True)
    assert command_of("Instructions Abort.") == ("Abort.", False)
    # words that only start like a control are the command itself
    assert command_of("Timeouts.") == ("Timeouts.", False)
    assert command_of("Time' x.") == ("Time' x.", False)
    assert command_of("Lemma Time : True.") == ("Lemma Time : True.", False)


CONTROLLED_ENDS = """
Lemma timed : forall n : nat, n + 0 = n.
Proof. intros. Time Admitted.

Lemma nested : forall n : nat, 0 + n = n.
Proof. intros. Timeout 5 Redirect "out" (* still Admitted *) Admitted.

Lemma aborted : 1 = 2.
Proof. Time Abort.

Lemma timed_qed : 2 = 2.
Proof. Fail Qed. reflexivity. Time Qed.

Lemma broken : 1 = 1.
Proof. rewrite no_such_lemma. Time Qed.

Lemma after_broken : 3 = 3.
Proof. reflexivity. Qed.

Lemma uses_timed : forall n : nat, n + 0 = n.
Proof. exact timed. Qed.
"""


@requires_coq
def test_ends_under_control_prefixes_are_read_as_coq_reads_them():
    _, by = _replay(CONTROLLED_ENDS)
    assert list(by) == ["timed", "nested", "aborted", "timed_qed", "broken", "after_broken", "uses_timed"]
    for name in ("timed", "nested", "aborted"):  # unfinished proofs: never problems, no transitions
        assert by[name].kind == "admitted" and not by[name].transitions, (name, by[name].failure)
    # Fail Qed. closes nothing: the proof goes on and its real end is Time Qed.
    assert by["timed_qed"].failure is None
    assert [t["tactic"] for t in by["timed_qed"].transitions] == ["reflexivity."]
    assert by["timed_qed"].proof.endswith("Time Qed.")
    # a failed proof ends at Time Qed.: the lemma after it is replayed, not skipped as part of it
    assert by["broken"].kind == "tactic"
    assert by["after_broken"].failure is None and by["after_broken"].transitions
    assert by["uses_timed"].failure is None and by["uses_timed"].transitions[0]["premises"] == ["x.timed"]


KERNEL = """
Lemma bad : nat -> False.
Proof. fix IH 1. exact IH. Qed.

Lemma vm_bad : Nat.even 3 = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

Lemma unfinished : 1 = 1 /\\ 2 = 2.
Proof. split. reflexivity. Qed.

Lemma after_bad : 4 = 4.
Proof. reflexivity. Qed.

Lemma uses_bad : False.
Proof. exact (bad 0). Qed.
"""


def _check_kernel_replay(by) -> None:
    assert list(by) == ["bad", "vm_bad", "unfinished", "after_bad", "uses_bad"]
    # the tactics left no goal, the check at Qed failed: skipped, not a problem, no transitions
    for name in ("bad", "vm_bad"):
        assert by[name].kind == "kernel" and not by[name].transitions, (name, by[name].failure)
    assert by["bad"].proof.endswith("Qed.")
    # goals left at Qed: the tactics did not finish the proof
    assert by["unfinished"].kind == "tactic" and not by["unfinished"].transitions
    assert by["after_bad"].failure is None and by["after_bad"].transitions
    # the failed lemma was admitted in its place: later lemmas still see its constant
    assert by["uses_bad"].failure is None and by["uses_bad"].transitions[0]["premises"] == ["x.bad"]


@requires_coq
def test_a_proof_end_refused_by_coq_skips_the_lemma_and_the_file_goes_on():
    _, by = _replay(KERNEL)
    _check_kernel_replay(by)


@requires_coq
def test_a_session_that_cannot_go_back_is_restarted_on_the_file_prefix(monkeypatch):
    def refuse(self, state_id, timeout=30):
        raise CoqFailure('Anomaly "edit_at: Uncaught exception Stm.Vcs_aux.Expired."', state_id)

    monkeypatch.setattr(CoqSession, "edit_at", refuse)  # Coq can go back to no state it has left
    _, by = _replay(KERNEL)
    _check_kernel_replay(by)


SLOW_QED = """
Require Import PArith.
Lemma slow_qed : Pos.iter negb true (2^29) = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

Lemma after_slow : Pos.iter negb true 2 = true.
Proof. reflexivity. Qed.
"""


@requires_coq
def test_a_proof_end_past_its_time_limit_skips_only_its_lemma():
    r = Replayer(SLOW_QED, file="x.v", module="x", timeout=3.0).run()  # the check at Qed takes seconds
    assert r.error is None, r.error
    by = {lem.name: lem for lem in r.lemmas}
    assert list(by) == ["slow_qed", "after_slow"]
    assert by["slow_qed"].kind == "timeout" and not by["slow_qed"].transitions
    assert by["after_slow"].failure is None and by["after_slow"].transitions
