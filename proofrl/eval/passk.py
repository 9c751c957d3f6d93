"""pass@N: the one implementation, in both forms used by "Rewarding the Unlikely" (arXiv:2506.02355).

* **Unbiased estimator** (Chen et al., arXiv:2107.03374 eq. 1): from n attempts of which c are correct,
  pass@k = 1 − C(n−c, k) / C(n, k), the probability that k attempts drawn without replacement from the n
  contain a correct one. Computed in log space with ``lgamma`` (no huge binomials); exactly 1 when n − c < k.
* **Chunked** (the paper's Appendix C, used in its plots): the N_max attempts per problem are split into
  N_max / N consecutive chunks of N; each chunk gives one pass@N over the problem set (fraction of problems
  with a correct attempt in the chunk); report mean and std over the chunks. The std is the population std
  (ddof = 0), so a single chunk (N = N_max) has std 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def pass_at_k_unbiased(n: torch.Tensor | int, c: torch.Tensor | int, k: int) -> torch.Tensor:
    """1 − C(n−c, k)/C(n, k) per problem. ``n, c: (P,) or scalars -> (P,)`` float64.

    Raises if k > n for any problem (the estimator needs at least k attempts).
    """
    n_t = torch.as_tensor(n, dtype=torch.float64)
    c_t = torch.as_tensor(c, dtype=torch.float64)
    n_t, c_t = torch.broadcast_tensors(n_t, c_t)
    if bool((n_t < k).any()):
        raise ValueError(f"pass@{k} needs at least {k} attempts per problem, got n={n_t.min().item():.0f}")
    if bool(((c_t < 0) | (c_t > n_t)).any()):
        raise ValueError("need 0 ≤ c ≤ n")
    fail = n_t - c_t  # attempts that failed
    possible = fail >= k  # else every k-subset contains a correct attempt
    f = torch.where(possible, fail, torch.full_like(fail, float(k)))  # keep lgamma arguments valid
    log_ratio = torch.lgamma(f + 1) - torch.lgamma(f - k + 1) - torch.lgamma(n_t + 1) + torch.lgamma(n_t - k + 1)
    return torch.where(possible, 1.0 - torch.exp(log_ratio), torch.ones_like(fail))


def pass_at_k_from_outcomes(correct: torch.Tensor, k: int) -> float:
    """Mean over problems of the unbiased pass@k. ``correct: (P, n) bool -> float``."""
    n = correct.shape[-1]
    return float(pass_at_k_unbiased(n, correct.sum(-1), k).mean())


@dataclass(frozen=True)
class ChunkedPassAtK:
    """pass@k over a problem set by the chunked method, as fractions in [0, 1]."""

    k: int
    mean: float
    std: float
    chunks: int

    def __str__(self) -> str:
        return f"pass@{self.k} = {100 * self.mean:.1f} ± {100 * self.std:.1f} % ({self.chunks} chunks)"


def pass_at_k_chunked(correct: torch.Tensor, k: int) -> ChunkedPassAtK:
    """The paper's Appendix C estimate. ``correct: (P, N_max) bool``, attempts in sampling order.

    N_max must be a multiple of k (the paper uses N_max = 512 and powers of two).
    """
    p, n_max = correct.shape
    if k < 1 or n_max % k:
        raise ValueError(f"N_max = {n_max} attempts is not a multiple of k = {k}")
    chunks = n_max // k
    solved = correct.reshape(p, chunks, k).any(-1).to(torch.float64)  # (P, chunks)
    per_chunk = solved.mean(0)  # (chunks,) pass@k of each chunk over the problem set
    std = float(per_chunk.std(unbiased=False)) if chunks > 1 else 0.0
    return ChunkedPassAtK(k=k, mean=float(per_chunk.mean()), std=std, chunks=chunks)


def pass_at_k_exact(p_correct: torch.Tensor, k: int) -> torch.Tensor:
    """pass@k of k independent samples when each is correct with probability p: 1 − (1 − p)^k. ``(P,) -> (P,)``.

    For policies whose success probability is known exactly (the toy environment); a reference for the
    two estimators above, not a substitute for them on sampled attempts.
    """
    return 1.0 - torch.exp(k * torch.log1p(-p_correct.clamp(max=1.0).to(torch.float64)))


def comb(n: int, k: int) -> int:
    """C(n, k) (0 when k > n); re-exported for tests and reports."""
    return math.comb(n, k) if 0 <= k <= n else 0
