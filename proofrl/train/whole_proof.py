"""Whole-proof GRPO (``proofrl train --recipe demo|unlikeliness|kimina|deepseek-v1.5``): the loop, in one file.

Set-up (:func:`build_trainer`): the recipe's problems, the policy (``model.path``, LoRA, dtype), its rollout generator
(``rollout.generator``: hf, vllm in this process with the weight push after every update, openai) and the verifier
(a local prover pool or a server); then :class:`Trainer`, run by :func:`run` with a progress bar.

One step (:meth:`Trainer.train_step`), as in DeepSeek-Prover-V1.5-RL, "Rewarding the Unlikely" (arXiv:2506.02355 §5)
and kimina-prover-rl:

1. draw ``problems_per_step`` problems (and, with error correction, second-turn prompts from the cache);
2. sample G completions per prompt; extract proofs; verify them with the prover while the next chunk is
   generated (:func:`proofrl.rollout.proofs.sample_and_verify`);
3. R = verifier reward × format reward (when the recipe sets one; :class:`proofrl.rewards.combine.RewardFn`);
   groups whose R are all equal are dropped before shaping (the paper's buffer rule);
4. π_old log-probs are recomputed exactly right before the update (the official code does the same);
   the unlikeliness reward reranks correct samples by their mean token log-prob;
5. group advantages (GRPO or Dr.GRPO), then K PPO epochs with KL to a frozen reference
   (:func:`proofrl.objectives.grpo.grpo_step`, the same step the toy experiment runs, through the one LM update
   :func:`proofrl.train.lm_update.lm_grpo_update`), ``optim.micro_batch`` rows per forward and backward pass,
   log-probs at the rollout temperature;
6. log every step to the run folder (:class:`~proofrl.train.rundir.RunDir`), checkpoint every ``checkpoint_every``
   steps; a killed run resumes exactly.

Precision (``model.dtype``) and π_ref (``model.ref_device``): :class:`~proofrl.train.lm_update.LMPolicy`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from rich.console import Console

from ..errors import ConfigError
from ..objectives.grpo import ADV_ESTIMATORS, GroupBuffer, PPOConfig
from ..policy.generation import SamplingConfig, encode_prompts, vllm_on_cpu
from ..policy.model import load_policy, load_weights
from ..policy.prompts import PromptFormat, get_format, render_messages
from ..problems import Problem
from ..provers.base import Verdict
from ..rewards.combine import RewardFn, Sample
from ..rollout.proofs import Group, PromptItem, RolloutTimings, first_turn, sample_and_verify
from ..verification import Verifier
from .checkpoints import load_state, save_state, set_rng_state
from .config import ErrorCorrectionConfig, GRPOConfig
from .lm_update import LMPolicy, compute_dtype, lm_grpo_update, pad_rows  # noqa: F401  (re-exported)
from .rundir import RunDir

if TYPE_CHECKING:
    from ..policy.correction import CorrectionCache

log = logging.getLogger(__name__)


class ProblemSampler:
    """Epoch-wise shuffled problems; its state is two ints, so resuming draws the same sequence."""

    def __init__(self, n: int, seed: int):
        if n < 1:
            raise ValueError("no training problems")
        self.n, self.seed, self.epoch, self.pos = n, seed, 0, 0
        self._order = self._shuffle()

    def _shuffle(self) -> list[int]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        return torch.randperm(self.n, generator=g).tolist()

    def take(self, k: int) -> list[int]:
        out = []
        for _ in range(k):
            if self.pos == self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self._order = self._shuffle()
            out.append(self._order[self.pos])
            self.pos += 1
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, d: dict[str, int]) -> None:
        self.epoch, self.pos = d["epoch"], d["pos"]
        self._order = self._shuffle()


def correction_item(
    item: PromptItem, completion: str, proof: str | None, verdict: Verdict, ecfg: ErrorCorrectionConfig, tokenizer: Any
) -> PromptItem | None:
    """kimina's second turn for one first-turn sample: the prover's feedback on its proof appended to the
    conversation (:func:`proofrl.policy.correction.second_turn_prompt`). None when the sample passed, has no
    proof to correct, its feedback is longer than ``ecfg.max_feedback_chars`` or the prompt longer than
    ``ecfg.max_prompt_tokens`` tokens (kimina drops those rather than cut them). The trainer fills its cache with
    these; the bench's error-correction claim samples them at evaluation."""
    from ..policy import correction as ec

    if verdict.valid or proof is None:
        return None
    feedback = ec.build_feedback(
        proof, verdict, max_errors=ecfg.max_errors, max_chars=ecfg.max_feedback_chars, backend=item.problem.backend
    )
    if feedback is None:
        return None
    messages = ec.second_turn_prompt(item.messages, completion, feedback)
    text = messages if isinstance(messages, str) else render_messages(messages, tokenizer)
    if not ec.prompt_tokens_ok(text, tokenizer, ecfg.max_prompt_tokens):
        return None
    return PromptItem(item.problem, text, 2, messages)


def verdict_metrics(verdicts: Sequence[Verdict], limit: float) -> dict[str, float]:
    """A step's verdicts by status (``verdicts/timeout`` always present: a run says whether any verdict hung on the
    wall clock), and ``time/verify_slowest_s``, the longest a verdict took, against ``verify/limit_s``: the verdicts
    of a step whose slowest came near its limit could go the other way on a slower or busier machine."""
    statuses = {"timeout": 0}
    for v in verdicts:
        statuses[v.status.value] = statuses.get(v.status.value, 0) + 1
    return {
        **{f"verdicts/{k}": float(c) for k, c in statuses.items()},
        "time/verify_slowest_s": max((v.seconds for v in verdicts), default=0.0),
        "verify/limit_s": float(limit),
    }


@dataclass
class StepRecord:
    step: int
    metrics: dict[str, float]


class Trainer:
    """GRPO over whole proofs. Build with a config, a model and tokenizer, a generator and a verifier."""

    def __init__(
        self,
        cfg: GRPOConfig,
        model: Any,
        tokenizer: Any,
        generator: Any,
        verifier: Verifier,
        train_problems: Sequence[Problem],
        *,
        eval_fn: Callable[[Trainer, int], dict[str, float]] | None = None,
        sync_weights: Callable[[Any], None] | None = None,
    ):
        self.cfg = cfg
        self.model, self.tokenizer, self.generator, self.verifier = model, tokenizer, generator, verifier
        self.problems = list(train_problems)
        self.fmt: PromptFormat = get_format(cfg.rollout.prompt_format)
        self.reward_fn = RewardFn(cfg.reward)  # the recipe's sample terms (verifier × format) and group shapers
        self.adv_fn = ADV_ESTIMATORS.get(cfg.algorithm.advantage)
        self.eval_fn, self.sync_weights = eval_fn, sync_weights
        self.out = Path(cfg.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.sampler = ProblemSampler(len(self.problems), cfg.seed)
        self.buffer: GroupBuffer[Group] = GroupBuffer(max(1, cfg.algorithm.buffer_samples))
        ecfg = cfg.rollout.error_correction
        self.cache: CorrectionCache | None = None
        if ecfg.enabled:
            from ..policy import correction as ec

            self.cache = ec.CorrectionCache(ecfg.cache_size, ecfg.rate, seed=cfg.seed)
        self.step = 0
        self.ppo: PPOConfig = cfg.ppo.with_horizon(cfg.rollout.max_tokens)
        m = cfg.model
        self.lm = LMPolicy(
            model,
            pad_id=tokenizer.pad_token_id,
            micro_batch=cfg.optim.micro_batch,
            temperature=cfg.rollout.temperature,
            dtype=m.dtype,
            reference=self.ppo.kl_coef > 0,
            ref_device=m.ref_device,
            gradient_checkpointing=m.gradient_checkpointing,
        )
        self.optimizer = torch.optim.AdamW(
            self.lm.params, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay, betas=cfg.optim.betas
        )
        self.run = RunDir(self.out, step_key="step", loggers=cfg.logger, name=cfg.name)
        self._resumed: int | None = None

    # ---------------------------------------------------------------------------------------- rollouts

    def _prompt_items(self) -> list[PromptItem]:
        fresh = [
            first_turn(self.problems[i], self.fmt, self.tokenizer)
            for i in self.sampler.take(self.cfg.rollout.problems_per_step)
        ]
        if self.cache is None or not len(self.cache):
            return fresh
        return self.cache.mix(fresh, len(fresh))

    def rollout(self) -> tuple[list[Group], RolloutTimings]:
        r = self.cfg.rollout
        params = SamplingConfig(
            n=r.group_size,
            temperature=r.temperature,
            top_p=r.top_p,
            max_tokens=r.max_tokens,
            stop=self.fmt.stop,
            seed=self.cfg.seed * 1_000_003 + self.step,
        )
        self.model.eval()
        with self.lm.autocast():
            groups, timings = sample_and_verify(
                self.generator,
                self._prompt_items(),
                params,
                self.fmt,
                self.verifier,
                chunk_prompts=r.chunk_prompts,
                overlap=r.overlap,
            )
        for g in groups:
            g.rewards = self.reward_fn.samples(
                [
                    Sample(g.item.problem, c.text, v, q)
                    for c, v, q in zip(g.completions, g.verdicts, g.proofs, strict=True)
                ]
            )
        return groups, timings

    def _feed_corrections(self, groups: Sequence[Group]) -> int:
        """Failed first-turn samples become second-turn prompts (kimina's error-correction turn)."""
        if self.cache is None:
            return 0
        added = 0
        for g in groups:
            if g.item.turn != 1:
                continue
            for comp, proof, verdict in zip(g.completions, g.proofs, g.verdicts, strict=True):
                item = correction_item(
                    g.item, comp.text, proof, verdict, self.cfg.rollout.error_correction, self.tokenizer
                )
                if item is not None:
                    self.cache.add(item)
                    added += 1
        return added

    # ------------------------------------------------------------------------------------------ update

    def update(self, groups: Sequence[Group]) -> dict[str, float]:
        """Shape rewards, compute advantages and run K PPO epochs on these groups (the one LM GRPO update,
        :func:`.lm_update.lm_grpo_update`).

        π_old, π_ref and π_θ log-probs are all taken at the rollout temperature; every forward and backward
        pass holds ``micro_batch`` rows; H of ``seq-mean-token-sum-norm`` is ``ppo.horizon`` or else
        the rollout's ``max_tokens``, whatever the lengths in this update."""
        encoded = encode_prompts(self.tokenizer, [g.item.prompt for g in groups])
        prompts = [p for g, p in zip(groups, encoded, strict=True) for _ in g.completions]  # one row per completion
        responses: list[Sequence[int]] = [c.token_ids for g in groups for c in g.completions]
        gids = torch.tensor([gi for gi, g in enumerate(groups) for _ in g.completions])
        raw = [r for g in groups for r in g.rewards]

        def shape(old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # the unlikeliness reward reads π_old
            shaped, start = [], 0
            for g in groups:
                n = len(g.completions)
                r = torch.tensor(g.rewards, dtype=torch.float32, device=old.device)
                shaped.append(self.reward_fn.shape_group(r, old[start : start + n], mask[start : start + n]))
                start += n
            return torch.cat(shaped)

        out = lm_grpo_update(
            self.lm,
            self.optimizer,
            prompts,
            responses,
            torch.tensor(raw, dtype=torch.float32),
            gids,
            self.ppo,
            advantage=self.cfg.algorithm.advantage,
            seed=self.cfg.seed + self.step,
            shape=shape,
            entropy=True,
        )
        if self.sync_weights is not None:
            self.sync_weights(self.model)
        assert out.entropy is not None
        ent = float((out.entropy * out.mask).sum() / out.mask.sum().clamp(min=1))
        return {
            **out.step.stats.to_json(),
            "update/rows": float(len(responses)),
            "reward/update_raw_mean": sum(raw) / len(raw),
            "reward/update_shaped_mean": float(out.rewards.mean()),
            "policy/entropy": ent,
        }

    # -------------------------------------------------------------------------------------------- loop

    def train_step(self) -> dict[str, float]:
        t0 = time.perf_counter()
        groups, timings = self.rollout()
        m: dict[str, float] = dict(timings.to_json())
        first = [g for g in groups if g.item.turn == 1]
        second = [g for g in groups if g.item.turn == 2]
        all_r = [r for g in groups for r in g.rewards]
        m["reward/mean"] = sum(all_r) / max(1, len(all_r))
        for name, gs in (("turn1", first), ("turn2", second)):
            if gs:
                ok = [v.valid for g in gs for v in g.verdicts]
                m[f"valid/{name}"] = sum(ok) / len(ok)
                m[f"solved/{name}"] = sum(any(g.correct) for g in gs) / len(gs)
        m.update(verdict_metrics([v for g in groups for v in g.verdicts], self.verifier.timeout))
        m["run/threads"] = float(torch.get_num_threads())
        m["correction/added"] = float(self._feed_corrections(groups))
        if self.cache is not None:
            m["correction/cache"] = float(len(self.cache))
        keep_all = not self.cfg.algorithm.skip_uninformative
        kept = sum(self.buffer.add(g.rewards, g, keep_uninformative=keep_all) for g in groups)
        m["buffer/kept_groups"], m["buffer/samples"] = float(kept), float(self.buffer.num_samples)
        due = self.buffer.ready if self.cfg.algorithm.buffer_samples > 0 else len(self.buffer) > 0
        t1 = time.perf_counter()
        if due:
            m.update(self.update(self.buffer.take()))
            m["time/update_s"] = time.perf_counter() - t1
        m["time/step_s"] = time.perf_counter() - t0
        return m

    def fit(self, *, progress: Callable[[int, dict[str, float]], None] | None = None) -> list[StepRecord]:
        """Train until ``cfg.steps``, resuming from the newest checkpoint in ``out`` when there is one; every step
        goes to the run folder's trackers, and the last step's metrics are the run's summary."""

        def step() -> tuple[int, dict[str, float]]:
            metrics = self.train_step()
            self.step += 1
            every = self.cfg.eval.every
            if self.eval_fn is not None and ((every and self.step % every == 0) or self.step == self.cfg.steps):
                with self.lm.autocast():
                    metrics.update(self.eval_fn(self, self.step))
            return self.step, metrics

        done = self.run.fit(self, step, progress)
        return [StepRecord(n, m) for n, m in done]

    # ------------------------------------------------------------------------------------- checkpoints

    def save_checkpoint(self) -> Path:
        """Weights (or the LoRA adapter) + tokenizer, and the saved state (:func:`.checkpoints.save_state`):
        optimiser, problem sampler, buffer, correction cache, reference weights, every RNG; written atomically."""
        name = f"step_{self.step:06d}"
        with self.run.checkpoint(name, self.cfg.keep_checkpoints) as tmp:
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            save_state(
                tmp,
                step=self.step,
                optimizer=self.optimizer.state_dict(),
                problems=self.sampler.state_dict(),
                buffer=self.buffer.state_dict(),
                cache=self.cache.state_dict() if self.cache is not None else None,
                ref=self.lm.ref_model.state_dict() if isinstance(self.lm.ref_model, torch.nn.Module) else None,
            )
        return self.run.checkpoint_dir / name

    def resume(self) -> int:
        """Load the newest complete checkpoint (if any) once; returns the step it resumes from (a second call,
        e.g. :meth:`fit` after a caller's own ``resume()`` for its progress bar, loads nothing again)."""
        if self._resumed is not None:
            return self._resumed
        ckpt = self.run.latest()
        self._resumed = 0
        if ckpt is None:
            return 0
        load_weights(self.model, ckpt)
        state = load_state(ckpt)
        self.step = state["step"]
        self.optimizer.load_state_dict(state["optimizer"])
        self.sampler.load_state_dict(state["problems"])
        self.buffer.load_state_dict(state["buffer"])
        if self.cache is not None and state["cache"] is not None:
            self.cache.load_state_dict(state["cache"])
        set_rng_state(state["rng"])
        if isinstance(self.lm.ref_model, torch.nn.Module) and state["ref"] is not None:
            self.lm.ref_model.load_state_dict(state["ref"])
        self._resumed = self.step
        if self.sync_weights is not None:
            self.sync_weights(self.model)
        log.info("resumed from %s (step %d)", ckpt, self.step)
        return self.step


# -- set-up and run ----------------------------------------------------------------------------------------------


def set_threads(cfg: GRPOConfig) -> None:
    """The run's ``threads`` torch CPU threads (0: leave torch's choice). A sum that torch splits between threads
    adds in another order at another count (the demo's tiny model has none such: 1, 2 and 4 threads gave the same
    weights), so the count is a setting of the run, kept in its ``config.yaml``; every step logs the count in
    effect (``run/threads``)."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)


def make_verifier(cfg: GRPOConfig) -> Any:
    """A :class:`~proofrl.verification.Verifier` that owns what it builds (its pool, closed with it), with the
    recipe's one ``verify.timeout``."""
    v = cfg.verify
    if v.server_url:
        return Verifier(server_url=v.server_url, api_key=v.api_key or None, timeout=v.timeout, backend=v.backend)
    return Verifier(timeout=v.timeout, backend=v.backend, workers=v.workers)


def make_policy(cfg: GRPOConfig) -> tuple[Any, Any]:
    m = cfg.model
    if not m.path:
        raise ConfigError(
            "model.path is empty: give a local Hugging Face model directory (--set model.path=DIR); "
            "`proofrl demo` builds a tiny one"
        )
    return load_policy(m.path, dtype=None if m.dtype == "auto" else getattr(torch, m.dtype), lora=m.lora)


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
    """A ready :class:`~proofrl.train.whole_proof.Trainer` (with periodic pass@N when ``data.eval`` is set)."""
    from ..data.splits import problem_set
    from ..eval.evaluate import evaluate

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
    from ..preflight import require_backend
    from ..progress import progress_bar

    set_threads(cfg)
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
    console.print(f"done: {trainer.out}/metrics.jsonl, checkpoints in {trainer.run.checkpoint_dir}")
    return trainer
