"""Offline DPO on tactic validity, LeanListener's offline baseline (arXiv:2503.09730 §4).

The pairs are drawn once from fixed data (:func:`offline_pairs`): k tactics sampled by the starting (SFT) model at
each training state and judged by the prover; y_w a valid sample, or the human tactic where no sample was valid (the
transition shows it is valid); y_l an invalid sample. Then plain epochs over these fixed pairs
(:func:`train_offline_dpo`) with the one DPO loss of :mod:`proofrl.objectives.dpo`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..objectives.dpo import DPOLoss, DPOStats, Pair, dpo_batch, dpo_stats, online_pairs


def tactic_ids(tokenizer: Any, tactic: str) -> tuple[int, ...]:
    """A tactic written by hand as the model would write it: its tokens, then EOS."""
    return (*tokenizer(tactic, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id)


def human_tactics(records: Sequence[dict[str, Any]], points: Sequence[Any]) -> list[str]:
    """The recorded (human) tactic at each state of ``points`` (:class:`~proofrl.rollout.tactics.StatePoint`): the
    transition of the same theorem and statement whose step is the point's path length ("" where none is)."""
    at: dict[tuple[str, str, int], str] = {}
    for r in records:
        at.setdefault((r["theorem"], r.get("statement", ""), int(r["step"])), r["tactic"])
    return [at.get((p.theorem.name, p.theorem.statement, len(p.path)), "") for p in points]


def offline_pairs(
    model: Any,
    tokenizer: Any,
    points: Sequence[Any],
    human: Sequence[str],
    pool: Any,
    *,
    k: int = 8,
    seed: int = 0,
    timeout: float = 10.0,
    workers: int = 1,
    chunk: int = 16,
    progress: Callable[[int], None] | None = None,
) -> list[Pair]:
    """The fixed offline data: ``k`` samples of ``model`` at each state of ``points`` judged once by the prover;
    pairs as in the module docstring (``human[i]``: the recorded tactic at ``points[i]``)."""
    from ..policy.generation import encode_prompts
    from ..rollout.tactics import TacticSampler, run_groups, tactic_of

    rng = random.Random(seed)
    sampler = TacticSampler(model, tokenizer, seed=seed)
    out: list[Pair] = []
    for s in range(0, len(points), chunk):
        part, hum = list(points[s : s + chunk]), list(human[s : s + chunk])
        groups = sampler.sample([p.text for p in part], k)
        runs = run_groups(
            pool,
            [(p, [tactic_of(c) for c in g]) for p, g in zip(part, groups, strict=True)],
            timeout=timeout,
            workers=workers,
        )
        prompts = encode_prompts(tokenizer, [sampler.prompt(p.text) for p in part])
        for prompt, comps, run, h in zip(prompts, groups, runs, hum, strict=True):
            if run.before is None:
                continue
            ok = [run.of(tactic_of(c)).valid for c in comps]
            resp = [c.token_ids for c in comps]
            if not any(ok):  # no valid sample: the human tactic is the valid one
                resp, ok = [tactic_ids(tokenizer, h), *resp], [True, *ok]
            out += online_pairs([prompt], [resp], [ok], rng)
        if progress is not None:
            progress(len(part))
    return out


def train_offline_dpo(
    model: Any,
    ref_model: Any,
    tokenizer: Any,
    pairs: Sequence[Pair],
    *,
    steps: int,
    batch: int = 16,
    lr: float = 2.25e-6,
    beta: float = 0.1,
    seed: int = 0,
    on_step: Callable[[int, DPOStats], None] | None = None,
    sizes: Sequence[int] | None = None,
) -> list[DPOStats]:
    """``steps`` DPO steps of ``batch`` pairs each over the fixed pairs (reshuffled every pass). ``sizes``: the
    pairs of each step instead (their count replaces ``steps``), e.g. to match an online run's updates pair for
    pair."""
    if not pairs:
        raise ValueError("no offline DPO pairs: no training state had both a valid and an invalid tactic")
    from ..policy.sft import BatchLoss, supervised_loop

    rng = random.Random(seed)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    per_step = list(sizes) if sizes is not None else [batch] * steps

    def plan(_: int) -> list[list[int]]:  # one batch per step over the pairs, reshuffled every pass
        order: list[int] = []
        out = []
        for size in per_step:
            if len(order) < size:
                more = list(range(len(pairs)))
                rng.shuffle(more)
                order += more
            take, order = order[:size], order[size:]
            out.append(take)
        return out

    last: list[DPOLoss] = []

    def batch_loss(idx: list[int]) -> BatchLoss:
        out = dpo_batch(model, ref_model, [pairs[i] for i in idx], pad_id=pad, beta=beta)
        last[:] = [out]
        return BatchLoss(out.loss, {"pairs": (float(len(idx)), 1.0)})

    stats: list[DPOStats] = []

    def step_done(b: BatchLoss, norm: float | None) -> None:
        stats.append(dpo_stats(last[0], int(b.parts["pairs"][0]), norm if norm is not None else 0.0))
        if on_step is not None:
            on_step(len(stats), stats[-1])

    supervised_loop(
        opt,
        len(pairs),
        batch_loss,
        epochs=1,
        batch=batch,
        generator=torch.Generator(),
        params=[p for p in model.parameters() if p.requires_grad],
        batches=plan,
        on_step=step_done,
    )
    return stats
