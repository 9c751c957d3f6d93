"""Problem JSONL: the shared benchmark files, our own round trip, backend guessing and bad records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofrl.problems import Problem, ProblemFileError, guess_backend, load_problems, save_problems

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def shared(rel: str) -> Path:
    path = SHARED / rel
    if not path.is_file():
        pytest.skip(f"shared benchmark data not present ({rel})")
    return path


def write(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "p.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


# -- the shared benchmark files -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "rel, backend, count, names, extra",
    [
        ("minif2f-lean4/minif2f.jsonl", "lean", 488, 488, set()),
        ("deepseek-prover-v1.5/minif2f.jsonl", "lean", 488, 488, {"goal"}),
        # ProofNet reuses 19 names for different exercises of different books (e.g. two exercise_3_3)
        ("deepseek-prover-v1.5/proofnet.jsonl", "lean", 371, 349, {"goal"}),
        ("minif2f-rocq/minif2f.jsonl", "coq", 488, 488, {"compiles_with_coq_8_16"}),
    ],
)
def test_shared_files_load_with_guessed_backend(rel, backend, count, names, extra) -> None:
    problems = load_problems(shared(rel))
    assert len(problems) == count
    assert {p.backend for p in problems} == {backend}
    assert {p.split for p in problems} == {"test", "valid"}
    assert set(problems[0].extra) == extra
    assert len({p.name for p in problems}) == names


def test_deepseek_record_fields() -> None:
    p = next(p for p in load_problems(shared("deepseek-prover-v1.5/minif2f.jsonl")) if p.name == "mathd_algebra_478")
    assert p.informal_prefix.startswith("/--") and p.informal_prefix.endswith("-/\n")
    assert p.formal_statement.startswith("theorem mathd_algebra_478") and p.formal_statement.endswith(":= by\n")
    assert p.header.startswith("import Mathlib\nimport Aesop\n")
    assert p.extra["goal"].endswith("⊢ v = 65")
    assert p.theorem.backend == "lean" and p.theorem.header == p.header


def test_rocq_statement_with_definitions_in_header_is_coq() -> None:
    # headers holding ``Fixpoint … :=`` lines must not read as Lean
    p = next(p for p in load_problems(shared("minif2f-rocq/minif2f.jsonl")) if p.name == "amc12a_2020_p10")
    assert p.backend == "coq" and "Fixpoint" in p.header and p.formal_statement.endswith(").")


def test_split_and_limit() -> None:
    path = shared("minif2f-lean4/minif2f.jsonl")
    test = load_problems(path, split="test")
    assert len(test) == 244 and {p.split for p in test} == {"test"}
    first = load_problems(path, split="valid", limit=5)
    assert [p.name for p in first] == [p.name for p in load_problems(path, split="valid")][:5]
    assert load_problems(path, split="nope") == []


# -- our own records ----------------------------------------------------------------------------------
def test_round_trip_keeps_every_field(tmp_path) -> None:
    problems = [
        Problem(
            "a",
            "Theorem a : True.",
            "Require Import Arith.\n",
            "coq",
            "train",
            "",
            "Coq.Arith.X",
            "Proof. exact I. Qed.",
            {"line": 3},
        ),
        Problem(
            "b",
            "theorem b : 1 = 1 := by",
            "import Mathlib\n",
            "lean",
            "test",
            "/-- one -/\n",
            extra={"goal": "⊢ 1 = 1"},
        ),
        Problem("ü", "Theorem ü : True.", backend="coq"),
    ]
    path = tmp_path / "sub" / "out.jsonl"
    save_problems(problems, path)
    back = load_problems(path)
    assert back == problems
    assert [p.extra for p in back] == [p.extra for p in problems]
    assert "ü" in path.read_text(encoding="utf-8")  # not \u-escaped
    assert not list(path.parent.glob("*.tmp"))


def test_key_is_module_qualified() -> None:
    assert (
        Problem("Z_dec", "Theorem Z_dec : True.", module="Coq.ZArith.ZArith_dec").key == "Coq.ZArith.ZArith_dec.Z_dec"
    )
    assert Problem("p1", "Theorem p1 : True.").key == "p1"
    qualified = "mathcomp.ssreflect.tuple.behead_bseqP"  # a library corpus names its lemmas in full already
    assert Problem(qualified, "Lemma behead_bseqP : True.", module="mathcomp.ssreflect.tuple").key == qualified


def test_given_backend_is_used_and_conflicts_are_errors(tmp_path) -> None:
    path = write(tmp_path, [json.dumps({"name": "x", "formal_statement": "odd statement"})])
    assert load_problems(path, backend="lean")[0].backend == "lean"
    with pytest.raises(ProblemFileError, match="cannot tell whether this is Lean or Coq"):
        load_problems(path)
    path = write(tmp_path, [json.dumps({"name": "x", "formal_statement": "Theorem x : True.", "backend": "coq"})])
    with pytest.raises(ProblemFileError, match="says backend 'coq' but 'lean' was asked for"):
        load_problems(path, backend="lean")


@pytest.mark.parametrize(
    "header, statement, expected",
    [
        ("", "theorem t (n : ℕ) : n = n := by", "lean"),
        ("", "theorem t : 1 = 1 :=", "lean"),
        ("", "theorem t : 1 = 1 := by sorry", "lean"),
        ("import Mathlib\n", "example : True", "lean"),
        ("", "Theorem t : forall n, n = n.", "coq"),
        ("", "Lemma t :\n  True.", "coq"),
        ("Require Import Reals.\nDefinition f (x : R) : R :=\n  x.\n", "Goal True.", "coq"),
        ("", "what is this", None),
    ],
)
def test_guess_backend(header, statement, expected) -> None:
    assert guess_backend(header, statement) == expected


def test_bad_records_are_all_reported_with_line_numbers(tmp_path) -> None:
    path = write(
        tmp_path,
        [
            json.dumps({"name": "ok", "formal_statement": "Theorem ok : True."}),
            "{not json",
            "",
            json.dumps({"formal_statement": "Theorem x : True."}),
            json.dumps({"name": "nostatement"}),
            json.dumps({"name": "badheader", "formal_statement": "Theorem y : True.", "header": 3}),
            json.dumps({"name": "badbackend", "formal_statement": "Theorem y : True.", "backend": "agda"}),
            json.dumps(["a", "list"]),
        ],
    )
    with pytest.raises(ProblemFileError) as e:
        load_problems(path)
    lines = [line for line, _ in e.value.errors]
    assert lines == [2, 4, 5, 6, 7, 8]
    text = str(e.value)
    assert f"{path}:2: not JSON" in text
    assert f"{path}:4: missing or empty `name`" in text
    assert "nostatement: missing or empty `formal_statement`" in text
    assert "badheader: `header` must be a string" in text
    assert "badbackend: unknown backend 'agda'" in text
    assert "expected a JSON object, got list" in text


def test_negative_limit_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="limit"):
        load_problems(write(tmp_path, [json.dumps({"name": "a", "formal_statement": "Theorem a : True."})]), limit=-1)
