"""The toy environment of "Rewarding the Unlikely" (arXiv:2506.02355, Appendix A) and its policy.

A one-step task: a state s ∈ R^10 is drawn from N(0, I); the policy picks one of 128 actions; action a has a
fixed hidden vector v_a ∈ R^10 (drawn once from N(0, I), never shown to the policy) and is correct when
sᵀv_a ≥ τ. Training uses τ = 1 (about a third of the actions are correct for a typical state); evaluating
at τ = 4 and τ = 5 asks for the rare, strongly aligned actions, which a sharpened policy stops sampling.
A "sample" is one action, so its sequence log-prob is the log-prob of that action.

Every tensor carries a leading run dimension ``S``: independent seeds (each with its own v_a, states and
policy weights) are simulated side by side as one batched computation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ToyEnv:
    """S independent copies of the environment (one per seed)."""

    action_vectors: torch.Tensor
    """(S, A, D) the hidden vectors v_a"""

    @classmethod
    def make(cls, runs: int, dim: int = 10, num_actions: int = 128, *, generator: torch.Generator) -> ToyEnv:
        return cls(torch.randn(runs, num_actions, dim, generator=generator))

    @property
    def dim(self) -> int:
        return self.action_vectors.shape[-1]

    @property
    def num_actions(self) -> int:
        return self.action_vectors.shape[-2]

    def sample_states(self, n: int, *, generator: torch.Generator) -> torch.Tensor:
        """(S, n, D) states from N(0, I)."""
        return torch.randn(self.action_vectors.shape[0], n, self.dim, generator=generator)

    def correct(self, states: torch.Tensor, tau: float) -> torch.Tensor:
        """1{sᵀv_a ≥ τ} for every action. ``(S, n, D) -> (S, n, A)`` bool."""
        return torch.bmm(states, self.action_vectors.transpose(1, 2)) >= tau

    def reward(self, states: torch.Tensor, actions: torch.Tensor, tau: float) -> torch.Tensor:
        """R(s, a) = 1{sᵀv_a ≥ τ}. ``(S, n, D), (S, n, G) -> (S, n, G)`` float."""
        return self.correct(states, tau).gather(-1, actions).to(torch.float32)


class BatchedMLP(torch.nn.Module):
    """S independent two-layer MLPs s ↦ logits: Linear(D, H) → ReLU → Linear(H, A), run as batched matmuls.

    Initialised like ``torch.nn.Linear`` (uniform ±1/√fan_in), independently per run.
    """

    def __init__(self, runs: int, dim: int, hidden: int, num_actions: int, *, generator: torch.Generator) -> None:
        super().__init__()

        def uniform(*shape: int, fan_in: int) -> torch.nn.Parameter:
            bound = 1.0 / math.sqrt(fan_in)
            return torch.nn.Parameter((torch.rand(*shape, generator=generator) * 2 - 1) * bound)

        self.w1 = uniform(runs, dim, hidden, fan_in=dim)
        self.b1 = uniform(runs, 1, hidden, fan_in=dim)
        self.w2 = uniform(runs, hidden, num_actions, fan_in=hidden)
        self.b2 = uniform(runs, 1, num_actions, fan_in=hidden)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        """``(S, n, D) -> (S, n, A)`` log-probabilities over actions."""
        h = torch.relu(torch.baddbmm(self.b1, states, self.w1))  # (S, n, H)
        return torch.log_softmax(torch.baddbmm(self.b2, h, self.w2), dim=-1)  # (S, n, A)


def sample_actions(logps: torch.Tensor, k: int, *, generator: torch.Generator) -> torch.Tensor:
    """k actions per state, with replacement. ``(S, n, A) -> (S, n, k)`` long."""
    s, n, a = logps.shape
    flat = torch.multinomial(logps.exp().reshape(s * n, a), k, replacement=True, generator=generator)
    return flat.reshape(s, n, k)
