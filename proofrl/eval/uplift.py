"""Uplift rate per likelihood rank: the rank-bias diagnostic of "Rewarding the Unlikely" (arXiv:2506.02355, §3.5).

For each problem take a group of G samples from the *initial* policy π_0 and sort it by π_0's sequence
log-prob, rank j = 0 the most likely. For the correct samples only, ask whether training raised their
probability: 1{log π_new(y) > log π_0(y)}. The uplift rate u_j is the mean of that indicator over the
problems whose rank-j sample is correct. Rank bias shows as u_j falling with j: GRPO lifts the samples it
already favoured. Ties in π_0 log-prob are broken by position (smaller index = smaller rank).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class UpliftRate:
    """u_j for j = 0..G−1 (NaN where no problem had a correct sample at rank j) and the counts behind each."""

    rates: tuple[float, ...]
    counts: tuple[int, ...]

    def to_json(self) -> dict[str, list[float] | list[int]]:
        return {"rates": list(self.rates), "counts": list(self.counts)}


def uplift_rate(init_logps: torch.Tensor, new_logps: torch.Tensor, correct: torch.Tensor) -> UpliftRate:
    """u_j per rank. ``init_logps, new_logps, correct: (P, G) -> UpliftRate`` with G rates.

    ``init_logps`` are log π_0(y) of the group's samples (which were drawn from π_0), ``new_logps`` the
    trained policy's log-probs of the same samples, ``correct`` their verdicts.
    """
    order = torch.sort(-init_logps, dim=-1, stable=True).indices  # (P, G): rank j -> sample index
    up = (new_logps > init_logps).gather(-1, order).to(torch.float64)  # (P, G) by rank
    ok = correct.bool().gather(-1, order).to(torch.float64)
    counts = ok.sum(0)  # (G,)
    rates = (up * ok).sum(0) / counts.clamp(min=1)
    rates = torch.where(counts > 0, rates, torch.full_like(rates, float("nan")))
    return UpliftRate(rates=tuple(rates.tolist()), counts=tuple(int(c) for c in counts.tolist()))
