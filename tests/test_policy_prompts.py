"""Prompt formats: exact prompt text, extraction rules, and extracted proofs judged by a real Coq pool (and
accepted by the Lean assembler, since no Lean runs here)."""

from __future__ import annotations

import pytest
from conftest import requires_coq

from proofrl.errors import ConfigError
from proofrl.policy import FORMATS, build_tiny_model, get_format, load_policy
from proofrl.policy.prompts import informal_text
from proofrl.problems import Problem
from proofrl.provers.base import Status, Verdict
from proofrl.provers.factory import make_pool
from proofrl.provers.lean.config import LeanConfig
from proofrl.provers.lean.prover import assemble
from proofrl.provers.pool import PoolConfig

LEAN_HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"
)
LEAN = Problem(
    "mathd_algebra_10",
    "theorem mathd_algebra_10 : abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10 := by\n",
    LEAN_HEADER,
    "lean",
    informal_prefix="/-- Find $|0.12 \\cdot 30 - 1.3 \\cdot 20|$. Show that it is 10.-/\n",
)
COQ = Problem(
    "add_zero_r",
    "Theorem add_zero_r : forall n : nat, n + 0 = n.",
    "Require Import Arith Lia.\n",
    "coq",
    proof="Proof.\n  intros n. lia.\nQed.",
)


# -- prompt text ----------------------------------------------------------------------------------------


def test_deepseek_prompts_are_the_papers():
    assert get_format("deepseek-v1.5").prompt(LEAN) == (
        "Complete the following Lean 4 code:\n\n```lean4\n" + LEAN_HEADER + LEAN.informal_prefix + LEAN.formal_statement
    )
    assert get_format("deepseek-v1.5-cot").prompt(LEAN) == (
        "Complete the following Lean 4 code with explanatory comments preceding each line of code:\n\n```lean4\n"
        + LEAN_HEADER
        + LEAN.informal_prefix
        + LEAN.formal_statement
    )


def test_coq_prompts_end_inside_the_proof():
    assert get_format("coq").prompt(COQ) == (
        "Complete the following Coq proof:\n\n```coq\nRequire Import Arith Lia.\n"
        "Theorem add_zero_r : forall n : nat, n + 0 = n.\nProof.\n"
    )
    assert (
        get_format("coq-cot")
        .prompt(COQ)
        .startswith("Complete the following Coq proof with explanatory comments preceding each tactic:\n\n```coq\n")
    )
    no_header = Problem("t", "Theorem t : True.", "", "coq")
    assert get_format("coq").prompt(no_header).endswith("```coq\nTheorem t : True.\nProof.\n")


def test_kimina_messages_are_the_recipes():
    msgs = get_format("kimina").messages(LEAN)
    assert msgs == [
        {"role": "system", "content": "You are an expert in mathematics and proving theorems in Lean 4."},
        {
            "role": "user",
            "content": "Think about and solve the following problems step by step in Lean 4.\n\n"
            "# Problem:\nFind $|0.12 \\cdot 30 - 1.3 \\cdot 20|$. Show that it is 10.\n\n"
            "# Formal Statement:\n```lean4\n" + LEAN_HEADER + LEAN.formal_statement + "```\n",
        },
    ]
    coq_user = get_format("kimina-coq").messages(COQ)[1]["content"]
    assert coq_user == (
        "Think about and solve the following problems step by step in Coq.\n\n# Formal Statement:\n"
        "```coq\nRequire Import Arith Lia.\nTheorem add_zero_r : forall n : nat, n + 0 = n.\n```\n"
    )
    assert get_format("kimina-coq").messages(COQ)[0]["content"].endswith("theorems in Coq.")
    assert get_format("coq").messages(COQ) is None


def test_chat_prompt_uses_the_tokenizers_template_else_chatml(tmp_path):
    fmt = get_format("kimina")
    _, tok = load_policy(build_tiny_model(tmp_path, ["Theorem t : True. Proof. exact I. Qed."] * 5, vocab_size=300))
    with_template = fmt.prompt(LEAN, tok)
    assert with_template == tok.apply_chat_template(fmt.messages(LEAN), tokenize=False, add_generation_prompt=True)
    assert fmt.prompt(LEAN) == with_template  # the fallback is ChatML, the tiny model's template too
    assert with_template.startswith("<|im_start|>system\nYou are an expert") and with_template.endswith(
        "<|im_start|>assistant\n"
    )


def test_informal_text_drops_the_doc_comment_markers():
    assert informal_text(LEAN) == "Find $|0.12 \\cdot 30 - 1.3 \\cdot 20|$. Show that it is 10."
    assert (
        informal_text(Problem("x", "theorem x : True := by\n", backend="lean", extra={"informal": " Plain. "}))
        == "Plain."
    )
    assert informal_text(COQ) == ""


def test_format_registry_and_backend_mismatch():
    assert set(FORMATS) == {"deepseek-v1.5", "deepseek-v1.5-cot", "kimina", "coq", "coq-cot", "kimina-coq"}
    assert {f.name: f.stop for f in FORMATS.values()}["coq"] == ("```",)
    with pytest.raises(ConfigError, match=r"unknown prompt format 'lean'.*'deepseek-v1.5'"):
        get_format("lean")
    with pytest.raises(ValueError, match="for coq problems"):
        get_format("coq").prompt(LEAN)
    with pytest.raises(ValueError, match="for lean problems"):
        get_format("kimina").extract(COQ, "")


# -- extraction rules -----------------------------------------------------------------------------------


def test_completion_formats_cut_at_the_first_fence():
    fmt = get_format("deepseek-v1.5")
    got = fmt.extract(LEAN, "  norm_num [abs_of_nonneg]\n```\nSome chatter\n```lean4\nmore\n```")
    assert got == LEAN.formal_statement + "  norm_num [abs_of_nonneg]\n"
    assert fmt.extract(LEAN, "  simp") == LEAN.formal_statement + "  simp"  # cut by length: kept as it is
    assert fmt.extract(LEAN, "\n```") is None and fmt.extract(LEAN, "") is None


def test_coq_completion_also_cut_after_qed():
    fmt = get_format("coq")
    got = fmt.extract(COQ, "  intros n. lia.\nQed.\n\nTheorem extra : True.\nProof. exact I. Qed.\n```")
    assert got == "Theorem add_zero_r : forall n : nat, n + 0 = n.\nProof.\n  intros n. lia.\nQed."
    assert fmt.extract(COQ, "  (* Qed. is in a comment *) exact I.\nDefined.").endswith("exact I.\nDefined.")
    assert fmt.extract(COQ, "  lia. Admitted.\nQed.").endswith("lia. Admitted.")  # the prover refuses it
    assert fmt.extract(COQ, '  idtac "Qed. ""Qed."" (*".\n  lia.\nQed. x').endswith('(*".\n  lia.\nQed.')
    assert get_format("coq").completion(COQ, "Proof. (* not Qed. *) lia.").endswith("lia.\nQed.\n```")


def test_kimina_takes_the_last_block_after_think():
    fmt = get_format("kimina")
    code = LEAN.formal_statement + "  norm_num\n"
    text = f"<think>\nTry:\n```lean4\nwrong\n```\n</think>\nFirst\n```lean4\nfirst\n```\nthen\n```lean4\n{code}```\n"
    assert fmt.extract(LEAN, text) == code
    assert fmt.extract(LEAN, "<think>\n```lean4\nonly in thought\n```\n</think>\nnothing") is None
    assert fmt.extract(LEAN, f"no think tags\n```lean4\n{code}```") == code
    assert fmt.extract(LEAN, f"<think>x</think>\n```lean4\n{code}") is None  # unclosed: cut by length
    assert fmt.extract(LEAN, "<think>x</think>\n```coq\nTheorem t : True.\n```") is None  # wrong language


def test_kimina_coq_drops_repeated_header_lines():
    got = get_format("kimina-coq").extract(
        COQ,
        "<think>\n</think>\n```coq\nRequire Import Arith Lia.\n\n"
        "Theorem add_zero_r : forall n : nat, n + 0 = n.\nProof. lia. Qed.\n```",
    )
    assert got == "Theorem add_zero_r : forall n : nat, n + 0 = n.\nProof. lia. Qed.\n"


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_completion_targets_extract_back(name):
    fmt = get_format(name)
    problem, proof = (COQ, COQ.proof) if fmt.backend == "coq" else (LEAN, "norm_num [abs_of_nonneg]")
    completion = fmt.completion(problem, proof, reasoning="Compute both sides.")
    extracted = fmt.extract(problem, completion)
    assert extracted is not None
    if fmt.backend == "coq":
        assert extracted.rstrip().endswith("intros n. lia.\nQed.") and "Require" not in extracted
    else:
        assert extracted.endswith(LEAN.formal_statement + "  norm_num [abs_of_nonneg]\n")


def test_lean_targets_start_a_new_line_after_a_statement_without_one():
    one_line = Problem("t", "theorem t : 1 + 1 = 2 := by", "", "lean")
    for name in ("deepseek-v1.5", "kimina"):
        fmt = get_format(name)
        extracted = fmt.extract(one_line, fmt.completion(one_line, "norm_num"))
        assert extracted == "theorem t : 1 + 1 = 2 := by\n  norm_num\n"


# -- judged by the provers ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["deepseek-v1.5", "deepseek-v1.5-cot", "kimina"])
def test_lean_extractions_are_what_the_lean_backend_accepts(name):
    fmt = get_format(name)
    config = LeanConfig(command=("repl",))
    for completion in (
        fmt.completion(LEAN, "norm_num [abs_of_nonneg]"),
        fmt.completion(LEAN, "-- step\nsimp\nnorm_num"),
    ):
        proof = fmt.extract(LEAN, completion)
        assembled = assemble(LEAN.theorem, proof, LEAN.header, config)
        assert not isinstance(assembled, Verdict), assembled
        assert "theorem mathd_algebra_10" in assembled.code and "norm_num" in assembled.code
    changed = "<think>\n</think>\n```lean4\ntheorem mathd_algebra_10 : (1 : ℝ) = 1 := by\n  norm_num\n```"
    if fmt.chat:
        verdict = assemble(LEAN.theorem, fmt.extract(LEAN, changed), LEAN.header, config)
        assert isinstance(verdict, Verdict) and verdict.status is Status.REJECTED


@pytest.fixture(scope="module")
def pool():
    p = make_pool("coq", pool=PoolConfig(workers=2, timeout=20))
    yield p
    p.close()


GOOD = {
    "coq": "  intros n.\n  lia.\nQed.\n```",
    "coq-cot": "  (* Introduce n. *)\n  intros n.\n  (* Linear arithmetic closes it. *)\n  lia.\nQed.\n```\nDone.",
    "kimina-coq": "<think>\nInduction is overkill; lia does it.\n```coq\nauto.\n```\n</think>\n"
    "```coq\nRequire Import Arith Lia.\nTheorem add_zero_r : forall n : nat, n + 0 = n.\nProof.\n  intros n. lia.\n"
    "Qed.\n```",
}
BAD = {
    "coq": "  intros n. reflexivity.\nQed.\n```",
    "coq-cot": "  (* Give up. *)\n  admit.\nAdmitted.\n```",
    "kimina-coq": "<think>\n</think>\n```coq\nTheorem add_zero_r : forall n : nat, 0 + n = n.\nProof. lia. Qed.\n```",
}


@requires_coq
@pytest.mark.parametrize("name", ["coq", "coq-cot", "kimina-coq"])
def test_coq_extractions_are_judged_valid_by_a_real_pool(pool, name):
    fmt = get_format(name)
    good = pool.check(COQ.theorem, fmt.extract(COQ, GOOD[name]))
    assert good.status is Status.VALID, good
    bad = pool.check(COQ.theorem, fmt.extract(COQ, BAD[name]))
    assert bad.status is not Status.VALID, bad
    target = pool.check(COQ.theorem, fmt.extract(COQ, fmt.completion(COQ, COQ.proof)))
    assert target.status is Status.VALID, target


@requires_coq
def test_text_after_qed_does_not_spoil_a_good_proof(pool):
    fmt = get_format("coq")
    proof = fmt.extract(COQ, "  lia.\nQed.\n\nTheorem bonus : True.\nProof. exact I. Qed.\n")
    assert pool.check(COQ.theorem, proof).status is Status.VALID
