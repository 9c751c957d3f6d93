"""The one place where a sample's reward is computed: named parts from two registries, as verl registers its
advantage estimators.

* **Sample terms** (:data:`SAMPLE_TERMS`): ``term(sample, settings) -> float`` from one sample alone (its
  problem, completion text, extracted proof and verdict). The sample's reward is the **product** of its terms:
  ``verifier`` (1 if the trusted judge says ``valid``, else 0) is always first, then each configured term.
  kimina-prover-rl's R = proof_valid × (format_error == NONE) is ``verifier`` × ``format``.
* **Group shapers** (:data:`GROUP_SHAPERS`): ``shaper(rewards (G,), token_logps (G, T), mask (G, T), settings)
  -> (G,)``, applied in order to the G rewards of one prompt's group once the generating policy's log-probs
  are known, such as the unlikeliness reward of "Rewarding the Unlikely".

A new reward (a subgoal step reward, EVA's scores, a value target) is one registered function plus a key in
the recipe's ``reward:`` section; the trainer does not change. :class:`RewardFn` applies a
:class:`~proofrl.rewards.compose.RewardConfig`: each of its fields that is set names a part of the same name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from ..problems import Problem
from ..provers.base import Verdict
from ..registry import Registry
from .format import format_reward
from .unlikeliness import sequence_logprob, unlikeliness_reward


@dataclass(frozen=True)
class Sample:
    """What a sample term may look at."""

    problem: Problem
    text: str
    """the whole completion (reasoning included)"""
    verdict: Verdict
    proof: str | None = None
    """the proof extracted from ``text`` (None: none could be)"""


SampleTerm = Callable[[Sample, Any], float]
GroupShaper = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], torch.Tensor]
SAMPLE_TERMS: Registry[SampleTerm] = Registry("reward term")
GROUP_SHAPERS: Registry[GroupShaper] = Registry("group shaper")
StepReward = Callable[..., float]
STEP_REWARDS: Registry[StepReward] = Registry("step reward")
"""Rewards of one tactic step, ``fn(before: ProofState, result: StepResult, **settings) -> float``: LeanListener's
``subgoal`` (:mod:`proofrl.rewards.subgoal`), EVA's score (:mod:`proofrl.rewards.eva`)."""


@SAMPLE_TERMS.register("verifier")
def verifier_term(sample: Sample, settings: Any = None) -> float:
    """R(x, y) ∈ {0, 1}: 1 when the proof assistant's verdict is ``valid`` (nothing else counts)."""
    return 1.0 if sample.verdict.valid else 0.0


@SAMPLE_TERMS.register("format")
def format_term(sample: Sample, settings: Any) -> float:
    """kimina-prover-rl's format reward: 1 when the completion follows the reasoning-then-code rules."""
    return format_reward(sample.text, sample.problem, settings)


@GROUP_SHAPERS.register("unlikeliness")
def unlikeliness_shaper(
    rewards: torch.Tensor, token_logps: torch.Tensor, mask: torch.Tensor, settings: Any
) -> torch.Tensor:
    """r_i = R_i · (1 − β_rank · (G − rank_i) / G), ranks by sequence log-prob (arXiv:2506.02355, eq. 3)."""
    seq = sequence_logprob(token_logps.detach().float(), mask, settings.reduction)  # (G,)
    return unlikeliness_reward(rewards, seq, beta_rank=settings.beta_rank, convention=settings.convention)


def _configured(cfg: Any, registry: Registry[Any]) -> list[tuple[str, Any]]:
    """The ``(name, settings)`` of each part of ``registry`` that ``cfg`` sets (a field not None), in field order."""
    names = [f.name for f in fields(cfg)] if hasattr(cfg, "__dataclass_fields__") else list(type(cfg).model_fields)
    return [(n, getattr(cfg, n)) for n in names if n in registry and getattr(cfg, n) is not None]


class RewardFn:
    """A recipe's reward: :meth:`samples` for the terms, :meth:`shape_group` for the shapers."""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.terms = [("verifier", None), *_configured(cfg, SAMPLE_TERMS)]
        self.shapers = _configured(cfg, GROUP_SHAPERS)

    def sample(self, sample: Sample) -> float:
        r = 1.0
        for name, settings in self.terms:
            r *= SAMPLE_TERMS.get(name)(sample, settings)
            if r == 0.0:  # a product: once 0, later terms cannot change it (and need not run)
                break
        return r

    def samples(self, samples: Sequence[Sample]) -> list[float]:
        return [self.sample(s) for s in samples]

    def shape_group(self, rewards: torch.Tensor, token_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The group's rewards after every shaper. ``rewards (G,)``, ``token_logps (G, T)`` of the generating
        policy, ``mask (G, T)`` (1 on completion tokens) ``-> (G,)`` float32. All-correct and all-wrong groups
        are dropped before this by the buffer (they carry no signal, and a shaper would invent one)."""
        if (
            rewards.dim() != 1
            or token_logps.dim() != 2
            or token_logps.shape != mask.shape
            or token_logps.shape[0] != rewards.shape[0]
        ):
            raise ValueError(
                f"expected rewards (G,), token_logps and mask (G, T); got {tuple(rewards.shape)}, "
                f"{tuple(token_logps.shape)}, {tuple(mask.shape)}"
            )
        out = rewards.to(torch.float32)
        for name, settings in self.shapers:
            out = GROUP_SHAPERS.get(name)(out, token_logps, mask, settings)
        return out
