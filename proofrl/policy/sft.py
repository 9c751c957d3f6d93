"""Supervised fine-tuning (teacher forcing) of a causal LM on (prompt, completion) pairs, and the one supervised
training loop every supervised learner runs.

* :func:`supervised_loop`: epochs of seeded shuffled batches; per batch a **batch-loss hook** computes the loss
  from one forward pass (and whatever else it reads from that pass: EVA's score logits), then one AdamW step
  with the gradient norm clipped (a non-finite norm skips the step); per-epoch weighted means of the named parts.
  SFT (:func:`supervised_finetune`), the EVA loss (:mod:`proofrl.train.eva`), the value-head RM
  (:mod:`proofrl.bench.eva_table4`), the search-and-learn learner (:mod:`proofrl.train.expert_iteration`) and
  offline DPO (:mod:`proofrl.train.offline_dpo`) all train through it.
* :func:`supervised_finetune`: the SFT loss (:func:`completion_nll`) in that loop; the demo teaches the tiny
  whole-proof model with it, and :func:`proofrl.policy.tactic.train_tiny_tactic_model` the tiny tactic model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .generation import encode_prompts
from .logprobs import response_logprobs


def encode_pairs(tokenizer: Any, pairs: Sequence[tuple[str, str]]) -> tuple[list[list[int]], list[list[int]]]:
    """Prompt ids as the generators encode them, completion ids followed by EOS (so the model learns to stop)."""
    prompts = encode_prompts(tokenizer, [p for p, _ in pairs])
    return prompts, [tokenizer(c, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for _, c in pairs]


def completion_nll(
    model: Any, prompts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], pad_id: int
) -> torch.Tensor:
    """The SFT loss: −mean log π(completion tokens | prompt) over every completion token of the batch."""
    lp, mask = response_logprobs(model, prompts, targets, pad_id=pad_id, micro_batch=max(1, len(prompts)))
    return -(lp * mask).sum() / mask.sum()


@dataclass
class BatchLoss:
    """What a batch-loss hook returns for one batch."""

    loss: torch.Tensor | None
    """the scalar to minimise; None (or no gradient): nothing to learn from this batch, no step"""
    parts: dict[str, tuple[float, float]] = field(default_factory=dict)
    """name → (value, weight): logged as the weighted mean over the epoch (and over the whole run)"""


@dataclass
class LoopResult:
    epochs: list[dict[str, float]]
    """per epoch: the weighted mean of each part"""
    overall: dict[str, float]
    """the weighted mean of each part over every batch of every epoch"""
    batches: int
    grad_norms: list[float]
    """the gradient norm before clipping of each step taken or skipped"""


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    params: Sequence[torch.Tensor],
    *,
    max_grad_norm: float | None = 1.0,
) -> float:
    """zero_grad, backward, clip the gradient norm to ``max_grad_norm`` (None: no clipping), step unless the norm
    is not finite; returns the norm before clipping."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(list(params), max_grad_norm if max_grad_norm is not None else float("inf"))
    if torch.isfinite(norm):
        optimizer.step()
    return float(norm)


def supervised_loop(
    optimizer: torch.optim.Optimizer,
    n: int,
    batch_loss: Callable[[list[int]], BatchLoss],
    *,
    epochs: int,
    batch: int,
    generator: torch.Generator,
    params: Sequence[torch.Tensor] | None = None,
    max_grad_norm: float | None = 1.0,
    batches: Callable[[int], list[list[int]]] | None = None,
    on_batch: Callable[[int], None] | None = None,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    on_step: Callable[[BatchLoss, float | None], None] | None = None,
    start_epoch: int = 0,
) -> LoopResult:
    """``epochs`` passes over ``n`` examples: each a ``torch.randperm(n, generator)`` cut into ``batch``-sized
        batches (or ``batches(epoch)``), ``batch_loss(indices)`` on each, one :func:`optimizer_step` over ``params``
        (default: the optimiser's). ``on_batch(size)`` and ``on_step(batch_loss, grad_norm or None)`` after each
    batch, ``on_epoch(epoch, means)`` after each epoch. ``start_epoch``: a resumed run's first epoch (the
    optimiser and ``generator`` as they were after the one before)."""
    params = list(params) if params is not None else [p for g in optimizer.param_groups for p in g["params"]]
    history: list[dict[str, float]] = []
    total: dict[str, list[float]] = {}
    norms: list[float] = []
    count = 0
    for epoch in range(start_epoch, epochs):
        if batches is not None:
            plan = batches(epoch)
        else:
            order = torch.randperm(n, generator=generator).tolist()
            plan = [order[s : s + batch] for s in range(0, len(order), batch)]
        sums: dict[str, list[float]] = {}
        for idx in plan:
            out = batch_loss(idx)
            norm = None
            if out.loss is not None and out.loss.requires_grad:
                norm = optimizer_step(optimizer, out.loss, params, max_grad_norm=max_grad_norm)
                norms.append(norm)
            if on_step:
                on_step(out, norm)
            for name, (v, w) in out.parts.items():
                for acc in (sums, total):
                    acc.setdefault(name, [0.0, 0.0])
                    acc[name][0] += v * w
                    acc[name][1] += w
            count += 1
            if on_batch:
                on_batch(len(idx))
        history.append({k: v / w if w else float("nan") for k, (v, w) in sums.items()})
        if on_epoch:
            on_epoch(epoch, history[-1])
    return LoopResult(history, {k: v / w if w else float("nan") for k, (v, w) in total.items()}, count, norms)


def supervised_finetune(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    *,
    epochs: int,
    lr: float,
    batch: int,
    seed: int,
    on_epoch: Callable[[int, float], None] | None = None,
    group_by_length: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> list[float]:
    """Teacher forcing on (prompt, completion) pairs: minimise −mean log π(completion tokens | prompt).

    Prompts are encoded as the generators encode them (:func:`encode_prompts`); each completion is followed
    by EOS, so the model learns to stop. AdamW (weight decay 0.01), gradient norm clipped at 1, a seeded
    shuffle per epoch (:func:`supervised_loop`). Returns the mean loss of each epoch; the model is left in eval
    mode.

    ``group_by_length``: after the shuffle, pairs are sorted by length inside windows of 16 batches and the
    batches are shuffled again, so a batch pads to its own length rather than to the longest pair drawn (on a
    CPU the padding, not the pairs, costs most of an epoch). ``on_batch(n)`` is called after each batch with
    its size (a progress bar).
    """
    prompts, targets = encode_pairs(tokenizer, pairs)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)

    def by_length(epoch: int) -> list[list[int]]:
        order = torch.randperm(len(pairs), generator=g).tolist()
        window = 16 * batch
        order = [
            i
            for s in range(0, len(order), window)
            for i in sorted(order[s : s + window], key=lambda i: len(prompts[i]) + len(targets[i]))
        ]
        plan = [order[s : s + batch] for s in range(0, len(order), batch)]
        return [plan[j] for j in torch.randperm(len(plan), generator=g).tolist()]

    def loss(idx: list[int]) -> BatchLoss:
        nll = completion_nll(model, [prompts[i] for i in idx], [targets[i] for i in idx], tokenizer.pad_token_id)
        return BatchLoss(nll, {"loss": (float(nll.detach()), len(idx))})

    model.train()
    res = supervised_loop(
        opt,
        len(pairs),
        loss,
        epochs=epochs,
        batch=batch,
        generator=g,
        params=list(model.parameters()),
        batches=by_length if group_by_length else None,
        on_batch=on_batch,
        on_epoch=(lambda e, m: on_epoch(e, m["loss"])) if on_epoch else None,
    )
    model.eval()
    return [h["loss"] for h in res.epochs]
