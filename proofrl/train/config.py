"""Typed configuration of the whole-proof RL trainer, loaded from YAML recipes and overridden from the CLI.

A recipe (``proofrl/recipes/*.yaml``) is a nested mapping whose sections mirror the dataclasses below;
``--set rollout.group_size=8`` overrides one leaf. Unknown keys are errors, so a typo never silently falls
back to a default.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..train.grpo import PPOConfig

RECIPES_DIR = Path(__file__).resolve().parent.parent / "recipes"


@dataclass(frozen=True)
class LoraConfig:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class ModelConfig:
    path: str = ""
    """a local Hugging Face model directory; empty = the tiny model built by ``proofrl demo``"""
    lora: LoraConfig | None = None
    dtype: str = "auto"
    """auto (bf16 on CUDA, fp32 on CPU) | float32 | bfloat16 | float16"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass (less memory, about a third more compute)"""
    ref_device: str = "same"
    """where the frozen KL reference lives: same (the policy's device) | cpu"""


@dataclass(frozen=True)
class DataConfig:
    train: str = ""
    """JSONL problem file (miniF2F-style) or ``coq-stdlib:train`` / ``coq-stdlib:held-out``"""
    eval: str = ""
    """problems for periodic pass@N; empty = no periodic evaluation"""
    split: str = ""
    """keep only records of this split (miniF2F's ``valid``/``test``); empty = all"""
    max_proof_chars: int | None = None
    """for ``coq-stdlib:*``: keep theorems whose human proof is at most this long"""
    limit: int | None = None
    """at most this many training problems"""
    eval_limit: int | None = None


@dataclass(frozen=True)
class ErrorCorrectionConfig:
    """kimina-prover-rl's second turn (rl-anchors.md §2)."""

    enabled: bool = False
    rate: float = 0.5
    """probability that a prompt slot is drawn from the correction cache"""
    cache_size: int = 5000
    max_feedback_chars: int = 3000
    max_prompt_tokens: int = 8192
    max_errors: int = 3


@dataclass(frozen=True)
class RolloutConfig:
    generator: str = "hf"
    """hf | vllm | openai"""
    base_url: str = ""
    """for ``openai``: the endpoint serving the policy"""
    prompt_format: str = "coq"
    problems_per_step: int = 16
    group_size: int = 32
    """G, samples per prompt"""
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    chunk_prompts: int = 4
    """prompts generated per call; each chunk's verification starts while the next chunk is generated"""
    error_correction: ErrorCorrectionConfig = field(default_factory=ErrorCorrectionConfig)


@dataclass(frozen=True)
class VerifyConfig:
    backend: str = "coq"
    workers: int = 2
    timeout: float = 60.0
    server_url: str = ""
    """verify through a running proofrl/kimina server instead of a local pool"""
    api_key: str = ""


@dataclass(frozen=True)
class RewardSection:
    """Mirrors :class:`proofrl.rewards.compose.RewardConfig`; converted there (kept as plain data here)."""

    format: dict[str, Any] | None = None
    unlikeliness: dict[str, Any] | None = None


@dataclass(frozen=True)
class PPOSection(PPOConfig):
    """``algorithm.ppo``: :class:`~proofrl.train.grpo.PPOConfig` with the trainer's defaults and keys."""

    clip_ratio_c: float = 3.0
    """dual-clip bound (verl's ``clip_ratio_c``): for negative advantages the loss is capped at −A·c; > 1"""
    max_grad_norm: float | None = 1.0
    """clip the global gradient norm to this value (verl and the unlikeliness code: 1.0); None = no clipping"""
    horizon: int | None = None
    """constant H for ``seq-mean-token-sum-norm`` (Dr.GRPO); None = the rollout's ``max_tokens``"""


@dataclass(frozen=True)
class AlgorithmConfig:
    advantage: str = "grpo"
    """grpo | dr_grpo (a name in :data:`proofrl.train.grpo.ADV_ESTIMATORS`)"""
    buffer_samples: int = 0
    """update once this many samples from informative groups are buffered (the paper: 256); 0 = every step"""
    skip_uninformative: bool = True
    """drop groups whose rewards are all equal before shaping (they carry no GRPO signal)"""
    ppo: PPOSection = field(default_factory=PPOSection)


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 1e-6
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)


@dataclass(frozen=True)
class EvalConfig:
    every: int = 0
    """run pass@N on ``data.eval`` every this many steps (0 = only at the end, when ``data.eval`` is set)"""
    samples: int = 32
    ks: tuple[int, ...] = (1, 8, 32)
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512


@dataclass(frozen=True)
class TrainConfig:
    name: str = "custom"
    steps: int = 100
    seed: int = 0
    out: str = "runs/train"
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    micro_batch: int = 16
    """rows per forward pass when computing log-probs"""
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    reward: RewardSection = field(default_factory=RewardSection)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))


class ConfigError(ValueError):
    """A recipe or override that does not fit the config (unknown key, wrong type)."""


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, where)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return build(tp, value, where)
    if origin is tuple:
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        args = typing.get_args(tp)
        item = args[0] if args and (len(args) == 2 and args[1] is Ellipsis) else None
        if item is None:
            return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
        return tuple(_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict or tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp in (int, float, str):
        if tp is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if tp is str and value is None:  # `--set data.eval=` clears a path
            return ""
        if tp is float and isinstance(value, str):  # PyYAML reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if not isinstance(value, tp) or isinstance(value, bool):
            raise ConfigError(f"{where}: expected {tp.__name__}, got {value!r}")
        return value
    return value


def build(cls: type, data: Mapping[str, Any], where: str = "") -> Any:
    """``cls(**data)`` recursively, with a clear error for unknown keys and wrong types."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where or cls.__name__}: unknown key(s) {unknown}; valid: {sorted(names)}")
    kwargs = {k: _convert(hints[k], v, f"{where}.{k}" if where else k) for k, v in data.items()}
    return cls(**kwargs)


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = tree
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{dotted}: {p} is not a section")
    node[leaf] = value


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def load_recipe(recipe: str | Path | None = None, overrides: Sequence[str] = ()) -> TrainConfig:
    """A :class:`TrainConfig` from a recipe name (``unlikeliness``, ``kimina``, ``deepseek-v1.5``, …) or a YAML
    path, with ``key.sub=value`` overrides (values parsed as YAML: ``8``, ``true``, ``[1, 8]``)."""
    tree: dict[str, Any] = {}
    if recipe:
        path = Path(recipe)
        if str(recipe) in recipe_names():
            path = RECIPES_DIR / f"{recipe}.yaml"
        elif not path.is_file():
            raise ConfigError(f"unknown recipe {recipe!r}; valid: {recipe_names()} or a YAML path")
        tree = yaml.safe_load(path.read_text()) or {}
        if not isinstance(tree, dict):
            raise ConfigError(f"{path}: a recipe must be a mapping")
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r}: expected key.sub=value")
        _set(tree, key.strip(), yaml.safe_load(raw))
    return build(TrainConfig, tree)


def save_config(cfg: TrainConfig, path: Path) -> None:
    path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
