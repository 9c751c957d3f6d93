"""Coq stdlib problems, the split by module, kimina's win-rate filter and recipe problem-set names."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from proofrl.data.splits import (
    HELD_OUT,
    TRAIN,
    coq_stdlib_problems,
    kimina_filter,
    problem_set,
    split_by_module,
)
from proofrl.problems import Problem

requires_coqc = pytest.mark.skipif(shutil.which("coqc") is None, reason="Coq not installed")


def P(name: str, module: str = "") -> Problem:
    return Problem(name, f"Theorem {name} : True.", module=module)


@pytest.fixture(scope="module")
def stdlib() -> list[Problem]:
    if shutil.which("coqc") is None:
        pytest.skip("Coq not installed")
    return coq_stdlib_problems()


# -- Coq stdlib ---------------------------------------------------------------------------------------
def test_stdlib_problems_carry_module_and_human_proof(stdlib) -> None:
    assert len(stdlib) > 500
    assert all(p.backend == "coq" and p.module.startswith("Coq.") for p in stdlib)
    assert all(p.proof.startswith("Proof.") and p.proof.endswith("Qed.") for p in stdlib)
    assert all({"file", "line"} <= set(p.extra) for p in stdlib)
    # names repeat across modules; keys do not
    assert len({p.key for p in stdlib}) == len(stdlib) > len({p.name for p in stdlib})
    primed = [p for p in stdlib if p.name == "Z_dec'"]
    assert len(primed) == 1 and primed[0].formal_statement.startswith("Lemma Z_dec' :")


def test_stdlib_header_loads_the_module_and_places_the_theorem_in_it(stdlib) -> None:
    """The header loads the theorem's compiled module (its definitions and notations) and says where the
    theorem stands in it: the judge keeps a proof to what precedes that place."""
    from proofrl.provers.coq.placement import placement

    for p in stdlib:
        assert f"Require Import {p.module}." in p.header, p.key
        assert placement(p.header) == f"{p.module}.{p.name}", p.key


@requires_coqc
def test_a_stdlib_theorem_cannot_cite_itself_but_its_human_proof_is_valid() -> None:
    """Under its header the compiled theorem exists (``coqc`` compiles a proof that applies it by its
    qualified name); the judge refuses that proof in ``check`` and in the final check (the route through a hint
    database, where no name is spelled: tests/test_placement.py). The human proof stays valid (the control)."""
    from proofrl.provers.coq.prover import CoqConfig, coqc_check
    from proofrl.provers.factory import make_pool
    from proofrl.provers.pool import PoolConfig

    (p,) = [p for p in coq_stdlib_problems(prefixes=("Coq.NArith.Ndist",)) if p.name == "Nplength_infty"]
    cite = f"Proof. exact {p.module}.{p.name}. Qed."
    with make_pool("coq", pool=PoolConfig(workers=1)) as pool:
        assert pool.check(p.theorem, p.proof, timeout=60).status.value == "valid"
        checked = pool.check(p.theorem, cite, timeout=60)
    final = coqc_check(p.theorem, cite, CoqConfig())
    assert checked.reasons == final.reasons == ("forbidden: cites Nplength_infty",)


@requires_coqc
def test_stdlib_max_proof_chars_and_prefixes() -> None:
    short = coq_stdlib_problems(prefixes=("Coq.Bool.", "Coq.Bool."), max_proof_chars=40)
    assert short and all(len(p.proof) <= 40 for p in short)
    assert {p.module.split(".")[1] for p in short} == {"Bool"}
    assert len({p.key for p in short}) == len(short)  # the repeated prefix is read once


# -- split by module ----------------------------------------------------------------------------------
def test_split_keeps_modules_whole_and_is_deterministic(stdlib) -> None:
    train, held = split_by_module(stdlib, held_out_fraction=0.2, seed=0)
    assert len(train) + len(held) == len(stdlib)
    assert not {p.module for p in train} & {p.module for p in held}
    assert abs(len(held) / len(stdlib) - 0.2) < 0.03
    assert {p.split for p in train} == {TRAIN} and {p.split for p in held} == {HELD_OUT}
    again = split_by_module(stdlib, held_out_fraction=0.2, seed=0)
    assert [p.key for p in again[1]] == [p.key for p in held]
    other = split_by_module(stdlib, held_out_fraction=0.2, seed=1)
    assert {p.module for p in other[1]} != {p.module for p in held}


def test_no_stdlib_set_holds_out_what_another_trains_on(stdlib) -> None:
    """Every stdlib set, built with the defaults and with the demo's settings, takes its sides from one split
    decided by module before any filter: no theorem held out by one set is on another set's training side
    (a model taught on the demo's tactic assets and scored on ``coq-stdlib:held-out`` meets none it was taught)."""
    from proofrl.data.assets import AssetsConfig, asset_problems
    from proofrl.data.tactics import stdlib_tactic_problems
    from proofrl.demo.whole_proof import demo_config, demo_problems

    def sides(problems: list[Problem]) -> tuple[set[str], set[str]]:
        return {p.key for p in problems if p.split == TRAIN}, {p.key for p in problems if p.split == HELD_OUT}

    demo = AssetsConfig()
    sets = {
        "coq-stdlib": (
            {p.key for p in problem_set("coq-stdlib:train")},
            {p.key for p in problem_set("coq-stdlib:held-out")},
        ),
        f"coq-stdlib, max_proof_chars={demo.max_proof_chars}": (
            {p.key for p in problem_set("coq-stdlib:train", max_proof_chars=demo.max_proof_chars)},
            {p.key for p in problem_set("coq-stdlib:held-out", max_proof_chars=demo.max_proof_chars)},
        ),
        "tactic transitions": sides(stdlib_tactic_problems()),
        "demo's tactic data": sides(stdlib_tactic_problems(max_proof_chars=demo.max_proof_chars)),
        "demo's tactic assets": tuple({p.key for p in ps} for ps in asset_problems(demo)),
        "whole-proof demo": tuple({p.key for p in ps} for ps in demo_problems(demo_config())),
    }
    assert all(train and held for train, held in sets.values())
    leaks = {
        (held_by, trained_by): len(held & sets[trained_by][0])
        for held_by, (_, held) in sets.items()
        for trained_by in sets
        if held & sets[trained_by][0]
    }
    assert leaks == {}
    # a filtered list split again keeps the sides the whole library decided
    whole = {p.module: p.split for ps in split_by_module(stdlib) for p in ps}
    again = [p for ps in split_by_module([p for p in stdlib if len(p.proof) <= 60]) for p in ps]
    assert [p.split for p in again] == [whole[p.module] for p in again]


def test_split_preserves_input_order() -> None:
    problems = [P(f"t{i}", f"M{i % 5}") for i in range(50)]
    train, held = split_by_module(problems, held_out_fraction=0.4, seed=3)
    index = {p.name: i for i, p in enumerate(problems)}
    assert [index[p.name] for p in train] == sorted(index[p.name] for p in train)
    assert [index[p.name] for p in held] == sorted(index[p.name] for p in held)
    assert len(held) == 20  # two of five equal modules


def test_split_edges() -> None:
    problems = [P(f"t{i}", f"M{i % 3}") for i in range(9)]
    assert split_by_module(problems, held_out_fraction=0.0)[1] == []
    assert split_by_module(problems, held_out_fraction=1.0)[0] == []
    assert split_by_module([], held_out_fraction=0.5) == ([], [])
    # a module bigger than the target does not swamp it when a closer choice exists
    lopsided = [P(f"a{i}", "Big") for i in range(90)] + [P(f"b{i}", f"S{i}") for i in range(10)]
    _, held = split_by_module(lopsided, held_out_fraction=0.1, seed=0)
    assert len(held) == 10 and all(p.module != "Big" for p in held)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="held_out_fraction"):
            split_by_module(problems, held_out_fraction=bad)


def test_problems_without_module_are_their_own_groups() -> None:
    problems = [P(f"p{i}") for i in range(10)]
    train, held = split_by_module(problems, held_out_fraction=0.3, seed=0)
    assert len(held) == 3 and len(train) == 7


# -- kimina's filter ----------------------------------------------------------------------------------
def test_kimina_filter_drops_easy_and_duplicates_hard() -> None:
    problems = [P("easy"), P("half"), P("mid"), P("hard"), P("never"), P("unknown"), P("q", "Coq.M")]
    rates = {"easy": 0.75, "half": 0.5, "mid": 0.25, "hard": 0.125, "never": 0.0, "Coq.M.q": 0.9, "q": 0.0}
    out = [p.key for p in kimina_filter(problems, rates)]
    # > 0.5 dropped (0.5 kept); < 0.25 twice, adjacent; unknown kept once; the module key wins over the name
    assert out == ["half", "mid", "hard", "hard", "never", "never", "unknown"]


def test_kimina_filter_options() -> None:
    problems = [P("a"), P("b"), P("c")]
    rates = {"a": 0.0, "b": 0.3, "c": 0.6}
    assert [p.name for p in kimina_filter(problems, rates, duplicate_below=None)] == ["a", "b"]
    assert [p.name for p in kimina_filter(problems, rates, copies=3)] == ["a", "a", "a", "b"]
    assert [p.name for p in kimina_filter(problems, rates, max_win_rate=1.0, duplicate_below=0.5)] == [
        "a",
        "a",
        "b",
        "b",
        "c",
    ]
    with pytest.raises(ValueError, match="copies"):
        kimina_filter(problems, rates, copies=0)
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match="b: win rate must be in"):
            kimina_filter(problems, {"b": bad})


# -- names used by recipes ----------------------------------------------------------------------------
def test_problem_set_names(stdlib, tmp_path) -> None:
    train = problem_set("coq-stdlib:train")
    held = problem_set("coq-stdlib:held-out", limit=7)
    assert len(train) + len(problem_set("coq-stdlib:held-out")) == len(stdlib)
    assert len(held) == 7 and not {p.module for p in train} & {p.module for p in held}
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"name": "a", "formal_statement": "Theorem a : True.", "split": "valid"}) + "\n")
    assert [p.name for p in problem_set(str(path), split="valid")] == ["a"]
    with pytest.raises(ValueError, match="unknown problem set 'coq-stdlib:test'"):
        problem_set("coq-stdlib:test")
    with pytest.raises(FileNotFoundError, match="no problem file"):
        problem_set(str(tmp_path / "missing.jsonl"))


def test_stdlib_split_sizes_are_reported(stdlib) -> None:
    """Not a property: prints the sizes the docs quote (run with -s)."""
    train, held = split_by_module(stdlib)
    print(
        f"\nstdlib core: {len(stdlib)} theorems in {len({p.module for p in stdlib})} modules; "
        f"train {len(train)}, held-out {len(held)} ({len({p.module for p in held})} modules)"
    )
    assert Counter(p.split for p in train + held) == Counter({TRAIN: len(train), HELD_OUT: len(held)})


def test_the_held_out_pool_extends_the_assets_draw_with_the_rest_of_the_side(stdlib, tmp_path) -> None:
    """A claim's larger held-out pool starts with the draw every earlier run used, adds only held-out theorems under
    the same filter, each name once, and stops where the side does."""
    from proofrl.data.assets import AssetsConfig, TacticAssets, asset_problems
    from proofrl.data.tactics import stdlib_tactic_problems

    demo = AssetsConfig()
    train, held = asset_problems(demo)
    assets = TacticAssets(tmp_path / "tactic-assets", tmp_path, tmp_path, tmp_path, train, held, {"seed": 0})
    assert assets.held_out_pool(50) == held[:50] and assets.held_out_pool(len(held)) == held
    side = {p.name for p in stdlib_tactic_problems(max_proof_chars=demo.max_proof_chars) if p.split == HELD_OUT}
    pool = assets.held_out_pool(10**6)
    assert pool[: len(held)] == held and len(pool) > len(held)
    assert {p.name for p in pool} == side and len({p.name for p in pool}) == len(pool)
    assert len(assets.held_out_pool(len(held) + 5)) == len(held) + 5
