"""The bench's plan (``proofrl bench --plan``): the shipped plan names every claim, its arms as the registry does,
and fits its budget; a plan that does not is one line naming what to fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from proofrl.bench.claims import CLAIMS
from proofrl.bench.plan import load_plan
from proofrl.errors import ConfigError

PLAN = Path(__file__).resolve().parent.parent / "docs" / "claims-plan.yaml"
PLAN_2 = PLAN.with_name("claims-plan-2.yaml")
PILOT_3, PLAN_3 = PLAN.with_name("claims-pilot-3.yaml"), PLAN.with_name("claims-plan-3.yaml")
PILOT_4, PLAN_4 = PLAN.with_name("claims-pilot-4.yaml"), PLAN.with_name("claims-plan-4.yaml")
PILOT_5, PLAN_5 = PLAN.with_name("claims-pilot-5.yaml"), PLAN.with_name("claims-plan-5.yaml")
PILOT_6, PILOT_7 = PLAN.with_name("claims-pilot-6.yaml"), PLAN.with_name("claims-pilot-7.yaml")
PLAN_6, PLAN_7 = PLAN.with_name("claims-plan-6.yaml"), PLAN.with_name("claims-plan-7.yaml")
PILOT_8, PLAN_8 = PLAN.with_name("claims-pilot-8.yaml"), PLAN.with_name("claims-plan-8.yaml")
PLAN_9 = PLAN.with_name("claims-plan-9.yaml")
PLAN_10 = PLAN.with_name("claims-plan-10.yaml")
PLAN_11 = PLAN.with_name("claims-plan-11.yaml")
REGISTERED = {n: c.arms for n, c in CLAIMS.items()}


def seeds_used_before(name: str) -> set[int]:
    """The seeds of the bench's first runs (0-5) and of every plan the index lists before ``name``, the order they
    were written in."""
    listed = yaml.safe_load(PLAN.with_name("claims-plans.yaml").read_text())["plans"]
    earlier = listed[: listed.index(name)]
    return set(range(6)) | {s for f in earlier for s in load_plan(PLAN.with_name(f), REGISTERED).seeds}


def write(tmp_path: Path, tree: dict) -> Path:
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump(tree))
    return p


def test_the_shipped_plan_covers_every_claim_within_its_budget() -> None:
    plan = load_plan(PLAN, REGISTERED)
    assert set(plan.claims) == set(CLAIMS)
    assert len(plan.seeds) >= 5 and not set(plan.seeds) & set(range(6))  # new seeds
    assert sum(c.hours for c in plan.claims.values() if c.size is not None) <= plan.budget_hours
    assert all(c.why for c in plan.claims.values())


def test_the_second_plan_uses_seeds_no_run_used_and_runs_only_what_the_first_could_not() -> None:
    first, second = load_plan(PLAN, REGISTERED), load_plan(PLAN_2, REGISTERED)
    assert set(second.claims) == set(CLAIMS) and all(c.why for c in second.claims.values())
    assert not set(second.seeds) & (set(range(6)) | set(first.seeds)) and len(second.seeds) >= 5
    assert second.planned == {"unlikely-passN": 69} and first.planned["unlikely-passN"] == 48


def test_the_third_plan_runs_the_memory_search_claim_at_its_pilot_s_size_on_seeds_no_run_used() -> None:
    pilot, third = load_plan(PILOT_3, REGISTERED), load_plan(PLAN_3, REGISTERED)
    earlier = set(range(6)) | set(load_plan(PLAN, REGISTERED).seeds) | set(load_plan(PLAN_2, REGISTERED).seeds)
    assert pilot.planned == {"reap-mcts-vs-best-first-memory": 100}
    assert third.planned == {"reap-mcts-vs-best-first-memory": 785} and len(third.seeds) >= 5
    assert not set(third.seeds) & (earlier | set(pilot.seeds))


def test_the_fourth_plan_runs_eva_ranking_on_the_pilot_s_states_at_the_seeds_it_asked_for() -> None:
    first, pilot, fourth = (load_plan(p, REGISTERED) for p in (PLAN, PILOT_4, PLAN_4))
    # the pilot repeats the first plan's EVA run as it was; the plan adds seeds, not states
    assert pilot.seeds == first.seeds and pilot.planned == {"eva-ranking": 55, "eva-ranking-value-head": 55}
    assert fourth.planned == pilot.planned and len(fourth.seeds) == 15
    assert not set(fourth.seeds) & seeds_used_before(PLAN_4.name)


def test_the_fifth_plan_runs_the_correction_turn_on_the_whole_pool_at_seeds_no_run_used() -> None:
    pilot, fifth = load_plan(PILOT_5, REGISTERED), load_plan(PLAN_5, REGISTERED)
    assert pilot.planned["kimina-error-correction"] == 32 and len(pilot.seeds) == 6
    assert fifth.planned == {"kimina-error-correction": 78, "kimina-format-reward": 78} and len(fifth.seeds) == 7
    assert not set(fifth.seeds) & seeds_used_before(PLAN_5.name)


def test_the_sixth_pilot_measures_the_proving_claim_on_the_whole_pool_at_six_seeds_no_run_used() -> None:
    pilot = load_plan(PILOT_6, REGISTERED)
    assert pilot.planned == {"leanlistener-proving": 267} and len(pilot.seeds) == 6
    assert not set(pilot.seeds) & seeds_used_before(PILOT_6.name)


def test_the_seventh_pilot_measures_both_reap_learning_claims_on_the_whole_pool_at_six_seeds_no_run_used() -> None:
    pilot = load_plan(PILOT_7, REGISTERED)
    assert pilot.planned == {"reap-search-and-learn": 267, "reap-value-head": 267} and len(pilot.seeds) == 6
    assert not set(pilot.seeds) & seeds_used_before(PILOT_7.name)


def test_the_sixth_plan_runs_the_proving_claim_on_the_pool_at_the_seeds_its_pilot_asked_for() -> None:
    plan = load_plan(PLAN_6, REGISTERED)
    assert plan.planned == {"leanlistener-proving": 267} and len(plan.seeds) == 11
    assert not set(plan.seeds) & seeds_used_before(PLAN_6.name)


def test_the_seventh_plan_runs_nothing_and_says_the_seeds_each_reap_claim_would_need() -> None:
    plan = load_plan(PLAN_7, REGISTERED)
    assert plan.planned == {}
    assert "37 seeds" in plan.claims["reap-search-and-learn"].why and "48 seeds" in plan.claims["reap-value-head"].why


def test_the_eighth_pilot_measures_ppo_epochs_at_its_own_size_at_six_seeds_no_run_used() -> None:
    pilot = load_plan(PILOT_8, REGISTERED)
    assert pilot.planned == {"unlikely-passN": 48, "unlikely-ppo-epochs": 48} and len(pilot.seeds) == 6
    assert not set(pilot.seeds) & seeds_used_before(PILOT_8.name)


def test_the_eighth_plan_runs_nothing_and_says_the_seeds_ppo_epochs_would_need() -> None:
    plan = load_plan(PLAN_8, REGISTERED)
    assert plan.planned == {} and "29 seeds" in plan.claims["unlikely-ppo-epochs"].why


def test_the_ninth_plan_runs_the_model_alone_claim_on_the_whole_held_out_pool_at_five_new_seeds() -> None:
    plan = load_plan(PLAN_9, REGISTERED)
    assert plan.planned == {"rango-retrieval-model-alone": 292} and len(plan.seeds) == 5
    assert not set(plan.seeds) & seeds_used_before(PLAN_9.name)


def test_the_tenth_and_eleventh_plans_take_the_sizes_asked_on_the_pool_beyond_the_core_modules() -> None:
    """Each runs one claim beyond the core modules at the size its core run's analysis asked, on five new seeds;
    the pool holds that many lemmas, and the eleventh says it does not fit the bench's 4 hours."""
    from proofrl.bench.memory import file_pool

    tenth, eleventh = load_plan(PLAN_10, REGISTERED), load_plan(PLAN_11, REGISTERED)
    assert tenth.planned == {"rango-retrieval-model-alone-beyond-core": 3295}
    assert eleventh.planned == {"reap-mcts-vs-best-first-beyond-core": 2595}
    for plan, path in ((tenth, PLAN_10), (eleventh, PLAN_11)):
        assert len(plan.seeds) == 5 and not set(plan.seeds) & seeds_used_before(path.name)
    assert not set(tenth.seeds) & set(eleventh.seeds)
    assert (
        eleventh.budget_hours > 4
        and "over the bench's 4-hour budget" in eleventh.claims["reap-mcts-vs-best-first-beyond-core"].why
    )
    if shutil.which("coqc"):
        assert len(file_pool(3295, "all", library="rest")) == 3295


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda t: t["claims"].pop("eva-ranking"), "says nothing of eva-ranking"),
        (lambda t: t["claims"].__setitem__("no-such-claim", {"size": 1, "why": "x"}), "'no-such-claim' is not a claim"),
        (lambda t: t["claims"]["eva-ranking"].__setitem__("arms", ["a", "b"]), "eva-ranking's arms are"),
        (lambda t: t["claims"]["eva-ranking"].__setitem__("hours", 99.0), "over the budget"),
        (lambda t: t.__setitem__("seeds", [1, 1]), "seeds repeat"),
        (lambda t: t["claims"]["eva-ranking"].__setitem__("size", 0), "size"),
        (lambda t: t.pop("budget_hours"), "budget_hours"),
    ],
)
def test_a_bad_plan_is_one_line_naming_the_fix(tmp_path, change, says) -> None:
    tree = yaml.safe_load(PLAN.read_text())
    change(tree)
    with pytest.raises(ConfigError) as e:
        load_plan(write(tmp_path, tree), REGISTERED)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_missing_plan_file_is_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no such plan file"):
        load_plan(tmp_path / "nope.yaml", REGISTERED)
