"""LeanListener's claims: step-level GRPO against its SFT start (Prec@8, the proving rate), online against
offline DPO."""

from __future__ import annotations

from typing import Any

from .claim import Claim, ClaimRun, Results
from .reap import SEARCH_BUDGET, search_budget

LEANLISTENER_SOURCE = (
    "LeanListener's summary, tactic validity: ReProver (the SFT start) Prec@8 40.77, 0-precision "
    "12.74 %; online GRPO 51.01 / 7.44 %; offline DPO 37.75 / 29.10 %; online DPO 44.75 / 11.88 %. "
    "Proving rate, random split: ReProver 52.76, LeanListener (GRPO) 53.21."
)

# -- LeanListener: step-level GRPO against its SFT start ------------------------------------------------------

STEP_LEVEL = {"updates": 4, "batch_states": 4, "group_size": 8, "lr": 3e-4, "tactic_timeout": 5.0, "k": 8}
"""the step-level demo's run: 4 online GRPO updates of 4 training states × 8 tactics, lr 3e-4 (the paper's
2.25e-6 is meant for 10,000 updates), 5 s a tactic; Prec@8 from 8 samples per held-out state"""


def step_level_settings(run: ClaimRun) -> dict[str, Any]:
    return STEP_LEVEL | ({"updates": 1, "batch_states": 2, "group_size": 2, "k": 2} if run.smoke else {})


def step_level_config(s: dict[str, Any], run: ClaimRun, *extra: str) -> Any:
    """The ``leanlistener`` recipe at the step-level demo's size, seeded with the bench seed (``extra``: more
    ``key=value`` overrides, e.g. ``algorithm.objective=dpo``)."""
    from ..train.step_grpo import load_config

    overrides = [
        f"steps={s['updates']}",
        f"seed={run.seed}",
        f"rollout.problems_per_step={s['batch_states']}",
        f"rollout.group_size={s['group_size']}",
        f"verify.workers={run.workers}",
        f"verify.timeout={s['tactic_timeout']}",
        f"optim.lr={s['lr']}",
        f"checkpoint_every={s['updates']}",
        "keep_checkpoints=1",
        "eval.every=0",
        "rollout.sync_every=1",
        *extra,
    ]
    return load_config("leanlistener", overrides)


def step_grpo_proving(run: ClaimRun) -> Results:
    """The taught tiny model (SFT) and the same model after the short step-level GRPO run of
    :func:`step_grpo_vs_sft` each drive best-first search on the same held-out theorems at the reap claim's
    budget (:data:`SEARCH_BUDGET`), policy seeded with ``run.seed``; the value is 1 when the proof passed the
    fresh ``coqc`` final check."""
    from ..data.tactics import read_transitions
    from ..demo.search import engine_config
    from ..policy.model import load_policy
    from ..policy.tactic import HFTacticPolicy
    from ..rollout.tactics import coq_pool, state_points
    from ..search.run import search_many
    from ..train.step_grpo import StepLevelTrainer

    s = step_level_settings(run)
    problems = run.assets.held_out_pool(run.size)
    budget = search_budget(run)
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


def held_out_states(run: ClaimRun) -> list[Any]:
    """The first ``run.size`` states of one fixed draw (seed 0) of the assets' held-out transitions: the same
    states for every seed and every claim that scores tactics."""
    from ..eval.tactics import load_points

    return load_points(run.assets.held_out_transitions, limit=run.size, seed=0)


def sampled_validity(
    model: Any, tok: Any, held: list[Any], pool: Any, s: dict[str, Any], run: ClaimRun, arm: str
) -> tuple[dict[str, float], dict[str, Any]]:
    """The tactic-validity protocol of the step-level claims: ``model`` samples ``k`` tactics at each held-out
    state (sampling seeded with ``run.seed``) and Coq runs them. Returns the share of the k that Coq accepts per
    reached state (its mean is Prec@k) and what was sampled: Prec@k, 0-precision, how often ``intros.`` and
    the most sampled tactics were drawn (``top_share``: the most sampled tactic's share of all samples)."""
    from collections import Counter

    from ..eval.tactics import tactic_metrics

    m = tactic_metrics(
        model, tok, held, pool, k=s["k"], label=arm, timeout=s["tactic_timeout"], workers=run.workers, seed=run.seed
    )
    values = {st.key: st.valid / st.k for st in m.per_state if not st.error}
    drawn = Counter(t.strip() for st in m.per_state for t in st.tactics if t.strip())
    total = sum(drawn.values())
    # a valid sample that is not `intros.`: at least valid − (its `intros.` samples) at each state
    others = sum(
        max(0, st.valid - sum(t.strip() == "intros." for t in st.tactics)) for st in m.per_state if not st.error
    )
    top = drawn.most_common(5)
    return values, {
        "samples": total,
        "intros.": drawn.get("intros.", 0),
        "valid": sum(st.valid for st in m.per_state),
        "valid_not_intros_at_least": others,
        "top": top,
        "top_share": top[0][1] / total if top else 0.0,
        "prec_at_k": m.prec_at_k,
        "zero_precision": m.zero_precision,
    }


def write_tactics(run: ClaimRun, tactics: dict[str, Any]) -> None:
    import json

    run.out.mkdir(parents=True, exist_ok=True)
    (run.out / "tactics.json").write_text(json.dumps(tactics, indent=2))


def step_grpo_vs_sft(run: ClaimRun) -> Results:
    """The taught tiny model (SFT) and the same model after a short online step-level GRPO run (``leanlistener``
    recipe, seeded with ``run.seed``) each sample 8 tactics at the same held-out states (the first ``run.size``
    of a fixed draw); the value is the share of the 8 that Coq accepts (its mean is Prec@8). Also writes
    ``tactics.json`` (:func:`sampled_validity`'s summary per arm)."""
    from ..data.tactics import read_transitions
    from ..policy.model import load_policy
    from ..rollout.tactics import coq_pool, state_points
    from ..train.step_grpo import StepLevelTrainer

    s = step_level_settings(run)
    held = held_out_states(run)
    train = state_points(read_transitions(run.assets.train_transitions))
    model, tok = load_policy(run.assets.model_dir, device="cpu")
    cfg = step_level_config(s, run)
    out: Results = {}
    tactics: dict[str, Any] = {}
    with coq_pool(run.workers, s["tactic_timeout"]) as pool:
        for arm in ("SFT", "step-level GRPO"):
            if arm == "step-level GRPO":
                StepLevelTrainer(cfg, model, tok, train, pool, out=run.out / "run").fit()
            out[arm], tactics[arm] = sampled_validity(model, tok, held, pool, s, run, arm)
    write_tactics(run, tactics)
    return out


def offline_dpo_pairs(
    model: Any,
    tok: Any,
    records: list[dict[str, Any]],
    train: list[Any],
    pool: Any,
    s: dict[str, Any],
    run: ClaimRun,
    *,
    want: int,
) -> tuple[list[Any], int]:
    """LeanListener's offline data for ``want`` pairs: the SFT model samples ``group_size`` tactics at training
    states taken in a seeded order (``run.seed``), ``updates × batch_states`` states at a time (as many as the
    online run draws in all), Coq judges them once (:func:`proofrl.train.offline_dpo.offline_pairs`: y_w a valid sample,
    or the human tactic where none is valid; y_l an invalid one), until there are ``want`` pairs. Returns
    the first ``want`` pairs (all there are, when the training states run out) and the states judged."""
    import random

    from ..train.offline_dpo import human_tactics, offline_pairs

    order = random.Random(run.seed).sample(train, len(train))
    chunk = s["updates"] * s["batch_states"]
    pairs: list[Any] = []
    judged = 0
    for i, start in enumerate(range(0, len(order), chunk)):
        if len(pairs) >= want:
            break
        part = order[start : start + chunk]
        pairs += offline_pairs(
            model,
            tok,
            part,
            human_tactics(records, part),
            pool,
            k=s["group_size"],
            seed=1000 * run.seed + i,
            timeout=s["tactic_timeout"],
            workers=run.workers,
        )
        judged += len(part)
    return pairs[:want], judged


def online_vs_offline_dpo(run: ClaimRun) -> Results:
    """Offline against online DPO from the same start (the assets' taught tiny model) at an equal update budget.

    *Online DPO*: the ``leanlistener`` recipe with ``algorithm.objective=dpo`` at the step-level claims' size
    (``updates`` updates, each ``batch_states`` states × ``group_size`` tactics sampled by the current policy,
    pairs from each group: :meth:`~proofrl.train.step_grpo.StepLevelTrainer.dpo_update`), seeded with
    ``run.seed``. *Offline DPO* (:func:`proofrl.train.offline_dpo.train_offline_dpo`): pairs fixed beforehand from the
    SFT model's own samples (:func:`offline_dpo_pairs`). **Equal** means: the same number of optimiser updates,
    each on the same number of pairs as the online run's update of the same index (an online update without a
    pair makes no step, so neither does the offline one), the same lr, β and gradient clipping (1.0), and every
    pair used once. Both arms, and the SFT start (a third arm, not compared), are scored by
    :func:`sampled_validity` at the same held-out states as ``leanlistener-prec8``. ``tactics.json`` holds each
    arm's samples summary and the budget (pairs per update, offline states judged)."""
    from ..data.tactics import read_transitions
    from ..policy.model import load_policy
    from ..rollout.tactics import coq_pool, state_points
    from ..train.offline_dpo import train_offline_dpo
    from ..train.step_grpo import StepLevelTrainer

    s = step_level_settings(run)
    held = held_out_states(run)
    records = read_transitions(run.assets.train_transitions)
    train = state_points(records)
    cfg = step_level_config(s, run, "algorithm.objective=dpo")
    out: Results = {}
    tactics: dict[str, Any] = {}
    with coq_pool(run.workers, s["tactic_timeout"]) as pool:
        model, tok = load_policy(run.assets.model_dir, device="cpu")
        out["SFT"], tactics["SFT"] = sampled_validity(model, tok, held, pool, s, run, "SFT")

        online = StepLevelTrainer(cfg, model, tok, train, pool, out=run.out / "online-dpo")
        online.fit()
        # from the log, not fit()'s return: a resumed run's fit() returns only the updates it made itself
        sizes = [int(r.get("dpo/pairs", 0)) for r in online.run_dir.rows()]
        out["online DPO"], tactics["online DPO"] = sampled_validity(model, tok, held, pool, s, run, "online DPO")

        model, tok = load_policy(run.assets.model_dir, device="cpu")
        ref = load_policy(run.assets.model_dir, device="cpu")[0].eval().requires_grad_(False)
        steps = [n for n in sizes if n > 0]
        pairs, judged = offline_dpo_pairs(model, tok, records, train, pool, s, run, want=sum(steps))
        if steps and pairs:
            train_offline_dpo(
                model,
                ref,
                tok,
                pairs,
                steps=len(steps),
                sizes=steps,
                lr=s["lr"],
                beta=cfg.algorithm.dpo_beta,
                seed=run.seed,
            )
        out["offline DPO"], tactics["offline DPO"] = sampled_validity(model, tok, held, pool, s, run, "offline DPO")
    tactics["budget"] = {
        "online_pairs_per_update": sizes,
        "offline_pairs": len(pairs),
        "offline_steps": len(steps) if pairs else 0,
        "offline_states_judged": judged,
        "online_states_drawn": s["updates"] * s["batch_states"],
    }
    write_tactics(run, tactics)
    return out


CLAIMS: list[Claim] = [
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
        "share of 8 sampled tactics Coq accepts per held-out state (mean: Prec@8)",
        "offline DPO",
        "online DPO",
        run=online_vs_offline_dpo,
        size=32,
        smoke_size=2,
        unit="states",
        settings=STEP_LEVEL | {"dpo_beta": 0.1, "equal": "updates and pairs per update"},
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
]
