"""EVA's claims: E[R] over the anchor logits against the parsed text score and against the value head."""

from __future__ import annotations

from typing import Any

from .claim import Claim, ClaimRun, Results

EVA_SOURCE = (
    "EVA, Table 4 (Lean 4 hold-out set), ranking accuracy: standard SFT generative RM (text score) 78.5 %, "
    "value-head RM 81.2 %, Leibniz-1.5B (EVA, E[R]) 84.6 %; Pearson r 0.725 / 0.782 / 0.824. Here the text "
    "score is the EVA model's own parsed integers (the same generations), which isolates the read-out."
)

# -- EVA: E[R] over the anchor logits against the parsed text score and the value head --------------------------

EVA_RANKING = ["data.limit=24"]
"""the EVA demo's settings (:data:`proofrl.demo.eva.SETTINGS`, overrides of the ``eva`` recipe) on 3× its train
theorems, and the claim's size as its held-out theorems (``data.eval_limit``; 40 by default, 8× the demo's): the
proposals are labelled once (seed 0, the same for every seed); each seed trains
the EVA model (L_SFT + α·L_EVA, LoRA) and the value-head RM on the train proposals"""


def eva_overrides(run: ClaimRun) -> list[str]:
    """The ``eva`` recipe's overrides of this run: the demo's, :data:`EVA_RANKING`, this size, the run's seed."""
    from ..demo.eva import SETTINGS

    small = ["data.limit=2", "data.states_per_theorem=1", "optim.epochs=1"] if run.smoke else []
    return [*SETTINGS, *EVA_RANKING, *small, f"data.eval_limit={run.size}", f"seed={run.seed}"]


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

    from ..data.eva_labels import STEP_TIMEOUT, label_splits
    from ..eval.rm import MIDDLE, prompt_of
    from ..policy.tactic import make_tactic_policy
    from ..rewards.eva import EvaScorer, parse_scores
    from ..train.eva import build_examples, load_base, load_config, read_records, train_eva
    from .eva_table4 import RegressionHeadRM, train_value_head

    cfg = load_config("eva", eva_overrides(run))
    max_state_chars = cfg.data.max_state_chars
    shared = run.shared_dir("eva")
    cached = shared / f"{run.seed_key}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    labels = shared / f"labels-{run.size}{run.smoke_suffix}"
    if (labels / "train.jsonl").is_file() and (labels / "held-out.jsonl").is_file():
        paths = {"train": labels / "train.jsonl", "held-out": labels / "held-out.jsonl"}
    else:
        policy = make_tactic_policy(run.assets.policy_spec, device="cpu", seed=0, max_tokens=64)
        paths, _ = label_splits(
            labels,
            {
                "train": (run.assets.train_transitions, cfg.data.limit),
                "held-out": (run.assets.held_out_transitions, cfg.data.eval_limit),
            },
            policy=policy,
            states_per_theorem=cfg.data.states_per_theorem,
            search=cfg.search,
            step_timeout=cfg.search.tactic_timeout if cfg.search is not None else STEP_TIMEOUT,
            seed=0,
            workers=run.workers,
            console=run.console,
        )
    train, _ = read_records(paths["train"])
    held, _ = read_records(paths["held-out"])
    torch.manual_seed(run.seed)
    m, tok = load_base(run.assets.model_dir, lora=cfg.model.lora, device="cpu")
    ex, _ = build_examples(train, tok, max_state_chars=max_state_chars)
    o = cfg.optim
    train_eva(m, tok, ex, alpha=cfg.algorithm.alpha, lr=o.lr, batch=o.batch, epochs=o.epochs, seed=run.seed)
    scorer = EvaScorer(m, tok, max_new_tokens=cfg.eval.max_tokens, max_state_chars=max_state_chars)
    prompts = [prompt_of(r, max_state_chars) for r in held]
    outputs = scorer.generate(prompts)
    expected = [e for e, _ in scorer.read_expected(prompts, outputs)]
    text = [
        {d: float(p.scores.get(d, MIDDLE)) for d in scorer.dims}
        for p in (parse_scores(o, scorer.dims) for o in outputs)
    ]
    torch.manual_seed(run.seed)
    m, tok = load_base(run.assets.model_dir, lora=cfg.model.lora, device="cpu")
    vh = RegressionHeadRM(m, tok, dims=scorer.dims, max_state_chars=max_state_chars)
    train_value_head(vh, train, lr=o.lr, batch=o.batch, epochs=o.epochs, seed=run.seed)
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


CLAIMS: list[Claim] = [
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
        settings={"recipe": "eva", "overrides": EVA_RANKING},
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
        settings={"recipe": "eva", "overrides": EVA_RANKING},
    ),
]
