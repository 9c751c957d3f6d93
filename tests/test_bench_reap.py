"""reap's learning claims (search-and-learn over rounds, value head against policy-only, and search-and-learn
beside the library-learning prover's sources): one run per seed serves the first two, the arms are paired on the
same held-out theorems, and each seed records whether its model learned (training theorems the rollouts solved,
update steps) and, with the sources, what the online memory learned."""

import json

from conftest import requires_coq
from typer.testing import CliRunner

from proofrl.bench.reap import SEARCH_AND_LEARN, learning_facts, search_and_learn_settings
from proofrl.cli import app

NAMES = ["reap-search-and-learn", "reap-value-head"]
LIBRARY = "reap-search-and-learn-library"


def test_learning_facts_count_solves_and_update_steps_per_round():
    rows = [
        {"round": 0, "eval/proved": 3, "eval/theorems": 30},  # the start's evaluation: no rollout
        {"round": 1, "rollout/theorems": 64, "rollout/solved": 0, "replay/added": 0, "learn/skipped": "nothing"},
        {"round": 2, "rollout/theorems": 64, "rollout/solved": 4, "replay/added": 9, "learn/batches": 4.0},
    ]
    facts = learning_facts(rows)
    assert facts["rounds"] == [
        {"round": 1, "theorems": 64, "solved": 0, "replay_added": 0, "update_steps": 0},
        {"round": 2, "theorems": 64, "solved": 4, "replay_added": 9, "update_steps": 4},
    ]
    assert (facts["solved"], facts["theorems"], facts["update_steps"]) == (4, 128, 4)
    assert learning_facts(rows[:1]) == {"rounds": [], "solved": 0, "theorems": 0, "update_steps": 0}


def test_the_smoke_size_cuts_budgets_but_keeps_the_rounds():
    full, smoke = search_and_learn_settings(False, 30), search_and_learn_settings(True, 2)
    assert full == SEARCH_AND_LEARN | {"eval_theorems": 30}
    assert smoke["rounds"] == full["rounds"] and smoke["eval_theorems"] == 2
    assert smoke["batch_theorems"] < full["batch_theorems"] and smoke["seconds"] < full["seconds"]


@requires_coq
def test_the_reap_learning_claims_at_smoke_size_pair_the_arms_and_record_learning(tmp_path):
    names = [*NAMES, LIBRARY]
    r = CliRunner().invoke(
        app, ["bench", "--smoke", *(x for n in names for x in ("--claim", n)), "--seeds", "1", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    lines = {x["claim"]: x for x in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines())}
    assert set(lines) == set(names)
    arms = lines["reap-search-and-learn"]["arms"]
    assert arms == lines["reap-value-head"]["arms"]  # one run serves both claims
    last = f"round {SEARCH_AND_LEARN['rounds']}"
    assert set(arms) == {"round 0", last, "policy only", "policy + value head"}
    held_out = set(arms["round 0"])
    assert len(held_out) == 2 and all(set(v) == held_out for v in arms.values())  # paired: the same theorems
    assert all(x in (0.0, 1.0) for v in arms.values() for x in v.values())
    said = " ".join(r.output.split())  # the console wraps its lines
    assert "policy+value: rollouts solved" in said and "policy-only: rollouts solved" in said

    cached, library = sorted(
        (tmp_path / "reap-shared").glob("seed-0-size-2-*-smoke.json"), key=lambda f: "sources" in f.read_text()
    )
    kept = json.loads(cached.read_text())
    assert kept["arms"] == arms and kept["settings"] == search_and_learn_settings(True, 2)
    smoke = kept["settings"]
    for arm in ("policy+value", "policy-only"):
        facts = kept["learning"][arm]
        assert len(facts["rounds"]) == smoke["rounds"]
        assert facts["theorems"] == smoke["rounds"] * smoke["batch_theorems"]
        assert 0 <= facts["solved"] <= facts["theorems"] and facts["update_steps"] >= 0
        assert facts["update_steps"] == 0 or facts["solved"] > 0  # no solve, no update
        metrics = [
            json.loads(x) for x in (cached.parent / cached.stem / arm / "metrics.jsonl").read_text().splitlines()
        ]
        assert facts == learning_facts(metrics)  # what the loop logged, not a recount

    # beside the library's sources: its own run (other settings, other cache), the two rounds of one arm, paired
    lib = json.loads(library.read_text())
    assert lib["settings"] == search_and_learn_settings(True, 2, library=True) and set(lib["learning"]) == {
        "policy+value"
    }
    assert lines[LIBRARY]["arms"] == lib["arms"] and set(lib["arms"]) == {"round 0", last}
    assert all(set(v) == held_out for v in lib["arms"].values())
    work = library.parent / library.stem / "policy+value"
    config = (work / "config.yaml").read_text()
    assert "knn-online:" in config and "+auto" in config  # the sources reached the loop
    memory = (tmp_path / "tactic-assets" / "memory" / "pairs.jsonl").read_text().splitlines()
    assert memory and not {json.loads(x)["theorem"] for x in memory} & held_out  # the start: training proofs only


def test_the_reap_recipe_s_own_cap_does_not_cut_a_larger_planned_pool(tmp_path):
    """The reap recipe evaluates at most 100 held-out theorems (``data.eval_limit: 100``); a claim planned at 236
    must reach the run's data as 236, in both arms."""
    from types import SimpleNamespace

    from proofrl.bench.claim import ClaimRun
    from proofrl.bench.reap import search_and_learn_overrides
    from proofrl.problems import Problem, save_problems
    from proofrl.train.expert_iteration import load_config, load_data

    assert load_config("reap", []).data.eval_limit == 100  # the cap this test is about
    pool = [Problem(f"t{i}", f"Theorem t{i} : {i} = {i}.", split="held-out") for i in range(236)]
    save_problems(pool, tmp_path / "held-out.jsonl")
    save_problems(pool[:3], tmp_path / "train.jsonl")
    (tmp_path / "transitions.jsonl").write_text("")
    assets = SimpleNamespace(model_dir=tmp_path / "model", train_transitions=tmp_path / "transitions.jsonl")
    run = ClaimRun(seed=10, size=236, out=tmp_path / "claim" / "seed-10", workers=2, assets=assets)
    s = search_and_learn_settings(False, run.size)
    for arm, head in (("policy+value", "true"), ("policy-only", "false")):
        cfg = load_config("reap", search_and_learn_overrides(run, s, tmp_path, arm, head))
        assert (cfg.data.eval_limit, cfg.eval.limit) == (236, 236)
        assert load_data(cfg).held_out == pool
