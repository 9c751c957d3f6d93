"""A library theorem stated where its file states it: the header loads its compiled module, which holds the
theorem and every later lemma too, and the placement comment keeps the proof to what precedes it, on every
channel that says ``valid`` or pays a step (``check``, the fresh-``coqc`` final check, ``step``)."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest
from conftest import requires_coq

from proofrl.provers.base import FailureKind, Status, Theorem, loaded_header
from proofrl.provers.coq.placement import (
    PlacementUnreadable,
    later_fields,
    module_fields,
    placement,
    placement_line,
    reach_reasons,
)

LIST = "Require Import Coq.Lists.List.\nImport ListNotations.\n"
APP_NIL_R = Theorem(
    "app_nil_r",
    "Lemma app_nil_r : forall (A : Type) (l : list A), l ++ [] = l.",
    LIST + placement_line("Coq.Lists.List.app_nil_r") + "\n",
)
HONEST = "Proof. intros. induction l; simpl; auto. rewrite IHl. reflexivity. Qed."
# ``app_nil_end`` comes after ``app_nil_r`` in List.v and is proved from it: a later lemma, named
LATER = "Proof. intros. symmetry. apply app_nil_end. Qed."
# ``Is_true_eq_left`` is a hint of the ``bool`` database: ``auto`` finds the theorem itself, never named
BOOL_HINT = Theorem(
    "Is_true_eq_left",
    "Lemma Is_true_eq_left : forall x:bool, x = true -> Is_true x.",
    "Require Import Coq.Bool.Bool.\nOpen Scope bool_scope.\n" + placement_line("Coq.Bool.Bool.Is_true_eq_left") + "\n",
)
BY_HINT = "Proof. intros; subst; auto with bool. Qed."


# -- reading Coq's answers ---------------------------------------------------------------------------
def test_placement_is_read_from_the_header_and_one_place_only() -> None:
    assert placement(APP_NIL_R.header) == "Coq.Lists.List.app_nil_r"
    assert placement(LIST) is None
    with pytest.raises(ValueError, match="2 placements"):
        placement(LIST + placement_line("Coq.Lists.List.a") + placement_line("Coq.Lists.List.b"))
    # the comment loads nothing: processes are shared by the header without it
    assert loaded_header(APP_NIL_R.header).strip() == LIST.strip()


def test_module_fields_in_declaration_order_with_names_on_the_next_line() -> None:
    printed = (
        "Module\nM\n:= Struct\n     Definition t : Set.\n     Record\n     R (A : Type) : Prop := Build_R\n"
        "       { f : A }.\n     Definition f : forall A, R A -> A.\n     Module N\n     Module Type S\n"
        "     Parameter lemma_x :\n       forall n : nat, n = n.\n   End\n"
    )
    assert [(f.kind, f.name) for f in module_fields(printed)] == [
        ("Definition", "t"),
        ("Record", "R"),
        ("Definition", "f"),
        ("Module", "N"),
        ("Module Type", "S"),
        ("Parameter", "lemma_x"),
    ]


def test_later_fields_read_later_modules_at_any_depth_and_fail_closed() -> None:
    bodies = {
        "M": "Module\nM\n:= Struct\n     Definition a : nat.\n     Parameter t : True.\n     Module N\n"
        "     Module Type S\n     Parameter b : True.\n   End\n",
        "M.N": "Module\nN\n:= Struct\n     Parameter c : True.\n     Module O\n   End\n",
        "M.N.O": "Module\nO\n:= Struct\n     Definition d : nat.\n   End\n",
    }
    asked: list[list[str]] = []

    def ask(commands: list[str]) -> list[str]:
        asked.append(commands)
        return [bodies.get(c.removeprefix("Print Module ").rstrip("."), "Error: no module") for c in commands]

    assert later_fields("M.t", ask) == {"M.t", "M.N", "M.b", "M.N.c", "M.N.O", "M.N.O.d"}
    assert "M.a" not in later_fields("M.t", ask)  # before the theorem: in reach
    with pytest.raises(PlacementUnreadable, match="not a constant of M"):
        later_fields("M.zzz", ask)
    bodies["M.N"] = "Error: cannot print"
    with pytest.raises(PlacementUnreadable, match=r"cannot read module M\.N"):
        later_fields("M.t", ask)


def test_dependency_names_read_entries_and_wrapped_types_and_refuse_elided_ones() -> None:
    from proofrl.provers.coq.placement import dependency_names

    printed = (
        "Transparent constants:\nRelationClasses.transitivity : forall (A : Type)\n    (R : relation A), T R\n"
        "Morphisms.very_long_name\n: forall (A : Type),\nforall x : A, Proper R (R x)\nOpaque constants:\n"
        "app_nil_r : forall A, l ++ [] = l\nAxioms:\n...\nSection Variables:\nv\n: nat\n"
    )
    assert dependency_names(printed) == ["RelationClasses.transitivity", "Morphisms.very_long_name", "app_nil_r"]
    with pytest.raises(ValueError, match="elided"):
        dependency_names("Opaque constants:\n...\n")


def test_reach_reasons_match_printed_names_never_suffixes() -> None:
    located = (
        "Constant Coq.Lists.List.app_nil_end\n  (shorter name to refer to it in current context is app_nil_end)\n"
        "Constant Coq.Lists.List.app_nil_r\n  (shorter name to refer to it in current context is List.app_nil_r)\n"
    )
    later = frozenset({"Coq.Lists.List.app_nil_end", "Coq.Lists.List.app_nil_r"})
    theorem = "Coq.Lists.List.app_nil_r"
    assert reach_reasons(["app_nil_r", "app_nil_l"], located, later, theorem) == []  # ours, and an earlier one
    assert reach_reasons(["List.app_nil_r"], located, later, theorem) == ["forbidden: cites app_nil_r"]
    assert reach_reasons(["app_nil_end"], located, later, theorem) == [
        "forbidden: uses Coq.Lists.List.app_nil_end, stated after app_nil_r"
    ]


# -- the wall on every channel ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool():
    if shutil.which("coqidetop.opt") is None and shutil.which("coqidetop") is None:
        pytest.skip("Coq not installed")
    from proofrl.provers.factory import make_pool
    from proofrl.provers.pool import PoolConfig

    with make_pool("coq", pool=PoolConfig(workers=1)) as p:
        yield p


@requires_coq
@pytest.mark.parametrize(
    ("theorem", "proof", "reason"),
    [
        (APP_NIL_R, LATER, "forbidden: uses Coq.Lists.List.app_nil_end, stated after app_nil_r"),
        (BOOL_HINT, BY_HINT, "forbidden: cites Is_true_eq_left"),
    ],
    ids=["later-lemma", "hint-reaches-itself"],
)
def test_check_and_final_check_refuse_what_comes_at_or_after_the_theorem(pool, theorem, proof, reason) -> None:
    from proofrl.provers.coq.prover import CoqConfig, coqc_check

    session, final = pool.check(theorem, proof, timeout=60), coqc_check(theorem, proof, CoqConfig())
    assert session.status is final.status is Status.REJECTED
    assert reason in session.reasons and reason in final.reasons
    # mutation: the same proof under the same header without its placement compiles and is valid, so the
    # wall, not anything else, refuses it
    unplaced = replace(theorem, header=loaded_header(theorem.header))
    assert pool.check(unplaced, proof, timeout=60).status is Status.VALID
    assert coqc_check(unplaced, proof, CoqConfig()).status is Status.VALID


@requires_coq
def test_an_honest_proof_from_what_precedes_stays_valid(pool) -> None:
    from proofrl.provers.coq.prover import CoqConfig, coqc_check

    assert pool.check(APP_NIL_R, HONEST, timeout=60).status is Status.VALID
    assert coqc_check(APP_NIL_R, HONEST, CoqConfig()).status is Status.VALID
    # an earlier lemma of the same module is in reach
    earlier = Theorem("app_nil_end", "Lemma app_nil_end : forall (A : Type) (l : list A), l = l ++ [].", LIST)
    earlier = replace(earlier, header=LIST + placement_line("Coq.Lists.List.app_nil_end") + "\n")
    proof = "Proof. intros. symmetry. apply app_nil_r. Qed."
    assert pool.check(earlier, proof, timeout=60).status is Status.VALID
    assert coqc_check(earlier, proof, CoqConfig()).status is Status.VALID


@requires_coq
def test_a_placement_that_names_no_constant_of_its_module_is_an_error(pool) -> None:
    bad = replace(APP_NIL_R, header=LIST + placement_line("Coq.Lists.List.no_such_lemma") + "\n")
    v = pool.check(bad, HONEST, timeout=60)
    assert v.status is Status.ERROR and v.reasons[0].startswith("placement unreadable")


@requires_coq
def test_steps_that_use_what_comes_after_are_not_paid(pool) -> None:
    """A step that ends the proof (the whole judge after ``Qed``) and one that closes a goal while another
    remains (the partial term's names) are both ``kernel`` failures; the honest steps stand."""
    with pool.lease(APP_NIL_R.header) as prover:
        s0 = prover.start(APP_NIL_R)
        s1 = prover.step(s0, "intros.")
        assert s1.ok
        end = prover.step(s1.state, "symmetry; apply app_nil_end.")
        assert end.failure is not None and end.failure.kind is FailureKind.KERNEL
        assert "stated after app_nil_r" in end.failure.message
        split = prover.step(s1.state, "assert (l ++ [] = l /\\ True) as [H _]; [split | exact H].")
        assert split.ok
        partial = prover.step(split.state, "symmetry; apply app_nil_end.")
        assert partial.failure is not None and partial.failure.kind is FailureKind.KERNEL
        assert "stated after app_nil_r" in partial.failure.message
        honest = prover.step(s1.state, "induction l; simpl; auto.")
        assert honest.ok, honest.failure
        done = prover.step(honest.state, "rewrite IHl; reflexivity.")
        assert done.ok, done.failure


@requires_coq
def test_problems_of_one_file_share_one_process(pool) -> None:
    """The placement comment loads nothing: two theorems of List.v placed apart use the same process, and
    each keeps its own wall."""
    started = pool.stats.started
    other = replace(
        APP_NIL_R,
        name="app_nil_end",
        statement="Lemma app_nil_end : forall (A : Type) (l : list A), l = l ++ [].",
        header=LIST + placement_line("Coq.Lists.List.app_nil_end") + "\n",
    )
    assert pool.check(other, "Proof. intros. symmetry. apply app_nil_r. Qed.", timeout=60).status is Status.VALID
    assert pool.check(APP_NIL_R, "Proof. intros. symmetry. apply app_nil_end. Qed.", timeout=60).reasons
    assert pool.stats.started - started <= 1


FACT = Theorem(
    "fact_neq_0",
    "Lemma fact_neq_0 n : fact n <> 0.",
    "Require Import Coq.Arith.Arith.\nRequire Import Coq.Arith.Factorial.\nRequire Import Lia.\n"
    + placement_line("Coq.Arith.Factorial.fact_neq_0")
    + "\n",
)


@requires_coq
def test_a_dependency_list_too_long_for_a_reply_is_judged_by_the_fresh_check(monkeypatch) -> None:
    """coqidetop prints each dependency's type whole; ``lia`` alone reaches hundreds of constants. With the
    reply cap lowered below that list (the process is then killed mid-reply), ``check`` and a step that ends
    the proof take the fresh ``coqc`` check's answer: the honest proof stays valid, the later lemma
    (``fact_le``) stays refused."""
    import proofrl.provers.coq.session as session
    from proofrl.provers.coq.prover import CoqProver

    prover = CoqProver(FACT.header)
    honest = "Proof. assert (1 + 1 = 2) by lia. apply Nat.neq_0_lt_0, lt_O_fact. Qed."
    later = "Proof. pose proof (fact_le 0 n (Nat.le_0_l n)) as K. simpl in K. lia. Qed."
    try:
        assert prover.check(FACT, honest, timeout=60).status is Status.VALID  # module fields read and kept
        monkeypatch.setattr(session, "MAX_REPLY_BYTES", 200_000)
        before = prover.pid
        assert prover.check(FACT, honest, timeout=60).status is Status.VALID
        assert prover.pid != before or not prover.alive  # the list did not fit: the session was lost
        cheat = prover.check(FACT, later, timeout=60)
        assert cheat.status is Status.REJECTED, cheat
        assert "forbidden: uses Coq.Arith.Factorial.fact_le, stated after fact_neq_0" in cheat.reasons
        s0 = prover.start(FACT)
        wait = 60  # a step that ends the proof waits for the fresh coqc: seconds alone, more on a loaded machine
        s1 = prover.step(s0, "pose proof (fact_le 0 n (Nat.le_0_l n)) as K.", timeout=wait)
        end = prover.step(s1.state, "simpl in K; lia.", timeout=wait)
        assert end.failure is not None and end.failure.kind is FailureKind.KERNEL
        assert "fact_le, stated after fact_neq_0" in end.failure.message
        s1 = prover.step(prover.start(FACT), "assert (1 + 1 = 2) by lia.", timeout=wait)
        done = prover.step(s1.state, "apply Nat.neq_0_lt_0, lt_O_fact.", timeout=wait)
        assert done.ok and done.state.solved, done.failure
        again = prover.step(s1.state, "apply Nat.neq_0_lt_0, lt_O_fact.", timeout=wait)  # the live path replayed
        assert again.ok and again.state.solved, again.failure
    finally:
        prover.close()
