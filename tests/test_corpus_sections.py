"""Library lemmas stated inside sections and modules are whole-proof problems in their real context: the
header is the file's text before the statement, and the judge closes what it leaves open after the proof, so
section variables are binders of the checked constant, never axioms, while a real axiom still is one."""

from __future__ import annotations

import pytest
from conftest import requires_coq

from proofrl.data import corpus
from proofrl.data.corpus import Library, build_corpus, corpus_problems
from proofrl.provers.base import Theorem
from proofrl.provers.coq.blocks import OpenBlocks, open_blocks
from proofrl.provers.coq.prover import CoqConfig, CoqProver, coqc_check

LIBRARY = """(* a library file: a section with variables, a hypothesis and a local notation, in nested modules *)
Require Import Arith.
Hypothesis cheat : False.  (* outside any section Coq makes this an axiom *)
Module Type Sig. Parameter zero : nat. End Sig.
Module Impl : Sig. Definition zero := 0. End Impl.  (* sealed: an open module's Print Assumptions lists zero *)

Module M.
Module N.
Section S.
Variable k : nat.
Hypothesis k_pos : 0 < k.
Local Notation "'twice' x" := (x + x) (at level 40).

Lemma twice_pos : 0 < twice k.
Proof.
  destruct k as [|j].
  - inversion k_pos.
  - simpl. apply Nat.lt_0_succ.
Qed.

Lemma k_ne0 : k <> 0.
Proof. intros E. rewrite E in k_pos. inversion k_pos. Qed.

Lemma sealed : Impl.zero + k = k + Impl.zero.
Proof. apply Nat.add_comm. Qed.
End S.
End N.

Lemma after : forall n, 0 < n -> n <> 0.
Proof. intros n H. exact (N.k_ne0 n H). Qed.
End M.
"""


def test_open_blocks_reads_sections_innermost_first_and_refuses_what_coq_would_not_accept():
    assert open_blocks("Require Import Arith.\n") == OpenBlocks()
    head = LIBRARY[: LIBRARY.index("Lemma twice_pos")]
    assert open_blocks(head) == OpenBlocks(("S",), ("N", "M"))
    assert open_blocks(head).closing == ("End S.", "End N.", "End M.")
    assert open_blocks(head).qualified("twice_pos") == "M.N.twice_pos"
    assert open_blocks(LIBRARY[: LIBRARY.index("Lemma after")]) == OpenBlocks((), ("M",))
    # comments, a module alias (opens nothing), an End naming what is not open, a module inside a section
    assert open_blocks("Module (* c *) A.\nModule B := Nat.\nSection (* d *) T.\n") == OpenBlocks(("T",), ("A",))
    assert open_blocks("Section T.\nEnd U.\n") is None
    assert open_blocks("Section T.\nModule A.\n") is None


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    root = tmp_path_factory.mktemp("contrib")
    (root / "demo").mkdir()
    (root / "demo" / "Sec.v").write_text(LIBRARY)
    out = tmp_path_factory.mktemp("corpora")
    with pytest.MonkeyPatch.context() as mp:  # the library is read from this folder instead of Coq's user-contrib
        mp.setattr(corpus, "user_contrib", lambda: root)
        mp.setitem(corpus.LIBRARIES, "demo", Library("demo", "demo", "demo", "none"))
        rep = build_corpus("demo", out / "demo", workers=1, progress=False)
        assert rep.lemmas == rep.clean == 4
        got = {p.name.rsplit(".", 1)[-1]: p for p in corpus_problems("coq-lib:demo:random/train", root=out)}
    return got


@requires_coq
def test_lemmas_inside_sections_are_problems_and_their_human_proofs_are_valid(problems):
    assert set(problems) == {"twice_pos", "k_ne0", "sealed", "after"}
    p = problems["twice_pos"]
    assert p.name == "demo.Sec.M.N.twice_pos" and not p.extra["top_level"]
    assert p.header.rstrip().endswith("(at level 40).") and "Hypothesis k_pos" in p.header
    for name, q in problems.items():
        v = coqc_check(q.theorem, q.proof, CoqConfig())
        # k and k_pos are binders, not axioms; nor is Impl.zero, read once the modules are closed
        assert v.valid and v.axioms == (), (name, v, v.messages)
    prover = CoqProver(p.header)
    try:
        assert prover.check(p.theorem, p.proof).valid  # the session's check reads assumptions the same way
        script = ["destruct k as [|j].", "- inversion k_pos.", "- simpl; apply Nat.lt_0_succ."]
        assert prover.final_check(p.theorem, script).valid  # what a search's found proof goes through
    finally:
        prover.close()


CHEATS = {
    "an axiom of the header": ("Proof. destruct cheat. Qed.", "axiom: cheat"),
    "Admitted": ("Proof. Admitted.", "admitted"),
    "ends the section early": ("Proof. End S. Qed.", "forbidden: End"),
    "opens a new section": ("Proof. Section T. Qed.", "forbidden: Section"),
    "adds its own hypothesis": ("Proof. Hypothesis h : False. destruct h. Qed.", "forbidden: Hypothesis"),
}


@requires_coq
@pytest.mark.parametrize("cheat", list(CHEATS))
def test_cheats_inside_a_section_are_not_valid(problems, cheat):
    proof, reason = CHEATS[cheat]
    v = coqc_check(problems["twice_pos"].theorem, proof, CoqConfig())
    assert not v.valid and reason in v.reasons, v


@requires_coq
def test_a_section_hypothesis_is_no_help_outside_its_section(problems):
    p = problems["after"]  # stated in M once S and N are closed: k_pos is gone
    v = coqc_check(p.theorem, "Proof. intros n H. exact (k_pos). Qed.", CoqConfig())
    assert not v.valid and "k_pos" in str(v.messages), v
    # nor can a header smuggle an open section's variable past the check by leaving the section unreadable
    bad = Theorem("t", "Lemma t : False.", "Section T.\nVariable f : False.\nEnd U.\n")
    assert not coqc_check(bad, "Proof. exact f. Qed.", CoqConfig()).valid
