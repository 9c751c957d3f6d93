"""Every recorded real-Lean transcript pair (v4.33.0-rc2), replayed through :class:`LeanSession` over real pipes.

For each pair: the replay process checks every request we send equals the recorded one, every response is
parsed into its typed model (strict: unknown keys fail), and the verdict/step outcome of every response is
asserted against the table below. Codes: for a command, ``ok`` (no error, no sorry) or the ``+``-joined
reasons (``sorry``, ``incomplete``, ``kernel``, ``lean``); for a tactic, ``solved``, ``openN`` (N goals) or
``fail:`` + ``error``/``sorry``/``meta``/``kernel``; ``repl`` for ``{"message": ...}`` (:mod:`lean_conformance`).
Older toolchains: ``test_lean_versions.py``.
"""

from __future__ import annotations

import pytest
from lean_conformance import run_pair
from lean_replay_support import TRANSCRIPTS, needs_transcripts, pairs

pytestmark = needs_transcripts

EXPECTED = {
    "Mathlib/test/20240209": "sorry fail:error",
    "Mathlib/test/H20231020": "ok ok ok ok",
    "Mathlib/test/H20231110": "ok ok",
    "Mathlib/test/H20231115": "ok sorry open2",
    "Mathlib/test/H20231115_2": "ok sorry",
    "Mathlib/test/H20231115_3": "ok incomplete",
    "Mathlib/test/H20231215": "ok ok",
    "Mathlib/test/H20231215_2": "ok sorry",
    "Mathlib/test/exact": "ok sorry solved sorry repl",
    "Mathlib/test/file_env": "ok sorry ok",
    "Mathlib/test/induction": "ok sorry open2 open1 fail:sorry",
    "Mathlib/test/line_breaks": "ok sorry",
    "Mathlib/test/on_goal": "ok sorry fail:sorry",
    "Mathlib/test/pickle": "ok sorry open1",
    "Mathlib/test/pickle_2": "open1 open1",
    "Mathlib/test/placeholder_synthesis": "ok lean sorry open1 fail:meta",
    "all_tactics-20250622": "ok solved",
    "all_tactics": "ok",
    "app_type_mismatch": "kernel sorry open2 open1 fail:meta",
    "app_type_mismatch2": "kernel sorry open2 open1 fail:kernel fail:sorry repl",
    "assumption_proof": "sorry solved",
    "by_cases": "sorry open2 open1 fail:sorry",
    "calc": "sorry",
    "def_eval": "ok ok",
    "dup_msg": "ok ok lean",
    "dup_sorries": "sorry sorry",
    "file": "ok",
    "file2": "ok",
    "file_env": "ok ok ok",
    "have_by_sorry": "incomplete+sorry sorry fail:sorry",
    "import_lean": "ok",
    "incomplete": "incomplete incomplete",
    "infotree": "ok",
    "infotree_theorem": "ok",
    "invalid_line_break": "lean lean",
    "invalid_tactic": "sorry fail:error",
    "line_breaks": "incomplete+lean sorry ok",
    "name_generator": "sorry fail:sorry fail:meta fail:meta fail:meta fail:meta fail:meta fail:error fail:error",
    "no_goal_sorry": "lean+lean",
    "no_goal_sorry_2": "lean+sorry",
    "options": "ok ok ok",
    "pickle_environment": "ok ok ok ok",
    "pickle_environment_with_imports": "ok ok ok ok ok",
    "pickle_open": "ok ok ok ok",
    "pickle_open_2": "ok ok",
    "pickle_open_scoped": "ok ok sorry ok",
    "pickle_open_scoped_2": "ok sorry",
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
    "synthesize_placeholder": "lean",
    "tactic_mode_sorry": "sorry fail:sorry",
    "tactic_sorry": "sorry",
    "term_sorry": "sorry",
    "trace_simp": "ok ok ok ok sorry open1 solved ok",
    "unfinished_tactic_block": "incomplete",
    "unknown_environment": "repl",
    "unknown_proof_state": "sorry repl",
    "unknown_tactic": "sorry repl",
    "variables": "ok ok sorry",
}


def test_every_pair_is_in_the_table() -> None:
    names = {p.relative_to(TRANSCRIPTS).as_posix()[: -len(".in")] for p in pairs()}
    assert len(names) == 71
    assert names == set(EXPECTED)


@pytest.mark.parametrize("inp", pairs(), ids=lambda p: p.relative_to(TRANSCRIPTS).as_posix()[: -len(".in")])
def test_transcript_replays_parses_and_judges(inp) -> None:
    name = inp.relative_to(TRANSCRIPTS).as_posix()[: -len(".in")]
    run = run_pair(inp, "v4.33.0-rc2")
    assert run.replayed and run.parsed, run.error  # the replay agreed with every request we sent
    assert run.text == EXPECTED[name]
