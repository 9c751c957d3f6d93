"""reap's claims: AND-OR MCTS against best-first at equal budget; search-and-learn over rounds; the value head."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from .claim import Claim, ClaimRun, Results

REAP_RL_SOURCE = (
    "The reap blog reports 78.7 % of miniF2F-test accumulated during RL (77.5 % at pass@32 after it) and gives no "
    "held-out curve over rounds nor a policy-only ablation at this scale."
)


# -- reap: MCTS against best-first at equal budget ------------------------------------------------------------

SEARCH_BUDGET: dict[str, Any] = {"expansions": 16, "width": 8, "tactic_timeout": 2.0}
"""both engines: 16 policy calls of 8 tactics per theorem, 2 s a tactic (the search demo's budget)"""


def search_budget(run: ClaimRun) -> list[str]:
    """:data:`SEARCH_BUDGET` (2 calls of 2 tactics at the smoke size) as overrides of the engines' search recipes
    (:func:`proofrl.demo.search.equal_budget`)."""
    from ..demo.search import equal_budget

    return equal_budget(**(SEARCH_BUDGET | ({"expansions": 2, "width": 2} if run.smoke else {})))


def mcts_vs_best_first(run: ClaimRun) -> Results:
    """Best-first (ReProver's cumulative log-prob priority) and reap's AND-OR MCTS search the same held-out
    theorems with the same tiny tactic model, each from a policy seeded with ``run.seed``; the value is 1 when
    the search's proof passed the fresh ``coqc`` final check, else 0."""
    from ..demo.search import engine_config
    from ..policy.tactic import make_tactic_policy
    from ..search.run import search_many

    problems = run.assets.held_out_pool(run.size)
    budget = search_budget(run)
    out: Results = {}
    for arm in ("best-first", "mcts"):
        policy = make_tactic_policy(run.assets.policy_spec, seed=run.seed, device="cpu")
        results = search_many(
            problems,
            policy,
            out_dir=run.out / arm,
            workers=run.workers,
            config=engine_config(arm, budget),
            progress=False,
        )
        out[arm] = {r.name: float(r.status == "proved" and r.verdict is not None and r.verdict.valid) for r in results}
        if len(out[arm]) != len(problems):
            raise RuntimeError(f"{arm}: {len(problems) - len(out[arm])} theorems share a name or have no result")
    return out


# -- reap: search-and-learn rounds, and the value head against policy-only ------------------------------------

SEARCH_AND_LEARN = {
    "rounds": 1,
    "batch_theorems": 64,
    "passes": 1,
    "num_samples": 8,
    "max_steps": 16,
    "max_nodes": 64,
    "tactic_timeout": 5.0,
    "seconds": 30.0,
}
"""the ``reap`` recipe's search (MCTS, 8 tactics a step, 16 steps, 64 nodes, 5 s a tactic, 30 s a theorem) and
learner; the rollouts cut to what 2 loaded cores allow: one round of 64 training theorems × 1 pass (the recipe:
3 rounds of 16 × 4), held-out evaluation on the claim's size (30 by default) of the assets' held-out pool.

Why 64 × 1: the taught tiny model's MCTS solves about 7 % of the training theorems in one pass (13 and 14 of
200 in two passes of a probe over the training side only), and a second pass mostly finds the same theorems
again (19 of 200 in either pass); 174 of 200 searches a pass ended with every branch failed, 2 or 3 with the
step budget spent, so more steps or nodes per search would hardly help (more tactics per step might, but would
change the held-out search too). More theorems do: a round of 64 × 1 leaves a
round with nothing solved (so no update) about 0.93⁶⁴ ≈ 1 % of the time, where the 8 × 1 this claim ran before
left it about 56 % of the time (and did: no update in any seed)."""


def proved_in(results_jsonl: Path) -> dict[str, float]:
    """Per theorem of a search's ``results.jsonl`` (:func:`proofrl.search.run.search_many`): 1 when it was proved
    and its final check's verdict is ``valid``, else 0."""
    import json

    from ..provers.base import Verdict

    rows = [json.loads(x) for x in results_jsonl.read_text().splitlines() if x.strip()]
    return {
        r["name"]: float(r["status"] == "proved" and bool(r["verdict"]) and Verdict.from_json(r["verdict"]).valid)
        for r in rows
    }


def learning_facts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether an arm learned: from its metrics rows (``ExpertIteration.run()``'s ``rounds``), per round the
    training theorems searched, how many of them the rollouts solved, the replay samples added and the update
    steps (optimiser steps; 0 when the round solved nothing and so made no update), and the totals."""
    per = [
        {
            "round": r["round"],
            "theorems": r["rollout/theorems"],
            "solved": r["rollout/solved"],
            "replay_added": r["replay/added"],
            "update_steps": int(r.get("learn/batches", 0)),
        }
        for r in rows
        if "rollout/theorems" in r  # round 0 is an evaluation only
    ]
    return {
        "rounds": per,
        "solved": sum(x["solved"] for x in per),
        "theorems": sum(x["theorems"] for x in per),
        "update_steps": sum(x["update_steps"] for x in per),
    }


LIBRARY_SOURCES = {"memory": "knn-online: the assets' training transitions", "automation": "auto"}
"""the library-learning prover's sources beside the model (``rollout.sources``): an online proof memory that
starts from the training split's human proofs (:meth:`proofrl.data.assets.TacticAssets.memory_dir`; the held-out
modules are not in it; each run learns into its own copy, never into that folder) and Coq's automation menu
(:func:`proofrl.policy.sources.automation_menu`, every tactic of it)"""


def search_and_learn_settings(smoke: bool, eval_theorems: int, *, library: bool = False) -> dict[str, Any]:
    """:data:`SEARCH_AND_LEARN` (budgets cut at the smoke size) with the held-out theorems of this size;
    ``library``: with :data:`LIBRARY_SOURCES` beside the model."""
    smoke_cut = {"num_samples": 2, "max_steps": 2, "max_nodes": 8, "seconds": 5.0, "batch_theorems": 2}
    return (
        SEARCH_AND_LEARN
        | (smoke_cut if smoke else {})
        | {"eval_theorems": eval_theorems}
        | ({"sources": dict(LIBRARY_SOURCES)} if library else {})
    )


def search_and_learn_overrides(run: ClaimRun, s: dict[str, Any], work: Path, arm: str, head: str) -> list[str]:
    """The reap recipe's overrides for one arm of :func:`search_and_learn`: settings ``s``
    (:func:`search_and_learn_settings`), its files under ``work``, ``model.value_head`` = ``head``."""
    return [
        f"out={work / arm}",
        f"model.path={run.assets.model_dir}",
        f"data.train={work / 'train.jsonl'}",
        f"data.eval={work / 'held-out.jsonl'}",
        f"data.transitions={run.assets.train_transitions}",
        f"seed={run.seed}",
        f"steps={s['rounds']}",
        f"verify.workers={run.workers}",
        "progress=false",
        f"model.value_head={head}",
        f"data.eval_limit={s['eval_theorems']}",  # the recipe's own cap (100) must not cut the pool
        f"eval.limit={s['eval_theorems']}",
        "eval.every=0",
        f"eval.before={'true' if head == 'true' else 'false'}",
        f"rollout.problems_per_step={s['batch_theorems']}",
        f"rollout.passes={s['passes']}",
        f"search.width={s['num_samples']}",
        f"search.max_steps={s['max_steps']}",
        f"search.max_nodes={s['max_nodes']}",
        f"search.tactic_timeout={s['tactic_timeout']}",
        f"search.seconds={s['seconds']}",
        *(["optim.epochs=1", "replay.max_samples=32"] if run.smoke else []),
        *([f"rollout.sources={library_sources(run, s)}"] if "sources" in s else []),
    ]


def library_sources(run: ClaimRun, s: dict[str, Any]) -> str:
    """``rollout.sources`` for :data:`LIBRARY_SOURCES`: the assets' memory, online, and the automation."""
    return f"knn-online:{run.assets.memory_dir()}+{s['sources']['automation']}"


def search_and_learn(run: ClaimRun) -> Results:
    """:func:`learn_rounds` with the model alone, both arms (the two reap learning claims)."""
    return learn_rounds(run, library=False)


def search_and_learn_library(run: ClaimRun) -> Results:
    """:func:`learn_rounds` with the library-learning prover's sources beside the model (:data:`LIBRARY_SOURCES`),
    the policy+value arm alone: ``round 0`` and ``round 1`` are its evaluations before and after the round, each
    searching with a fork of the online memory as it stood (the start's memory, then the one the round's
    rollouts taught)."""
    return learn_rounds(run, library=True)


def learn_rounds(run: ClaimRun, *, library: bool) -> Results:
    """One seed of reap's search-and-learn (:class:`proofrl.train.expert_iteration.ExpertIteration`, seeded with
    ``run.seed``), shared by both reap learning claims (computed once per seed, size and settings, kept in
    ``reap-shared``): the policy+value arm is evaluated before (``round 0``) and after its rounds (``round 1``);
    the ``policy only`` arm (``model.value_head=false``) runs the same rounds from the same checkpoint and is
    evaluated after them (``policy + value head`` is the first arm's last evaluation). The value is 1 when the
    held-out search's proof passed the fresh ``coqc`` final check.

    The cached JSON keeps, beside the arms, each learning arm's :func:`learning_facts` (training theorems solved,
    update steps), so a reader can tell a seed whose model was never updated."""
    import hashlib
    import json

    from ..problems import save_problems
    from ..train.expert_iteration import ExpertIteration, load_config

    s = search_and_learn_settings(run.smoke, run.size, library=library)
    tag = hashlib.sha1(json.dumps(s, sort_keys=True).encode()).hexdigest()[:8]  # other settings: another run
    shared = run.shared_dir("reap")
    cached = shared / f"seed-{run.seed}-size-{run.size}-{tag}{run.smoke_suffix}.json"
    pool = run.assets.held_out_pool(run.size)

    def short(arms: Results) -> dict[str, int]:
        """The arms that hold other than the pool's theorems, with their counts (a run cut short)."""
        return {arm: len(v) for arm, v in arms.items() if len(v) != len(pool)}

    if cached.is_file():  # a run whose arms hold fewer theorems than the pool was cut short: run it again
        arms = json.loads(cached.read_text())["arms"]
        if not short(arms):
            return arms
        shutil.rmtree(shared / cached.stem, ignore_errors=True)  # its run folders hold the cut run's settings
    work = shared / cached.stem
    work.mkdir(parents=True, exist_ok=True)
    save_problems(run.assets.train_problems, work / "train.jsonl")
    save_problems(pool, work / "held-out.jsonl")

    def proved(arm: str, round_: int) -> dict[str, float]:
        return proved_in(work / arm / "rounds" / f"{round_:04d}" / "eval" / "results.jsonl")

    learning: dict[str, Any] = {}
    for arm, head in (("policy+value", "true"),) if library else (("policy+value", "true"), ("policy-only", "false")):
        cfg = load_config("reap", search_and_learn_overrides(run, s, work, arm, head))
        learning[arm] = facts = learning_facts(ExpertIteration(cfg).run()["rounds"])
        run.say(
            f"  reap seed {run.seed}, {arm}: rollouts solved {facts['solved']} of {facts['theorems']} training "
            f"theorems, {facts['update_steps']} update steps"
            + ("" if facts["update_steps"] else " (no update: the model after the rounds is the start model)")
        )
    last = int(s["rounds"])
    after = proved("policy+value", last)
    out: Results = {"round 0": proved("policy+value", 0), f"round {last}": after}
    if not library:
        out |= {"policy only": proved("policy-only", last), "policy + value head": after}
    if cut := short(out):  # never a partial arm kept
        raise RuntimeError(f"reap seed {run.seed}: arms {cut} searched other than the pool's {len(pool)} theorems")
    cached.write_text(json.dumps({"settings": s, "arms": out, "learning": learning}, indent=1))
    return out


CLAIMS: list[Claim] = [
    Claim(
        "reap-mcts-vs-best-first",
        "reap",
        "AND-OR MCTS proves more theorems than best-first search at equal budget.",
        "The reap blog reports 77.5 % on miniF2F-test at pass@32 with its MCTS (78.7 % accumulated during RL) and "
        "gives no best-first comparison at equal budget.",
        "proved (0/1) per held-out stdlib theorem, final check in a fresh coqc",
        "best-first",
        "mcts",
        run=mcts_vs_best_first,
        size=100,
        smoke_size=2,
        settings=dict(SEARCH_BUDGET),
    ),
    Claim(
        "reap-search-and-learn",
        "reap",
        "Search-and-learn raises held-out proved counts over rounds.",
        REAP_RL_SOURCE,
        "proved (0/1) per held-out theorem by MCTS with the policy+value model, final check in a fresh coqc",
        "round 0",
        "round 1",
        run=search_and_learn,
        size=30,
        smoke_size=2,
        settings=dict(SEARCH_AND_LEARN),
    ),
    Claim(
        "reap-search-and-learn-library",
        "reap",
        "Search-and-learn raises held-out proved counts over rounds when the model searches beside the "
        "library-learning prover's sources (an online proof memory and Coq's automation).",
        REAP_RL_SOURCE + " Graph2Tac measures Tactician's online k-NN proving 1.72× what the same k-NN frozen "
        "offline proves; here a round's own proofs teach both the memory and the model.",
        "proved (0/1) per held-out theorem by MCTS with the policy+value model, a fork of the online memory and the "
        "automation, final check in a fresh coqc",
        "round 0",
        "round 1",
        run=search_and_learn_library,
        size=30,
        smoke_size=2,
        settings=dict(SEARCH_AND_LEARN) | {"sources": dict(LIBRARY_SOURCES)},
    ),
    Claim(
        "reap-value-head",
        "reap",
        "MCTS with the learned value head proves more than policy-only MCTS.",
        REAP_RL_SOURCE,
        "proved (0/1) per held-out theorem after the same search-and-learn rounds, final check in a fresh coqc",
        "policy only",
        "policy + value head",
        run=search_and_learn,
        size=30,
        smoke_size=2,
        settings=dict(SEARCH_AND_LEARN),
    ),
]
