"""The REPL session's framing and failure modes, through the replay process over real pipes, plus the pure
pieces (models, goal parser, header split, text rules)."""

from __future__ import annotations

import json
import os
import time

import pytest
from lean_replay_support import TRANSCRIPTS, needs_transcripts, recorded, replay_config

from proofrl.errors import ProtocolError, ProverCrashed, ProverTimeout
from proofrl.provers.base import Goal, Hypothesis
from proofrl.provers.lean import LeanSession
from proofrl.provers.lean.header import blank_comments_and_strings, normalise_header, split_header
from proofrl.provers.lean.models import CommandResponse, ProofStepResponse, parse_goal, parse_response
from proofrl.provers.lean.rules import find_statement, forbidden_words, meaning_changers, parse_axioms
from proofrl.provers.lean.session import encode_request


# -- framing ----------------------------------------------------------------------------------------------
def test_request_is_one_line_then_a_blank_line() -> None:
    raw = encode_request({"cmd": "theorem foo : 1 = 1 := by\nsorry\r\n\n"})
    assert raw.count(b"\n") == 2 and raw.endswith(b"}\n\n")


@needs_transcripts
def test_raw_newline_in_code_reaches_lean_as_a_newline() -> None:
    # line_breaks.in request 1 is the code with an *escaped* newline; real Lean answered with two lines of
    # messages (line 2 holds `sorry`). We send the code with a raw newline: if our framing glued it to
    # "bysorry" (what invalid_line_break.in shows happens), the replay would see a different request.
    inp = TRANSCRIPTS / "line_breaks.in"
    with LeanSession(replay_config(inp)) as s:
        resp = s.command("theorem foo : 1 = 1 := by\nsorry", timeout=10)
    assert isinstance(resp, CommandResponse)
    assert [(m.pos.line, m.data.split("\n")[0]) for m in resp.messages] == [
        (1, "unsolved goals"),
        (2, "unexpected token 'sorry'; expected command"),
    ]


@needs_transcripts
def test_glued_newline_is_what_the_recording_of_a_raw_newline_shows() -> None:
    # invalid_line_break.in was recorded by piping a raw newline: the REPL glued the lines.
    req, _ = recorded("invalid_line_break", 1)
    assert req == {"cmd": "theorem foo : 1 = 1 := bysorry"}
    with LeanSession(replay_config(TRANSCRIPTS / "invalid_line_break.in")) as s, pytest.raises(ProverCrashed) as e:
        s.command("theorem foo : 1 = 1 := by\nsorry", timeout=10)  # ours keeps the newline: not that request
    assert "differs" in e.value.stderr and "by\\nsorry" in e.value.stderr


@needs_transcripts
def test_unicode_survives_both_directions() -> None:
    with LeanSession(replay_config(TRANSCRIPTS / "readme.in")) as s:
        resp = s.command("def f (x : Unit) : Nat := by sorry", timeout=10)
    assert resp.sorries[0].goal == "x : Unit\n⊢ Nat"


# -- failures ---------------------------------------------------------------------------------------------
@needs_transcripts
def test_crash_is_eof_with_stderr_attached() -> None:
    s = LeanSession(replay_config(TRANSCRIPTS / "readme.in", "--crash-at", "2"))
    s.command("def f (x : Unit) : Nat := by sorry", timeout=10)
    with pytest.raises(ProverCrashed) as e:
        s.tactic(0, "apply Int.natAbs", timeout=10)
    assert "uncaught exception" in e.value.stderr and e.value.returncode == 1
    assert not s.alive
    with pytest.raises(ProverCrashed):
        s.tactic(1, "exact -37", timeout=10)


@needs_transcripts
def test_undecodable_output_is_a_crash() -> None:
    s = LeanSession(replay_config(TRANSCRIPTS / "readme.in", "--garbage-at", "1"))
    with pytest.raises(ProverCrashed, match="not JSON"):
        s.command("def f (x : Unit) : Nat := by sorry", timeout=10)
    assert not s.alive


@needs_transcripts
def test_hanging_request_times_out_and_kills_the_group() -> None:
    s = LeanSession(replay_config(TRANSCRIPTS / "readme.in", "--hang-at", "2"))
    s.command("def f (x : Unit) : Nat := by sorry", timeout=10)
    t0 = time.monotonic()
    with pytest.raises(ProverTimeout):
        s.tactic(0, "apply Int.natAbs", timeout=0.5)
    assert time.monotonic() - t0 < 3
    assert not s.alive
    with pytest.raises(ProcessLookupError):
        os.kill(s.pid, 0)


@needs_transcripts
def test_extra_blank_line_crashes_like_the_repl() -> None:
    s = LeanSession(replay_config(TRANSCRIPTS / "readme.in"))
    s._proc.write(b"\n")  # an empty query: the REPL throws a JSON parse error and exits
    with pytest.raises(ProverCrashed) as e:
        s.command("def f (x : Unit) : Nat := by sorry", timeout=10)
    assert "Could not parse JSON" in e.value.stderr


def test_close_ends_the_process_at_eof(tmp_path) -> None:
    inp = tmp_path / "empty.in"
    inp.write_text("")
    (tmp_path / "empty.expected.out").write_text("")
    s = LeanSession(replay_config(inp))
    s.close()
    assert s._proc.proc.returncode == 0 and not s.alive


# -- models -----------------------------------------------------------------------------------------------
def test_models_are_strict() -> None:
    with pytest.raises(ProtocolError):
        parse_response({"env": 0, "surprise": 1})
    with pytest.raises(ProtocolError):
        parse_response({"proofState": "1", "goals": [], "proofStatus": "Completed"})
    with pytest.raises(ProtocolError):
        parse_response([1, 2])
    r = parse_response({"proofStatus": "Completed", "proofState": 2, "goals": []})
    assert r == ProofStepResponse(2, (), "Completed")


@needs_transcripts
def test_null_end_pos_of_older_repls_is_accepted() -> None:
    _, block = recorded("readme", 1)
    d = json.loads(block)
    d["messages"][0]["endPos"] = None
    assert parse_response(d).messages[0].end_pos is None


def test_goal_parser_keeps_case_names_groups_lets_and_wrapped_types() -> None:
    g = parse_goal("case succ\nn✝ m : Nat\nx : Nat := 3\nh : ∀ (a : Nat),\n    a = a\n⊢ n✝ + 1 = 0")
    assert g == Goal(
        (Hypothesis(("n✝", "m"), "Nat"), Hypothesis(("x",), "Nat", "3"), Hypothesis(("h",), "∀ (a : Nat),\n    a = a")),
        "n✝ + 1 = 0",
        "succ",
    )
    assert parse_goal("⊢ 1 = 1") == Goal((), "1 = 1")
    with pytest.raises(ProtocolError):
        parse_goal("x : Nat")


# -- header and text rules -----------------------------------------------------------------------------------
def test_header_split_and_normalise() -> None:
    code = (
        "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real\n\ntheorem t : 1 = "
        "1 := rfl\n"
    )
    s = split_header(code)
    assert s.header_lines == (
        "import Mathlib",
        "import Aesop",
        "set_option maxHeartbeats 400000",
        "open BigOperators Real",
    )
    assert s.line_count == 7 and s.body.startswith("theorem t")
    assert normalise_header("open Real\nimport Mathlib\nimport  Mathlib\n") == "import Mathlib\nopen Real"
    assert (
        normalise_header("import Mathlib.Data.Nat\nimport Mathlib.Tactic\nopen Real", collapse_mathlib=True)
        == "import Mathlib\nopen Real"
    )
    assert split_header("open Nat in\ntheorem t : True := trivial").header_lines == ()


def test_blanking_keeps_positions() -> None:
    code = 'a -- sorry\n/- admit /- nested -/ still -/ b "sorry\\"" c \'x\' d'
    out = blank_comments_and_strings(code)
    assert len(out) == len(code) and out.count("\n") == 1
    assert out.split() == ["a", "b", "c", "d"]


def test_forbidden_words_skip_comments_strings_and_qualified_names() -> None:
    words = ("sorry", "admit", "native_decide")
    assert forbidden_words("by\n  simp -- sorry\n  exact List.head? l", words) == ()
    assert forbidden_words("by\n  exact?", words) == ("exact?",)
    assert forbidden_words("by first | admit | native_decide", words) == ("admit", "native_decide")
    assert forbidden_words("sorry_free_lemma x", words) == ()


def test_statement_search_is_whitespace_insensitive_and_ignores_comments() -> None:
    st = "theorem t (n : Nat) :\n    n + 0 = n := by"
    assert find_statement("lemma h : True := trivial\ntheorem t (n : Nat) : n + 0 = n := by\n  simp", st) == (26, 63)
    assert find_statement("-- theorem t (n : Nat) : n + 0 = n := by\ntheorem t : True := trivial", st) is None
    assert meaning_changers("instance : Add Nat := ⟨fun _ _ => 0⟩\n") == ("instance",)
    assert meaning_changers("lemma h : True := trivial -- open Real\n") == ()


def test_axiom_lines() -> None:
    assert parse_axioms("'t' depends on axioms: [propext,\n Classical.choice, Quot.sound]") == (
        "propext",
        "Classical.choice",
        "Quot.sound",
    )
    assert parse_axioms("'t' does not depend on any axioms") == ()
    assert parse_axioms("t : 1 = 1") is None


@needs_transcripts
@pytest.mark.parametrize("spelling", ["declaration uses `sorry`", "declaration uses 'sorry'"])
def test_sorry_warning_alone_rejects_in_both_spellings(spelling) -> None:
    # what `admit` looks like to a client (kimina#75): the warning without a `sorries` entry
    from proofrl.provers.base import Status
    from proofrl.provers.lean.rules import judge_command

    _, block = recorded("readme", 1)
    d = json.loads(block)
    del d["sorries"]
    d["messages"][0]["data"] = spelling
    j = judge_command(parse_response(d))
    assert (j.status, j.reasons) == (Status.REJECTED, ("sorry",))


def test_a_response_over_the_cap_kills_the_session_instead_of_growing_without_bound(monkeypatch, tmp_path):
    """Read with the end marker and a cap: a flood is OutputTooLarge and the process is gone."""
    import sys

    from proofrl.errors import OutputTooLarge
    from proofrl.provers.lean import session as lean_session
    from proofrl.provers.lean.config import LeanConfig

    monkeypatch.setattr(lean_session, "MAX_RESPONSE_BYTES", 1 << 16)
    flood = tmp_path / "flood.py"  # a REPL stand-in that answers one request with 1 MiB and no blank line
    flood.write_text(
        "import sys, time\nsys.stdin.readline()\nsys.stdout.write('x' * (1 << 20))\nsys.stdout.flush()\n"
        "time.sleep(30)\n"
    )
    s = LeanSession(LeanConfig(command=(sys.executable, str(flood)), memory_mb=None))
    with pytest.raises(OutputTooLarge):
        s.send({"cmd": "x"}, timeout=20)
    assert not s.alive
