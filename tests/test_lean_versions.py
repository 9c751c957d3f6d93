"""Every REPL generation users pin: the recorded transcripts of 29 older toolchains (``nightly-2023-03-17``,
``v4.2.0-rc1`` ... ``v4.33.0-rc1``, read in place from ``../shared/lean-repl-versions``) replayed through
:class:`LeanSession` with the generation detected from the answers, every answer parsed strictly and judged,
against the table of expected outcome codes below (codes: :mod:`lean_conformance`). The newest toolchain's 71
pairs are in ``test_lean_transcripts.py``.

Where a code differs from the same test's code on v4.33, the REPL said less: ``closed`` is a tactic that left
no goals on a REPL without ``proofStatus`` (before v4.19), never ``solved`` (``name_generator``: Lean v4.33
says ``fail:meta`` for the same steps). Other differences are the test's input changing between versions.
"""

from __future__ import annotations

import json

import pytest
from lean_conformance import (
    VERSIONS,
    outcome,
    pair_name,
    pairs_in,
    run_pair,
    toolchains,
)
from lean_replay_support import expected_of, replay_config, write_transcript

from proofrl.errors import ConfigError, ProtocolError
from proofrl.provers.lean import LeanConfig, LeanSession
from proofrl.provers.lean.generations import (
    CURRENT,
    LEGACY,
    candidates,
    generation_for,
    toolchain_key,
)
from proofrl.provers.lean.models import ProofStepResponse, parse_as, parse_response
from proofrl.provers.lean.replay import answers_of, requests_of
from proofrl.provers.lean.rules import UNCONFIRMED, judge_step

pytestmark = pytest.mark.skipif(not VERSIONS.is_dir(), reason=f"no recordings at {VERSIONS}")

EXPECTED: dict[str, dict[str, str]] = {
    "nightly-2023-03-17": {
        "def_eval": "ok ok",
        "enableInitializersExecution": "ok",
    },
    "v4.2.0-rc1": {
        "all_tactics": "ok",
        "calc": "sorry",
        "def_eval": "ok ok",
        "enableInitializersExecution": "ok",
        "invalid_tactic": "sorry fail:error",
        "pickle_environment": "ok ok ok ok",
        "pickle_environment_with_imports": "ok ok ok ok ok",
        "pickle_proof_state_1": "ok sorry open1 open1 open1 open1 open1 closed",
        "pickle_proof_state_2": "open1 closed",
        "proof_step": "sorry open1 open1 closed",
        "proof_step2": "sorry open1 open1 closed",
        "synthesize_placeholder": "lean",
        "tactic_sorry": "sorry",
        "term_sorry": "sorry",
        "unfinished_tactic_block": "lean+incomplete",
        "unknown_environment": "repl",
        "unknown_proof_state": "sorry repl",
        "unknown_tactic": "sorry repl",
    },
    "v4.2.0-rc4": {
        "Mathlib/test/H20231020": "ok ok ok ok",
        "Mathlib/test/H20231110": "ok ok",
        "Mathlib/test/H20231115": "ok sorry open2",
        "Mathlib/test/H20231115_2": "ok sorry",
        "Mathlib/test/H20231115_3": "ok incomplete",
        "options": "ok ok ok",
        "variables": "ok ok sorry",
    },
    "v4.3.0-rc2": {
        "Mathlib/test/H20231115": "ok sorry open2",
        "Mathlib/test/H20231115_2": "ok sorry",
        "invalid_tactic": "sorry fail:error",
        "readme": "sorry open1 closed",
        "variables": "ok ok sorry",
    },
    "v4.4.0-rc1": {
        "Mathlib/test/H20231215": "ok ok",
        "Mathlib/test/H20231215_2": "ok sorry",
        "pickle_open": "ok ok ok ok",
        "pickle_open_2": "ok ok",
        "pickle_open_scoped": "ok ok sorry ok",
        "pickle_open_scoped_2": "ok sorry",
    },
    "v4.5.0": {
        "trace_simp": "ok ok ok ok sorry open1 closed ok",
    },
    "v4.5.0-rc1": {
        "Mathlib/test/induction": "ok sorry open2 open1 fail:sorry",
        "Mathlib/test/on_goal": "ok sorry fail:sorry",
        "Mathlib/test/pickle": "ok sorry open1",
        "Mathlib/test/pickle_2": "open1 open1",
        "by_cases": "sorry open2 open1 fail:sorry",
        "have_by_sorry": "incomplete+sorry sorry fail:sorry",
        "infotree": "ok",
        "pickle_proof_state_env": "ok sorry open1 open1 open1 open1 open1 closed",
        "sorry_hypotheses": "sorry fail:sorry",
        "tactic_mode_sorry": "sorry fail:sorry",
    },
    "v4.6.0-rc1": {
        "Mathlib/test/20240209": "ok sorry fail:error",
        "Mathlib/test/exact": "ok sorry closed sorry repl",
        "name_generator": "sorry fail:sorry closed closed closed closed closed fail:error fail:error",
        "no_goal_sorry": "lean+lean",
        "no_goal_sorry_2": "lean+sorry",
        "unknown_tactic": "sorry repl",
    },
    "v4.7.0-rc1": {
        "Mathlib/test/20240209": "sorry fail:error",
        "by_cases": "sorry open2 open1 fail:sorry",
        "name_generator": "sorry fail:sorry closed closed closed closed closed fail:error fail:error",
    },
    "v4.7.0-rc2": {
        "Mathlib/test/exact": "ok sorry closed sorry repl",
        "file": "ok",
        "incomplete": "incomplete incomplete",
    },
    "v4.8.0-rc1": {
        "Mathlib/test/H20231115": "ok sorry open2",
        "Mathlib/test/H20231115_2": "ok sorry",
        "Mathlib/test/H20231115_3": "ok incomplete",
        "Mathlib/test/exact": "ok sorry closed sorry repl",
        "Mathlib/test/induction": "ok sorry open2 open1 fail:sorry",
        "dup_msg": "ok ok lean",
        "dup_sorries": "sorry sorry",
        "infotree": "ok",
        "variables": "ok ok sorry",
    },
    "v4.9.0-rc1": {
        "name_generator": "sorry fail:sorry closed closed closed closed closed fail:error fail:error",
        "no_goal_sorry": "lean+lean",
        "trace_simp": "ok ok ok ok sorry open1 closed ok",
    },
    "v4.11.0": {
        "all_tactics": "ok",
        "calc": "sorry",
        "file": "ok",
    },
    "v4.14.0-rc1": {
        "all_tactics": "ok",
        "calc": "sorry",
    },
    "v4.16.0-rc2": {
        "calc": "sorry",
    },
    "v4.18.0-rc1": {
        "name_generator": "sorry fail:sorry closed closed closed closed closed fail:error fail:error",
        "trace_simp": "ok ok ok ok sorry open1 closed ok",
    },
    "v4.19.0-rc2": {
        "Mathlib/test/20240209": "sorry fail:error",
        "Mathlib/test/H20231020": "ok ok ok ok",
        "Mathlib/test/H20231110": "ok ok",
        "Mathlib/test/H20231115": "ok sorry open2",
        "Mathlib/test/exact": "ok sorry solved sorry repl",
        "Mathlib/test/induction": "ok sorry open2 open1 fail:sorry",
        "Mathlib/test/on_goal": "ok sorry fail:sorry",
        "Mathlib/test/pickle": "ok sorry open1",
        "Mathlib/test/pickle_2": "open1 open1",
        "Mathlib/test/placeholder_synthesis": "ok lean sorry open1 fail:meta",
        "app_type_mismatch": "kernel sorry open2 open1 fail:meta",
        "app_type_mismatch2": "kernel sorry open2 open1 fail:kernel fail:sorry repl",
        "assumption_proof": "sorry solved",
        "by_cases": "sorry open2 open1 fail:sorry",
        "file": "ok",
        "have_by_sorry": "incomplete+sorry sorry fail:sorry",
        "import_lean": "ok",
        "invalid_tactic": "sorry fail:error",
        "name_generator": "sorry fail:sorry fail:meta fail:meta fail:meta fail:meta fail:meta fail:error fail:error",
        "pickle_environment": "ok ok ok ok",
        "pickle_environment_with_imports": "ok ok ok ok ok",
        "pickle_open": "ok ok ok ok",
        "pickle_open_2": "ok ok",
        "pickle_proof_state_1": "ok sorry open1 open1 open1 open1 open1 solved",
        "pickle_proof_state_2": "open1 solved",
        "pickle_proof_state_env": "ok sorry open1 open1 open1 open1 open1 solved",
        "proof_branching": "sorry open2 open1 open1 solved",
        "proof_branching2": "sorry open1 open1 open1 open2 open1 solved",
        "proof_step": "sorry open1 open1 solved",
        "proof_transitivity": "sorry solved sorry solved",
        "readme": "sorry open1 solved",
        "root_goals": "sorry solved solved",
        "self_proof_apply_check": "lean sorry fail:kernel",
        "self_proof_check": "lean sorry repl sorry repl sorry repl sorry repl",
        "self_proof_exact_check": "lean sorry fail:kernel",
        "self_proof_rw": "lean sorry fail:kernel",
        "sorry_hypotheses": "sorry fail:sorry",
        "tactic_mode_sorry": "sorry fail:sorry",
        "trace_simp": "ok ok ok ok sorry open1 solved ok",
    },
    "v4.20.1-rc1": {
        "root_goals": "sorry solved solved",
        "trace_simp": "ok ok ok ok sorry open1 solved ok",
    },
    "v4.21.0-rc3": {
        "app_type_mismatch2": "kernel sorry open2 open1 fail:kernel fail:sorry repl",
        "trace_simp": "ok ok ok ok sorry open1 solved ok",
    },
    "v4.22.0-rc2": {
        "Mathlib/test/file_env": "ok sorry ok",
        "Mathlib/test/line_breaks": "ok sorry",
        "all_tactics-20250622": "ok solved",
        "all_tactics": "ok",
        "app_type_mismatch2": "kernel sorry open2 open1 fail:kernel fail:sorry repl",
        "file2": "ok",
        "file_env": "ok ok ok",
        "infotree": "ok",
        "infotree_theorem": "ok",
        "invalid_line_break": "lean lean",
        "line_breaks": "sorry ok",
        "variables": "ok ok sorry",
    },
    "v4.23.0-rc2": {
        "app_type_mismatch2": "kernel sorry open2 open1 fail:kernel fail:sorry repl",
        "dup_msg": "ok ok lean",
        "invalid_line_break": "lean lean",
        "invalid_tactic": "sorry fail:error",
        "no_goal_sorry": "lean+lean",
        "no_goal_sorry_2": "lean+sorry",
    },
    "v4.24.0-rc1": {
        "Mathlib/test/exact": "ok sorry solved sorry repl",
        "infotree_theorem": "ok",
        "root_goals": "sorry solved solved",
        "self_proof_apply_check": "lean sorry fail:kernel",
        "self_proof_exact_check": "lean sorry fail:kernel",
        "self_proof_rw": "lean sorry fail:kernel",
    },
    "v4.25.0-rc1": {
        "Mathlib/test/exact": "ok sorry solved sorry repl",
        "root_goals": "sorry solved solved",
    },
    "v4.27.0-rc1": {
        "root_goals": "sorry solved solved",
    },
    "v4.28.0-rc1": {
        "Mathlib/test/20240209": "sorry fail:error",
        "Mathlib/test/H20231115": "ok sorry open2",
        "Mathlib/test/H20231115_2": "ok sorry",
        "Mathlib/test/H20231215_2": "ok sorry",
        "Mathlib/test/exact": "ok sorry solved sorry repl",
        "Mathlib/test/file_env": "ok sorry ok",
        "Mathlib/test/induction": "ok sorry open2 open1 fail:sorry",
        "Mathlib/test/line_breaks": "ok sorry",
        "Mathlib/test/on_goal": "ok sorry fail:sorry",
        "Mathlib/test/pickle": "ok sorry open1",
        "Mathlib/test/placeholder_synthesis": "ok lean sorry open1 fail:meta",
        "app_type_mismatch": "kernel sorry open2 open1 fail:meta",
        "app_type_mismatch2": "kernel sorry open2 open1 fail:kernel fail:sorry repl",
        "assumption_proof": "sorry solved",
        "by_cases": "sorry open2 open1 fail:sorry",
        "calc": "sorry",
        "dup_sorries": "sorry sorry",
        "have_by_sorry": "incomplete+sorry sorry fail:sorry",
        "invalid_tactic": "sorry fail:error",
        "line_breaks": "sorry ok",
        "name_generator": "sorry fail:sorry fail:meta fail:meta fail:meta fail:meta fail:meta fail:error fail:error",
        "pickle_open_scoped": "ok ok sorry ok",
        "pickle_open_scoped_2": "ok sorry",
        "pickle_proof_state_1": "ok sorry open1 open1 open1 open1 open1 solved",
        "pickle_proof_state_env": "ok sorry open1 open1 open1 open1 open1 solved",
        "proof_branching": "sorry open2 open1 open1 solved",
        "proof_branching2": "sorry open1 open1 open1 open2 open1 solved",
        "proof_step": "sorry open1 open1 solved",
        "proof_transitivity": "sorry solved sorry solved",
        "readme": "sorry open1 solved",
        "self_proof_apply_check": "lean sorry fail:kernel",
        "self_proof_check": "lean sorry repl sorry repl sorry repl sorry repl",
        "self_proof_exact_check": "lean sorry fail:kernel",
        "self_proof_rw": "lean sorry fail:kernel",
        "sorry_hypotheses": "sorry fail:sorry",
        "tactic_mode_sorry": "sorry fail:sorry",
        "tactic_sorry": "sorry",
        "term_sorry": "sorry",
        "trace_simp": "ok ok ok ok sorry open1 solved ok",
        "unknown_proof_state": "sorry repl",
        "unknown_tactic": "sorry repl",
        "variables": "ok ok sorry",
    },
    "v4.29.0-rc2": {
        "self_proof_apply_check": "lean sorry fail:kernel",
        "self_proof_exact_check": "lean sorry fail:kernel",
        "self_proof_rw": "lean sorry fail:kernel",
    },
    "v4.29.0-rc6": {
        "self_proof_rw": "lean sorry fail:kernel",
    },
    "v4.31.0-rc1": {
        "infotree": "ok",
        "infotree_theorem": "ok",
        "line_breaks": "incomplete+lean sorry ok",
        "unfinished_tactic_block": "incomplete",
        "variables": "ok ok sorry",
    },
    "v4.33.0-rc1": {
        "infotree": "ok",
        "variables": "ok ok sorry",
    },
}

OLDER = [(name, inp) for name, folder in toolchains() if folder.parent == VERSIONS for inp in pairs_in(folder)]


def _id(item) -> str:
    name, inp = item
    return f"{name}/{pair_name(inp, VERSIONS / name)}"


def test_every_recorded_toolchain_and_pair_is_in_the_table() -> None:
    assert len(OLDER) == 204
    assert {(n, pair_name(i, VERSIONS / n)) for n, i in OLDER} == {(n, p) for n, t in EXPECTED.items() for p in t}


@pytest.mark.parametrize("item", OLDER, ids=[_id(x) for x in OLDER])
def test_pair_replays_parses_and_judges_as_expected(item) -> None:
    name, inp = item
    run = run_pair(inp)
    assert run.replayed and run.parsed, run.error
    assert run.text == EXPECTED[name][pair_name(inp, VERSIONS / name)]
    want = LEGACY if toolchain_key(name) < (4, 19) else CURRENT
    if any("proofState" in a and "env" not in a for a in _answers(inp)):  # a tactic answer decides, rightly
        assert run.generations == (str(want),)
    else:  # command answers fit both, unless their shape is older (infotree syntax without `kind`)
        assert str(want) in run.generations


def _answers(inp):
    return [json.loads(a) for a in answers_of(expected_of(inp).read_text(encoding="utf-8"))]


@pytest.mark.parametrize("name", [n for n, _ in toolchains()])
def test_a_named_toolchain_reads_every_answer_of_its_recordings_alike(name) -> None:
    """``version: <toolchain>``: every recorded answer is read with that toolchain's generation alone (no
    detection), and judged with the code the detecting session gave."""
    gens = candidates(name)
    assert gens == (LEGACY,) if toolchain_key(name) < (4, 19) else gens == (CURRENT,)
    for _, folder in [t for t in toolchains() if t[0] == name]:
        for inp in pairs_in(folder):
            codes = [outcome(parse_as(a, gens)[0]) for a in _answers(inp)]
            if folder.parent == VERSIONS:
                assert " ".join(codes) == EXPECTED[name][pair_name(inp, folder)]


def test_toolchain_names_as_users_write_them() -> None:
    assert generation_for("v4.9.0") is LEGACY and generation_for("leanprover/lean4:v4.9.0-rc1") is LEGACY
    assert generation_for("nightly-2023-03-17") is LEGACY and generation_for("v4.18.0") is LEGACY
    assert generation_for("v4.19.0-rc2") is CURRENT and generation_for("4.33.0") is CURRENT
    assert generation_for("v5.0.0") is CURRENT
    for bad in ("latest", "v4", "4.9.0.1", ""):
        with pytest.raises(ConfigError, match="expected a toolchain"):
            LeanConfig(command=("repl",), version=bad)


def test_each_generation_is_strict() -> None:
    legacy_step = {"proofState": 1, "goals": ["⊢ Nat"]}
    current_step = {"proofStatus": "Incomplete: open goals remain", "proofState": 1, "goals": ["⊢ Nat"]}
    assert parse_response(legacy_step, LEGACY) == ProofStepResponse(1, ("⊢ Nat",), None)
    with pytest.raises(ProtocolError):  # v4.19+ always says proofStatus: its absence is no v4.19+ answer
        parse_response(legacy_step, CURRENT)
    with pytest.raises(ProtocolError):  # and a legacy REPL never says it
        parse_response(current_step, LEGACY)
    for gen in (LEGACY, CURRENT):
        with pytest.raises(ProtocolError):  # an unknown key is an error in every generation
            parse_response({**legacy_step, "proofStatus": "Completed", "newKey": 1}, gen)
        with pytest.raises(ProtocolError):
            parse_response({**legacy_step, "newKey": 1}, gen)
    # infotree syntax without `kind` (up to v4.8) is legacy only
    tree = {
        "env": 0,
        "infotree": [
            {"kind": "TacticInfo", "node": {"name": None, "goalsBefore": [], "goalsAfter": [], "stx": {"pp": "rfl"}}}
        ],
    }
    assert parse_response(tree, LEGACY).infotree[0].pp == "rfl"
    with pytest.raises(ProtocolError):
        parse_response(tree, CURRENT)


def test_a_legacy_step_that_leaves_no_goals_is_never_solved_and_says_why() -> None:
    """v4.9's answers to `name_generator`: after `have h : x > 0 := by sorry`, `exact h0` leaves no goals and the
    REPL says nothing else, though the proof holds that sorry (v4.33 answers `Incomplete: contains sorry`)."""
    inp = VERSIONS / "v4.9.0-rc1" / "name_generator.in"
    answers = [parse_response(a, LEGACY) for a in _answers(inp)]
    j = judge_step(answers[2])
    assert answers[2].goals == () and j.ok and not j.solved and j.unconfirmed == UNCONFIRMED
    assert "proofStatus" in j.unconfirmed and "kernel" in j.unconfirmed


def test_detection_narrows_on_the_first_tactic_answer_and_then_holds(tmp_path) -> None:
    """A REPL that answered one tactic in the legacy shape cannot later be read as v4.19+ (nor the reverse)."""
    legacy = {"proofState": 1, "goals": ["⊢ Nat"]}
    current = {"proofStatus": "Completed", "proofState": 2, "goals": []}
    for first, then in ((legacy, current), (current, legacy)):
        inp = write_transcript(
            tmp_path,
            "mixed",
            [
                ({"cmd": "def f : Nat := by sorry"}, {"env": 0}),
                ({"tactic": "exact 1", "proofState": 0}, first),
                ({"tactic": "exact 2", "proofState": 0}, then),
            ],
        )
        with LeanSession(replay_config(inp)) as s:
            s.command("def f : Nat := by sorry", timeout=10)
            assert len(s.generations) == 2
            s.tactic(0, "exact 1", timeout=10)
            assert s.generations == ((LEGACY,) if first is legacy else (CURRENT,))
            with pytest.raises(ProtocolError):
                s.tactic(0, "exact 2", timeout=10)
            assert not s.alive


def test_a_named_toolchain_that_is_not_the_repls_is_an_error(tmp_path) -> None:
    inp = VERSIONS / "v4.9.0-rc1" / "trace_simp.in"
    with LeanSession(replay_config(inp, version="v4.19.0")) as s, pytest.raises(ProtocolError):
        for q in requests_of(inp.read_text(encoding="utf-8")):
            s.send(json.loads(q), timeout=10)


def test_the_earliest_framing_one_newline_between_answers_is_read() -> None:
    """``nightly-2023-03-17`` printed answers with no blank line between them: each is read as one JSON value."""
    inp = VERSIONS / "nightly-2023-03-17" / "def_eval.in"
    assert "\n\n" not in expected_of(inp).read_text(encoding="utf-8")
    run = run_pair(inp)
    assert run.replayed and run.parsed and run.text == "ok ok"


def test_one_json_value_is_one_answer_however_it_arrives() -> None:
    """The frame ends at the bracket that closes the value, not at a blank line: braces, quotes and escapes
    inside strings do not count, and bytes arriving one at a time cost one scan each."""
    from proofrl.provers.lean.session import JsonEnd

    value = b'{"data": "a } \\" ] {\\\\", "goals": ["\\u22a2 {x}"],\n "env": 0}'
    for tail in (b'\n\n{"env": 1}', b'\n{"env": 1}', b""):
        end, buf = JsonEnd(), bytearray()
        found = -1
        for b in b"\n\n" + value + tail:
            buf.append(b)
            found = end(buf)
            if found > 0:
                break
        assert bytes(buf[:found]).strip() == value and json.loads(bytes(buf[:found]))["env"] == 0
    assert JsonEnd()(bytearray(b"not JSON\n{")) == len(b"not JSON\n")  # framed at its newline: a crash
