"""The whole-proof GRPO trainer (``proofrl train --recipe …``).

One step, as in DeepSeek-Prover-V1.5-RL, "Rewarding the Unlikely" (arXiv:2506.02355 §5) and kimina-prover-rl:

1. draw ``problems_per_step`` problems (and, with error correction, second-turn prompts from the cache);
2. sample G completions per prompt; extract proofs; verify them with the prover while the next chunk is
   generated (:func:`proofrl.rollout.sample_and_verify`);
3. R = verifier reward × format reward (when the recipe sets one); groups whose R are all equal are
   dropped before shaping (the paper's buffer rule);
4. π_old log-probs are recomputed exactly right before the update (the official code does the same);
   the unlikeliness reward reranks correct samples by their mean token log-prob;
5. group advantages (GRPO or Dr.GRPO), then K PPO epochs with KL to a frozen reference
   (:func:`proofrl.train.grpo.grpo_step`, the same step the toy experiment runs), ``micro_batch`` rows per
   forward and backward pass, log-probs at the rollout temperature.

Precision: trainable weights and AdamW state are fp32 (master weights); with ``model.dtype`` bfloat16 (or
``auto`` on bf16 weights) every forward pass runs under bf16 autocast. float16 is refused.

Every step goes to the run folder (:class:`~proofrl.train.rundir.RunDir`: ``metrics.jsonl`` and the recipe's
``logger:`` list, TensorBoard by default); checkpoints hold the weights,
the optimiser, the RNG states, the problem sampler and the buffer, so a killed run resumes exactly.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..problems import Problem
from ..errors import ConfigError
from ..policy.generation import SamplingParams, encode_prompts
from ..policy.logprobs import response_logprobs
from ..policy.prompts import PromptFormat, get_format, render_messages
from ..rewards.compose import RewardConfig, base_rewards, reward_config_from_dict, shape_group
from ..verification import Verifier
from ..rollout import Group, PromptItem, RolloutTimings, choose_overlap, first_turn, sample_and_verify
from .config import TrainConfig
from .grpo import ADV_ESTIMATORS, GroupBuffer, PPOConfig, grpo_step
from .rundir import RunDir

log = logging.getLogger(__name__)


def pad_rows(rows: Sequence[Sequence[float]] | torch.Tensor, width: int, value: float = 0.0) -> torch.Tensor:
    """Right-pad a (B, t) tensor to (B, width)."""
    t = torch.as_tensor(rows)
    if t.shape[-1] >= width:
        return t[..., :width]
    return torch.nn.functional.pad(t, (0, width - t.shape[-1]), value=value)


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


@dataclass
class StepRecord:
    step: int
    metrics: dict[str, float]


class Trainer:
    """GRPO over whole proofs. Build with a config, a model and tokenizer, a generator and a verifier."""

    def __init__(
        self,
        cfg: TrainConfig,
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
        self.reward_cfg: RewardConfig = reward_config_from_dict(
            {"format": cfg.reward.format, "unlikeliness": cfg.reward.unlikeliness}
        )
        self.adv_fn = ADV_ESTIMATORS.get(cfg.algorithm.advantage)
        self.eval_fn, self.sync_weights = eval_fn, sync_weights
        self.out = Path(cfg.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.sampler = ProblemSampler(len(self.problems), cfg.seed)
        self.buffer: GroupBuffer[Group] = GroupBuffer(max(1, cfg.algorithm.buffer_samples))
        ecfg = cfg.rollout.error_correction
        self.cache = None
        if ecfg.enabled:
            from . import error_correction as ec

            self.cache = ec.CorrectionCache(ecfg.cache_size, ecfg.rate, seed=cfg.seed)
        self.step = 0
        self.ppo: PPOConfig = ppo_config(cfg)
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable parameters")
        self.compute_dtype = compute_dtype(cfg.model.dtype, model)
        # π_ref is copied before the trainable weights become fp32 masters: it keeps the loaded dtype.
        self.ref_model = self._reference() if self.ppo.kl_coef > 0 else None
        if self.compute_dtype == torch.float32:
            model.to(torch.float32)
        for p in params:  # fp32 master weights (and so fp32 AdamW state); the forward runs under autocast
            if p.dtype != torch.float32:
                p.data = p.data.float()
        if cfg.model.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay,
                                           betas=tuple(cfg.optim.betas))  # fmt: skip
        self.run = RunDir(self.out, step_key="step", loggers=cfg.logger, name=cfg.name)
        self._resumed: int | None = None

    # ------------------------------------------------------------------------------------------ set-up

    def _reference(self) -> Any:
        """The frozen π_ref: the adapter switched off for LoRA models, else a copy of the starting weights in
        the loaded dtype, on the policy's device (``model.ref_device: same``) or kept in CPU memory and brought to
        the policy's device only for its forward pass (``cpu``)."""
        if hasattr(self.model, "disable_adapter"):
            return "adapter-off"
        ref = copy.deepcopy(self.model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        if self.cfg.model.ref_device == "cpu":
            ref.to("cpu")
        return ref

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def autocast(self) -> Any:
        """The forward passes' precision: bf16 autocast over fp32 master weights, or nothing for fp32."""
        if self.compute_dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype)

    @contextlib.contextmanager
    def _checkpointing(self) -> Any:
        """Gradient checkpointing acts only on decoder layers in training mode (transformers' rule): switch just
        those layers' flags, so their submodules stay in eval mode (no dropout: ρ = 1 at the first epoch)."""
        try:
            from transformers.modeling_layers import GradientCheckpointingLayer
        except ImportError:  # pragma: no cover - older transformers
            GradientCheckpointingLayer = torch.nn.Module  # noqa: N806
        layers = [m for m in self.model.modules()
                  if isinstance(m, GradientCheckpointingLayer) and getattr(m, "gradient_checkpointing", False)]  # fmt: skip
        for m in layers:
            m.training = True
        try:
            yield
        finally:
            for m in layers:
                m.training = False

    # ---------------------------------------------------------------------------------------- rollouts

    def _prompt_items(self) -> list[PromptItem]:
        fresh = [first_turn(self.problems[i], self.fmt, self.tokenizer)
                 for i in self.sampler.take(self.cfg.rollout.problems_per_step)]  # fmt: skip
        if self.cache is None or not len(self.cache):
            return fresh
        return self.cache.mix(fresh, len(fresh))

    def _sampling(self, n: int, temperature: float, top_p: float, max_tokens: int, seed: int) -> SamplingParams:
        return SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                              stop=self.fmt.stop, seed=seed)  # fmt: skip

    def rollout(self) -> tuple[list[Group], RolloutTimings]:
        r = self.cfg.rollout
        params = self._sampling(r.group_size, r.temperature, r.top_p, r.max_tokens, self.cfg.seed * 1_000_003 + self.step)
        self.model.eval()
        with self.autocast():
            groups, timings = sample_and_verify(self.generator, self._prompt_items(), params, self.fmt, self.verifier,
                                                chunk_prompts=r.chunk_prompts, overlap=choose_overlap(r.overlap, self.generator))  # fmt: skip
        for g in groups:
            texts = [c.text for c in g.completions]
            g.rewards = base_rewards(texts, [g.item.problem] * len(texts), g.verdicts, self.reward_cfg, g.proofs)
        return groups, timings

    def _feed_corrections(self, groups: Sequence[Group]) -> int:
        """Failed first-turn samples become second-turn prompts (kimina's error-correction turn)."""
        if self.cache is None:
            return 0
        from . import error_correction as ec

        ecfg = self.cfg.rollout.error_correction
        added = 0
        for g in groups:
            if g.item.turn != 1:
                continue
            for comp, proof, verdict in zip(g.completions, g.proofs, g.verdicts, strict=True):
                if verdict.valid or proof is None:
                    continue
                feedback = ec.build_feedback(proof, verdict, max_errors=ecfg.max_errors, max_chars=ecfg.max_feedback_chars,
                                             backend=g.item.problem.backend)
                if feedback is None:
                    continue
                messages = ec.second_turn_prompt(g.item.messages, comp.text, feedback)
                text = messages if isinstance(messages, str) else render_messages(messages, self.tokenizer)
                if not ec.prompt_tokens_ok(text, self.tokenizer, ecfg.max_prompt_tokens):
                    continue
                self.cache.add(PromptItem(g.item.problem, text, 2, messages))
                added += 1
        return added

    # ------------------------------------------------------------------------------------------ update

    def _encode_prompts(self, groups: Sequence[Group]) -> list[list[int]]:
        encoded = encode_prompts(self.tokenizer, [g.item.prompt for g in groups])
        return [p for g, p in zip(groups, encoded, strict=True) for _ in g.completions]

    def _logps(self, model: Any, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], width: int,
               *, entropy: bool = False) -> Any:
        """Per-token log-probs (B, width) at the rollout temperature, ``micro_batch`` rows per forward pass, in the
        compute precision; with ``entropy`` also the per-token entropies (B, width)."""
        with self.autocast():
            out = response_logprobs(model, prompts, responses, pad_id=self.tokenizer.pad_token_id,
                                    micro_batch=self.cfg.micro_batch, temperature=self.cfg.rollout.temperature,
                                    entropy=entropy)  # fmt: skip
        if entropy:
            return pad_rows(out[0], width), pad_rows(out[2], width)
        return pad_rows(out[0], width)

    def _ref_logps(self, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], width: int) -> torch.Tensor | None:
        if self.ref_model is None:
            return None
        if self.ref_model == "adapter-off":
            with self.model.disable_adapter():
                return self._logps(self.model, prompts, responses, width)
        home = next(self.ref_model.parameters()).device
        if home == self.device:
            return self._logps(self.ref_model, prompts, responses, width)
        self.ref_model.to(self.device)  # model.ref_device: cpu — on the policy's device for this pass only
        try:
            return self._logps(self.ref_model, prompts, responses, width).to(self.device)
        finally:
            self.ref_model.to(home)

    def update(self, groups: Sequence[Group]) -> dict[str, float]:
        """Shape rewards, compute advantages and run K PPO epochs on these groups (:func:`~.grpo.grpo_step`).

        π_old, π_ref and π_θ log-probs are all taken at the rollout temperature; every forward and backward
        pass holds ``micro_batch`` rows; H of ``seq-mean-token-sum-norm`` is ``algorithm.ppo.horizon`` or else
        the rollout's ``max_tokens``, whatever the lengths in this update."""
        prompts = self._encode_prompts(groups)
        responses: list[Sequence[int]] = [c.token_ids for g in groups for c in g.completions]
        width = max(1, max(len(r) for r in responses))
        dev = self.device
        lengths = torch.tensor([len(r) for r in responses], device=dev)
        mask = (torch.arange(width, device=dev)[None, :] < lengths[:, None]).float()
        self.model.eval()  # no dropout: π_old and π_θ must agree at the first epoch (ρ = 1)
        with torch.no_grad():
            old, entropy = self._logps(self.model, prompts, responses, width, entropy=True)
            ref = self._ref_logps(prompts, responses, width)
        shaped, gids, start = [], [], 0
        for gi, g in enumerate(groups):
            n = len(g.completions)
            r = torch.tensor(g.rewards, dtype=torch.float32, device=old.device)
            shaped.append(shape_group(r, old[start : start + n], mask[start : start + n], self.reward_cfg))
            gids += [gi] * n
            start += n
        rewards = torch.cat(shaped)

        def logp_fn(rows: torch.Tensor) -> torch.Tensor:
            idx = rows.tolist()
            return self._logps(self.model, [prompts[i] for i in idx], [responses[i] for i in idx], width)

        with self._checkpointing():
            step = grpo_step(logp_fn, rewards, torch.tensor(gids, device=rewards.device), old, mask, self.optimizer,
                             self.ppo, advantage=self.cfg.algorithm.advantage, ref_logps=ref,
                             micro_batch_rows=self.cfg.micro_batch,
                             generator=torch.Generator().manual_seed(self.cfg.seed + self.step))  # fmt: skip
        if self.sync_weights is not None:
            self.sync_weights(self.model)
        raw = [r for g in groups for r in g.rewards]
        ent = float((entropy * mask).sum() / mask.sum().clamp(min=1))
        return {**step.stats.to_json(), "update/rows": float(len(responses)), "reward/update_raw_mean": sum(raw) / len(raw),
                "reward/update_shaped_mean": float(rewards.mean()), "policy/entropy": ent}  # fmt: skip

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
        statuses: dict[str, int] = {}
        for g in groups:
            for v in g.verdicts:
                statuses[v.status.value] = statuses.get(v.status.value, 0) + 1
        m.update({f"verdicts/{k}": float(c) for k, c in statuses.items()})
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
        ckpt = self.latest_checkpoint()
        self.resume()
        self.run.start(self.cfg, resumed_from=self.step if ckpt is not None else None)
        records = []
        try:
            while self.step < self.cfg.steps:
                metrics = self.train_step()
                self.step += 1
                every = self.cfg.eval.every
                if self.eval_fn is not None and ((every and self.step % every == 0) or self.step == self.cfg.steps):
                    with self.autocast():
                        metrics.update(self.eval_fn(self, self.step))
                self.run.log(self.step, metrics)
                records.append(StepRecord(self.step, metrics))
                if progress:
                    progress(self.step, metrics)
                if self.step % self.cfg.checkpoint_every == 0 or self.step == self.cfg.steps:
                    self.save_checkpoint()
            self.run.summary({"steps": self.step, "last": records[-1].metrics if records else {}})
        finally:
            self.run.close()
        return records

    # ------------------------------------------------------------------------------------- checkpoints

    @property
    def checkpoint_dir(self) -> Path:
        return self.run.checkpoint_dir

    def latest_checkpoint(self) -> Path | None:
        return self.run.latest("step_", "trainer_state.pt")

    def save_checkpoint(self) -> Path:
        """Weights (or the LoRA adapter) + tokenizer + optimiser/RNG/sampler/buffer state, written atomically."""
        name = f"step_{self.step:06d}"
        with self.run.checkpoint(name, self.cfg.keep_checkpoints) as tmp:
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            state = {
                "step": self.step,
                "optimizer": self.optimizer.state_dict(),
                "sampler": self.sampler.state_dict(),
                "buffer": self.buffer.state_dict(),
                "cache": self.cache.state_dict() if self.cache is not None else None,
                "rng": {"torch": torch.get_rng_state(), "random": random.getstate(),
                        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None},
                "ref": self.ref_model.state_dict() if isinstance(self.ref_model, torch.nn.Module) else None,
            }
            torch.save(state, tmp / "trainer_state.pt")
        return self.checkpoint_dir / name

    def resume(self) -> int:
        """Load the newest complete checkpoint (if any) once; returns the step it resumes from (a second call,
        e.g. :meth:`fit` after a caller's own ``resume()`` for its progress bar, loads nothing again)."""
        if self._resumed is not None:
            return self._resumed
        ckpt = self.latest_checkpoint()
        self._resumed = 0
        if ckpt is None:
            return 0
        load_weights(self.model, ckpt)
        state = torch.load(ckpt / "trainer_state.pt", weights_only=False)
        self.step = state["step"]
        self.optimizer.load_state_dict(state["optimizer"])
        self.sampler.load_state_dict(state["sampler"])
        buffer = state["buffer"]
        if isinstance(buffer, tuple):  # checkpoints written before GroupBuffer.state_dict: (items, num_samples)
            buffer = {"items": buffer[0], "num_samples": buffer[1]}
        self.buffer.load_state_dict(buffer)
        if self.cache is not None and state["cache"] is not None:
            self.cache.load_state_dict(state["cache"])
        torch.set_rng_state(state["rng"]["torch"])
        if state["rng"].get("cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        random.setstate(state["rng"]["random"])
        if isinstance(self.ref_model, torch.nn.Module) and state["ref"] is not None:
            self.ref_model.load_state_dict(state["ref"])
        self._resumed = self.step
        if self.sync_weights is not None:
            self.sync_weights(self.model)
        log.info("resumed from %s (step %d)", ckpt, self.step)
        return self.step


def ppo_config(cfg: TrainConfig) -> PPOConfig:
    """``algorithm.ppo`` as :func:`~.grpo.grpo_step` takes it, with H (``horizon``) = the rollout's ``max_tokens``
    when unset: Dr.GRPO's divisor must not depend on which responses share an update."""
    section = cfg.algorithm.ppo
    horizon = section.horizon if section.horizon is not None else cfg.rollout.max_tokens
    if isinstance(section, PPOConfig):
        return dataclasses.replace(section, horizon=horizon)
    if hasattr(section, "to_ppo_config"):
        return section.to_ppo_config(horizon=horizon)
    names = {f.name for f in dataclasses.fields(PPOConfig)}
    return PPOConfig(**{k: getattr(section, k) for k in names if hasattr(section, k)} | {"horizon": horizon})


def compute_dtype(setting: str, model: Any) -> torch.dtype:
    """The dtype the forward passes compute in, from ``model.dtype``: ``bfloat16`` (or ``auto`` with bf16
    weights, as :func:`~proofrl.policy.model.load_policy` loads on CUDA) runs under bf16 autocast over fp32
    master weights; ``float32`` (or ``auto`` otherwise) in fp32. ``float16`` is refused: fp16 training needs
    loss scaling, which this trainer does not do."""
    weights = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if setting == "float16" or (setting == "auto" and torch.float16 in weights):
        raise ConfigError("model.dtype: float16 cannot be trained here (it needs loss scaling); use bfloat16 "
                          "(fp32 master weights, bf16 compute) or float32")  # fmt: skip
    if setting == "bfloat16" or (setting == "auto" and torch.bfloat16 in weights):
        return torch.bfloat16
    if setting not in ("auto", "float32"):
        raise ConfigError(f"model.dtype: {setting!r}; valid: auto, bfloat16, float32")
    return torch.float32


def load_weights(model: Any, ckpt: Path) -> None:
    """Load a checkpoint written by ``save_pretrained`` into ``model`` in place (full weights or a LoRA adapter)."""
    if hasattr(model, "load_adapter") and (ckpt / "adapter_config.json").exists():
        from peft import set_peft_model_state_dict
        from peft.utils import load_peft_weights

        set_peft_model_state_dict(model, load_peft_weights(str(ckpt)))
        return
    from safetensors.torch import load_file

    files = sorted(ckpt.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{ckpt}: no *.safetensors weights")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Tied embeddings are saved once; anything else missing means a different architecture.
    missing = [k for k in missing if not k.endswith("lm_head.weight")]
    if missing or unexpected:
        raise ValueError(f"{ckpt}: weights do not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})")

