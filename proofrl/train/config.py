"""Typed configuration of the whole-proof RL trainer, loaded from YAML recipes and overridden from the CLI.

A recipe (``proofrl/recipes/*.yaml``) is a nested mapping whose sections mirror the sections below
(pydantic models, :mod:`proofrl.schema`; LoRA, AdamW and ``logger:`` are the sections every loop shares,
:mod:`proofrl.train.sections`); ``--set rollout.group_size=8`` overrides one leaf (:mod:`proofrl.train.recipes`).
Everything is checked when the recipe loads: unknown keys are errors, so a typo never silently falls back to a default;
every enumeration is a ``Literal`` or a name in its live registry (advantage estimators, KL estimators, aggregation
modes, generators, prompt formats, backends); every range is a constraint. A mistake is one
:class:`~proofrl.errors.ConfigError` line naming the dotted key and what it accepts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, model_validator

from ..errors import ConfigError
from ..rewards.compose import RewardConfig
from ..schema import Section, one_of
from .grpo import ADV_ESTIMATORS, PPOConfig
from .recipes import LOOPS, RECIPES_DIR, apply_overrides, recipe_names  # noqa: F401  (re-exported)
from .sections import LOGGER_FIELD, Loggers, LoraSection, OptimSection, PPOSection

__all__ = [
    "AlgorithmConfig",
    "ConfigError",
    "DataConfig",
    "ErrorCorrectionConfig",
    "EvalConfig",
    "LoraConfig",
    "ModelConfig",
    "OptimConfig",
    "PPOSection",
    "RolloutConfig",
    "TrainConfig",
    "VLLMRolloutConfig",
    "VerifyConfig",
    "load_recipe",
    "recipe_names",
    "save_config",
]


Probability = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveInt = Annotated[int, Field(ge=1)]
Count = Annotated[int, Field(ge=0)]


def _generators() -> list[str]:
    from ..policy.generation import GENERATORS  # imported when checked: it pulls in transformers

    return list(GENERATORS)


def _prompt_formats() -> list[str]:
    from ..policy.prompts import FORMATS

    return list(FORMATS)


def _backends() -> list[str]:
    from ..provers.backend import backend_names

    return backend_names()


LoraConfig = LoraSection
"""the shared LoRA section (:class:`proofrl.train.sections.LoraSection`)"""


class ModelConfig(Section):
    path: str = ""
    """a local Hugging Face model directory; empty = the tiny model built by ``proofrl demo``"""
    lora: LoraConfig | None = None
    dtype: Literal["auto", "bfloat16", "float32", "float16"] = "auto"
    """auto (bf16 on CUDA, fp32 on CPU) | float32 | bfloat16 | float16"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass (less memory, about a third more compute)"""
    ref_device: Literal["same", "cpu"] = "same"
    """where the frozen KL reference lives: same (the policy's device) | cpu"""


class DataConfig(Section):
    train: str = ""
    """JSONL problem file (miniF2F-style) or ``coq-stdlib:train`` / ``coq-stdlib:held-out``"""
    eval: str = ""
    """problems for periodic pass@N; empty = no periodic evaluation"""
    split: str = ""
    """keep only records of this split (miniF2F's ``valid``/``test``); empty = all"""
    max_proof_chars: PositiveInt | None = None
    """for ``coq-stdlib:*``: keep theorems whose human proof is at most this long"""
    limit: PositiveInt | None = None
    """at most this many training problems"""
    eval_limit: PositiveInt | None = None


class ErrorCorrectionConfig(Section):
    """kimina-prover-rl's second turn (error correction)."""

    enabled: bool = False
    rate: Probability = 0.5
    """probability that a prompt slot is drawn from the correction cache"""
    cache_size: PositiveInt = 5000
    max_feedback_chars: PositiveInt = 3000
    max_prompt_tokens: PositiveInt = 8192
    max_errors: PositiveInt = 3


class VLLMRolloutConfig(Section):
    """The in-process vLLM engine of ``rollout.generator: vllm``. It is built from ``model.path`` in the dtype the
    update computes in (``model.dtype``: fp32 on a CPU) and takes the trained weights after every update."""

    gpu_memory_utilization: Annotated[float, Field(gt=0.0, le=1.0)] = 0.5
    """the share of the accelerator's memory the engine takes for its weights and KV cache (vLLM's own knob)"""
    kv_cache_gib: Annotated[float, Field(gt=0.0)] | None = None
    """a KV cache of this many GiB instead of the share above; unset: the share on an accelerator, 1 GiB on vLLM's
    CPU build (whose share is of RAM, less all this process holds, the trainer's model and Coq's pool included)"""
    enforce_eager: bool = False
    """no torch.compile or CUDA graphs: the engine starts in seconds rather than minutes, then samples slower"""


class RolloutConfig(Section):
    generator: Annotated[str, one_of(_generators)] = "hf"
    """hf | vllm | openai (:data:`proofrl.policy.generation.GENERATORS`)"""
    base_url: str = ""
    """for ``openai``: the endpoint serving the policy"""
    prompt_format: Annotated[str, one_of(_prompt_formats)] = "coq"
    """a name in :data:`proofrl.policy.prompts.FORMATS`"""
    problems_per_step: PositiveInt = 16
    group_size: PositiveInt = 32
    """G, samples per prompt"""
    temperature: Annotated[float, Field(gt=0.0)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    max_tokens: PositiveInt = 512
    chunk_prompts: PositiveInt = 4
    """prompts generated per call; each chunk's verification starts while the next chunk is generated"""
    overlap: bool = False
    """``true``: chunks of ``chunk_prompts`` prompts, each verified while the next is generated; ``false``: one
    generation call, then one verification of everything: the faster one on 2 CPU cores, measured for the demo
    recipe and for a policy whose generation is much slower than verification (docs/training.md, "Where a
    step's time goes")"""
    generation_batch: PositiveInt = 64
    """``hf``: sequences (prompts × G) per ``model.generate`` call. Its own knob: the batch changes the sampled
    rollouts (padding and the RNG stream), so the training-side ``micro_batch`` must not set it"""
    error_correction: ErrorCorrectionConfig = Field(default_factory=ErrorCorrectionConfig)
    vllm: VLLMRolloutConfig = Field(default_factory=VLLMRolloutConfig)
    """``generator: vllm``: the engine's memory and compilation"""

    @model_validator(mode="after")
    def _openai_needs_url(self) -> RolloutConfig:
        if self.generator == "openai" and not self.base_url:
            raise ValueError("generator=openai needs base_url (the OpenAI-compatible endpoint serving the policy)")
        return self


class VerifyConfig(Section):
    backend: Annotated[str, one_of(_backends)] = "coq"
    workers: PositiveInt = 2
    timeout: Annotated[float, Field(gt=0.0)] = 60.0
    """seconds per proof: the pool's and the verifier's (one timeout)"""
    server_url: str = ""
    """verify through a running proofrl/kimina server instead of a local pool"""
    api_key: str = ""


class AlgorithmConfig(Section):
    advantage: Annotated[str, one_of(ADV_ESTIMATORS.names)] = "grpo"
    """grpo | dr_grpo (a name in :data:`proofrl.train.grpo.ADV_ESTIMATORS`)"""
    buffer_samples: Count = 0
    """update once this many samples from informative groups are buffered (the paper: 256); 0 = every step"""
    skip_uninformative: bool = True
    """drop groups whose rewards are all equal before shaping (they carry no GRPO signal)"""
    ppo: PPOSection = Field(default_factory=PPOSection)

    @model_validator(mode="before")
    @classmethod
    def _ppo_dataclass(cls, data: Any) -> Any:  # AlgorithmConfig(ppo=PPOConfig(...)) reads the dataclass's fields
        if isinstance(data, dict) and isinstance(data.get("ppo"), PPOConfig):
            data = {**data, "ppo": dataclasses.asdict(data["ppo"])}
        return data


OptimConfig = OptimSection
"""the shared AdamW section (:class:`proofrl.train.sections.OptimSection`)"""


class EvalConfig(Section):
    every: Count = 0
    """run pass@N on ``data.eval`` every this many steps (0 = only at the end, when ``data.eval`` is set)"""
    samples: PositiveInt = 32
    ks: tuple[PositiveInt, ...] = (1, 8, 32)
    temperature: Annotated[float, Field(gt=0.0)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    max_tokens: PositiveInt = 512


class TrainConfig(Section):
    name: str = "custom"
    steps: Count = 100
    seed: int = 0
    out: str = "runs/train"
    checkpoint_every: PositiveInt = 10
    keep_checkpoints: PositiveInt = 2
    logger: Loggers = LOGGER_FIELD
    """trackers (:mod:`proofrl.train.tracking`): jsonl, tensorboard, console, wandb, mlflow"""
    micro_batch: PositiveInt = 16
    """rows per forward and backward pass of the update (a memory knob: it never changes what is sampled)"""
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)


def load_recipe(recipe: str | Path | None = None, overrides: Sequence[str] = ()) -> TrainConfig:
    """A :class:`TrainConfig` from a whole-proof recipe name (``unlikeliness``, ``kimina``, ``deepseek-v1.5``, …)
    or a YAML path, with ``key.sub=value`` overrides (:func:`proofrl.train.recipes.apply_overrides`)."""
    return LOOPS["grpo"].config(recipe, overrides)


def save_config(cfg: TrainConfig, path: Path) -> None:
    path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
