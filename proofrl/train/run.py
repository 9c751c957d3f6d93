"""Whole-proof GRPO as a loop like the others (``proofrl train --recipe unlikeliness``): wire a
:class:`~proofrl.train.config.GRPOConfig` into running parts (problems, policy, generator, verifier) and run
the :class:`~proofrl.train.trainer.Trainer` with a progress bar (:func:`run`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from ..problems import Problem
from .config import GRPOConfig


def make_verifier(cfg: GRPOConfig) -> Any:
    """A :class:`~proofrl.verification.Verifier` that owns what it builds (its pool, closed with it), with the
    recipe's one ``verify.timeout``."""
    from ..verification import Verifier

    v = cfg.verify
    if v.server_url:
        return Verifier(server_url=v.server_url, api_key=v.api_key or None, timeout=v.timeout, backend=v.backend)
    return Verifier(timeout=v.timeout, backend=v.backend, workers=v.workers)


def make_policy(cfg: GRPOConfig) -> tuple[Any, Any]:
    import torch

    from ..policy.model import load_policy

    m = cfg.model
    if not m.path:
        raise ConfigError(
            "model.path is empty: give a local Hugging Face model directory (--set model.path=DIR); "
            "`proofrl demo` builds a tiny one"
        )
    dtypes = {
        "auto": None,
        "float32": torch.float32,
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
    }  # model.dtype's Literal
    return load_policy(m.path, dtype=dtypes[m.dtype], lora=m.lora)


def rollout_generator(cfg: GRPOConfig, model: Any, tokenizer: Any) -> tuple[Any, Any]:
    """The recipe's ``rollout.generator``, built by :func:`proofrl.policy.generation.make_generator` (the one
    generator factory), and the hook that gives it the trained weights after each update (``sync_weights``)."""
    from ..policy.generation import make_generator

    r = cfg.rollout
    options: dict[str, dict[str, Any]] = {
        "hf": {"model": model, "tokenizer": tokenizer, "batch_size": r.generation_batch},
        "openai": {"base_url": r.base_url, "model": cfg.model.path, "tokenizer": tokenizer},
    }
    if r.generator == "vllm":
        _vllm_in_process()
        options["vllm"] = vllm_engine_options(cfg, model)
    try:
        gen = make_generator(r.generator, **options.get(r.generator, {"model": model, "tokenizer": tokenizer}))
    except ImportError as e:  # an optional backend that is not installed: its message names the install command
        raise ConfigError(f"rollout.generator={r.generator}: {e}") from None
    return gen, getattr(gen, "sync_weights", None)


def vllm_engine_options(cfg: GRPOConfig, model: Any) -> dict[str, Any]:
    """:class:`~proofrl.policy.generation.VLLMGenerator`'s settings for training ``model``: ``model.path`` in the
    dtype the update computes in (``model.dtype``; fp32 on a CPU), so that the engine samples from the distribution
    the update's ratios are taken against; the run's seed; the rollout's memory and compilation settings."""
    import torch

    from ..policy.generation import vllm_on_cpu
    from .lm_update import compute_dtype

    v = cfg.rollout
    options: dict[str, Any] = {
        "path": cfg.model.path,
        "dtype": "bfloat16" if compute_dtype(cfg.model.dtype, model) == torch.bfloat16 else "float32",
        "seed": cfg.seed,
        "gpu_memory_utilization": v.gpu_memory_utilization,
        "enforce_eager": v.enforce_eager,
    }
    gib = v.kv_cache_gib if v.kv_cache_gib is not None else (1.0 if vllm_on_cpu() else None)
    if gib is not None:
        options["kv_cache_memory_bytes"] = int(gib * 2**30)
    return options


def _vllm_in_process() -> None:
    """The vLLM engine runs in this process, where the weight push after every update can reach it: vLLM hands
    weights to an engine in its own process only by pickling, which it refuses unless
    ``VLLM_ALLOW_INSECURE_SERIALIZATION=1``. So ``VLLM_ENABLE_V1_MULTIPROCESSING`` is set to 0 for this process
    unless it is set already; set to 1 without that permission, it is one line here rather than a failure after the
    first step's rollout. Without vLLM this does nothing (building the generator then names the install command)."""
    import os

    try:
        from vllm import envs
    except ImportError:
        return
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    read = envs.environment_variables  # each read parses the environment now, as vLLM does (never its cache)
    try:
        separate = read["VLLM_ENABLE_V1_MULTIPROCESSING"]() and not read["VLLM_ALLOW_INSECURE_SERIALIZATION"]()
    except ValueError as e:
        raise ConfigError(f"rollout.generator=vllm: a vLLM environment variable is not an integer: {e}") from None
    if separate:
        raise ConfigError(
            "rollout.generator=vllm pushes the trained weights into the engine after every update, which vLLM "
            "allows for an engine in its own process (VLLM_ENABLE_V1_MULTIPROCESSING=1) only with "
            "VLLM_ALLOW_INSECURE_SERIALIZATION=1: set that, or unset VLLM_ENABLE_V1_MULTIPROCESSING"
        )


def build_trainer(cfg: GRPOConfig, *, extra_eval: Sequence[Problem] | None = None) -> Any:
    """A ready :class:`~proofrl.train.trainer.Trainer` (with periodic pass@N when ``data.eval`` is set)."""
    from ..data.splits import problem_set
    from ..eval.evaluate import evaluate
    from .trainer import Trainer

    d = cfg.data
    if not d.train:
        raise ConfigError("data.train is empty: a JSONL problem file or coq-stdlib:train (--set data.train=…)")
    train = problem_set(d.train, split=d.split or None, limit=d.limit, max_proof_chars=d.max_proof_chars, seed=cfg.seed)
    held = list(extra_eval or [])
    if d.eval and not held:
        held = problem_set(
            d.eval, split=d.split or None, limit=d.eval_limit, max_proof_chars=d.max_proof_chars, seed=cfg.seed
        )
    model, tok = make_policy(cfg)
    gen, sync = rollout_generator(cfg, model, tok)
    verifier = make_verifier(cfg)

    def eval_fn(trainer: Trainer, step: int) -> dict[str, float]:
        e = cfg.eval
        res = evaluate(
            gen,
            held,
            trainer.fmt,
            verifier,
            n=e.samples,
            ks=e.ks,
            temperature=e.temperature,
            top_p=e.top_p,
            max_tokens=e.max_tokens,
            seed=cfg.seed + step,
            tokenizer=tok,
            label=f"step{step}",
            samples_path=trainer.out / f"eval-step{step:06d}.jsonl",
        )
        return {f"eval/pass@{k}": v["unbiased"] for k, v in res.table().items()}

    return Trainer(cfg, model, tok, gen, verifier, train, eval_fn=eval_fn if held else None, sync_weights=sync)


def run(cfg: GRPOConfig) -> Any:
    """Train by ``cfg`` (resuming in ``cfg.out``) with a progress bar; returns the trainer."""
    from rich.console import Console

    from ..preflight import require_backend
    from ..progress import progress_bar

    if not cfg.verify.server_url:
        require_backend(cfg.verify.backend)
    if any(s.startswith("coq-stdlib") for s in (cfg.data.train, cfg.data.eval)):
        require_backend("coq")  # the problems are read where coqc says the standard library is
    try:
        trainer = build_trainer(cfg)
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from e
    console = Console()
    try:
        with progress_bar(console=console) as bar:
            task = bar.add_task(f"training ({cfg.name})", total=cfg.steps, completed=trainer.resume())

            def show(step: int, m: dict[str, float]) -> None:
                bar.update(task, completed=step)
                keys = ("reward/mean", "valid/turn1", "loss/loss", "time/step_s", "eval/pass@1")
                console.print(f"step {step}: " + "  ".join(f"{k} {m[k]:.3g}" for k in keys if k in m))

            trainer.fit(progress=show)
    finally:
        trainer.verifier.close()
    console.print(f"done: {trainer.out}/metrics.jsonl, checkpoints in {trainer.checkpoint_dir}")
    return trainer
