"""Rewards composed from a recipe's ``reward:`` section.

Two stages, because they need different inputs:

1. :func:`base_rewards` — per sample, from its text and verdict: R = valid × (format ok), the format factor
   only when format rules are set (kimina-prover-rl: ``proof_valid × (format_error == NONE)``).
2. :func:`shape_group` — per group of the G samples of one prompt, once the policy's log-probs are known:
   the unlikeliness reward of "Rewarding the Unlikely" (arXiv:2506.02355, eq. 3) when configured.

A recipe's section reads::

    reward:
      format: {}                      # kimina's rules with their defaults; a mapping overrides fields; null: off
      unlikeliness: {beta_rank: 0.25} # null or absent: off
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

import torch
from pydantic import BaseModel, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from ..problems import Problem
from ..provers.base import Verdict
from ..schema import Config, validate
from .format import FormatRules
from .unlikeliness import Convention


class UnlikelinessConfig(Config):
    """The rank penalty of "Rewarding the Unlikely" (defaults: the paper's, §4 and its official code)."""

    beta_rank: Annotated[float, Field(ge=0.0, le=1.0)] = 0.25
    """β_rank, the largest penalty (paper: 0.25), in [0, 1]"""
    convention: Convention = "paper"
    """"paper" (ranks from the most likely, penalties β/G…β) or "official" (the released code's, 0…β(G−1)/G)"""
    reduction: Literal["mean", "sum"] = "mean"
    """sequence log-prob from token log-probs: mean (official code) or sum (its analysis scripts)"""


def _switch(default: Callable[[], Any]) -> BeforeValidator:
    """A part of the section: absent/None/False is off, True or ``{}`` is on with defaults, a mapping overrides
    fields (YAML lists become the dataclass's tuples)."""

    def read(value: Any) -> Any:
        if value is None or value is False:
            return None
        if value is True:
            return default()
        if isinstance(value, Mapping):
            return {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
        if isinstance(value, (BaseModel, FormatRules)):
            return value
        raise PydanticCustomError("part_type", "expected a mapping, true/false or null")

    return BeforeValidator(read)


class RewardConfig(Config):
    """A recipe's ``reward:`` section; each field that is set names a part of :mod:`proofrl.rewards.combine`."""

    format: Annotated[FormatRules | None, _switch(FormatRules)] = None
    """kimina's format reward multiplied in; None: no format reward (the kimina recipe sets it)"""
    unlikeliness: Annotated[UnlikelinessConfig | None, _switch(UnlikelinessConfig)] = None
    """the unlikeliness shaping of each group; None: rewards are left as they are"""


def base_rewards(
    completions: Sequence[str],
    problems: Sequence[Problem],
    verdicts: Sequence[Verdict],
    cfg: RewardConfig,
    proofs: Sequence[str | None] | None = None,
) -> list[float]:
    """The sample terms of :class:`~proofrl.rewards.combine.RewardFn`: R_i = 1[verdict_i valid] × 1[format ok]
    (the second factor only when ``cfg.format`` is set). ``(N,) -> (N,)``."""
    if not len(completions) == len(problems) == len(verdicts) or (proofs is not None and len(proofs) != len(verdicts)):
        raise ValueError(
            f"lengths differ: {len(completions)} completions, {len(problems)} problems, {len(verdicts)} verdicts"
        )
    from .combine import RewardFn, Sample

    ps = proofs if proofs is not None else [None] * len(verdicts)
    return RewardFn(cfg).samples(
        [Sample(p, t, v, q) for t, p, v, q in zip(completions, problems, verdicts, ps, strict=True)]
    )


def shape_group(
    rewards: torch.Tensor, token_logps: torch.Tensor, mask: torch.Tensor, cfg: RewardConfig
) -> torch.Tensor:
    """The group shapers of :class:`~proofrl.rewards.combine.RewardFn` (with ``cfg.unlikeliness``: the rank
    penalty of "Rewarding the Unlikely"). ``rewards (G,)``, ``token_logps (G, T)``, ``mask (G, T)`` ``-> (G,)``."""
    from .combine import RewardFn

    return RewardFn(cfg).shape_group(rewards, token_logps, mask)


def reward_config_from_dict(d: Mapping[str, Any] | None) -> RewardConfig:
    """A :class:`RewardConfig` from a recipe's ``reward:`` mapping. Each part may be absent/None/False (off),
    True or ``{}`` (on, defaults) or a mapping of field overrides; any mistake is a one-line
    :class:`~proofrl.errors.ConfigError` naming the key (``reward.unlikeliness.beta_rank must be in [0, 1], got 2``)."""
    if d is None:
        return RewardConfig()
    if isinstance(d, RewardConfig):
        return d
    return validate(RewardConfig, d, "reward")
