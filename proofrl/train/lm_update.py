"""The one GRPO update of a language model, shared by whole-proof GRPO (:mod:`.whole_proof`) and step-level GRPO
(:mod:`.step_grpo`): per-token log-probs of the sampled responses, π_old and π_ref before the update, optional
reward shaping from π_old (the unlikeliness reward), then :func:`~.grpo.grpo_step`. :class:`LMPolicy` owns the LM
side: the precision (:func:`compute_dtype`), π_ref, and the log-probs at the sampling temperature."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from ..objectives.grpo import GRPOStep, PPOConfig, grpo_step


def pad_rows(rows: Sequence[Sequence[float]] | torch.Tensor, width: int, value: float = 0.0) -> torch.Tensor:
    """Right-pad a (B, t) tensor to (B, width)."""
    t = torch.as_tensor(rows)
    if t.shape[-1] >= width:
        return t[..., :width]
    return torch.nn.functional.pad(t, (0, width - t.shape[-1]), value=value)


def compute_dtype(setting: str, model: Any) -> torch.dtype:
    """The dtype the forward passes compute in, from ``model.dtype``: ``bfloat16`` (or ``auto`` with bf16
    weights, as :func:`~proofrl.policy.model.load_policy` loads on CUDA) runs under bf16 autocast over fp32
    master weights; ``float32`` (or ``auto`` otherwise) in fp32. ``float16`` is refused: fp16 training needs
    loss scaling, which this update does not do."""
    weights = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if setting == "float16" or (setting == "auto" and torch.float16 in weights):
        raise ConfigError(
            "model.dtype: float16 cannot be trained here (it needs loss scaling); use bfloat16 "
            "(fp32 master weights, bf16 compute) or float32"
        )
    if setting == "bfloat16" or (setting == "auto" and torch.bfloat16 in weights):
        return torch.bfloat16
    if setting not in ("auto", "float32"):
        raise ConfigError(f"model.dtype: {setting!r}; valid: auto, bfloat16, float32")
    return torch.float32


class LMPolicy:
    """A causal LM being trained, with its precision, its π_ref and its log-prob passes. Build it before the
    optimiser: it makes the trainable weights fp32 masters (π_ref, when it is a copy, keeps the loaded dtype)."""

    def __init__(
        self,
        model: Any,
        *,
        pad_id: int,
        micro_batch: int,
        temperature: float = 1.0,
        dtype: str = "auto",
        reference: bool = False,
        ref_device: str = "same",
        gradient_checkpointing: bool = False,
    ):
        self.model, self.pad_id, self.micro_batch, self.temperature = model, pad_id, micro_batch, temperature
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable parameters")
        self.compute_dtype = compute_dtype(dtype, model)
        self.ref_model = self._reference(ref_device) if reference else None
        if self.compute_dtype == torch.float32:
            model.to(torch.float32)
        for p in params:  # fp32 master weights (and so fp32 AdamW state); the forward runs under autocast
            if p.dtype != torch.float32:
                p.data = p.data.float()
        if gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.params = params

    def _reference(self, ref_device: str) -> Any:
        """π_ref: for a LoRA model the same model with its adapter switched off (no copy), else a frozen copy of the
        starting weights, on the policy's device (``same``) or parked in CPU memory between its passes (``cpu``)."""
        if hasattr(self.model, "disable_adapter"):
            return "adapter-off"
        ref = copy.deepcopy(self.model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        if ref_device == "cpu":
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
    def checkpointing(self) -> Any:
        """Gradient checkpointing acts only on decoder layers in training mode (transformers' rule): switch just
        those layers' flags, so their submodules stay in eval mode (no dropout: ρ = 1 at the first epoch)."""
        from transformers.modeling_layers import GradientCheckpointingLayer

        layers = [
            m
            for m in self.model.modules()
            if isinstance(m, GradientCheckpointingLayer) and getattr(m, "gradient_checkpointing", False)
        ]
        for m in layers:
            m.training = True
        try:
            yield
        finally:
            for m in layers:
                m.training = False

    def logps(
        self,
        model: Any,
        prompts: Sequence[Sequence[int]],
        responses: Sequence[Sequence[int]],
        width: int,
        *,
        entropy: bool = False,
    ) -> Any:
        """Per-token log-probs (B, width) at the sampling temperature, ``micro_batch`` rows per forward pass, in
        the compute precision; with ``entropy`` also the per-token entropies (B, width)."""
        from ..policy.logprobs import response_logprobs

        with self.autocast():
            out = response_logprobs(
                model,
                prompts,
                responses,
                pad_id=self.pad_id,
                micro_batch=self.micro_batch,
                temperature=self.temperature,
                entropy=entropy,
            )
        if entropy:
            return pad_rows(out[0], width), pad_rows(out[2], width)
        return pad_rows(out[0], width)

    def ref_logps(
        self, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], width: int
    ) -> torch.Tensor | None:
        if self.ref_model is None:
            return None
        if self.ref_model == "adapter-off":
            with self.model.disable_adapter():
                return self.logps(self.model, prompts, responses, width)
        home = next(self.ref_model.parameters()).device
        if home == self.device:
            return self.logps(self.ref_model, prompts, responses, width)
        self.ref_model.to(self.device)  # ref_device: cpu — on the policy's device for this pass only
        try:
            return self.logps(self.ref_model, prompts, responses, width).to(self.device)
        finally:
            self.ref_model.to(home)


@dataclass
class LMUpdate:
    step: GRPOStep
    rewards: torch.Tensor
    """(B,) the rewards the advantages were computed from (after ``shape``)"""
    mask: torch.Tensor
    entropy: torch.Tensor | None
    """(B, T) per-token entropies under π_old (when asked for)"""


def lm_grpo_update(
    lm: LMPolicy,
    optimizer: torch.optim.Optimizer,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    ppo: PPOConfig,
    *,
    advantage: str,
    seed: int,
    shape: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    entropy: bool = False,
) -> LMUpdate:
    """One GRPO update of ``lm`` on rows (``prompts[i]``, ``responses[i]``) with ``rewards`` (B,) and ``group_ids``.

    π_old (the model's log-probs right before the update), π_ref and π_θ are all taken at the sampling
    temperature, in eval mode (no dropout: ρ = 1 at the first epoch); ``shape(old_logps, mask)`` may rewrite the
    rewards from π_old; ``ppo.horizon`` is H of Dr.GRPO's aggregation (a constant the caller sets)."""
    width = max(1, max(len(r) for r in responses))
    dev = lm.device
    lengths = torch.tensor([len(r) for r in responses], device=dev)
    mask = (torch.arange(width, device=dev)[None, :] < lengths[:, None]).float()
    lm.model.eval()
    with torch.no_grad():
        if entropy:
            old, ent = lm.logps(lm.model, prompts, responses, width, entropy=True)
        else:
            old, ent = lm.logps(lm.model, prompts, responses, width), None
        ref = lm.ref_logps(prompts, responses, width) if ppo.kl_coef > 0 else None
    rewards = rewards.to(old.device)
    if shape is not None:
        rewards = shape(old, mask)

    def logp_fn(rows: torch.Tensor) -> torch.Tensor:
        idx = rows.tolist()
        return lm.logps(lm.model, [prompts[i] for i in idx], [responses[i] for i in idx], width)

    with lm.checkpointing():
        step = grpo_step(
            logp_fn,
            rewards,
            group_ids.to(rewards.device),
            old,
            mask,
            optimizer,
            ppo,
            advantage=advantage,
            ref_logps=ref,
            micro_batch_rows=lm.micro_batch,
            generator=torch.Generator().manual_seed(seed),
        )
    return LMUpdate(step, rewards, mask, ent)
