"""kimina's error-correction turn over real Coq verdicts: feedback text, goals, second-turn prompts, the cache."""

from __future__ import annotations

import threading

import pytest
from conftest import requires_coq

from proofrl.policy.correction import (
    CorrectionCache,
    build_feedback,
    goals_before_errors,
    prompt_tokens_ok,
    second_turn_prompt,
)
from proofrl.problems import Problem
from proofrl.provers.base import Message, Position, Status, Verdict
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig

P = Problem("t", "Theorem t : forall n : nat, n + 0 = n /\\ True.", "Require Import Arith Lia.\n")
LINE2 = "Proof.\n  intros n. rewrite foo.\n  split.\nQed."
LINE4 = "intros n.\nsplit.\n- lia.\n- exact 0.\n"
LINE5_RESTATED = (
    "Theorem t : forall n : nat, n + 0 = n /\\ True.\nProof.\n  intros n.\n  split.\n  - exact I.\n  - exact I.\nQed."
)
INCOMPLETE = "Proof. intros n. split.\nQed."
LOOP = "Proof.\n  intros n.\n  repeat (assert True by exact I).\nQed."


@pytest.fixture(scope="module")
def pool():
    if requires_coq.args[0]:
        pytest.skip("Coq not installed")
    p = make_pool("coq", pool=PoolConfig(workers=1, timeout=10))
    yield p
    p.close()


@requires_coq
def test_error_on_line_2_with_goals_and_numbered_snippet(pool) -> None:
    v = pool.check(P.theorem, LINE2)
    goals = goals_before_errors(pool, P, LINE2, v)
    assert goals == ["n : nat\n⊢ n + 0 = n /\\ True"]
    assert build_feedback(LINE2, v, goals_before=goals) == (
        "# Error 1:\n"
        "Goals state before error position:\nn : nat\n⊢ n + 0 = n /\\ True\n\n"
        "Error message:\nThe reference foo was not found in the current environment.\n\n"
        "Coq code snippet with error:\n```coq\n"
        "001  | Proof.\n"
        "002 >|   intros n. rewrite foo.\n"
        "003  |   split.\n"
        "004  | Qed.\n"
        "```\n"
    )


@requires_coq
def test_error_on_line_4_goal_is_the_focused_bullet(pool) -> None:
    v = pool.check(P.theorem, LINE4)
    assert v.messages[0].start.line == 4  # positions are the proof's own lines
    goals = goals_before_errors(pool, P, LINE4, v)
    assert goals == ["n : nat\n⊢ True"]  # after `- lia.` and the second bullet
    fb = build_feedback(LINE4, v, goals_before=goals)
    assert "002  | split.\n003  | - lia.\n004 >| - exact 0.\n005  | \n```" in fb
    assert "001" not in fb  # ±2 lines only


@requires_coq
def test_restated_statement_is_skipped_and_context_is_clipped(pool) -> None:
    v = pool.check(P.theorem, LINE5_RESTATED)
    assert v.messages[0].start.line == 5
    goals = goals_before_errors(pool, P, LINE5_RESTATED, v)
    assert goals == ["n : nat\n⊢ n + 0 = n"]
    fb = build_feedback(LINE5_RESTATED, v, goals_before=goals, context_lines=1)
    assert "004  |   split.\n005 >|   - exact I.\n006  |   - exact I.\n```" in fb
    assert "003" not in fb and "007" not in fb
    last = build_feedback(
        "Proof.\n  intros n.\n  exact 0.", Verdict(Status.ERROR, messages=(Message("error", "x", Position(3, 2)),))
    )
    assert "001  | Proof.\n002  |   intros n.\n003 >|   exact 0.\n```" in last  # nothing after the last line


@requires_coq
def test_system_error_for_incomplete_proof_lists_open_goals(pool) -> None:
    v = pool.check(P.theorem, INCOMPLETE)
    assert v.status is Status.REJECTED and not [m for m in v.messages if m.severity == "error"]
    assert goals_before_errors(pool, P, INCOMPLETE, v) == []
    assert build_feedback(INCOMPLETE, v) == (
        "# System Error:\nError message:\nrejected: incomplete: 2 focused, 0 unfocused, 0 shelved, 0 given up\n"
        "\nUnsolved goals:\nn : nat\n⊢ n + 0 = n\n\nn : nat\n⊢ True\n"
    )


@requires_coq
def test_coq_timeout_is_located_so_it_gets_an_error_section(pool) -> None:
    v = pool.check(P.theorem, LOOP, timeout=2)
    assert v.status is Status.TIMEOUT
    fb = build_feedback(LOOP, v)
    assert fb.startswith("# Error 1:\nError message:\nTimeout!") and "003 >|   repeat (assert True by exact I)." in fb


def test_system_error_for_timeouts_and_admitted_without_messages() -> None:
    assert build_feedback("Proof. auto. Qed.", Verdict(Status.TIMEOUT, ("timeout after 60s",))) == (
        "# System Error:\nError message:\ntimeout: timeout after 60s\n"
    )
    assert (
        build_feedback("x", Verdict(Status.REJECTED, ("admitted",)))
        == "# System Error:\nError message:\nrejected: admitted\n"
    )
    assert build_feedback("x", Verdict(Status.CRASH)) == "# System Error:\nError message:\ncrash: not accepted\n"


def test_at_most_three_errors_and_lean_snippets() -> None:
    """Lean reports several errors per proof (Coq stops at the first); only the first 3 are shown."""
    proof = "\n".join(f"  tac{i}" for i in range(1, 8))
    msgs = (*(Message("error", f"e{i}", Position(i, 2)) for i in range(1, 6)), Message("warning", "w", Position(1, 0)))
    v = Verdict(Status.ERROR, ("e1",), msgs, prover="lean 4.9 (repl)")
    fb = build_feedback(proof, v, goals_before=["⊢ a", None])
    assert [line for line in fb.split("\n") if line.startswith("# Error")] == ["# Error 1:", "# Error 2:", "# Error 3:"]
    assert "e4" not in fb and "\nw\n" not in fb
    assert fb.count("Goals state before error position:") == 1 and "⊢ a" in fb
    assert fb.count("Lean 4 code snippet with error:\n```lean4\n") == 3
    assert "003 >|   tac3\n004  |   tac4\n005  |   tac5" in fb
    assert build_feedback(proof, v, max_errors=1).count("# Error") == 1


def test_too_long_feedback_is_dropped_not_cut() -> None:
    v = Verdict(Status.ERROR, ("x",), (Message("error", "y" * 100, None),))
    text = build_feedback("p", v)
    assert text == "# Error 1:\nError message:\n" + "y" * 100 + "\n\n"
    assert build_feedback("p", v, max_chars=len(text)) == text
    assert build_feedback("p", v, max_chars=len(text) - 1) is None
    huge = Verdict(Status.ERROR, ("x",), (Message("error", "z" * 3000, Position(1, 0)),))
    assert build_feedback("p", huge) is None  # over kimina's 3000 characters


def test_valid_and_positionless_errors() -> None:
    assert build_feedback("p", Verdict(Status.VALID)) is None
    out_of_range = Verdict(Status.ERROR, ("x",), (Message("error", "far", Position(9, 0)),))
    assert "snippet" not in build_feedback("one line", out_of_range)


@requires_coq
def test_goals_none_where_unreachable(pool) -> None:
    v = pool.check(P.theorem, LINE2)
    assert goals_before_errors(pool, P, LINE2, Verdict(Status.ERROR, messages=(Message("error", "no position"),))) == [
        None
    ]
    assert goals_before_errors(pool, P, LINE2, v, timeout=0.0) == [None]  # no time to step
    lean = Problem("l", "theorem l : True := by", "", "lean")
    assert goals_before_errors(
        pool, lean, "trivial", Verdict(Status.ERROR, messages=(Message("error", "x", Position(1, 0)),))
    ) == [None]
    assert goals_before_errors(
        pool, P, "(* unclosed", Verdict(Status.ERROR, messages=(Message("error", "x", Position(1, 0)),))
    ) == [None]
    bad = Problem("b", "Theorem b : nat_that_does_not_exist.", "Require Import Arith.\n")
    assert goals_before_errors(
        pool, bad, "exact 0.", Verdict(Status.ERROR, messages=(Message("error", "x", Position(1, 0)),))
    ) == [None]


# -- second turn ----------------------------------------------------------------------------------------
def test_chat_second_turn() -> None:
    first = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    out = second_turn_prompt(first, "<think>…</think>```coq\nbad\n```", "# Error 1:\n…")
    assert out == [
        *first,
        {"role": "assistant", "content": "<think>…</think>```coq\nbad\n```"},
        {"role": "user", "content": "# Error 1:\n…"},
    ]
    out[0]["content"] = "changed"
    assert first[0]["content"] == "S"  # the first prompt is not aliased
    with pytest.raises(TypeError, match="list of"):
        second_turn_prompt([{"content": "no role"}], "c", "f")


def test_plain_second_turn_reopens_the_code_block() -> None:
    first = "Complete the following Lean 4 code:\n\n```lean4\nimport Mathlib\ntheorem t : 1 = 1 := by\n"
    out = second_turn_prompt(first, "  simp [foo]", "# Error 1:\nError message:\nunknown foo\n")
    assert out == (
        first + "  simp [foo]\n```"
        "\n\nThe proof above was not accepted. The proof assistant reported:\n\n"
        "# Error 1:\nError message:\nunknown foo\n"
        "\nWrite a corrected proof.\n\n"
        "```lean4\nimport Mathlib\ntheorem t : 1 = 1 := by\n"
    )
    closed = second_turn_prompt(first, "  simp\n```", "fb")  # a completion that kept its closing fence
    assert closed.startswith(first + "  simp\n```\n\nThe proof above") and closed.endswith(
        "```lean4\nimport Mathlib\ntheorem t : 1 = 1 := by\n"
    )
    no_block = second_turn_prompt("Prove t.\n", "Proof. auto. Qed.", "fb")
    assert no_block.endswith("fb\n\nWrite a corrected proof.\n\n")


def test_prompt_tokens_ok_with_a_real_tokenizer() -> None:
    from proofrl.policy.tiny import train_tokenizer

    tok = train_tokenizer(
        ["intros n. split. lia. exact I. Qed. Proof. The proof above was not accepted."] * 5, 300, 4096
    )
    text = "intros n. split. lia." * 3
    n = len(tok(text, add_special_tokens=True)["input_ids"])
    assert prompt_tokens_ok(text, tok, n) and not prompt_tokens_ok(text, tok, n - 1)
    chat = [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "Qed."},
        {"role": "user", "content": "fb"},
    ]
    ids = tok.apply_chat_template(chat, tokenize=True, add_generation_prompt=True)
    m = len(ids["input_ids"] if hasattr(ids, "keys") else ids)
    assert m > n and prompt_tokens_ok(chat, tok, m) and not prompt_tokens_ok(chat, tok, m - 1)


# -- the cache ------------------------------------------------------------------------------------------
def test_cache_keeps_the_last_items() -> None:
    c: CorrectionCache[int] = CorrectionCache(max_size=3, rate=1.0)
    for i in range(5):
        c.add(i)
    assert len(c) == 3 and set(c.mix([-1] * 50, 50)) == {2, 3, 4}


def test_cache_mix_rates_and_order() -> None:
    fresh = list(range(100, 110))
    empty: CorrectionCache[int] = CorrectionCache(rate=1.0)
    assert empty.mix(fresh, 10) == fresh  # nothing cached: all fresh, in order
    never: CorrectionCache[int] = CorrectionCache(rate=0.0)
    never.add(1)
    assert never.mix(fresh, 4) == fresh[:4]
    half: CorrectionCache[int] = CorrectionCache(rate=0.5, seed=7)
    for i in range(10):
        half.add(i)
    batch = half.mix(list(range(100, 4100)), 4000)
    from_cache = sum(x < 100 for x in batch)
    assert 1850 < from_cache < 2150  # 0.5 ± 3.9 sigma
    assert [x for x in batch if x >= 100] == list(range(100, 100 + 4000 - from_cache))  # fresh in order
    again: CorrectionCache[int] = CorrectionCache(rate=0.5, seed=7)
    for i in range(10):
        again.add(i)
    assert again.mix(list(range(100, 4100)), 4000) == batch  # seeded


def test_cache_errors_state_and_threads() -> None:
    c: CorrectionCache[int] = CorrectionCache(max_size=100, rate=0.5, seed=1)
    with pytest.raises(ValueError, match="k <= len"):
        c.mix([1, 2], 3)
    for bad in ({"max_size": 0}, {"rate": 1.5}):
        with pytest.raises(ValueError):
            CorrectionCache(**bad)
    threads = [threading.Thread(target=lambda b=b: [c.add(b * 1000 + i) for i in range(500)]) for b in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(c) == 100
    state = c.state_dict()
    d: CorrectionCache[int] = CorrectionCache(max_size=100, rate=0.5)
    d.load_state_dict(state)
    assert d.mix(list(range(-50, 0)), 50) == c.mix(list(range(-50, 0)), 50)  # resumes identically
