"""The papers' claims as named, paired experiments: what ``proofrl bench`` runs.

A :class:`Claim` names its paper, quotes what the source reports, and says which arm the paper expects to
be better (``treatment`` against ``baseline``, ``direction`` +1 when higher is better for the metric). Its
``run`` takes one :class:`ClaimRun` (a seed, a size, a folder) and measures *every* arm on the *same*
theorems under that seed, returning ``{arm: {theorem: value}}``; :mod:`proofrl.bench.run` repeats it over
seeds and :mod:`proofrl.bench.stats` compares the arms pairwise.

A claim whose ``run`` is ``None`` is listed (paper, source, arms) but not yet measured; the report says so.

Sizes are fixed per claim before any result is seen (:attr:`Claim.size`, theorems per seed) and chosen from
measured costs so that a claim's default seeds fit its time budget on 2 CPU cores; ``smoke_size`` is what the
CI test runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

NOT_QUOTED = "not quoted yet (the claim is not measured yet)"

LEANLISTENER_SOURCE = (
    "LeanListener's summary, tactic validity: ReProver (the SFT start) Prec@8 40.77, 0-precision "
    "12.74 %; online GRPO 51.01 / 7.44 %; offline DPO 37.75 / 29.10 %; online DPO 44.75 / 11.88 %. "
    "Proving rate, random split: ReProver 52.76, LeanListener (GRPO) 53.21."
)

EVA_SOURCE = (
    "EVA, Table 4 (Lean 4 hold-out set), ranking accuracy: standard SFT generative RM (text score) 78.5 %, "
    "value-head RM 81.2 %, Leibniz-1.5B (EVA, E[R]) 84.6 %; Pearson r 0.725 / 0.782 / 0.824. Here the text "
    "score is the EVA model's own parsed integers (the same generations), which isolates the read-out."
)

REAP_RL_SOURCE = (
    "The reap blog reports 78.7 % of miniF2F-test accumulated during RL (77.5 % at pass@32 after it) and gives no "
    "held-out curve over rounds nor a policy-only ablation at this scale."
)

Results = dict[str, dict[str, float]]
"""arm → theorem (or state) name → the metric's value"""


@dataclass
class ClaimRun:
    """What a claim's run gets: the seed, theorems (or states) per seed, its own folder, the Coq processes, the
    shared tactic assets (:func:`proofrl.data.assets.tactic_assets`) and the console."""

    seed: int
    size: int
    out: Path
    workers: int
    assets: Any
    console: Any = None
    smoke: bool = False


@dataclass(frozen=True)
class Claim:
    name: str
    paper: str
    statement: str
    """the claim in one sentence, as the paper makes it"""
    source: str
    """what the source itself reports (quoted or paraphrased with its numbers)"""
    metric: str
    """what one value is (per theorem or state)"""
    baseline: str
    treatment: str
    direction: int = 1
    """+1: the claim is treatment > baseline on the metric; −1: treatment < baseline"""
    run: Callable[[ClaimRun], Results] | None = None
    size: int = 0
    """theorems (or states) per seed at the bench's size"""
    smoke_size: int = 2
    unit: str = "theorems"
    """what one value is measured on (theorems, states)"""
    settings: dict[str, Any] = field(default_factory=dict)
    """the arms' fixed settings (budgets, widths), shown in the report"""

    @property
    def implemented(self) -> bool:
        return self.run is not None

    @property
    def arms(self) -> tuple[str, str]:
        return self.baseline, self.treatment


# -- reap: MCTS against best-first at equal budget ------------------------------------------------------------

SEARCH_BUDGET: dict[str, Any] = {"expansions": 16, "width": 8, "tactic_timeout": 2.0}
"""both engines: 16 policy calls of 8 tactics per theorem, 2 s a tactic (the search demo's budget)"""


def mcts_vs_best_first(run: ClaimRun) -> Results:
    """Best-first (ReProver's cumulative log-prob priority) and reap's AND-OR MCTS search the same held-out
    theorems with the same tiny tactic model, each from a policy seeded with ``run.seed``; the value is 1 when
    the search's proof passed the fresh ``coqc`` final check, else 0."""
    from ..demo.search import SearchPartSettings, engine_config
    from ..policy.tactic import make_tactic_policy
    from ..search.run import search_many

    problems = run.assets.held_out_problems[: run.size]
    settings = SearchPartSettings(
        theorems=len(problems), **(SEARCH_BUDGET | ({"expansions": 2, "width": 2} if run.smoke else {}))
    )
    out: Results = {}
    for arm in ("best-first", "mcts"):
        policy = make_tactic_policy(run.assets.policy_spec, seed=run.seed, device="cpu")
        results = search_many(
            problems,
            policy,
            out_dir=run.out / arm,
            workers=run.workers,
            config=engine_config(arm, settings),
            progress=False,
        )
        out[arm] = {r.name: float(r.status == "proved" and r.verdict is not None and r.verdict.valid) for r in results}
        if len(out[arm]) != len(problems):
            raise RuntimeError(f"{arm}: {len(problems) - len(out[arm])} theorems share a name or have no result")
    return out


# -- LeanListener: step-level GRPO against its SFT start ------------------------------------------------------

STEP_LEVEL = {"updates": 4, "batch_states": 4, "group_size": 8, "lr": 3e-4, "tactic_timeout": 5.0, "k": 8}
"""the step-level demo's run: 4 online GRPO updates of 4 training states × 8 tactics, lr 3e-4 (the paper's
2.25e-6 is meant for 10,000 updates), 5 s a tactic; Prec@8 from 8 samples per held-out state"""


def step_level_settings(run: ClaimRun) -> dict[str, Any]:
    return STEP_LEVEL | ({"updates": 1, "batch_states": 2, "group_size": 2, "k": 2} if run.smoke else {})


def step_level_config(s: dict[str, Any], run: ClaimRun) -> Any:
    """The ``leanlistener`` recipe at the step-level demo's size, seeded with the bench seed."""
    from ..train.step_grpo import load_config

    overrides = [
        f"steps={s['updates']}",
        f"seed={run.seed}",
        f"rollout.batch_states={s['batch_states']}",
        f"rollout.group_size={s['group_size']}",
        f"rollout.workers={run.workers}",
        f"rollout.tactic_timeout={s['tactic_timeout']}",
        f"algorithm.lr={s['lr']}",
        f"checkpoint_every={s['updates']}",
        "keep_checkpoints=1",
        "eval.every=0",
        "rollout.sync_every=1",
    ]
    return load_config("leanlistener", overrides)


def step_grpo_proving(run: ClaimRun) -> Results:
    """The taught tiny model (SFT) and the same model after the short step-level GRPO run of
    :func:`step_grpo_vs_sft` each drive best-first search on the same held-out theorems at the reap claim's
    budget (:data:`SEARCH_BUDGET`), policy seeded with ``run.seed``; the value is 1 when the proof passed the
    fresh ``coqc`` final check."""
    from ..data.tactics import read_transitions
    from ..demo.search import SearchPartSettings, engine_config
    from ..eval.tactics import coq_pool, state_points
    from ..policy.model import load_policy
    from ..policy.tactic import HFTacticPolicy
    from ..search.run import search_many
    from ..train.step_grpo import StepLevelTrainer

    s = step_level_settings(run)
    problems = run.assets.held_out_problems[: run.size]
    budget = SearchPartSettings(
        theorems=len(problems), **(SEARCH_BUDGET | ({"expansions": 2, "width": 2} if run.smoke else {}))
    )
    train = state_points(read_transitions(run.assets.train_transitions))
    model, tok = load_policy(run.assets.model_dir, device="cpu")
    out: Results = {}
    for arm in ("SFT", "step-level GRPO"):
        if arm == "step-level GRPO":
            with coq_pool(run.workers, s["tactic_timeout"]) as pool:
                StepLevelTrainer(step_level_config(s, run), model, tok, train, pool, out=run.out / "run").fit()
        policy = HFTacticPolicy(model, tok, max_tokens=64, seed=run.seed)
        results = search_many(
            problems,
            policy,
            out_dir=run.out / arm,
            workers=run.workers,
            config=engine_config("best-first", budget),
            progress=False,
        )
        out[arm] = {r.name: float(r.status == "proved" and r.verdict is not None and r.verdict.valid) for r in results}
    return out


def step_grpo_vs_sft(run: ClaimRun) -> Results:
    """The taught tiny model (SFT) and the same model after a short online step-level GRPO run (``leanlistener``
    recipe, seeded with ``run.seed``) each sample 8 tactics at the same held-out states (the first ``run.size``
    of a fixed draw); the value is the share of the 8 that Coq accepts (its mean is Prec@8). Also writes
    ``tactics.json``: how often each arm sampled ``intros.``, and the most sampled tactics."""
    import json
    from collections import Counter

    from ..data.tactics import read_transitions
    from ..eval.tactics import coq_pool, load_points, state_points, tactic_metrics
    from ..policy.model import load_policy
    from ..train.step_grpo import StepLevelTrainer

    s = step_level_settings(run)
    held = load_points(run.assets.held_out_transitions, limit=run.size, seed=0)  # the same states for every seed
    train = state_points(read_transitions(run.assets.train_transitions))
    model, tok = load_policy(run.assets.model_dir, device="cpu")
    cfg = step_level_config(s, run)
    out: Results = {}
    tactics: dict[str, Any] = {}
    with coq_pool(run.workers, s["tactic_timeout"]) as pool:
        for arm in ("SFT", "step-level GRPO"):
            if arm == "step-level GRPO":
                StepLevelTrainer(cfg, model, tok, train, pool, out=run.out / "run").fit()
            m = tactic_metrics(
                model,
                tok,
                held,
                pool,
                k=s["k"],
                label=arm,
                timeout=s["tactic_timeout"],
                workers=run.workers,
                seed=run.seed,
            )
            out[arm] = {st.key: st.valid / st.k for st in m.per_state if not st.error}
            drawn = Counter(t.strip() for st in m.per_state for t in st.tactics if t.strip())
            total = sum(drawn.values())
            # a valid sample that is not `intros.`: at least valid − (its `intros.` samples) at each state
            others = sum(
                max(0, st.valid - sum(t.strip() == "intros." for t in st.tactics)) for st in m.per_state if not st.error
            )
            valid = sum(st.valid for st in m.per_state)
            tactics[arm] = {
                "samples": total,
                "intros.": drawn.get("intros.", 0),
                "valid": valid,
                "valid_not_intros_at_least": others,
                "top": drawn.most_common(5),
                "prec_at_k": m.prec_at_k,
                "zero_precision": m.zero_precision,
            }
    run.out.mkdir(parents=True, exist_ok=True)
    (run.out / "tactics.json").write_text(json.dumps(tactics, indent=2))
    return out


# -- EVA: E[R] over the anchor logits against the parsed text score and the value head --------------------------

EVA_RANKING = {
    "train_theorems": 24,
    "held_out_theorems": 40,
    "states_per_theorem": 2,
    "search_expansions": 1,
    "epochs": 3,
    "lr": 2e-3,
    "alpha": 0.5,
    "batch": 8,
    "max_state_chars": 300,
    "max_new_tokens": 80,
}
"""the EVA demo's settings (:class:`proofrl.demo.eva.EvaPartSettings`) on 3× its train and 8× its held-out
theorems: the proposals are labelled once (seed 0, the same for every seed); each seed trains the EVA model
(L_SFT + α·L_EVA, LoRA) and the value-head RM on the train proposals"""


def eva_settings(run: ClaimRun) -> dict[str, Any]:
    small = {"train_theorems": 2, "held_out_theorems": run.size, "states_per_theorem": 1, "epochs": 1}
    return EVA_RANKING | (small if run.smoke else {"held_out_theorems": run.size})


def per_state_accuracy(preds: list[dict[str, float]], records: list[Any], weights: Any = None) -> dict[str, float]:
    """Ranking accuracy (:func:`proofrl.eval.rm.metrics`: pairs whose target combined scores differ by ≥ 0.5, a
    tie one half) at each held-out state with at least one pair, keyed ``theorem#step``."""
    from collections import defaultdict

    from ..eval.rm import ranking_pairs
    from ..rewards.eva import combined_score

    pc = [combined_score(p, weights) for p in preds]
    won: dict[str, list[float]] = defaultdict(list)
    for a, b in ranking_pairs(records, weights):
        key = f"{records[a].extra.get('theorem', '')}#{records[a].extra.get('step', records[a].state)}"
        won[key].append(1.0 if pc[a] > pc[b] else 0.5 if pc[a] == pc[b] else 0.0)
    return {k: sum(v) / len(v) for k, v in won.items()}


def eva_ranking(run: ClaimRun) -> Results:
    """One seed of the EVA comparison, shared by both EVA claims (computed once per seed and size, kept in
    ``eva-shared``): Coq labels the proposals (:func:`proofrl.data.eva_labels.label_splits`, seed 0); the tiny
    tactic model learns L_SFT + α·L_EVA with LoRA (seeded with ``run.seed``) and, from the same start, the
    value-head RM (:class:`proofrl.bench.eva_table4.RegressionHeadRM`, MSE); on the held-out proposals each
    read-out's ranking accuracy per state: ``E[R]`` over the anchor logits, the ``parsed text`` score (3, the
    middle, where a dimension does not parse) of the same generations, and the ``value head``."""
    import json

    import torch

    from ..data.eva_labels import LabelSettings, label_splits
    from ..eval.rm import MIDDLE, prompt_of
    from ..policy.tactic import make_tactic_policy
    from ..rewards.eva import EvaScorer, parse_scores
    from ..train.eva import EvaLoraConfig, build_examples, load_base, read_records, train_eva
    from .eva_table4 import RegressionHeadRM, train_value_head

    s = eva_settings(run)
    shared = run.out.parent.parent / "eva-shared"
    cached = shared / f"seed-{run.seed}-size-{run.size}{'-smoke' if run.smoke else ''}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    labels = shared / f"labels-{run.size}{'-smoke' if run.smoke else ''}"
    if (labels / "train.jsonl").is_file() and (labels / "held-out.jsonl").is_file():
        paths = {"train": labels / "train.jsonl", "held-out": labels / "held-out.jsonl"}
    else:
        policy = make_tactic_policy(run.assets.policy_spec, device="cpu", seed=0, max_tokens=64)
        ls = LabelSettings(states_per_theorem=s["states_per_theorem"], search_expansions=s["search_expansions"], seed=0)
        paths, _ = label_splits(
            labels,
            {
                "train": (run.assets.train_transitions, s["train_theorems"]),
                "held-out": (run.assets.held_out_transitions, s["held_out_theorems"]),
            },
            policy=policy,
            settings=ls,
            workers=run.workers,
            console=run.console,
        )
    train, _ = read_records(paths["train"])
    held, _ = read_records(paths["held-out"])
    torch.manual_seed(run.seed)
    m, tok = load_base(run.assets.model_dir, lora=EvaLoraConfig(), device="cpu")
    ex, _ = build_examples(train, tok, max_state_chars=s["max_state_chars"])
    train_eva(m, tok, ex, alpha=s["alpha"], lr=s["lr"], batch=s["batch"], epochs=s["epochs"], seed=run.seed)
    scorer = EvaScorer(m, tok, max_new_tokens=s["max_new_tokens"], max_state_chars=s["max_state_chars"])
    prompts = [prompt_of(r, s["max_state_chars"]) for r in held]
    outputs = scorer.generate(prompts)
    expected = [e for e, _ in scorer.read_expected(prompts, outputs)]
    text = [
        {d: float(p.scores.get(d, MIDDLE)) for d in scorer.dims}
        for p in (parse_scores(o, scorer.dims) for o in outputs)
    ]
    torch.manual_seed(run.seed)
    m, tok = load_base(run.assets.model_dir, lora=EvaLoraConfig(), device="cpu")
    vh = RegressionHeadRM(m, tok, dims=scorer.dims, max_state_chars=s["max_state_chars"])
    train_value_head(vh, train, lr=s["lr"], batch=s["batch"], epochs=s["epochs"], seed=run.seed)
    out: Results = {
        arm: per_state_accuracy(p, held, scorer.weights)
        for arm, p in (
            ("parsed text score", text),
            ("E[R] over anchor logits", expected),
            ("value head", vh.predict(held)),
        )
    }
    shared.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(out))
    return out


# -- reap: search-and-learn rounds, and the value head against policy-only ------------------------------------

SEARCH_AND_LEARN = {
    "rounds": 1,
    "eval_theorems": 30,
    "batch_theorems": 8,
    "passes": 1,
    "num_samples": 8,
    "max_steps": 16,
    "max_nodes": 64,
    "tactic_timeout": 5.0,
    "seconds": 30.0,
}
"""the ``reap`` recipe's search (MCTS, 8 tactics a step, 16 steps, 64 nodes, 5 s a tactic, 30 s a theorem) and
learner, cut to what 2 loaded cores allow: one round of 8 training theorems × 1 rollout pass (the recipe: 3
rounds of 16 × 4), held-out evaluation on the first 30 of the assets' held-out theorems"""


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


def search_and_learn(run: ClaimRun) -> Results:
    """One seed of reap's search-and-learn (:class:`proofrl.train.expert_iteration.ExpertIteration`, seeded with
    ``run.seed``), shared by both reap learning claims (computed once per seed and size, kept in
    ``reap-shared``): the policy+value arm is evaluated before (``round 0``) and after its rounds (``round 1``);
    the ``policy only`` arm (``model.value_head=false``) runs the same rounds from the same checkpoint and is
    evaluated after them (``policy + value head`` is the first arm's last evaluation). The value is 1 when the
    held-out search's proof passed the fresh ``coqc`` final check."""
    import json

    from ..problems import save_problems
    from ..train.expert_iteration import ExpertIteration, load_reap_config

    s = (
        SEARCH_AND_LEARN
        | ({"num_samples": 2, "max_steps": 2, "max_nodes": 8, "seconds": 5.0, "batch_theorems": 2} if run.smoke else {})
        | {"eval_theorems": run.size}
    )
    shared = run.out.parent.parent / "reap-shared"
    cached = shared / f"seed-{run.seed}-size-{run.size}{'-smoke' if run.smoke else ''}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    work = shared / cached.stem
    work.mkdir(parents=True, exist_ok=True)
    save_problems(run.assets.train_problems, work / "train.jsonl")
    save_problems(run.assets.held_out_problems, work / "held-out.jsonl")

    def proved(arm: str, round_: int) -> dict[str, float]:
        return proved_in(work / arm / "rounds" / f"{round_:04d}" / "eval" / "results.jsonl")

    for arm, head in (("policy+value", "true"), ("policy-only", "false")):
        cfg = load_reap_config(
            "reap",
            [
                f"out={work / arm}",
                f"model.path={run.assets.model_dir}",
                f"data.train={work / 'train.jsonl'}",
                f"data.held_out={work / 'held-out.jsonl'}",
                f"data.transitions={run.assets.train_transitions}",
                f"seed={run.seed}",
                f"rounds={s['rounds']}",
                f"workers={run.workers}",
                "progress=false",
                f"model.value_head={head}",
                f"eval.theorems={s['eval_theorems']}",
                "eval.every=0",
                f"eval.before={'true' if head == 'true' else 'false'}",
                f"rollout.batch_theorems={s['batch_theorems']}",
                f"rollout.passes={s['passes']}",
                f"search.num_samples={s['num_samples']}",
                f"search.max_steps={s['max_steps']}",
                f"search.max_nodes={s['max_nodes']}",
                f"search.tactic_timeout={s['tactic_timeout']}",
                f"search.seconds={s['seconds']}",
                *(["learner.epochs=1", "learner.max_samples=32"] if run.smoke else []),
            ],
        )
        ExpertIteration(cfg).run()
    last = int(s["rounds"])
    after = proved("policy+value", last)
    out: Results = {
        "round 0": proved("policy+value", 0),
        f"round {last}": after,
        "policy only": proved("policy-only", last),
        "policy + value head": after,
    }
    cached.write_text(json.dumps(out))
    return out


# -- Rewarding the Unlikely: the unlikeliness reward against plain GRPO at large N ----------------------------

UNLIKELY = {"eval_problems": 48, "eval_samples": 32, "rl_steps": 12, "sft_epochs": 12}
"""the whole-proof demo's run (:class:`proofrl.demo.whole_proof.DemoConfig` defaults, the ``demo`` recipe: the
unlikeliness recipe scaled down): 48 held-out theorems, 32 samples each, 12 GRPO steps per arm"""


def unlikeliness_pass_at_n(run: ClaimRun) -> Results:
    """The whole-proof demo (:func:`proofrl.demo.whole_proof.run_demo`): the same split, held-out theorems and
    taught SFT model for every seed (the demo's seed 0), then GRPO plain and with the unlikeliness reward
    (β_rank 0.25) from it, the recipe seeded with ``run.seed``; the value is pass@32 per held-out theorem: 1
    when one of its 32 samples passed the final check (N = 32 samples, so the estimate is exact)."""
    import json

    from ..demo.whole_proof import DemoConfig, run_demo

    small = {"eval_problems": run.size, "sft_epochs": 2, "rl_steps": 1, "eval_samples": 4}
    s = UNLIKELY | (small if run.smoke else {"eval_problems": run.size})
    overrides = [f"seed={run.seed}", f"eval.samples={s['eval_samples']}", f"eval.ks=[1, {s['eval_samples']}]"]
    if run.smoke:
        overrides += [
            "rollout.problems_per_step=2",
            "rollout.group_size=2",
            "rollout.max_tokens=24",
            "eval.max_tokens=24",
        ]
    model = {"hidden": 64, "layers": 1, "heads": 4, "vocab_size": 512} if run.smoke else DemoConfig().model
    cfg = DemoConfig(
        out=run.out,
        seed=0,
        eval_problems=s["eval_problems"],
        sft_epochs=s["sft_epochs"],
        rl_steps=s["rl_steps"],
        workers=run.workers,
        overrides=tuple(overrides),
        model=model,
    )
    run_demo(cfg, console=run.console)
    out: Results = {}
    for arm, label in (("GRPO", "grpo"), ("GRPO + unlikeliness", "grpo-unlikeliness")):
        solved: dict[str, float] = {}
        for line in (run.out / f"samples-{label}.jsonl").read_text().splitlines():
            r = json.loads(line)
            solved[r["name"]] = max(solved.get(r["name"], 0.0), float(r["status"] == "valid"))
        out[arm] = solved
    return out


# -- the registry ---------------------------------------------------------------------------------------------

CLAIMS: dict[str, Claim] = {
    c.name: c
    for c in (
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
        Claim(
            "unlikely-passN",
            "Rewarding the Unlikely",
            "GRPO with the unlikeliness reward raises pass@N at large N over plain GRPO.",
            "Figure 2: GRPO from DeepSeek-Prover-V1.5-SFT improves pass@1..16 but is below the base model at large N; "
            "the unlikeliness reward improves pass@N across N up to 512 on their validation set.",
            "pass@32 per held-out theorem (32 samples, final check in Coq)",
            "GRPO",
            "GRPO + unlikeliness",
            run=unlikeliness_pass_at_n,
            size=48,
            smoke_size=2,
            settings=dict(UNLIKELY),
        ),
        Claim(
            "unlikely-uplift-rank",
            "Rewarding the Unlikely",
            "The uplift rate falls with rank under GRPO and flattens with the unlikeliness reward.",
            NOT_QUOTED,
            "uplift-rate slope over rank per seed",
            "GRPO",
            "GRPO + unlikeliness",
        ),
        Claim(
            "unlikely-ppo-epochs",
            "Rewarding the Unlikely",
            "More PPO epochs per batch raise pass@N.",
            NOT_QUOTED,
            "pass@32 estimate per held-out theorem",
            "1 epoch",
            "2 epochs",
        ),
        Claim(
            "kimina-error-correction",
            "kimina",
            "The error-correction turn raises the pass rate over the same budget without it.",
            NOT_QUOTED,
            "proved (0/1) per held-out theorem",
            "two samples",
            "sample + correction",
        ),
        Claim(
            "kimina-format-reward",
            "kimina",
            "The format reward does not lower the pass rate.",
            NOT_QUOTED,
            "pass@8 per held-out theorem",
            "without format reward",
            "with format reward",
            direction=-1,
        ),
        Claim(
            "leanlistener-prec8",
            "LeanListener",
            "Step-level GRPO raises Prec@8 (and lowers 0-precision) over SFT.",
            LEANLISTENER_SOURCE,
            "share of 8 sampled tactics Coq accepts per held-out state (mean: Prec@8)",
            "SFT",
            "step-level GRPO",
            run=step_grpo_vs_sft,
            size=32,
            smoke_size=2,
            unit="states",
            settings=dict(STEP_LEVEL),
        ),
        Claim(
            "leanlistener-online-dpo",
            "LeanListener",
            "Online DPO beats offline DPO.",
            LEANLISTENER_SOURCE,
            "valid tactics of 8 per held-out state",
            "offline DPO",
            "online DPO",
        ),
        Claim(
            "leanlistener-proving",
            "LeanListener",
            "The proving rate under best-first search rises after step-level GRPO.",
            LEANLISTENER_SOURCE,
            "proved (0/1) per held-out theorem under best-first search, final check in a fresh coqc",
            "SFT",
            "step-level GRPO",
            run=step_grpo_proving,
            size=100,
            smoke_size=2,
            settings=STEP_LEVEL | SEARCH_BUDGET,
        ),
        Claim(
            "eva-ranking",
            "EVA",
            "E[R] over the anchor logits ranks proposals better than the parsed text score.",
            EVA_SOURCE,
            "ranking accuracy over the held-out proposal pairs at one state (a tie one half)",
            "parsed text score",
            "E[R] over anchor logits",
            run=eva_ranking,
            size=40,
            smoke_size=2,
            unit="states",
            settings=dict(EVA_RANKING),
        ),
        Claim(
            "eva-ranking-value-head",
            "EVA",
            "E[R] over the anchor logits ranks proposals better than the value head.",
            EVA_SOURCE,
            "ranking accuracy over the held-out proposal pairs at one state (a tie one half)",
            "value head",
            "E[R] over anchor logits",
            run=eva_ranking,
            size=40,
            smoke_size=2,
            unit="states",
            settings=dict(EVA_RANKING),
        ),
    )
}


def get_claims(names: list[str] | tuple[str, ...] | None = None) -> list[Claim]:
    """The named claims (all, in registry order, by default); an unknown name is one :class:`ConfigError`."""
    if not names:
        return list(CLAIMS.values())
    unknown = [n for n in names if n not in CLAIMS]
    if unknown:
        raise ConfigError(f"--claim {unknown[0]!r} is not a claim; valid: {', '.join(CLAIMS)}")
    return [CLAIMS[n] for n in CLAIMS if n in names]
