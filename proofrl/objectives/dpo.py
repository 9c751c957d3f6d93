"""The DPO loss on tactic validity and its update: LeanListener's baselines (arXiv:2503.09730 §4).

The one DPO loss (Rafailov et al., arXiv:2305.18290, eq. 7)::

    L = −log σ( β [ (log π_θ(y_w|x) − log π_ref(y_w|x)) − (log π_θ(y_l|x) − log π_ref(y_l|x)) ] )

averaged over pairs, with log π(y|x) the summed token log-probs of the tactic y (EOS included) after the
tactic prompt x. β = 0.1 (the DPO paper's value; LeanListener gives none). Preferences are *binary validity*:
y_w a tactic the prover accepts at state x, y_l one it rejects (or refuses, or that timed out) at the same x.

Pairing is LeanListener's "random" strategy: each valid sample is paired with an invalid one drawn at random
from the same state (the paper found random / zero-accuracy / hard pairing within 0.65 % of each other). The
online baseline (:mod:`proofrl.train.step_grpo` with ``algorithm.objective: dpo``) pairs the current policy's own
group at each state every step (:func:`online_pairs`); the offline one (:mod:`proofrl.train.offline_dpo`) draws
its pairs once from fixed data.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F


class DPOLoss(NamedTuple):
    loss: torch.Tensor
    """scalar: the mean of −log σ(β·margin) over pairs"""
    margin: torch.Tensor
    """(P,) detached: (log π_θ − log π_ref)(y_w) − (log π_θ − log π_ref)(y_l)"""


def dpo_loss(
    chosen_logps: torch.Tensor,
    rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    *,
    beta: float = 0.1,
) -> DPOLoss:
    """The DPO loss of P pairs from their sequence log-probs, each ``(P,)`` (see the module docstring)."""
    margin = (chosen_logps - ref_chosen_logps) - (rejected_logps - ref_rejected_logps)
    return DPOLoss(-F.logsigmoid(beta * margin).mean(), margin.detach())


@dataclass(frozen=True)
class Pair:
    """One preference at one state: token ids of the prompt, the valid tactic and the invalid one."""

    prompt: tuple[int, ...]
    chosen: tuple[int, ...]
    rejected: tuple[int, ...]


def random_pairs(valid: Sequence[int], invalid: Sequence[int], rng: random.Random) -> list[tuple[int, int]]:
    """Each valid index paired with an invalid one drawn at random ("random" pairing); none when either is empty."""
    if not valid or not invalid:
        return []
    return [(v, rng.choice(list(invalid))) for v in valid]


def online_pairs(
    prompt_ids: Sequence[Sequence[int]],
    responses: Sequence[Sequence[Sequence[int]]],
    valid: Sequence[Sequence[bool]],
    rng: random.Random,
) -> list[Pair]:
    """Pairs from groups: ``prompt_ids[g]``, ``responses[g][i]`` (token ids), ``valid[g][i]``. Equal token
    sequences are one sample (a tactic drawn twice is not preferred to itself)."""
    out: list[Pair] = []
    for p, resp, ok in zip(prompt_ids, responses, valid, strict=True):
        seen: dict[tuple[int, ...], bool] = {}
        for r, v in zip(resp, ok, strict=True):
            seen.setdefault(tuple(r), bool(v))
        seqs = list(seen)
        good = [i for i, s in enumerate(seqs) if seen[s]]
        bad = [i for i, s in enumerate(seqs) if not seen[s]]
        out += [Pair(tuple(p), seqs[w], seqs[b]) for w, b in random_pairs(good, bad, rng)]
    return out


def sequence_logps(
    model: Any,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    *,
    pad_id: int,
    micro_batch: int = 16,
) -> torch.Tensor:
    """``(B,)`` Σ_t log π(o_t | x, o_<t) of each response (gradients flow when enabled)."""
    from ..policy.logprobs import response_logprobs

    logps, mask = response_logprobs(model, prompts, responses, pad_id=pad_id, micro_batch=micro_batch)
    return (logps * mask).sum(-1)


@dataclass(frozen=True)
class DPOStats:
    loss: float
    margin: float
    accuracy: float
    """share of pairs whose margin is > 0"""
    pairs: int
    grad_norm: float

    def to_json(self) -> dict[str, float]:
        return {f"dpo/{k}": float(v) for k, v in self.__dict__.items()}


def dpo_batch(
    model: Any, ref_model: Any, pairs: Sequence[Pair], *, pad_id: int, beta: float = 0.1, micro_batch: int = 16
) -> DPOLoss:
    """The DPO loss of ``pairs`` in one batch (π_ref's log-probs without gradients; no dropout: eval mode).
    ``ref_model`` ``"adapter-off"``: a LoRA policy's π_ref is the same model with its adapter switched off."""
    prompts = [p.prompt for p in pairs] * 2
    responses = [p.chosen for p in pairs] + [p.rejected for p in pairs]
    n = len(pairs)
    model.eval()
    off = ref_model == "adapter-off"
    with torch.no_grad(), model.disable_adapter() if off else contextlib.nullcontext():
        ref = sequence_logps(model if off else ref_model, prompts, responses, pad_id=pad_id, micro_batch=micro_batch)
    cur = sequence_logps(model, prompts, responses, pad_id=pad_id, micro_batch=micro_batch)
    return dpo_loss(cur[:n], cur[n:], ref[:n], ref[n:], beta=beta)


def dpo_stats(out: DPOLoss, pairs: int, grad_norm: float) -> DPOStats:
    return DPOStats(
        float(out.loss.detach()), float(out.margin.mean()), float((out.margin > 0).float().mean()), pairs, grad_norm
    )


def dpo_update(
    model: Any,
    ref_model: Any,
    pairs: Sequence[Pair],
    optimizer: torch.optim.Optimizer,
    *,
    pad_id: int,
    beta: float = 0.1,
    max_grad_norm: float | None = 1.0,
    micro_batch: int = 16,
) -> DPOStats:
    """One optimiser step of the DPO loss over ``pairs`` (all in one batch; :func:`~proofrl.policy.sft.optimizer_step`:
    gradient norm clipped, a non-finite norm skips the step)."""
    from ..policy.sft import optimizer_step

    if not pairs:
        return DPOStats(0.0, 0.0, 0.0, 0, 0.0)
    out = dpo_batch(model, ref_model, pairs, pad_id=pad_id, beta=beta, micro_batch=micro_batch)
    params = [p for g in optimizer.param_groups for p in g["params"]]
    norm = optimizer_step(optimizer, out.loss, params, max_grad_norm=max_grad_norm)
    optimizer.zero_grad(set_to_none=True)
    return dpo_stats(out, len(pairs), norm)
