"""The config sections every training loop shares (:mod:`proofrl.schema` style: checked when the recipe loads):
LoRA, the optimiser and the ``logger:`` list. A loop's recipe uses these classes, so a key means the same thing,
with the same type and range, in every recipe."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ..schema import Section, one_of
from .tracking import DEFAULT_LOGGERS, LOGGERS

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")

Loggers = tuple[Annotated[str, one_of(LOGGERS.names)], ...]
"""``logger: [jsonl, tensorboard, console, wandb, mlflow]`` (:mod:`.tracking`); ``jsonl`` is always written"""

LOGGER_FIELD: Any = Field(default=DEFAULT_LOGGERS)


class LoraSection(Section):
    """LoRA (arXiv:2106.09685) on the named linear layers: ΔW = (α/r)·B·A."""

    r: Annotated[int, Field(ge=1)] = 16
    alpha: Annotated[float, Field(gt=0)] = 32
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
