"""Sample diversity: how many distinct samples a policy produces, and its entropy.

Sharpening (the paper's "distribution sharpening", arXiv:2506.02355 §3) shows as fewer unique samples per
problem and falling entropy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

import torch


def unique_counts(samples: torch.Tensor) -> torch.Tensor:
    """Number of distinct values in each row. ``(P, N) integer -> (P,)`` long."""
    s = torch.sort(samples, dim=-1).values
    return 1 + (s[:, 1:] != s[:, :-1]).sum(-1)


def unique_count(samples: Sequence[Hashable]) -> int:
    """Number of distinct samples (e.g. proofs as normalised strings) in one problem's list."""
    return len(set(samples))


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats, H(p) = −Σ_a p_a log p_a (0 log 0 = 0). ``(..., A) -> (...)``."""
    return -(probs * torch.log(probs.clamp(min=1e-30))).sum(-1)


def empirical_entropy(samples: Sequence[Hashable]) -> float:
    """Entropy (nats) of the empirical distribution of one problem's samples."""
    counts = torch.tensor(list(Counter(samples).values()), dtype=torch.float64)
    return float(entropy(counts / counts.sum())) if len(counts) else 0.0
