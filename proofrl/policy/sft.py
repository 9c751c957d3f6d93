"""Supervised fine-tuning (teacher forcing) of a causal LM on (prompt, completion) pairs.

The one SFT implementation in proofrl: the demo teaches the tiny whole-proof model with it, and
:func:`proofrl.policy.tactic.train_tiny_tactic_model` teaches the tiny tactic model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .generation import encode_prompts
from .logprobs import response_logprobs


def encode_pairs(tokenizer: Any, pairs: Sequence[tuple[str, str]]) -> tuple[list[list[int]], list[list[int]]]:
    """Prompt ids as the generators encode them, completion ids followed by EOS (so the model learns to stop)."""
    prompts = encode_prompts(tokenizer, [p for p, _ in pairs])
    return prompts, [tokenizer(c, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for _, c in pairs]


def completion_nll(model: Any, prompts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """The SFT loss: −mean log π(completion tokens | prompt) over every completion token of the batch."""
    lp, mask = response_logprobs(model, prompts, targets, pad_id=pad_id, micro_batch=max(1, len(prompts)))
    return -(lp * mask).sum() / mask.sum()


def supervised_finetune(
    model: Any, tokenizer: Any, pairs: Sequence[tuple[str, str]], *, epochs: int, lr: float, batch: int, seed: int,
    on_epoch: Callable[[int, float], None] | None = None, group_by_length: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> list[float]:
    """Teacher forcing on (prompt, completion) pairs: minimise −mean log π(completion tokens | prompt).

    Prompts are encoded as the generators encode them (:func:`encode_prompts`); each completion is followed
    by EOS, so the model learns to stop. AdamW (weight decay 0.01), gradient norm clipped at 1, a seeded
    shuffle per epoch. Returns the mean loss of each epoch; the model is left in eval mode.

    ``group_by_length``: after the shuffle, pairs are sorted by length inside windows of 16 batches and the
    batches are shuffled again, so a batch pads to its own length rather than to the longest pair drawn (on a
    CPU the padding, not the pairs, costs most of an epoch). ``on_batch(n)`` is called after each batch with
    its size (a progress bar).
    """
    prompts, targets = encode_pairs(tokenizer, pairs)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(pairs), generator=g).tolist()
        if group_by_length:
            window = 16 * batch
            order = [i for s in range(0, len(order), window)
                     for i in sorted(order[s : s + window], key=lambda i: len(prompts[i]) + len(targets[i]))]  # fmt: skip
        batches = [order[s : s + batch] for s in range(0, len(order), batch)]
        if group_by_length:
            batches = [batches[j] for j in torch.randperm(len(batches), generator=g).tolist()]
        total, count = 0.0, 0
        for idx in batches:
            loss = completion_nll(model, [prompts[i] for i in idx], [targets[i] for i in idx], tokenizer.pad_token_id)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total, count = total + float(loss.detach()) * len(idx), count + len(idx)
            if on_batch:
                on_batch(len(idx))
        losses.append(total / count)
        if on_epoch:
            on_epoch(epoch, losses[-1])
    model.eval()
    return losses
