"""LeanProver and the pool, driven by the replay process. Requests must match the recorded ones exactly, so
these also pin down what the prover sends (header once as env 0, bodies with env 0, one-line joins).

Answers come from the real recordings except where marked SYNTHETIC (the ``#print axioms`` audit, which the
recordings do not contain, and a few answers placed after a renamed ``example``).
"""

from __future__ import annotations

import json
import time

import pytest
from lean_replay_support import (
    TRANSCRIPTS,
    needs_transcripts,
    recorded,
    replay_config,
    synthetic_axioms,
    write_transcript,
)

from proofrl.provers.base import FailureKind, Goal, Hypothesis, Position, Status, Theorem
from proofrl.provers.lean import LeanProver, WarmSpares
from proofrl.provers.lean.prover import EXAMPLE_NAME
from proofrl.provers.pool import PoolConfig, ProverPool

pytestmark = needs_transcripts

HEADER_1020, _ = recorded("Mathlib/test/H20231020", 1)
HEADER = HEADER_1020["cmd"]
T188 = Theorem("mathd_numbertheory_188", "theorem mathd_numbertheory_188 : Nat.gcd 180 168 = 12 := by ", HEADER, "lean")
T403 = Theorem(
    "mathd_numbertheory_403",
    "theorem mathd_numbertheory_403 : ∑ k ∈ (Nat.properDivisors 198), k = 270 := by",
    HEADER,
    "lean",
)
NO_SCREEN = {"forbidden_tactics": (), "forbid_search_tactics": False}


def mathlib_batch(tmp_path, name="batch", jobs=(1, 2)):
    """H20231020 as the prover talks: the header, then per job its recorded body and a SYNTHETIC audit."""
    ex = [recorded("Mathlib/test/H20231020", 1)]
    for j in jobs:
        req, ans = recorded("Mathlib/test/H20231020", j + 1)
        env = json.loads(ans)["env"]
        thm = req["cmd"].split()[1]
        ex += [(req, ans), ({"cmd": f"#print axioms {thm}", "env": env}, synthetic_axioms(thm, ["propext"], env + 10))]
    return write_transcript(tmp_path, name, ex)


def no_lean(tmp_path, **overrides):
    """A prover whose REPL answers nothing: any request it receives is a crash, so a verdict proves none was sent."""
    inp = write_transcript(tmp_path, "silent", [])
    return LeanProver(replay_config(inp, **overrides))


# -- cheats refused before Lean runs ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "proof, word",
    [
        ("sorry", "sorry"),
        ("admit", "admit"),
        ("native_decide", "native_decide"),
        ("exact?", "exact?"),
        ("norm_num\n  all_goals sorry -- TODO", "sorry"),
        ("first | rfl | apply?", "apply?"),
    ],
)
def test_forbidden_tactics_reject_without_asking_lean(tmp_path, proof, word) -> None:
    v = no_lean(tmp_path).check(T188, proof)
    assert v.status is Status.REJECTED and v.reasons == (f"forbidden: {word}",)


@pytest.mark.parametrize(
    "code, reason",
    [
        ("theorem mathd_numbertheory_188 : Nat.gcd 180 168 = 4 := by norm_num", "statement changed"),
        (
            "-- theorem mathd_numbertheory_188 : Nat.gcd 180 168 = 12 := by\ntheorem x : True := trivial",
            "statement changed",
        ),
        (
            "axiom cheat : False\ntheorem mathd_numbertheory_188 : Nat.gcd 180 168 = 12 := by exact cheat.elim",
            "statement changed: `axiom` before it",
        ),
        (
            "instance : OfNat Nat 12 := ⟨4⟩\ntheorem mathd_numbertheory_188 : Nat.gcd 180 168 = 12 := by rfl",
            "statement changed: `instance` before it",
        ),
        (
            "import Mathlib.Tactic\ntheorem mathd_numbertheory_188 : Nat.gcd 180 168 = 12 := by rfl",
            "header changed: import Mathlib.Tactic",
        ),
    ],
)
def test_statement_and_header_must_be_the_problems(tmp_path, code, reason) -> None:
    v = no_lean(tmp_path).check(T188, code)
    assert v.status is Status.REJECTED and v.reasons == (reason,)


def test_used_axiom_is_caught_by_the_audit(tmp_path) -> None:
    # the header (trusted, from the problem) declares an axiom; the proof uses it
    thm = Theorem("t", "theorem t : 1 = 2 := by", "axiom cheat : False", "lean")
    inp = write_transcript(
        tmp_path,
        "axiom",
        [
            ({"cmd": "axiom cheat : False"}, {"env": 0}),
            ({"cmd": "theorem t : 1 = 2 := by exact cheat.elim", "env": 0}, {"env": 1}),
            ({"cmd": "#print axioms t", "env": 1}, synthetic_axioms("t", ["cheat"], 2)),
        ],
    )
    v = LeanProver(replay_config(inp), thm.header).check(thm, "exact cheat.elim")
    assert v.status is Status.REJECTED and v.reasons == ("axiom: cheat",)


@pytest.mark.parametrize(
    "axioms, status, reasons",
    [
        (["Lean.ofReduceBool"], Status.REJECTED, ("axiom: Lean.ofReduceBool",)),
        (["propext", "sorryAx"], Status.REJECTED, ("axiom: sorryAx",)),
        (["propext", "Classical.choice", "Quot.sound"], Status.VALID, ()),
        ([], Status.VALID, ()),
    ],
)
def test_axiom_allowlist(tmp_path, axioms, status, reasons) -> None:
    thm = Theorem("t", "theorem t : 2 + 2 = 4 := by", "", "lean")
    inp = write_transcript(
        tmp_path,
        "ax",
        [
            ({"cmd": "theorem t : 2 + 2 = 4 := by native_decide"}, {"env": 0}),
            ({"cmd": "#print axioms t", "env": 0}, synthetic_axioms("t", axioms, 1)),
        ],
    )
    v = LeanProver(replay_config(inp, **NO_SCREEN)).check(thm, "native_decide")
    assert (v.status, v.reasons, v.axioms) == (status, reasons, tuple(axioms))


# -- recorded real answers through check() ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "transcript, statement, proof, status, reasons",
    [
        (
            "self_proof_check",
            "theorem ex : False := by",
            "exact?",
            Status.ERROR,
            ("lean error: `exact?` could not close the goal. Try `apply?` to see partial suggestions.",),
        ),
        (
            "self_proof_apply_check",
            "theorem ex : False := by",
            "apply ex",
            Status.ERROR,
            ("lean error: fail to show termination for",),
        ),
        (
            "have_by_sorry",
            "theorem foo (x : Int) : x = x := by",
            "theorem foo (x : Int) : x = x := by\n  have h : x = 1 := by sorry",
            Status.REJECTED,
            ("incomplete", "sorry"),
        ),
        ("invalid_tactic", "theorem my_theorem (x : Nat) : x = x := by", "sorry", Status.REJECTED, ("sorry",)),
    ],
)
def test_recorded_failures_map_to_verdicts(transcript, statement, proof, status, reasons) -> None:
    thm = Theorem("x", statement, "", "lean")
    v = LeanProver(replay_config(TRANSCRIPTS / f"{transcript}.in", **NO_SCREEN)).check(thm, proof)
    assert (v.status, v.reasons) == (status, reasons)


def test_recorded_unsolved_goals_with_header_is_incomplete(tmp_path) -> None:
    thm = Theorem("e", "example {x : Nat} : x + 1 > x := by", "import Mathlib.Tactic.Cases", "lean")
    # the recording elaborates the example as written; the prover names it, so the request is SYNTHETIC and
    # the answer is the recorded one with line 1 columns moved by the renaming
    req, ans = recorded("Mathlib/test/H20231115_3", 2)
    renamed = dict(req, cmd=req["cmd"].replace("example", f"theorem {EXAMPLE_NAME}", 1))
    moved = json.loads(ans)  # where Lean would put the error in the renamed line: after the longer keyword
    moved["messages"][0]["pos"]["column"] += len(f"theorem {EXAMPLE_NAME}") - len("example")
    ans = json.dumps(moved, ensure_ascii=False)
    tr = write_transcript(tmp_path, "h3", [recorded("Mathlib/test/H20231115_3", 1), (renamed, ans)])
    v = LeanProver(replay_config(tr), thm.header).check(thm, req["cmd"])  # a whole file: positions unchanged
    assert v.status is Status.REJECTED and v.reasons == ("incomplete",)
    assert (v.messages[0].start, v.messages[0].end) == (Position(1, 33), Position(2, 24))


def test_kernel_failure_in_command_mode_rejects(tmp_path) -> None:
    code = "example : 1 = 0 := by\n  cases 1\n  rfl\n  have: true := by\n    apply ?succ\n    trivial"
    req, ans = recorded("app_type_mismatch2", 1)
    assert req["cmd"] == code
    inp = write_transcript(tmp_path, "kern", [({"cmd": code.replace("example", f"theorem {EXAMPLE_NAME}")}, ans)])
    thm = Theorem("e", "example : 1 = 0 := by", "", "lean")
    v = LeanProver(replay_config(inp)).check(thm, code)
    assert v.status is Status.REJECTED and v.reasons == ("kernel: application type mismatch",)


def test_valid_needs_the_audit_and_shifts_positions(tmp_path) -> None:
    inp = write_transcript(
        tmp_path,
        "pos",
        [
            (
                {"cmd": "theorem t (n : Nat) : n = n := by\n  skip\n  rfl"},
                {
                    "messages": [
                        {
                            "severity": "info",
                            "pos": {"line": 3, "column": 2},
                            "endPos": {"line": 3, "column": 5},
                            "data": "SYNTHETIC note on rfl",
                        }
                    ],
                    "env": 0,
                },
            ),
            ({"cmd": "#print axioms t", "env": 0}, synthetic_axioms("t", [], 1)),
        ],
    )
    v = LeanProver(replay_config(inp)).check(Theorem("t", "theorem t (n : Nat) : n = n := by"), "skip\nrfl")
    assert v.status is Status.VALID
    assert (v.messages[0].start, v.messages[0].end) == (Position(2, 0), Position(2, 3))


# -- header reuse, pool, crashes, timeouts ----------------------------------------------------------------------
def test_pool_runs_the_header_once_and_bodies_on_env0(tmp_path) -> None:
    cfg = replay_config(mathlib_batch(tmp_path))
    starts = []
    with ProverPool(lambda h: starts.append(h) or LeanProver(cfg, h), PoolConfig(workers=1, timeout=10)) as pool:
        verdicts = pool.check_many([(T188, "norm_num"), (T403, "simp (config := {decide := true})")])
    assert [v.status for v in verdicts] == [Status.VALID, Status.VALID]
    assert verdicts[0].axioms == ("propext",) and len(starts) == 1


def test_crash_mid_batch_is_retried_on_a_fresh_process(tmp_path) -> None:
    crashing = replay_config(mathlib_batch(tmp_path, "all"), "--crash-at", "4")  # T403's body
    fresh = replay_config(mathlib_batch(tmp_path, "second", jobs=(2,)))
    configs = [crashing, fresh]
    with ProverPool(lambda h: LeanProver(configs.pop(0), h), PoolConfig(workers=1, timeout=10)) as pool:
        verdicts = pool.check_many([(T188, "norm_num"), (T403, "simp (config := {decide := true})")])
        assert [v.status for v in verdicts] == [Status.VALID, Status.VALID]
        assert pool.stats.crashes == 1 and not configs


def test_crash_twice_is_reported_with_stderr(tmp_path) -> None:
    cfg = replay_config(mathlib_batch(tmp_path), "--crash-at", "2")
    with ProverPool(lambda h: LeanProver(cfg, h), PoolConfig(workers=1, timeout=10)) as pool:
        v = pool.check(T188, "norm_num")
        assert v.status is Status.CRASH and "uncaught exception" in v.messages[0].text
        assert pool.stats.crashes == 2


def test_hanging_check_is_a_timeout_and_the_prover_restarts(tmp_path) -> None:
    prover = LeanProver(replay_config(mathlib_batch(tmp_path), "--hang-at", "2"), HEADER)
    pid = prover.pid
    t0 = time.monotonic()
    v = prover.check(T188, "norm_num", timeout=0.5)
    assert v.status is Status.TIMEOUT and time.monotonic() - t0 < 3
    assert not prover.alive
    assert prover.check(T188, "norm_num", timeout=0.5).status is Status.TIMEOUT  # restarted: header ran again
    assert prover.pid != pid
    prover.close()


def test_final_check_uses_a_fresh_process(tmp_path) -> None:
    prover = LeanProver(replay_config(mathlib_batch(tmp_path, jobs=(1,))), HEADER)
    v = prover.final_check(T188, ["norm_num"])
    assert v.status is Status.VALID
    assert prover.check(T188, "norm_num").status is Status.VALID  # the first process never saw final_check
    prover.close()


def test_warm_spares_hand_out_a_loaded_process(tmp_path) -> None:
    cfg = replay_config(mathlib_batch(tmp_path))
    made = []
    spares = WarmSpares(lambda h: made.append(h) or LeanProver(cfg, h))
    first = spares(HEADER)
    spares.wait(10)
    assert len(made) == 2  # the one handed out and a spare behind it
    second = spares(HEADER)
    assert second is not first and second.alive and second.check(T188, "norm_num").status is Status.VALID
    spares.wait(10)
    spares.close()
    for p in (first, second):
        p.close()


# -- tactic mode ------------------------------------------------------------------------------------------------
def test_start_and_steps_keep_case_names_and_never_trust_empty_goals() -> None:
    prover = LeanProver(replay_config(TRANSCRIPTS / "app_type_mismatch2.in", "--start", "2"))
    s0 = prover.start(Theorem("e", "example : 1 = 0 :=", "", "lean"))
    assert s0.goals == (Goal((), "1 = 0"),) and s0.handle == 0
    s1 = prover.step(s0, "cases 1").state
    assert [g.name for g in s1.goals] == ["zero", "succ"]
    assert s1.goals[1].hypotheses == (Hypothesis(("n✝",), "Nat"),)
    s2 = prover.step(s1, "rfl").state
    assert s2.goal_count == 1 and s2.tactics == ("cases 1", "rfl")
    r = prover.step(s2, "have: true := by\n    apply ?succ\n    trivial")
    assert r.state is None and r.failure.kind is FailureKind.KERNEL
    assert r.failure.message.startswith("Error: kernel type check failed")
    r = prover.step(s2, "have: true := sorry")
    assert r.failure.kind is FailureKind.FORBIDDEN  # refused before Lean


def test_error_with_empty_goals_is_a_failure() -> None:
    prover = LeanProver(replay_config(TRANSCRIPTS / "invalid_tactic.in"))
    s0 = prover.start(Theorem("t", "theorem my_theorem (x : Nat) : x = x := by"))
    r = prover.step(s0, "exact my_fake_premise")  # Lean: goals [] but "Incomplete: contains sorry" + an error
    assert not r.ok and r.failure.message == "Unknown identifier `my_fake_premise`" and r.failure.start is None


def test_sorry_from_lean_is_forbidden_even_unscreened() -> None:
    prover = LeanProver(replay_config(TRANSCRIPTS / "tactic_mode_sorry.in", **NO_SCREEN))
    s0 = prover.start(Theorem("f", "def f : Nat := by"))
    r = prover.step(s0, "sorry")
    assert r.failure.kind is FailureKind.FORBIDDEN


def test_solved_only_on_completed_and_states_move_between_processes() -> None:
    a = LeanProver(replay_config(TRANSCRIPTS / "readme.in"))
    s0 = a.start(Theorem("f", "def f (x : Unit) : Nat := by"))
    s1 = a.step(s0, "apply Int.natAbs").state
    assert str(s1) == "x : Unit\n⊢ Int" and not s1.solved
    b = LeanProver(replay_config(TRANSCRIPTS / "readme.in"))
    r = b.step(s1, "exact -37")  # b replays start + "apply Int.natAbs" to re-reach s1 (its id is a's)
    assert r.state.solved and r.state.tactics == ("apply Int.natAbs", "exact -37")
    assert r.state.session == b.session_id != a.session_id


def test_equal_goals_have_equal_fingerprints() -> None:
    p = LeanProver(replay_config(TRANSCRIPTS / "proof_branching.in"))
    s0 = p.start(Theorem("c", "theorem complex_and (p q r : Prop) (h1 : p ∧ q) (h2 : q → r) : p ∧ r := by"))
    s1 = p.step(s0, "apply And.intro").state
    assert s1.foreground == 2 and s1.fingerprint != s0.fingerprint
    s2 = p.step(s1, "exact h1.left").state
    assert s2.goals == s1.goals[1:] and s2.fingerprint == s1.__class__(s1.theorem, (), s1.goals[1:]).fingerprint


def test_step_timeout_kills_and_reports(tmp_path) -> None:
    p = LeanProver(replay_config(TRANSCRIPTS / "readme.in", "--hang-at", "2"))
    s0 = p.start(Theorem("f", "def f (x : Unit) : Nat := by"))
    t0 = time.monotonic()
    r = p.step(s0, "apply Int.natAbs", timeout=0.5)
    assert r.failure.kind is FailureKind.TIMEOUT and time.monotonic() - t0 < 3 and not p.alive
