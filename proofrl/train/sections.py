"""The config sections every training loop shares (:mod:`proofrl.schema` style: checked when the recipe loads):
LoRA, the optimiser, PPO and the ``logger:`` list. A loop's recipe uses these classes, so a key means the same thing,
with the same type and range, in every recipe."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from pydantic import Field

from ..schema import Section, one_of
from .grpo import AGG_MODES, KL_ESTIMATORS, POLICY_LOSSES, PPOConfig
from .tracking import DEFAULT_LOGGERS, LOGGERS

PositiveInt = Annotated[int, Field(ge=1)]

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")

Loggers = tuple[Annotated[str, one_of(LOGGERS.names)], ...]
"""``logger: [jsonl, tensorboard, console, wandb, mlflow]`` (:mod:`.tracking`); ``jsonl`` is always written"""

LOGGER_FIELD: Any = Field(default=DEFAULT_LOGGERS)


class LoraSection(Section):
    """LoRA (arXiv:2106.09685) on the named linear layers: ΔW = (α/r)·B·A."""

    r: Annotated[int, Field(ge=1)] = 16
    alpha: Annotated[int, Field(gt=0)] = 32
    dropout: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.05
    target_modules: tuple[str, ...] = ATTENTION

    def spec(self) -> Any:
        """The :class:`~proofrl.policy.model.LoraSpec` of these settings."""
        from ..policy.model import LoraSpec

        return LoraSpec(self.r, self.alpha, self.dropout, tuple(self.target_modules))


class OptimSection(Section):
    """AdamW."""

    lr: Annotated[float, Field(gt=0.0)] = 1e-6
    weight_decay: Annotated[float, Field(ge=0.0)] = 0.01
    betas: tuple[Annotated[float, Field(ge=0.0, lt=1.0)], Annotated[float, Field(ge=0.0, lt=1.0)]] = (0.9, 0.999)


class PPOSection(Section):
    """The PPO settings of a GRPO loop (whole-proof ``algorithm.ppo``, step-level ``algorithm``): the fields of
    :class:`~proofrl.train.grpo.PPOConfig`, checked; :meth:`to_ppo_config` gives the dataclass
    :func:`~proofrl.train.grpo.ppo_update` takes. A loop with other defaults redeclares only those fields."""

    epochs: PositiveInt = 1
    """K: passes over the same batch (verl ``ppo_epochs``; "Rewarding the Unlikely" uses 2)"""
    minibatch_rows: PositiveInt | None = None
    """rows per gradient step; None = the whole batch in one step per epoch"""
    clip_ratio_low: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.2
    """ε_low: ρ is clipped below at 1 − ε_low"""
    clip_ratio_high: Annotated[float, Field(ge=0.0)] = 0.2
    """ε_high: ρ is clipped above at 1 + ε_high (DAPO's clip-higher sets this above ε_low)"""
    clip_ratio_c: Annotated[float, Field(gt=1.0)] = 3.0
    """dual-clip bound (verl's ``clip_ratio_c``): for negative advantages the loss is capped at −A·c"""
    policy_loss: Annotated[str, one_of(POLICY_LOSSES.names)] = "dual-clip"
    """per-token policy loss, a name in :data:`~proofrl.train.grpo.POLICY_LOSSES`"""
    agg_mode: Annotated[str, one_of(AGG_MODES.names)] = "token-mean"
    """loss aggregation, a name in :data:`~proofrl.train.grpo.AGG_MODES`"""
    kl_coef: Annotated[float, Field(ge=0.0)] = 0.0
    """β_KL; 0 disables the penalty and the reference model"""
    kl_kind: Annotated[str, one_of(KL_ESTIMATORS.names)] = "low_var_kl"
    """KL estimator, a name in :data:`~proofrl.train.grpo.KL_ESTIMATORS`"""
    max_grad_norm: Annotated[float, Field(gt=0.0)] | None = 1.0
    """clip the global gradient norm to this value (verl and the unlikeliness code: 1.0); None = no clipping"""
    skip_grad_norm: Annotated[float, Field(gt=0.0)] | None = None
    """skip the optimiser step when the gradient norm is >= this (the official code uses 20); None = never"""
    horizon: PositiveInt | None = None
    """constant H for ``seq-mean-token-sum-norm`` (Dr.GRPO); None = the rollout's ``max_tokens``"""
    shuffle: bool = True
    """shuffle rows into mini-batches each epoch"""

    def to_ppo_config(self, **changes: Any) -> PPOConfig:
        """The :class:`~proofrl.train.grpo.PPOConfig` of these settings (fields it lacks are left out)."""
        names = {f.name for f in dataclasses.fields(PPOConfig)}
        return PPOConfig(**{k: v for k, v in {**dict(self), **changes}.items() if k in names})
