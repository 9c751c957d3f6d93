"""The unlikeliness reward of "Rewarding the Unlikely" (He, Fried, Welleck; arXiv:2506.02355, §4, eq. 3).

Within each group of G samples for one problem, correct samples are penalised by how likely they were under
the policy that generated them, so GRPO stops reinforcing only the samples it already favours:

    r_i = R(x, y_i) · (1 − β_rank · (G − rank(y_i)) / G)

with rank(y_i) ∈ {0, …, G−1} the position of y_i when the group is sorted by **descending** log-probability
(rank 0 = the most likely sample ⇒ the largest penalty, β_rank; rank G−1 = the least likely ⇒ β_rank/G).
Incorrect samples (R = 0) stay at 0. β_rank = 0.25 as in the paper.

Differences from the official code (AndreHe02/rewarding-unlikely-release), which we keep selectable:

* The official code ranks **ascending** (0 = least likely) and multiplies by 1 − β·rank/G, i.e. penalties
  run from 0 to β(G−1)/G instead of β/G to β: every correct sample's penalty is β/G smaller. Use
  ``convention="official"`` for that.
* Sequence log-prob is the **mean** of token log-probs there (the default here); its analysis scripts use
  the sum (``reduction="sum"``).

Ties are broken deterministically by position: among equal log-probs, the sample with the smaller index
in the group counts as *less* likely (smaller penalty). The ranks use every sample of the group, correct or
not, as in the official code.
"""

from __future__ import annotations

from typing import Literal

import torch

Convention = Literal["paper", "official"]


def sequence_logprob(
    token_logps: torch.Tensor, mask: torch.Tensor, reduction: Literal["mean", "sum"] = "mean"
) -> torch.Tensor:
    """log π(y) of each sample from its token log-probs: mean (default, official code) or sum. ``(..., T) -> (...)``."""
    m = mask.to(token_logps.dtype)
    total = (token_logps * m).sum(-1)
    if reduction == "sum":
        return total
    if reduction == "mean":
        return total / m.sum(-1).clamp(min=1)
    raise ValueError(f"unknown reduction {reduction!r}; valid choices: ['mean', 'sum']")


def likelihood_ranks(seq_logps: torch.Tensor) -> torch.Tensor:
    """Paper ranks: 0 = most likely, G−1 = least likely, within each group. ``(..., G) -> (..., G)`` long.

    Ties: the smaller index is treated as less likely (gets the larger rank).
    """
    g = seq_logps.shape[-1]
    # Stable ascending sort: among ties, smaller index first ⇒ smaller ascending rank ⇒ "less likely".
    order = torch.sort(seq_logps, dim=-1, stable=True).indices  # (..., G)
    ascending = torch.empty_like(order)
    ascending.scatter_(-1, order, torch.arange(g, device=order.device).expand_as(order).clone())
    return (g - 1) - ascending


def unlikeliness_reward(
    rewards: torch.Tensor,
    seq_logps: torch.Tensor,
    *,
    beta_rank: float = 0.25,
    convention: Convention = "paper",
) -> torch.Tensor:
    """r_i = R_i · (1 − β_rank · (G − rank_i) / G) within each group. ``(..., G), (..., G) -> (..., G)``.

    ``rewards`` are the verifier's R(x, y_i) (normally 0/1); ``seq_logps`` the sequence log-probs under the
    generating policy (see :func:`sequence_logprob`); the last dimension is the group. ``convention="official"``
    uses 1 − β_rank · rank_asc / G with rank_asc = G − 1 − rank (see the module docstring).
    """
    g = rewards.shape[-1]
    rank = likelihood_ranks(seq_logps).to(torch.float32)
    if convention == "paper":
        penalty = beta_rank * (g - rank) / g
    elif convention == "official":
        penalty = beta_rank * (g - 1 - rank) / g
    else:
        raise ValueError(f"unknown convention {convention!r}; valid choices: ['official', 'paper']")
    return rewards.to(torch.float32) * (1.0 - penalty)
