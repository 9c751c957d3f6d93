"""kimina's format reward: each rule with an input that trips it, one that does not, and the edges."""

from __future__ import annotations

import pytest

from proofrl.problems import Problem
from proofrl.rewards.format import (
    FormatError,
    FormatRules,
    check_format,
    comment_ratios,
    format_reward,
    strip_comments,
    tactics_match,
)

COQ = Problem("add0", "Theorem add0 : forall n : nat, n + 0 = n.", "Require Import Arith.\n")
LEAN = Problem("t", "theorem t (x : ℝ) (h : 0 < x) :\n    0 < x ^ 2 := by", "import Mathlib\n", "lean")

COQ_CODE = """Theorem add0 : forall n : nat, n + 0 = n.
Proof.
intros n.
induction n as [| k IH].
- reflexivity.
- simpl. rewrite IH. reflexivity.
Qed."""
T1 = "Theorem add0 : forall n : nat, n + 0 = n.\nProof.\nintros n.\ninduction n as [| k IH]."
T2 = "- reflexivity.\n- simpl. rewrite IH. reflexivity.\nQed."

LEAN_CODE = """import Mathlib

theorem t (x : ℝ) (h : 0 < x) :
    0 < x ^ 2 := by
  positivity"""


def answer(think: str, code: str = COQ_CODE, lang: str = "coq", after: str = "") -> str:
    return f"<think>\n{think}\n</think>\n```{lang}\n{code}\n```{after}"


def think(*blocks: str, prose: str = "Induction on n; the step case rewrites with the hypothesis.") -> str:
    parts = [prose]
    for b in blocks:
        parts += [f"```tactics\n{b}\n```", "Then continue."]
    return "\n".join(parts)


GOOD = answer(think(T1, T2))


def test_good_answers_pass() -> None:
    assert check_format(GOOD, COQ) is FormatError.NONE and format_reward(GOOD, COQ) == 1.0
    lean = answer(
        think("theorem t (x : ℝ) (h : 0 < x) :\n    0 < x ^ 2 := by", "import Mathlib\n  positivity"),
        LEAN_CODE,
        "lean4",
    )
    assert check_format(lean, LEAN) is FormatError.NONE
    assert check_format("Some preamble.\n" + GOOD + "\n\n  ", COQ) is FormatError.NONE  # text before, blanks after


@pytest.mark.parametrize("text", ["", "   \n", None])
def test_empty(text) -> None:
    assert check_format(text, COQ) is FormatError.EMPTY and format_reward(text, COQ) == 0.0


def test_code_block_presence_language_and_trailing_text() -> None:
    assert check_format(answer(think(T1, T2), lang="lean4"), COQ) is FormatError.NO_CODE_BLOCK
    assert check_format(GOOD.removesuffix("```"), COQ) is FormatError.NO_CODE_BLOCK  # truncated: never closed
    assert check_format(GOOD + "\nHope this helps.", COQ) is FormatError.TEXT_AFTER_CODE_BLOCK
    assert check_format(GOOD + "\n```tactics\nlia.\n```", COQ) is FormatError.TEXT_AFTER_CODE_BLOCK
    assert check_format(GOOD + "\n```coq\nunclosed", COQ) is FormatError.TEXT_AFTER_CODE_BLOCK
    assert check_format(GOOD, COQ, FormatRules(language="lean4")) is FormatError.NO_CODE_BLOCK


def test_think_block() -> None:
    bare = f"```coq\n{COQ_CODE}\n```"
    assert check_format(bare, COQ) is FormatError.NO_THINK_BLOCK
    assert check_format("<think>a</think>\n" + GOOD, COQ) is FormatError.THINK_BLOCK_COUNT
    assert check_format(GOOD.replace("</think>", ""), COQ) is FormatError.THINK_BLOCK_COUNT
    assert check_format("</think> " + GOOD.replace("</think>", ""), COQ) is FormatError.THINK_BLOCK_COUNT  # wrong order
    custom = GOOD.replace("<think>", "<reason>").replace("</think>", "</reason>")
    assert check_format(custom, COQ, FormatRules(think_open="<reason>", think_close="</reason>")) is FormatError.NONE


def test_exactly_one_code_block_after_think() -> None:
    inside = answer(think(T1, T2) + f"\n```coq\n{COQ_CODE}\n```")
    assert check_format(inside, COQ) is FormatError.CODE_BLOCK_COUNT
    twice = GOOD + f"\n```coq\n{COQ_CODE}\n```"
    assert check_format(twice, COQ) is FormatError.CODE_BLOCK_COUNT
    before = f"```coq\n{COQ_CODE}\n```\n" + GOOD  # a code block before <think> is not counted (kimina)
    assert check_format(before, COQ) is FormatError.NONE


def test_generation_repeats_edges() -> None:
    ten = "alpha beta gamma delta epsilon zeta eta theta iota kappa"  # 10 content tokens
    nine = "alpha beta gamma delta epsilon zeta eta theta iota the and of"  # 9 content tokens + stop words
    rep = lambda line, n: answer(think(T1, T2, prose="\n".join([line] * n)))  # noqa: E731
    assert check_format(rep(ten, 6), COQ) is FormatError.GENERATION_REPEATS
    assert check_format(rep(ten, 5), COQ) is FormatError.NONE
    assert check_format(rep(nine, 20), COQ) is FormatError.NONE  # not significant
    assert check_format(rep("  " + ten.upper() + "  ", 6), COQ) is FormatError.GENERATION_REPEATS  # case, spaces
    # lines inside tactics blocks are not prose
    assert check_format(answer(think(T1, T2, *[ten] * 6)), COQ) is not FormatError.GENERATION_REPEATS
    assert check_format(rep(ten, 3), COQ, FormatRules(repeat_max_count=3)) is FormatError.GENERATION_REPEATS
    assert check_format(rep(nine, 6), COQ, FormatRules(repeat_min_tokens=9)) is FormatError.GENERATION_REPEATS


def test_tactics_blocks_count_and_malformed() -> None:
    assert check_format(answer(think(T1 + "\n" + T2)), COQ) is FormatError.TOO_FEW_TACTICS_BLOCKS
    assert check_format(answer(think()), COQ) is FormatError.TOO_FEW_TACTICS_BLOCKS
    one = FormatRules(min_tactics_blocks=1)
    assert check_format(answer(think(T1 + "\n" + T2)), COQ, one) is FormatError.TACTICS_BLOCK_TOO_LONG  # 7 > 6 lines
    assert (
        check_format(answer(think(T1 + "\n" + T2)), COQ, FormatRules(min_tactics_blocks=1, tactics_lines_ratio=None))
        is FormatError.NONE
    )
    assert check_format(answer(think()), COQ, FormatRules(min_tactics_blocks=0)) is FormatError.NONE
    unclosed = answer(think(T1, T2) + "\n```tactics\nlia.")
    assert check_format(unclosed, COQ) is FormatError.TACTICS_BLOCK_MALFORMED
    inline = answer(think(T1, T2 + " ```"))
    assert check_format(inline, COQ) is FormatError.TACTICS_BLOCK_MALFORMED
    # a code block opened inside a tactics block ends it; that code block then sits inside the reasoning
    nested = answer(think(T1, T2 + "\n```coq"))
    assert check_format(nested, COQ) is FormatError.CODE_BLOCK_COUNT


def test_tactics_block_length_limit_edges() -> None:
    # final code has 7 lines: limit max(5, int(0.95 * 7) = 6) = 6 lines per tactics block
    six = "\n".join(COQ_CODE.split("\n")[:6])
    seven = COQ_CODE
    assert check_format(answer(think(six, T2)), COQ) is FormatError.NONE
    assert check_format(answer(think(seven, T2)), COQ) is FormatError.TACTICS_BLOCK_TOO_LONG
    # short final code: the floor of 5 lines applies
    short = "Theorem add0 : forall n : nat, n + 0 = n.\nProof. lia. Qed."
    five = "Theorem add0 : forall n : nat, n + 0 = n.\nProof. lia. Qed.\n(* a *)\n(* b *)\n(* c *)"
    assert check_format(answer(think(five, "Proof. lia. Qed."), short), COQ) is FormatError.NONE
    assert (
        check_format(answer(think(five + "\n(* d *)", "Proof. lia. Qed."), short), COQ)
        is FormatError.TACTICS_BLOCK_TOO_LONG
    )
    assert check_format(answer(think(seven, T2)), COQ, FormatRules(tactics_lines_ratio=None)) is FormatError.NONE


def test_tactics_code_match_edges() -> None:
    # 7 final lines; T1 + T2 cover all of them
    assert tactics_match([T1, T2], COQ_CODE, "coq") == 1.0
    partial = "Theorem add0 : forall n : nat, n + 0 = n.\nProof.\nintros n.\ninduction n as [| k IH]."
    assert tactics_match([partial, "- reflexivity."], COQ_CODE, "coq") == pytest.approx(5 / 7)  # 0.714 >= 0.7
    assert check_format(answer(think(partial, "- reflexivity.")), COQ) is FormatError.NONE
    assert tactics_match([partial, "(* reflexivity *)"], COQ_CODE, "coq") == pytest.approx(4 / 7)
    assert check_format(answer(think(partial, "(* nothing *)")), COQ) is FormatError.TACTICS_CODE_MISMATCH
    assert check_format(answer(think(partial, "auto.")), COQ, FormatRules(min_tactics_match=None)) is FormatError.NONE
    assert tactics_match(["  intros n.  "], "intros n.", "coq") == 1.0  # stripped lines
    assert tactics_match(["x"], "(* only a comment *)", "coq") == 0.0


def test_forbidden_keywords_whole_words() -> None:
    axiom = COQ_CODE.replace("Proof.", "Proof.\n(* Axiom in a comment is fine *)")
    assert check_format(answer(think(T1, T2), axiom), COQ) is FormatError.NONE
    sneaky = "Axiom cheat : forall n : nat, n + 0 = n.\n" + COQ_CODE
    t = answer(think("Axiom cheat : forall n : nat, n + 0 = n.\n" + T1, T2), sneaky)
    assert check_format(t, COQ) is FormatError.FORBIDDEN_KEYWORD
    assert check_format(t, COQ, FormatRules(forbidden_keywords=())) is FormatError.NONE
    lean_ax = LEAN_CODE.replace("import Mathlib\n", "import Mathlib\naxiom cheat : False\n")
    lean = answer(think(lean_ax.rsplit("\n", 1)[0], "  positivity"), lean_ax, "lean4")
    assert check_format(lean, LEAN) is FormatError.FORBIDDEN_KEYWORD
    fine = LEAN_CODE.replace("positivity", "exact axiomatic_lemma h -- axiom here is a comment")
    assert check_format(answer(think(fine), fine, "lean4"), LEAN, FormatRules(min_tactics_blocks=0)) is FormatError.NONE


def test_statement_must_appear() -> None:
    changed = COQ_CODE.replace("n + 0 = n", "0 + n = n")
    t = answer(think(changed.split("\n- ")[0], T2.replace("n + 0", "0 + n")), changed)
    assert check_format(t, COQ) is FormatError.STATEMENT_MISSING
    assert check_format(t, COQ, FormatRules(require_statement=False)) is FormatError.NONE
    spaced = COQ_CODE.replace("forall n : nat,", "forall  n : nat,\n   ")  # whitespace does not matter
    assert check_format(answer(think(T1, T2), spaced), COQ, FormatRules(min_tactics_match=None)) is FormatError.NONE
    # a Lean statement given with `:= by sorry` still matches a real proof
    sorry = Problem("t", "theorem t (x : ℝ) (h : 0 < x) :\n    0 < x ^ 2 := by sorry", "import Mathlib\n", "lean")
    lean = answer(
        think("theorem t (x : ℝ) (h : 0 < x) :\n    0 < x ^ 2 := by", "import Mathlib\n  positivity"),
        LEAN_CODE,
        "lean4",
    )
    assert check_format(lean, sorry) is FormatError.NONE


def test_comment_ratio_rules_are_off_by_default_and_work_when_set() -> None:
    noisy_code = COQ_CODE.replace("Qed.", "(* c1 *)\n(* c2 *)\n(* c3 *)\nQed.")
    t = answer(think(T1, T2, "(* c1 *)\n(* c2 *)\n(* c3 *)"), noisy_code)
    assert check_format(t, COQ) is FormatError.NONE
    # after the statement: 6 code lines, 3 comment-only lines (0.5)
    assert check_format(t, COQ, FormatRules(code_comment_lines_ratio=0.4)) is FormatError.CODE_TOO_MANY_COMMENT_LINES
    assert check_format(t, COQ, FormatRules(code_comment_chars_ratio=0.1)) is FormatError.CODE_TOO_MANY_COMMENT_CHARS
    assert (
        check_format(t, COQ, FormatRules(tactics_comment_lines_ratio=0.5)) is FormatError.TACTICS_TOO_MANY_COMMENT_LINES
    )
    assert (
        check_format(t, COQ, FormatRules(tactics_comment_chars_ratio=0.5)) is FormatError.TACTICS_TOO_MANY_COMMENT_CHARS
    )
    assert check_format(t, COQ, FormatRules(code_comment_lines_ratio=0.5)) is FormatError.NONE  # 0.5 is not above 0.5


def test_comment_helpers() -> None:
    assert strip_comments("a (* b (* nested *) c *) d", "coq") == "a  d"
    assert strip_comments("a /- b /- nested -/ c -/ d -- e\nf", "lean") == "a  d \nf"
    assert strip_comments("x (* one\ntwo *) y", "coq") == "x \n y"  # line structure kept
    lines, chars = comment_ratios("tac.\n(* only comment *)\n\ntac2.", "coq")
    assert lines == pytest.approx(0.5, rel=1e-4) and chars == pytest.approx(18 / 12, rel=1e-4)


def test_rules_validation() -> None:
    for bad in (
        {"repeat_min_tokens": 0},
        {"repeat_max_count": 1},
        {"min_tactics_blocks": -1},
        {"think_open": ""},
        {"forbidden_keywords": "axiom"},
    ):
        with pytest.raises(ValueError):
            FormatRules(**bad)
    assert {e.value for e in FormatError} >= {"none", "generation_repeats", "tactics_code_mismatch"}
