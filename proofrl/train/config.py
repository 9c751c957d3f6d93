"""The one settings schema of proofrl's training loops: a run section and component sections, each defined once.

A loop's config is :class:`RunConfig` (name, seed, out, steps, checkpoint cadence, loggers) plus the components it
uses, all from this module: ``model``, ``data``, ``rollout``, ``verify``, ``reward``, ``algorithm``, ``ppo``,
``optim``, ``eval``, ``search`` (the search engines' own :class:`SearchConfig`: search-and-learn's, and EVA's
labelling search), and for search-and-learn ``replay``. A key means the same thing, with the same type and range,
in every loop.

A component holds every setting any loop reads from it, and each loop (:data:`proofrl.train.recipes.LOOPS`) names
the fields it reads (:attr:`RunConfig.READS`): a key a loop does not read is an error naming the keys it does, so
a typo, or a key of another loop, never silently falls back to a default. A loop's own defaults (step-level GRPO's
learning rate, EVA's LoRA on every projection) are its fields' default values, given as components, not as copies
of them.

A recipe (``proofrl/recipes/*.yaml``) is a mapping of these sections; ``--set rollout.group_size=8`` overrides
one leaf (:mod:`proofrl.train.recipes`). Everything is checked when the recipe loads (:mod:`proofrl.schema`): every
enumeration is a ``Literal`` or a name in its live registry, every range a constraint, and a mistake is one
:class:`~proofrl.errors.ConfigError` line naming the dotted key and what it accepts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..data.search_samples import ReplayConfig
from ..errors import ConfigError
from ..objectives.grpo import ADV_ESTIMATORS, PPOConfig
from ..policy.model import LoraConfig
from ..policy.sources import MODEL_KINDS, spec_parts
from ..rewards.compose import RewardConfig
from ..rewards.eva import DIMENSIONS
from ..schema import Config, one_of
from ..search.config import SearchConfig
from .recipes import LOOPS, RECIPES_DIR, apply_overrides, recipe_names  # noqa: F401  (re-exported)
from .tracking import DEFAULT_LOGGERS, LOGGERS

__all__ = [
    "AlgorithmConfig",
    "ConfigError",
    "DataConfig",
    "ErrorCorrectionConfig",
    "EvaConfig",
    "EvalConfig",
    "ExpertIterationConfig",
    "GRPOConfig",
    "LoraConfig",
    "ModelConfig",
    "OptimConfig",
    "PPOConfig",
    "ReplayConfig",
    "RolloutConfig",
    "RunConfig",
    "StepGRPOConfig",
    "VerifyConfig",
    "load_recipe",
]

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveInt = Annotated[int, Field(ge=1)]
Positive = Annotated[float, Field(gt=0.0)]
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


def _step_rewards() -> list[str]:
    from ..rewards import subgoal  # noqa: F401  (registers the ``subgoal`` step reward)
    from ..rewards.combine import STEP_REWARDS

    return list(STEP_REWARDS.names())


# -- components -----------------------------------------------------------------------------------------------


class ModelConfig(Config):
    path: str = ""
    """a local Hugging Face model directory; empty: the loop's tiny model, built locally"""
    lora: LoraConfig | None = None
    """LoRA adapters on the named layers (null: full fine-tuning)"""
    dtype: Literal["auto", "bfloat16", "float32", "float16"] = "auto"
    """the update's precision: auto (bf16 on CUDA, fp32 on CPU) | float32 | bfloat16 | float16"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass (less memory, about a third more compute)"""
    ref_device: Literal["same", "cpu"] = "same"
    """where the frozen KL reference lives: same (the policy's device) | cpu (a LoRA model's reference is its
    adapter switched off: no copy)"""
    value_head: bool = True
    """search-and-learn: false is the policy-only baseline (no value head, search without a value function)"""
    num_bins: Annotated[int, Field(ge=2)] = 64
    """value bins over the remaining proof cost (AlphaProof pseudocode ``num_value_bins``)"""
    device: str = ""
    """empty: cuda when there is one, else cpu"""


class DataConfig(Config):
    train: str = ""
    """training data: a problem JSONL / ``coq-stdlib:train`` (whole proofs), transitions JSONL (step-level), the
    EVA format; empty: the loop's Coq standard-library data, built locally"""
    eval: str = ""
    """held-out data in the same format; empty: none, or the loop's held-out split when ``train`` is empty too"""
    split: str = ""
    """keep only records of this split (miniF2F's ``valid``/``test``); empty = all"""
    limit: PositiveInt | None = None
    """at most this many training problems (states, theorems)"""
    eval_limit: PositiveInt | None = None
    """at most this many held-out problems"""
    max_proof_chars: PositiveInt | None = None
    """for ``coq-stdlib:*``: keep theorems whose human proof is at most this long"""
    max_state_chars: PositiveInt = 2000
    """proof states longer than this are left out (step-level) or cut (EVA prompts)"""
    max_tokens: Annotated[int, Field(ge=32)] = 1024
    """EVA: prompt + target tokens at most; longer prompts lose their start, then the target its end"""
    premise_dropout: Probability = 0.5
    """step-level: probability that each named premise is left out of a prompt (only where records carry
    ``premises``; LeanListener gives no value)"""
    assets: str = ""
    """where the Coq standard library's tactic data and tiny tactic model are built or found (empty: the run folder)"""
    transitions: str = ""
    """search-and-learn: human-proof transitions JSONL, given with ``train`` and ``eval`` instead of the assets"""
    states_per_theorem: PositiveInt = 2
    """EVA: states labelled per theorem (spread over its proof) when the prover-labelled set is built here"""


class ErrorCorrectionConfig(Config):
    """kimina-prover-rl's second turn (error correction)."""

    enabled: bool = False
    rate: Probability = 0.5
    """probability that a prompt slot is drawn from the correction cache"""
    cache_size: PositiveInt = 5000
    max_feedback_chars: PositiveInt = 3000
    max_prompt_tokens: PositiveInt = 8192
    max_errors: PositiveInt = 3


class RolloutConfig(Config):
    generator: Annotated[str, one_of(_generators)] = "hf"
    """hf | vllm | openai (:data:`proofrl.policy.generation.GENERATORS`)"""
    base_url: str = ""
    """for ``openai``: the endpoint serving the policy"""
    prompt_format: Annotated[str, one_of(_prompt_formats)] = "coq"
    """a name in :data:`proofrl.policy.prompts.FORMATS`"""
    problems_per_step: PositiveInt = 16
    """problems (theorems, states) drawn per step (LeanListener: batch 16)"""
    group_size: PositiveInt = 32
    """G, samples per problem (a GRPO group)"""
    temperature: Positive = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    max_tokens: PositiveInt = 512
    """tokens per sample (a cut tactic is not a tactic)"""
    chunk_prompts: PositiveInt = 4
    """prompts generated per call; each chunk's verification starts while the next chunk is generated"""
    overlap: bool = False
    """``true``: chunks of ``chunk_prompts`` prompts, each verified while the next is generated; ``false``: one
    generation call, then one verification of everything: the faster one on 2 CPU cores, measured for the demo
    recipe and for a policy whose generation is much slower than verification (docs/training.md, "Where a
    step's time goes")"""
    generation_batch: PositiveInt = 64
    """``hf``: sequences (prompts × G) per ``model.generate`` call. Its own knob: the batch changes the sampled
    rollouts (padding and the RNG stream), so the training-side ``optim.micro_batch`` must not set it"""
    error_correction: ErrorCorrectionConfig = Field(default_factory=ErrorCorrectionConfig)
    gpu_memory_utilization: Annotated[float, Field(gt=0.0, le=1.0)] = 0.5
    """``vllm``: the share of the accelerator's memory the in-process engine takes for its weights and KV cache
    (vLLM's own knob); the engine is built from ``model.path`` in the dtype the update computes in (``model.dtype``:
    fp32 on a CPU) and takes the trained weights after every update"""
    kv_cache_gib: Annotated[float, Field(gt=0.0)] | None = None
    """``vllm``: a KV cache of this many GiB instead of the share above; unset: the share on an accelerator, 1 GiB
    on vLLM's CPU build (whose share is of RAM, less all this process holds, the trainer's model and Coq's pool
    included)"""
    enforce_eager: bool = False
    """``vllm``: no torch.compile or CUDA graphs: the engine starts in seconds rather than minutes, then samples
    slower"""
    sync_every: PositiveInt = 50
    """step-level: updates between refreshes of the sampling model's weights (LeanListener: 50)"""
    own_state_share: Probability = 0.25
    """step-level: chance that a state comes from the policy's own valid steps (when it has any)"""
    own_state_cap: PositiveInt = 4096
    """step-level: the policy's own states kept (oldest dropped first)"""
    passes: PositiveInt = 4
    """search-and-learn: search passes over each batch, each with its own sampling seed (reap: four)"""
    policy: str = "in-process"
    """search-and-learn: the tactic policy the searches sample, ``in-process`` (the published weights, loaded by the
    rollout worker) or ``openai:URL`` / ``openai-chat:URL``"""
    model_name: str = ""
    """search-and-learn: the served model's name for an OpenAI-compatible ``policy`` endpoint"""
    value: str = "in-process"
    """search-and-learn: the value the searches read, ``in-process`` (the published value head) or ``endpoint:URL``
    (reap's value service)"""
    sources: str = ""
    """search-and-learn: tactic sources pooled with ``policy`` at every state of every search
    (:class:`proofrl.policy.sources.MixedPolicy`): a proof memory ``knn:DIR`` or ``knn-online:DIR`` and the
    automation ``auto[:T,...]``, joined by ``+``; empty: the model alone (reap). An online memory learns every
    proof the training rollouts find and keeps it across rounds (saved in each checkpoint); each held-out
    evaluation searches with a copy of it, so no held-out proof reaches training"""

    @model_validator(mode="after")
    def _openai_needs_url(self) -> RolloutConfig:
        if self.generator == "openai" and not self.base_url:
            raise ValueError("generator=openai needs base_url (the OpenAI-compatible endpoint serving the policy)")
        return self

    @model_validator(mode="after")
    def _sources_are_no_model(self) -> RolloutConfig:
        if self.sources:
            kinds = [kind for kind, _ in spec_parts(self.sources)]
            if models := [k for k in kinds if k in MODEL_KINDS]:
                raise ConfigError(
                    f"rollout.sources={self.sources!r}: {models[0]} is a model; the model is rollout.policy, "
                    "sources are knn:DIR, knn-online:DIR and auto[:T,...]"
                )
        return self


class VerifyConfig(Config):
    backend: Annotated[str, one_of(_backends)] = "coq"
    workers: PositiveInt = 2
    """prover processes running at once"""
    timeout: Positive = 60.0
    """seconds per proof (whole proofs) or per tactic (step-level)"""
    server_url: str = ""
    """verify through a running proofrl/kimina server instead of a local pool"""
    api_key: str = ""


class AlgorithmConfig(Config):
    """The method's own settings, besides PPO and the optimiser."""

    advantage: Annotated[str, one_of(ADV_ESTIMATORS.names)] = "grpo"
    """grpo | dr_grpo (a name in :data:`proofrl.objectives.grpo.ADV_ESTIMATORS`)"""
    buffer_samples: Count = 0
    """update once this many samples from informative groups are buffered ("Rewarding the Unlikely": 256); 0 =
    every step"""
    skip_uninformative: bool = True
    """drop groups whose rewards are all equal before shaping (they carry no GRPO signal)"""
    objective: Literal["grpo", "dpo"] = "grpo"
    """step-level: ``grpo`` (LeanListener) or ``dpo`` (the online DPO baseline, binary validity)"""
    step_reward: Annotated[str, one_of(_step_rewards)] = "subgoal"
    """step-level: a name in :data:`proofrl.rewards.combine.STEP_REWARDS`"""
    failed_reward: float = 0.0
    """step-level: reward of a tactic the prover rejects, refuses, or that times out (LeanListener: 0)"""
    unchanged_reward: float | None = None
    """step-level ``subgoal``: reward of a valid tactic that leaves the state as it was (None = the paper: ln 2)"""
    dpo_beta: Positive = 0.1
    value_coef: Annotated[float, Field(ge=0)] = 1.0
    """search-and-learn: loss = SFT loss of the tactic + value_coef × cross-entropy over the value bins"""
    alpha: Annotated[float, Field(ge=0)] = 0.5
    """EVA: α of L_SFT + α · L_EVA (0: the SFT-only generative reward model)"""
    tau: Positive = 1.0
    """EVA: τ of the expectation over the anchor logits"""
    dims: tuple[str, ...] = DIMENSIONS
    """EVA: the score dimensions"""
    weights: dict[str, float] = Field(default_factory=dict)
    """EVA: weights of the combined score (empty: equal)"""

    @model_validator(mode="after")
    def _dimension_names(self) -> AlgorithmConfig:
        if bad := [d for d in self.dims if not d or not d.replace("_", "").isalnum()]:
            raise ValueError(f"{bad[0]!r} is not a dimension name (letters, digits, _)")
        return self


class OptimConfig(Config):
    """AdamW, and how the update batches its rows."""

    lr: Positive = 1e-6
    weight_decay: Annotated[float, Field(ge=0.0)] = 0.01
    betas: tuple[Annotated[float, Field(ge=0.0, lt=1.0)], Annotated[float, Field(ge=0.0, lt=1.0)]] = (0.9, 0.999)
    micro_batch: PositiveInt = 16
    """rows per forward and backward pass of an RL update (a memory knob: it never changes what is sampled)"""
    batch: PositiveInt = 16
    """examples per optimiser step of a supervised update (search-and-learn, EVA)"""
    epochs: PositiveInt = 1
    """passes over the examples of a supervised update (search-and-learn, EVA)"""


class EvalConfig(Config):
    every: Count = 0
    """evaluate every this many steps (0: only at the end where the loop evaluates at all)"""
    samples: PositiveInt = 32
    """N: samples per held-out problem"""
    ks: tuple[PositiveInt, ...] = (1, 8, 32)
    """the k of pass@k (whole proofs) or Prec@k (step-level)"""
    temperature: Positive = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    max_tokens: PositiveInt = 512
    """tokens per sample (EVA: the greedy decoding budget when the trained model is scored)"""
    limit: PositiveInt | None = None
    """held-out problems evaluated at most (None: all)"""
    before: bool = True
    """search-and-learn: evaluate the starting model too (round 0)"""


# -- the run section and the loops -----------------------------------------------------------------------------


Loggers = tuple[Annotated[str, one_of(LOGGERS.names)], ...]
"""``logger: [jsonl, tensorboard, console, wandb, mlflow]`` (:mod:`.tracking`); ``jsonl`` is always written"""


class RunConfig(Config):
    """What every loop's run has; a loop adds the components it uses and names the fields it reads."""

    READS: ClassVar[dict[str, tuple[str, ...]]] = {}
    """section → the fields this loop reads (``""``: the run section's own keys); a section left out is read whole"""

    name: str = "custom"
    seed: int = 0
    out: str = "runs/train"
    steps: Count = 100
    """updates (search-and-learn: rounds)"""
    checkpoint_every: PositiveInt = 10
    keep_checkpoints: PositiveInt = 2
    logger: Loggers = DEFAULT_LOGGERS
    """trackers (:mod:`proofrl.train.tracking`): jsonl, tensorboard, console, wandb, mlflow"""
    threads: Count = 0
    """torch CPU threads (0: torch's choice)"""
    progress: bool = True
    """progress bars on the console"""

    @model_validator(mode="before")
    @classmethod
    def _only_what_the_loop_reads(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        for section in cls.READS:
            given = data if section == "" else data.get(section)
            if not isinstance(given, Mapping):
                continue
            known = cls._reads(section)
            if unknown := sorted(set(given) - known):
                where = f"in {section}" if section else "in the config"
                loop = cls.model_fields["loop"].default if "loop" in cls.model_fields else cls.__name__
                moved = [f"{d} is now {MOVED[d]}" for k in unknown if (d := f"{section}.{k}".lstrip(".")) in MOVED]
                hint = f" ({'; '.join(moved)})" if moved else ""
                raise ConfigError(f"unknown keys {where}: {unknown}{hint}; the {loop} loop reads: {sorted(known)}")
        # a section given in part keeps the loop's own defaults for the rest (``--set optim.lr=…`` on step-level
        # GRPO leaves its weight decay 0, not the component's 0.01)
        merged = dict(data)
        for name, field in cls.model_fields.items():
            if isinstance(data.get(name), Mapping) and field.default_factory is not None:
                own = field.default_factory()  # type: ignore[call-arg]
                if isinstance(own, Config):
                    merged[name] = _deep_merge(own.model_dump(exclude_unset=True), data[name])
        return merged

    @classmethod
    def _reads(cls, section: str) -> set[str]:
        """The keys this loop reads in ``section`` (``""``: the run section's, its components' names and ``loop``)."""
        components = {n for n in cls.model_fields if n not in RunConfig.model_fields}
        return set(cls.READS[section]) | (components if section == "" else set())

    def to_dict(self) -> dict[str, Any]:
        """The settings this loop reads, as plain data (:func:`proofrl.schema.validate` reads it back)."""
        out = super().to_dict()
        for section in self.READS:
            target = out if section == "" else out.get(section)
            if isinstance(target, dict):
                for k in set(target) - self._reads(section):
                    del target[k]
        return out


def _deep_merge(base: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in given.items():
        out[k] = _deep_merge(out[k], v) if isinstance(out.get(k), Mapping) and isinstance(v, Mapping) else v
    return out


MOVED = {
    "micro_batch": "optim.micro_batch",
    "rounds": "steps",
    "workers": "verify.workers",
    "learner": "optim (lr, epochs, batch), replay (rehearsal_fraction, max_samples), algorithm.value_coef",
    "loss": "algorithm",
    "max_new_tokens": "eval.max_tokens",
    "algorithm.ppo": "ppo",
    "algorithm.lr": "optim.lr",
    "algorithm.micro_batch": "optim.micro_batch",
    **{f"algorithm.{k}": f"ppo.{k}" for k in PPOConfig.model_fields},
    "rollout.batch_states": "rollout.problems_per_step",
    "rollout.batch_theorems": "rollout.problems_per_step",
    "rollout.workers": "verify.workers",
    "rollout.tactic_timeout": "verify.timeout",
    "rollout.vllm": "rollout.gpu_memory_utilization, rollout.kv_cache_gib, rollout.enforce_eager",
    "model.max_tokens": "rollout.max_tokens",
    "model.temperature": "rollout.temperature",
    "data.held_out": "data.eval",
    "data.theorems": "data.limit",
    "data.train_theorems": "data.limit",
    "data.held_out_theorems": "data.eval_limit",
    "eval.theorems": "eval.limit",
    "eval.states": "eval.limit",
    "eval.k": "eval.ks",
    "optim.seed": "seed",
    "serving": "rollout (policy, model_name, value)",
}
"""keys of the loops' earlier schemas → where they live now (named in the error a recipe written for them gets)"""

RENAMED = {f"serving.{k}": f"rollout.{k}" for k in ("policy", "model_name", "value")}
"""moved keys whose meaning did not change → their place now, so that a run folder saved before the move resumes
(:func:`proofrl.train.rundir.settings_changed`)"""


_RUN = ("name", "seed", "out", "steps", "checkpoint_every", "keep_checkpoints", "logger")


class GRPOConfig(RunConfig):
    """Whole-proof GRPO (``proofrl train``; recipes ``demo``, ``unlikeliness``, ``kimina``, ``deepseek-v1.5``)."""

    READS: ClassVar[dict[str, tuple[str, ...]]] = {
        "": (*_RUN, "threads"),
        "model": ("path", "lora", "dtype", "gradient_checkpointing", "ref_device"),
        "data": ("train", "eval", "split", "limit", "eval_limit", "max_proof_chars"),
        "rollout": (
            "generator",
            "base_url",
            "prompt_format",
            "problems_per_step",
            "group_size",
            "temperature",
            "top_p",
            "max_tokens",
            "chunk_prompts",
            "overlap",
            "generation_batch",
            "error_correction",
            "gpu_memory_utilization",
            "kv_cache_gib",
            "enforce_eager",
        ),
        "algorithm": ("advantage", "buffer_samples", "skip_uninformative"),
        "optim": ("lr", "weight_decay", "betas", "micro_batch"),
        "eval": ("every", "samples", "ks", "temperature", "top_p", "max_tokens"),
    }

    loop: Literal["grpo"] = "grpo"
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    ppo: PPOConfig = Field(default_factory=PPOConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)


class ExpertIterationConfig(RunConfig):
    """Search-and-learn (``proofrl train --recipe reap``): reap's RL stage, AlphaProof-style expert iteration."""

    READS: ClassVar[dict[str, tuple[str, ...]]] = {
        "": ("name", "seed", "out", "steps", "keep_checkpoints", "logger", "progress"),
        "model": ("path", "lora", "value_head", "num_bins", "device"),
        "data": ("train", "eval", "limit", "eval_limit", "assets", "transitions"),
        "rollout": (
            "problems_per_step",
            "passes",
            "temperature",
            "max_tokens",
            "policy",
            "model_name",
            "value",
            "sources",
        ),
        "verify": ("workers",),
        "algorithm": ("value_coef",),
        "optim": ("lr", "weight_decay", "batch", "epochs"),
        "eval": ("every", "limit", "before"),
    }

    loop: Literal["expert-iteration"] = "expert-iteration"
    name: str = "expert-iteration"
    out: str = "runs/reap"
    steps: Count = 3
    model: ModelConfig = Field(default_factory=lambda: ModelConfig(device="cpu"))
    data: DataConfig = Field(default_factory=DataConfig)
    search: SearchConfig = Field(
        default_factory=lambda: SearchConfig(
            algorithm="mcts", width=8, max_steps=16, max_nodes=64, tactic_timeout=5.0, seconds=30.0
        )
    )
    """the search of every rollout pass and of the held-out evaluation (reap's MCTS at a small budget)"""
    rollout: RolloutConfig = Field(
        default_factory=lambda: RolloutConfig(problems_per_step=16, passes=4, temperature=1.0, max_tokens=96)
    )
    replay: ReplayConfig = Field(default_factory=ReplayConfig)
    verify: VerifyConfig = Field(default_factory=lambda: VerifyConfig(workers=2))
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    optim: OptimConfig = Field(default_factory=lambda: OptimConfig(lr=3e-4, weight_decay=0.01, batch=16, epochs=2))
    eval: EvalConfig = Field(default_factory=lambda: EvalConfig(every=1))


class StepGRPOConfig(RunConfig):
    """Online step-level GRPO with the prover in the loop (``proofrl train --recipe leanlistener``)."""

    READS: ClassVar[dict[str, tuple[str, ...]]] = {
        "": (*_RUN, "threads"),
        "model": ("path", "dtype", "ref_device"),
        "data": ("train", "eval", "assets", "limit", "max_state_chars", "premise_dropout"),
        "rollout": (
            "problems_per_step",
            "group_size",
            "temperature",
            "max_tokens",
            "sync_every",
            "own_state_share",
            "own_state_cap",
        ),
        "verify": ("workers", "timeout"),
        "algorithm": ("objective", "step_reward", "failed_reward", "unchanged_reward", "advantage", "dpo_beta"),
        "optim": ("lr", "weight_decay", "micro_batch"),
        "eval": ("every", "limit", "ks"),
    }

    loop: Literal["step-grpo"] = "step-grpo"
    name: str = "step-grpo"
    steps: Count = 10000
    """updates (LeanListener: 10,000)"""
    out: str = "runs/leanlistener"
    checkpoint_every: PositiveInt = 100
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=lambda: DataConfig(assets="runs/assets"))
    rollout: RolloutConfig = Field(
        default_factory=lambda: RolloutConfig(problems_per_step=16, group_size=8, temperature=1.0, max_tokens=64)
    )
    verify: VerifyConfig = Field(default_factory=lambda: VerifyConfig(workers=2, timeout=10.0))
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    ppo: PPOConfig = Field(default_factory=lambda: PPOConfig(kl_coef=0.04, agg_mode="seq-mean-token-mean"))
    """LeanListener regularises with a KL term and gives no β: DeepSeekMath's 0.04"""
    optim: OptimConfig = Field(default_factory=lambda: OptimConfig(lr=2.25e-6, weight_decay=0.0, micro_batch=32))
    """LeanListener: lr 2.25e-6"""
    eval: EvalConfig = Field(default_factory=lambda: EvalConfig(every=0, limit=64, ks=(8,)))

    @model_validator(mode="after")
    def _groups_of_two(self) -> StepGRPOConfig:
        if self.rollout.group_size < 2:
            raise ConfigError(f"rollout.group_size must be >= 2, got {self.rollout.group_size}")
        return self


EVA_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class EvaConfig(RunConfig):
    """The EVA process reward model (``proofrl train --recipe eva``): L = L_SFT + α · L_EVA."""

    READS: ClassVar[dict[str, tuple[str, ...]]] = {
        "": ("name", "seed", "out", "logger"),
        "model": ("path", "lora", "device"),
        "data": ("train", "eval", "limit", "eval_limit", "max_state_chars", "max_tokens", "states_per_theorem"),
        "algorithm": ("alpha", "tau", "dims", "weights"),
        "optim": ("lr", "batch", "epochs", "weight_decay"),
        "eval": ("max_tokens",),
    }

    loop: Literal["eva"] = "eva"
    name: str = "eva"
    out: str = "runs/eva"
    model: ModelConfig = Field(default_factory=lambda: ModelConfig(lora=LoraConfig(target_modules=EVA_LORA_TARGETS)))
    """LoRA on every projection (the paper: attention and MLP)"""
    data: DataConfig = Field(default_factory=lambda: DataConfig(limit=24, max_state_chars=600))
    """``limit``: theorems labelled per split when the prover-labelled set is built here (``eval_limit``: on the
    held-out side, when given)"""
    search: SearchConfig | None = Field(
        default_factory=lambda: SearchConfig(
            algorithm="best-first", width=4, max_steps=2, seconds=30.0, tactic_timeout=5.0
        )
    )
    """the short search (with ``policy``) from an accepted proposal's state that tells whether the proof then
    closes, when the prover-labelled set is built here; its tactic timeout is every labelling step's; null: only a
    state with no goals closes"""
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    optim: OptimConfig = Field(default_factory=lambda: OptimConfig(lr=2e-5, batch=8, epochs=3, weight_decay=0.01))
    eval: EvalConfig = Field(default_factory=lambda: EvalConfig(max_tokens=96))
    policy: str = ""
    """a tactic policy (``hf:DIR``) saved with the model: the proposals EVA judges as a search value
    (``--value eva:OUT``), and the short search of the prover-labelled set"""

    @model_validator(mode="after")
    def _best_first_labelling(self) -> EvaConfig:
        if self.search is not None and self.search.algorithm != "best-first":
            raise ConfigError(f"search.algorithm: the labelling search is best-first, got {self.search.algorithm!r}")
        return self


def load_recipe(recipe: str | Path | None = None, overrides: Sequence[str] = ()) -> GRPOConfig:
    """A :class:`GRPOConfig` from a whole-proof recipe name (``unlikeliness``, ``kimina``, ``deepseek-v1.5``, …)
    or a YAML path, with ``key.sub=value`` overrides (:func:`proofrl.train.recipes.apply_overrides`)."""
    return LOOPS["grpo"].config(recipe, overrides)
