"""The same checks against a real Lean REPL. Skipped unless ``lean`` is on PATH and ``PROOFRL_LEAN_REPL``
names a REPL that can be started (see docs/lean.md). The miniF2F statements need Mathlib in that project."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from proofrl.provers.base import FailureKind, Status, Theorem
from proofrl.provers.lean import LeanConfig, LeanProver, LeanSession
from proofrl.provers.lean.config import diagnose
from proofrl.provers.lean.models import CommandResponse

MINIF2F = Path(__file__).resolve().parents[2] / "shared" / "data" / "minif2f-lean4" / "minif2f.jsonl"

_ok, _why = diagnose()
pytestmark = [
    pytest.mark.lean,
    pytest.mark.skipif(shutil.which("lean") is None or not _ok, reason=f"no real Lean REPL here: {_why}"),
]


@pytest.fixture(scope="module")
def config() -> LeanConfig:
    return LeanConfig.from_env(timeout=120.0)


def test_readme_exchange(config) -> None:
    with LeanSession(config) as s:
        r = s.command("def f (x : Unit) : Nat := by sorry", timeout=120)
        assert isinstance(r, CommandResponse) and r.sorries[0].goal == "x : Unit\n⊢ Nat"
        assert s.tactic(r.sorries[0].proof_state, "apply Int.natAbs", timeout=60).proof_status.startswith("Incomplete")


def test_valid_and_cheats_without_mathlib(config) -> None:
    thm = Theorem("t", "theorem t (n : Nat) : n + 0 = n := by", "", "lean")
    p = LeanProver(config)
    try:
        v = p.check(thm, "simp")
        assert v.status is Status.VALID, v
        assert p.check(thm, "sorry").status is Status.REJECTED
        unscreened = LeanProver(config.with_overrides(forbidden_tactics=(), forbid_search_tactics=False))
        try:
            assert unscreened.check(thm, "sorry").reasons == ("sorry",)
            assert unscreened.check(thm, "admit").status is Status.REJECTED
            v = unscreened.check(Theorem("d", "theorem d : 2 + 2 = 4 := by"), "native_decide")
            assert v.status is Status.REJECTED and "axiom: Lean.ofReduceBool" in v.reasons
        finally:
            unscreened.close()
        assert p.check(thm, "theorem t (n : Nat) : n + 1 = n + 1 := by simp").reasons == ("statement changed",)
        s0 = p.start(thm)
        r = p.step(s0, "exact my_fake_premise")
        assert r.failure is not None and r.failure.kind is FailureKind.ERROR
        assert p.step(s0, "simp").state.solved
        assert p.final_check(thm, ["simp"]).status is Status.VALID
    finally:
        p.close()


@pytest.mark.slow
def test_minif2f_sorry_proofs_are_rejected(config) -> None:
    if not MINIF2F.exists():
        pytest.skip(f"no miniF2F at {MINIF2F}")
    rows = [json.loads(line) for line in MINIF2F.read_text(encoding="utf-8").splitlines()[:5]]
    assert len({r["header"] for r in rows}) == 1  # one header, so one process serves them all
    unscreened = config.with_overrides(forbidden_tactics=(), timeout=300.0)
    p = LeanProver(unscreened, rows[0]["header"])
    try:
        for row in rows:
            thm = Theorem.from_json(row, backend="lean")
            v = p.check(thm, "sorry")
            assert v.status is Status.REJECTED and "sorry" in v.reasons, (thm.name, v)
    finally:
        p.close()
