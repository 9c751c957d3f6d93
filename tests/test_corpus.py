"""Library corpora: a file replayed in its real context through coqidetop, bad input skipped lemma by lemma,
resumable extraction, fixed splits, loading with Hugging Face datasets."""

from __future__ import annotations

import json

import pytest
from conftest import requires_coq

from proofrl.data.corpus import (
    LIBRARIES,
    LibraryMissing,
    build_corpus,
    library_files,
    main,
    problem_with_context,
)
from proofrl.data.corpus_splits import (
    load_split,
    novel_premise_violations,
    split_novel_premises,
)
from proofrl.data.file_steps import Replayer
from proofrl.data.splits import problem_set
from proofrl.provers.coq.prover import CoqProver

pytestmark = requires_coq

SOURCE = """
Require Import Arith.
Section S.
Variable k : nat.
Hypothesis k_pos : 0 < k.
Local Notation "'twice' x" := (x + x) (at level 40).

Lemma twice_k : twice k = 2 * k.
Proof.
  simpl.
  rewrite Nat.add_0_r.
  reflexivity.
Qed.

Lemma given_up : k = k + 0.
Proof.
  Admitted.

Lemma broken : k = k.
Proof.
  rewrite no_such_lemma.
  reflexivity.
Qed.

Lemma slow : True.
Proof.
  do 1000000000 idtac.
  exact I.
Qed.

Lemma bad_statement : k = undefined_constant.
Proof.
  reflexivity.
Qed.

Lemma after_failures : k + 0 = k.
Proof.
  - symmetry. apply given_up.
Qed.
End S.

Module M.
Lemma top : 1 = 1.
Proof. reflexivity. Qed.
End M.
Lemma top : 2 = 2.
Proof. reflexivity. Qed.
"""


def test_replay_real_context_and_bad_input_lemma_by_lemma():
    r = Replayer(SOURCE, file="demo/T.v", module="demo.T", timeout=3.0).run()
    assert r.error is None
    by = {lem.name: lem for lem in r.lemmas}
    assert list(by) == ["twice_k", "given_up", "broken", "slow", "bad_statement", "after_failures", "M.top", "top"]
    # a module's name is part of a lemma's; only a lemma with nothing open around it is top level
    assert [by[n].top_level for n in ("twice_k", "M.top", "top")] == [False, False, True]
    # the section variable and the local notation were in effect: the state shows them
    t0 = by["twice_k"].transitions[0]
    assert t0["tactic"] == "simpl." and "k : nat" in t0["state_before"] and "k_pos : 0 < k" in t0["state_before"]
    assert [t["tactic"] for t in by["twice_k"].transitions] == ["simpl.", "rewrite Nat.add_0_r.", "reflexivity."]
    assert by["twice_k"].transitions[1]["premises"] == ["Coq.Arith.PeanoNat.Nat.add_0_r"]
    assert by["twice_k"].transitions[-1]["goals_after"] == 0 and by["twice_k"].failure is None
    assert SOURCE[by["twice_k"].context_chars :].startswith("Lemma twice_k")
    assert by["twice_k"].proof.startswith("Proof.") and by["twice_k"].proof.endswith("Qed.")
    assert by["given_up"].kind == "admitted"
    assert by["broken"].kind == "tactic" and "no_such_lemma" in by["broken"].failure and not by["broken"].transitions
    assert by["slow"].kind == "timeout"
    assert by["bad_statement"].kind == "statement"
    # a lemma after all that still replays in context, and may use the admitted one
    after = by["after_failures"]
    assert after.failure is None, after.failure
    assert after.transitions[0]["structural"] and after.transitions[-1]["premises"] == ["demo.T.given_up"]


def test_premises_resolved_intro_names_left_out_unknown_names_kept_as_text():
    src = (
        "Lemma t : forall n : nat, n = n.\nProof.\n  intros m.\n"
        "  destruct m as [|Hm]; [reflexivity | exact (eq_refl (S Hm))].\nQed.\n"
    )
    r = Replayer(src, file="x.v", module="x", timeout=10.0).run()
    (lem,) = r.lemmas
    assert lem.failure is None
    intro, case = lem.transitions
    assert intro["premises"] == [] and intro["premises_unresolved"] == []  # m is a hypothesis after it
    assert case["premises"] == ["Coq.Init.Logic.eq_refl", "Coq.Init.Datatypes.S"]
    assert case["premises_unresolved"] == ["Hm"]  # bound inside the tactic only: kept as text


def _mathcomp_file() -> str:
    try:
        files = library_files("mathcomp")
    except LibraryMissing as e:
        pytest.skip(str(e))
    assert any(f.name == "ssrfun.v" for f in files)
    return "ssreflect/ssrfun.v"


def test_library_corpus_resumes_splits_loads_with_datasets_and_names_problem_sets(tmp_path, monkeypatch):
    only = _mathcomp_file()
    out = tmp_path / "mathcomp"
    rep = build_corpus("mathcomp", out, only=[only], workers=1, progress=False)
    assert rep.files == 1 and rep.lemmas == rep.clean and rep.clean > 0 and rep.transitions > 0
    assert rep.resumed_files == 0
    probs = [json.loads(x) for x in (out / "problems.jsonl").read_text().splitlines()]
    assert len(probs) == rep.clean
    full = problem_with_context(probs[0])
    assert full["header"].rstrip().endswith(".") and "Require" in full["header"]
    again = build_corpus("mathcomp", out, only=[only], workers=1, progress=False)
    assert (
        again.resumed_files == 1 and again.transitions == rep.transitions and again.replay_seconds == rep.replay_seconds
    )
    card = (out / "README.md").read_text()
    assert "libcoq-mathcomp-ssreflect" in card and "8.16" in card and "novel_premises" in card
    ds = load_split(out, "random")
    assert set(ds) == {"train", "valid", "test"}
    assert sum(len(ds[s]) for s in ds) == rep.transitions
    assert {"state_before", "tactic", "premises"} <= set(ds["train"].column_names)
    # coq-lib:NAME:SPLIT/SIDE names the split's lemmas (inside sections too), each stated in its file's context
    monkeypatch.setenv("PROOFRL_CORPORA", str(tmp_path))
    train = problem_set("coq-lib:mathcomp:random/train")
    records = [json.loads(line) for line in (out / "splits/random/problems-train.jsonl").read_text().splitlines()]
    assert len(train) == len(records)
    p = train[0]
    assert p.formal_statement not in p.header and p.name.startswith("mathcomp.ssreflect.ssrfun.")
    prover = CoqProver(p.header)
    try:
        assert prover.check(p.theorem, p.proof).valid  # the human proof, in the file's own context
    finally:
        prover.close()
    with pytest.raises(ValueError, match="SIDE one of"):
        problem_set("coq-lib:mathcomp:everything")


def test_novel_premises_split_holds_out_only_lemmas_with_an_unseen_premise():
    premises = {f"l{i}": [f"p{i % 7}", f"q{i % 3}"] for i in range(60)} | {"solo": []}
    side = split_novel_premises(premises, fraction=0.1, seed=1)
    assert side["solo"] == "train"
    held = [n for n, s in side.items() if s != "train"]
    assert held and {"valid", "test"} <= set(side.values())
    assert novel_premise_violations(side, premises) == []


def test_library_not_installed_is_one_line_naming_the_package(capsys, monkeypatch, tmp_path):
    missing = next((n for n, lib in LIBRARIES.items() if not _installed(n)), None)
    if missing is None:
        pytest.skip("every known library is installed here")
    assert main(["--library", missing, "--out", str(tmp_path)]) == 2
    out = capsys.readouterr().out.strip()
    assert "\n" not in out and f"apt-get install {LIBRARIES[missing].package}" in out
    assert main(["--library", "no-such-lib", "--out", str(tmp_path)]) == 2
    assert "known:" in capsys.readouterr().out


def _installed(name: str) -> bool:
    try:
        library_files(name)
    except LibraryMissing:
        return False
    return True


def test_the_standard_library_is_a_corpus_like_any_other(tmp_path):
    """``--library stdlib``: files under ``$(coqc -where)/theories`` (``Init`` left out), modules named ``Coq.…``,
    and a problem's header read back from the installed file."""
    files = library_files("stdlib")
    assert files and not any("/theories/Init/" in str(f) for f in files)
    rep = build_corpus("stdlib", tmp_path, only=["Bool/IfProp.v"], workers=1, progress=False)
    assert rep.files == 1 and rep.clean >= 5, rep
    probs = [json.loads(x) for x in (tmp_path / "problems.jsonl").read_text().splitlines()]
    assert {p["file"] for p in probs} == {"Bool/IfProp.v"} and {p["module"] for p in probs} == {"Coq.Bool.IfProp"}
    full = problem_with_context(probs[-1], LIBRARIES["stdlib"])
    assert full["header"].rstrip().endswith(".") and "IfProp" in full["header"]
