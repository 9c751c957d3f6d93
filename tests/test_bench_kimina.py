"""kimina's claims in the bench: the non-inferiority verdict (the format reward "does not lower" the pass rate),
the error-correction arms' bookkeeping at the same budget, and both claims at smoke size with real Coq."""

import json

import numpy as np
import pytest
from conftest import requires_coq

from proofrl.bench.stats import compare


def test_a_non_inferiority_claim_holds_when_the_interval_stays_above_minus_the_margin():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, size=(3, 200)).astype(float)
    b = a.copy()
    b[:, :4] = 0.0  # B loses a little: 2 points at most
    ordinary = compare(a, b)
    assert ordinary.verdict != "holds"  # "B > A" does not hold up
    c = compare(a, b, margin=0.1)
    assert c.verdict == "holds" and c.difference.low > -0.1 and c.p_value < 0.05 and c.margin == 0.1


def test_a_non_inferiority_claim_does_not_hold_when_the_loss_is_beyond_the_margin():
    a = np.ones((2, 100))
    b = np.ones((2, 100))
    b[:, :30] = 0.0  # B loses 30 points; the margin allows 5
    c = compare(a, b, margin=0.05)
    assert c.verdict == "does not hold" and c.difference.high < -0.05


def test_a_loss_near_the_margin_cannot_tell_and_names_a_size():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2, size=(2, 40)).astype(float)
    b = np.where(rng.random((2, 40)) < 0.05, 1 - a, a)  # noise around no change
    c = compare(a, b, margin=0.01)
    assert c.verdict == "cannot tell at this size" and c.theorems_needed


def test_a_non_inferiority_claim_cannot_hold_when_the_baseline_is_within_the_margin_of_zero():
    """A baseline at 2 % with a 5-point margin: an arm proving nothing would be "not worse" too."""
    from proofrl.bench.claims import CLAIMS
    from proofrl.bench.run import compare_from, verdict_line

    a = np.zeros((3, 100))
    a[:, :2] = 1.0
    c = compare(a, a.copy(), margin=0.05)
    assert c.verdict == "cannot tell at this size" and c.a.low <= 0.05
    assert compare(np.zeros((3, 100)), np.zeros((3, 100)), margin=0.05).verdict == "cannot tell at this size"
    line = verdict_line(CLAIMS["kimina-format-reward"], compare_from(c.as_dict()))
    assert "useless" in line and "would tell an effect" not in line
    strong = np.ones((3, 100))
    assert compare(strong, strong.copy(), margin=0.05).verdict == "holds"


def test_margin_zero_is_the_ordinary_rule_and_a_negative_margin_is_refused():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, size=(3, 60)).astype(float)
    b = np.maximum(a, rng.random((3, 60)) < 0.3)
    assert compare(a, b) == compare(a, b, margin=0.0)
    assert compare(a, b, direction=-1, margin=0.0).verdict == "does not hold"
    with pytest.raises(ValueError, match="margin"):
        compare(a, b, margin=-0.1)


def test_the_verdict_line_of_a_non_inferiority_claim_states_the_bound():
    from proofrl.bench.claims import CLAIMS
    from proofrl.bench.run import compare_from, verdict_line

    claim = CLAIMS["kimina-format-reward"]
    assert claim.margin > 0 and claim.direction == 1
    c = compare(np.ones((2, 50)), np.ones((2, 50)), margin=claim.margin)
    assert c.verdict == "holds"  # identical arms are not worse by the margin
    line = verdict_line(claim, compare_from(c.as_dict()))
    assert line.startswith("**holds**") and f"> -{claim.margin:g}" in line and "not worse by" in line


# -- the error-correction claim's arms at the same budget ------------------------------------------------------


def test_attempt_values_count_a_correction_only_where_the_first_sample_failed():
    from proofrl.bench.kimina import attempt_values

    first = [True, False, False, False]
    second = [False, True, False, True]
    corrected = [None, False, True, None]  # attempt 3 had no correction prompt: its second sample is used
    two, fix = attempt_values(first, second, corrected)
    assert two == 3 / 4  # attempts 0, 1, 3
    assert fix == 3 / 4  # attempts 0, 2, 3: the correction of attempt 1 failed where its fresh sample passed
    assert attempt_values([True], [False], [None]) == (1.0, 1.0)
    with pytest.raises(ValueError, match="attempts"):
        attempt_values([True], [True, False], [None])


def test_the_correction_prompt_is_the_trainer_s_second_turn_with_coq_s_feedback(tmp_path):
    """No Coq: a verdict as Coq reports an error, and the tiny tokenizer."""
    from proofrl.policy.prompts import get_format
    from proofrl.policy.tiny import train_tokenizer
    from proofrl.problems import Problem
    from proofrl.provers.base import Message, Position, Status, Verdict
    from proofrl.rollout.proofs import first_turn
    from proofrl.train.config import ErrorCorrectionConfig
    from proofrl.train.whole_proof import correction_item

    problem = Problem("add_0", "Theorem add_0 : forall n : nat, n + 0 = n.", "Require Import Arith.")
    fmt = get_format("kimina-coq")
    tok = train_tokenizer([fmt.prompt(problem) + fmt.completion(problem, "Proof. lia. Qed.")] * 4, 300, 1024)
    item = first_turn(problem, fmt, tok)
    completion = "<think>\n</think>\n```coq\nTheorem add_0 : forall n : nat, n + 0 = n.\nProof. reflexivity. Qed.\n```"
    proof = fmt.extract(problem, completion)
    failed = Verdict(Status.ERROR, messages=(Message("error", "Unable to unify", Position(2, 7)),), prover="coq")
    got = correction_item(item, completion, proof, failed, ErrorCorrectionConfig(), tok)
    assert got is not None and got.turn == 2 and got.problem == problem
    assert got.messages[-2] == {"role": "assistant", "content": completion}
    assert "Unable to unify" in got.messages[-1]["content"] and "reflexivity" in got.prompt
    assert correction_item(item, completion, proof, Verdict(Status.VALID), ErrorCorrectionConfig(), tok) is None
    assert correction_item(item, "no code", None, failed, ErrorCorrectionConfig(), tok) is None  # nothing to fix
    short = ErrorCorrectionConfig(max_prompt_tokens=8)  # kimina drops too long a prompt rather than cut it
    assert correction_item(item, completion, proof, failed, short, tok) is None


def test_the_taught_answer_is_kimina_s_shape_with_the_proof_only_and_extracts_back():
    from dataclasses import fields

    from proofrl.bench.kimina import KIMINA, ProofOnlyAnswer
    from proofrl.policy.prompts import PromptFormat, get_format
    from proofrl.problems import Problem
    from proofrl.rewards.format import FormatError, FormatRules, check_format

    kimina = get_format("kimina-coq")
    fmt = ProofOnlyAnswer(**{f.name: getattr(kimina, f.name) for f in fields(PromptFormat)})
    problem = Problem("add_0", "Theorem add_0 : forall n : nat, n + 0 = n.", "Require Import Arith.")
    answer = fmt.completion(problem, "Proof.\nintros n. lia.\nQed.")
    assert answer == "<think>\n\n</think>\n```coq\nProof.\nintros n. lia.\nQed.\n```"
    assert fmt.prompt(problem) == kimina.prompt(problem)  # the prompts are kimina's own
    assert kimina.extract(problem, answer) == "Proof.\nintros n. lia.\nQed.\n"
    rules = FormatRules(**KIMINA["format"])
    assert check_format(answer, problem, rules) is FormatError.NONE
    assert check_format(answer + "\ntrailing", problem, rules) is FormatError.TEXT_AFTER_CODE_BLOCK
    assert check_format(answer, problem) is not FormatError.NONE  # kimina's strict rules refuse it


def test_both_kimina_claims_are_registered_with_sizes_and_quote_the_source():
    from proofrl.bench.claims import CLAIMS
    from proofrl.bench.kimina import FORMAT_MARGIN

    ec, fr = CLAIMS["kimina-error-correction"], CLAIMS["kimina-format-reward"]
    for c in (ec, fr):
        assert c.implemented and c.size > c.smoke_size > 0 and "not quoted" not in c.source
    assert ec.direction == 1 and ec.margin == 0.0
    assert fr.direction == 1 and fr.margin == FORMAT_MARGIN > 0
    assert "75.41" in ec.source


# -- both claims through the command line at smoke size (real Coq) -------------------------------------------


@requires_coq
def test_both_kimina_claims_run_at_smoke_size_from_one_run_per_seed(tmp_path):
    from typer.testing import CliRunner

    from proofrl.cli import app

    names = ["kimina-error-correction", "kimina-format-reward"]
    args = ["bench", "--smoke", *(x for n in names for x in ("--claim", n)), "--seeds", "1", "--out", str(tmp_path)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    lines = {x["claim"]: x for x in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines())}
    assert set(lines) == set(names)
    ec, fr = lines["kimina-error-correction"]["arms"], lines["kimina-format-reward"]["arms"]
    assert set(ec) == {"two samples", "sample + correction"} and set(fr) == {
        "without format reward",
        "with format reward",
    }
    for arms in (ec, fr):
        first, second = arms.values()
        assert len(first) == 2 and first.keys() == second.keys()  # paired: the same held-out theorems
        assert all(0.0 <= v <= 1.0 for arm in arms.values() for v in arm.values())
    assert ec["two samples"].keys() == fr["with format reward"].keys()
    shared = json.loads((tmp_path / "kimina-shared" / "seed-0-size-2-smoke.json").read_text())
    b = shared["budget"]  # every failed first sample got a correction or, with no prompt to build, the fresh sample
    assert b["attempts"] == 2 * 2 and b["generations_per_attempt"] == 2
    assert b["corrections_sampled"] + b["no_correction_prompt"] == b["first_samples_failed"]
    assert set(shared["training"]) == {"without format reward", "with format reward"}
    assert len(list((tmp_path / "kimina-shared").glob("sft-*-smoke/sft-model/config.json"))) == 1  # taught once
    report = (tmp_path / "report.md").read_text()
    assert "not worse by 0.05 or more" in report and "| kimina-format-reward | kimina |" in report
    assert lines["kimina-format-reward"]["seconds"] < lines["kimina-error-correction"]["seconds"]  # read, not rerun
