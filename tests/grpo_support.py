"""A plain-loop reference of the group-relative advantages, for the equivalence tests (slow)."""

from __future__ import annotations

import torch


def group_advantages_loop(
    rewards: torch.Tensor, group_ids: torch.Tensor, *, scale_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """:func:`proofrl.objectives.grpo.group_advantages`, one group at a time (a singleton's advantage is 0)."""
    out = torch.zeros(len(rewards), dtype=torch.float32, device=rewards.device)
    for g in torch.unique(group_ids).tolist():
        idx = (group_ids == g).nonzero().flatten().to(rewards.device)
        r = rewards[idx].float()
        if len(r) == 1:
            continue  # singleton: advantage 0
        a = r - r.mean()
        out[idx] = a / (r.std() + eps) if scale_by_std else a
    return out
