"""GRPO as pure tensor maths: group-relative advantages, the PPO-clip surrogate, KL penalties, loss
aggregation, K optimisation epochs over one batch, and the sample buffer that skips uninformative groups.

This is the one implementation used by the toy experiment (:mod:`proofrl.toy`), the LM trainer and the verl
integration. Nothing here knows what a "sample" is: a policy is any callable that returns log-probabilities.

Papers and conventions:

* GRPO — DeepSeekMath, arXiv:2402.03300 (outcome supervision: one scalar reward per sample, the same
  advantage on every token of it).
* Dr.GRPO — arXiv:2503.20783: no division by the group std, ``seq-mean-token-sum-norm`` aggregation.
* PPO — arXiv:1707.06347; asymmetric clip bounds as in DAPO, arXiv:2503.14476 (``clip_ratio_low/high``);
  dual-clip PPO (arXiv:1912.09729, verl's ``clip_ratio_c``) caps the loss of negative advantages. Policy
  losses are registered by name (:data:`POLICY_LOSSES`), like advantage estimators and aggregation modes.
* KL estimators k1/k2/k3 — http://joschu.net/blog/kl-approx.html, with verl's names and clamps
  (``low_var_kl`` is verl's name for k3; verl treats the two names as one).
* Loss aggregation modes — verl's ``loss_agg_mode`` semantics, see :func:`agg_loss`.

Shapes: ``B`` samples (rows), ``T`` tokens per sample (response length, padded; ``mask`` marks real tokens).
Leading dimensions before ``(B, T)`` in :func:`agg_loss` are independent problems (the toy runs its seeds
that way) and are reduced separately.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, NamedTuple, TypeVar

import torch
from pydantic import Field

from ..registry import Registry
from ..schema import Config, one_of

PositiveInt = Annotated[int, Field(ge=1)]

T = TypeVar("T")


ADV_ESTIMATORS: Registry[Callable[..., torch.Tensor]] = Registry("advantage estimator")
KL_ESTIMATORS: Registry[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = Registry("KL estimator")
AGG_MODES: Registry[Callable[..., torch.Tensor]] = Registry("loss_agg_mode")


# ---------------------------------------------------------------------------------------------- advantages


def group_advantages(
    rewards: torch.Tensor, group_ids: torch.Tensor, *, scale_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Group-relative advantage Â_i = (r_i − mean_g(r)) / (std_g(r) + ε), or r_i − mean_g(r) without the std.

    ``(B,), (B,) -> (B,)``. GRPO, arXiv:2402.03300 §4.1.2 (outcome supervision); ``scale_by_std=False`` is
    Dr.GRPO, arXiv:2503.20783, which drops the division by σ. ``std`` is the unbiased (Bessel) estimate, as
    ``torch.std`` in verl and the official "Rewarding the Unlikely" code; ε = 1e-6 as there.

    ``group_ids`` may be any integers (groups need not be contiguous or equal-sized). **A single-member group
    gets advantage 0**: its mean is its own reward, so it carries no relative signal (verl instead uses mean 0,
    std 1 there and passes the raw reward through, undocumented; we do not). Everything is computed on
    ``rewards``' device (``group_ids`` are moved there).
    """
    rewards = rewards.float()
    group_ids = group_ids.to(rewards.device)
    uniq, inv = torch.unique(group_ids, return_inverse=True)  # inv: (B,) group index in [0, n_groups)
    zeros = rewards.new_zeros(uniq.shape[0])  # (n_groups,) on rewards' device
    n = zeros.index_add(0, inv, torch.ones_like(rewards))
    total = zeros.index_add(0, inv, rewards)
    mean = total / n  # (n_groups,)
    centred = rewards - mean.index_select(0, inv)  # (B,)
    if not scale_by_std:
        return centred
    sq = zeros.index_add(0, inv, centred.square())
    std = torch.sqrt(sq / (n - 1).clamp(min=1))  # (n_groups,); 0 for singletons (their centred reward is 0)
    return centred / (std.index_select(0, inv) + eps)


@ADV_ESTIMATORS.register("grpo")
def grpo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, *, eps: float = 1e-6) -> torch.Tensor:
    """GRPO (arXiv:2402.03300): ``(r − mean) / (std + ε)`` per group. ``(B,), (B,) -> (B,)``."""
    return group_advantages(rewards, group_ids, scale_by_std=True, eps=eps)


@ADV_ESTIMATORS.register("dr_grpo")
def dr_grpo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, *, eps: float = 1e-6) -> torch.Tensor:
    """Dr.GRPO (arXiv:2503.20783): ``r − mean`` per group, no std. ``(B,), (B,) -> (B,)``."""
    return group_advantages(rewards, group_ids, scale_by_std=False, eps=eps)


def informative_groups(rewards: torch.Tensor) -> torch.Tensor:
    """``(..., G) -> (...)`` bool: True where a group's *raw* rewards are not all equal.

    The skip rule of the official "Rewarding the Unlikely" trainer and DAPO's dynamic sampling (keep groups
    with reward std > 0): an all-correct or all-wrong group has zero advantage for every member, so it only
    dilutes the batch. Apply it to the verifier's rewards **before** any shaping (e.g. the unlikeliness
    reward, which would otherwise make an all-correct group look informative).
    """
    return (rewards != rewards[..., :1]).any(dim=-1)


# ---------------------------------------------------------------------------------------- KL estimators


@KL_ESTIMATORS.register("k1", "kl")
def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = log π − log π_ref (unbiased, high variance, can be negative). ``(B, T) -> (B, T)``."""
    return logp - ref_logp


@KL_ESTIMATORS.register("k2", "mse")
def kl_k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 = ½ (log π − log π_ref)² (biased, low variance). ``(B, T) -> (B, T)``."""
    return 0.5 * (logp - ref_logp).square()


@KL_ESTIMATORS.register("k3", "low_var_kl")
def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = π_ref/π − log(π_ref/π) − 1 (unbiased, ≥ 0, low variance). ``(B, T) -> (B, T)``.

    verl semantics (``low_var_kl`` and ``k3`` are one estimator there): log(π_ref/π) is clamped to
    [−20, 20] before the exponential and the result to [−10, 10].
    """
    log_ratio = (ref_logp - logp).clamp(-20.0, 20.0)
    return (torch.exp(log_ratio) - log_ratio - 1.0).clamp(-10.0, 10.0)


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "low_var_kl") -> torch.Tensor:
    """Per-token KL estimate of KL(π ‖ π_ref) by the registered estimator ``kind``. ``(B, T) -> (B, T)``."""
    return KL_ESTIMATORS.get(kind)(logp, ref_logp)


# ---------------------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class AggScale:
    """The divisors of :func:`agg_loss`, fixed for a whole mini-batch before it is cut into micro-batches.

    Every aggregation mode is a sum over rows divided by one of these, so the losses of the micro-batches of a
    mini-batch, each divided by the mini-batch's scale, add up to the mini-batch's loss and their gradients to
    its gradient (gradient accumulation is exact). Shapes: the leading dimensions ``(...)`` of the loss.
    """

    tokens: torch.Tensor
    """Σ_i Σ_t m_it, real tokens in the mini-batch (at least 1)"""
    rows: torch.Tensor
    """rows with at least one real token (at least 1)"""
    horizon: float
    """H of ``seq-mean-token-sum-norm`` (Dr.GRPO) and ``token-sum-norm``"""

    @staticmethod
    def of(mask: torch.Tensor, horizon: int | float | None = None) -> AggScale:
        """The scale of the (..., B, T) ``mask``; H = ``horizon``, or the padded length T when None (verl)."""
        counts = mask.to(torch.float32).sum(-1)  # (..., B)
        return AggScale(
            tokens=counts.sum(-1).clamp(min=1),
            rows=(counts > 0).to(torch.float32).sum(-1).clamp(min=1),
            horizon=float(horizon if horizon is not None else mask.shape[-1]),
        )


def _masked_sums(loss: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mask = mask.to(loss.dtype)
    return (loss * mask).sum(-1), mask.sum(-1)  # (..., B) token sums and token counts


@AGG_MODES.register("token-mean")
def agg_token_mean(loss: torch.Tensor, mask: torch.Tensor, scale: AggScale) -> torch.Tensor:
    """Σ_{i,t} ℓ_it m_it / Σ_{i,t} m_it: every token weighs the same (long answers weigh more)."""
    sums, _ = _masked_sums(loss, mask)
    return sums.sum(-1) / scale.tokens


@AGG_MODES.register("seq-mean-token-mean")
def agg_seq_mean_token_mean(loss: torch.Tensor, mask: torch.Tensor, scale: AggScale) -> torch.Tensor:
    """mean_i (Σ_t ℓ_it m_it / Σ_t m_it): every sequence weighs the same (the original GRPO objective).
    Rows without a real token do not count."""
    sums, counts = _masked_sums(loss, mask)
    return (sums / counts.clamp(min=1)).sum(-1) / scale.rows


@AGG_MODES.register("seq-mean-token-sum")
def agg_seq_mean_token_sum(loss: torch.Tensor, mask: torch.Tensor, scale: AggScale) -> torch.Tensor:
    """mean_i Σ_t ℓ_it m_it (rows without a real token do not count)."""
    sums, _ = _masked_sums(loss, mask)
    return sums.sum(-1) / scale.rows


@AGG_MODES.register("seq-mean-token-sum-norm")
def agg_seq_mean_token_sum_norm(loss: torch.Tensor, mask: torch.Tensor, scale: AggScale) -> torch.Tensor:
    """Dr.GRPO (arXiv:2503.20783): mean_i (Σ_t ℓ_it m_it) / H, with H a constant (the maximum response length).

    verl 0.9.1 semantics (its ``agg_loss`` with ``loss_scale_factor`` = H): the token sums are averaged over the
    sequences (rows without a real token do not count), then divided by H. H must not depend on the batch (else
    the same samples get a different gradient next to longer neighbours): every loop sets it to its constant
    response budget; alone, :func:`agg_loss` falls back to the padded length T as verl does.
    """
    sums, _ = _masked_sums(loss, mask)
    return sums.sum(-1) / scale.rows / scale.horizon


@AGG_MODES.register("token-sum-norm")
def agg_token_sum_norm(loss: torch.Tensor, mask: torch.Tensor, scale: AggScale) -> torch.Tensor:
    """Σ_i Σ_t ℓ_it m_it / H: the older ``seq-mean-token-sum-norm`` of verl releases before the sequence mean
    (the one kimina-prover-rl's fork trains with). It equals ``seq-mean-token-sum-norm`` × the rows of the
    mini-batch, so its gradient grows with the mini-batch (what ``max_grad_norm`` then clips)."""
    sums, _ = _masked_sums(loss, mask)
    return sums.sum(-1) / scale.horizon


def agg_loss(
    loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token-mean",
    horizon: int | None = None,
    scale: AggScale | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss with verl's ``loss_agg_mode``. ``(..., B, T), (..., B, T) -> (...)``.

    ``scale`` gives the divisors of a larger mini-batch this one is a micro-batch of (see :class:`AggScale`);
    None = this batch's own (with H = ``horizon``)."""
    return AGG_MODES.get(mode)(loss, mask, scale if scale is not None else AggScale.of(mask, horizon))


# ------------------------------------------------------------------------------------------- policy loss


class TokenLoss(NamedTuple):
    """A registered policy loss's per-token output. ``(..., B, T)`` each."""

    loss: torch.Tensor
    """ℓ_it, the loss to aggregate"""
    clipped: torch.Tensor
    """bool: the ε-clipped branch of PPO was taken"""
    dual_clipped: torch.Tensor
    """bool: the dual-clip bound −Â·c was taken (always False without dual clip)"""


POLICY_LOSSES: Registry[Callable[..., TokenLoss]] = Registry("policy loss")
"""Per-token policy losses by name: ``fn(log_ratio, advantages, *, clip_ratio_low, clip_ratio_high,
clip_ratio_c) -> TokenLoss`` with log ρ and Â broadcast to ``(..., B, T)`` (verl's ``policy_loss.loss_mode``)."""


@POLICY_LOSSES.register("ppo-clip")
def ppo_clip_tokens(
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float = 3.0,
) -> TokenLoss:
    """PPO-clip (arXiv:1707.06347 eq. 7) with asymmetric bounds (DAPO, arXiv:2503.14476):
    ℓ = max(−Â ρ, −Â clip(ρ, 1 − ε_low, 1 + ε_high)), ρ = exp(log ρ). ``clip_ratio_c`` is unused.

    With Â > 0 the gradient vanishes once ρ > 1 + ε_high, with Â < 0 once ρ < 1 − ε_low; with Â < 0 and ρ
    large the loss −Â ρ is unbounded (what dual-clip caps)."""
    ratio = torch.exp(log_ratio)
    surr = -advantages * ratio
    surr_clipped = -advantages * ratio.clamp(1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    return TokenLoss(torch.maximum(surr, surr_clipped), surr_clipped > surr, torch.zeros_like(surr, dtype=torch.bool))


@POLICY_LOSSES.register("dual-clip")
def dual_clip_tokens(
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float = 3.0,
) -> TokenLoss:
    """Dual-clip PPO (Ye et al., arXiv:1912.09729; verl's default ``vanilla`` loss): PPO-clip, and for Â < 0
    the loss is capped at −Â·c, i.e. ℓ = min(ℓ_clip, −Â c) where Â < 0 (c = ``clip_ratio_c`` > 1, verl 3.0), so
    a sample whose probability already rose far above π_old's cannot dominate the batch."""
    if not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 for dual-clip, got {clip_ratio_c}")
    base = ppo_clip_tokens(log_ratio, advantages, clip_ratio_low=clip_ratio_low, clip_ratio_high=clip_ratio_high)
    cap = -advantages * clip_ratio_c
    negative = (advantages < 0).expand_as(base.loss)
    dual = negative & (base.loss > cap)
    return TokenLoss(
        torch.where(negative, torch.minimum(base.loss, cap), base.loss),
        torch.logical_and(base.clipped, torch.logical_not(dual)),
        dual,
    )


@dataclass(frozen=True)
class PolicyLoss:
    """The aggregated loss and its diagnostics (diagnostics are detached token means over the mask)."""

    loss: torch.Tensor
    """the scalar to minimise: aggregated policy loss (+ kl_coef · aggregated KL); summed over leading dims"""
    clipfrac: float
    """fraction of tokens where the ε-clipped branch was taken"""
    approx_kl: float
    """mean of ½(log π − log π_old)² over tokens: how far this epoch moved from the sampling policy"""
    kl: float
    """mean KL estimate to the reference policy (0 when there is none)"""
    dual_clipfrac: float = 0.0
    """fraction of tokens where the dual-clip bound −Â·c was taken"""


class _Terms(NamedTuple):
    loss: torch.Tensor
    """scalar, with gradient"""
    sums: torch.Tensor
    """(5,) detached sums over the mask: clipped tokens, dual-clipped tokens, Σ ½(log ρ)², Σ KL, tokens"""


def _loss_terms(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    scale: AggScale,
    cfg: PPOConfig,
    ref_logp: torch.Tensor | None,
) -> _Terms:
    """The one place the GRPO loss is written: agg(ℓ_policy) + β_KL · agg(KL(π ‖ π_ref)), both with ``scale``."""
    if advantages.dim() == logp.dim() - 1:
        advantages = advantages.unsqueeze(-1)  # (..., B, 1)
    log_ratio = (logp - old_logp).clamp(-20.0, 20.0)  # verl's clamp
    tok = POLICY_LOSSES.get(cfg.policy_loss)(
        log_ratio,
        advantages,
        clip_ratio_low=cfg.clip_ratio_low,
        clip_ratio_high=cfg.clip_ratio_high,
        clip_ratio_c=cfg.clip_ratio_c,
    )
    loss = agg_loss(tok.loss, mask, cfg.agg_mode, scale=scale)
    m = mask.to(logp.dtype)
    kl_sum = logp.new_zeros(())
    if ref_logp is not None and cfg.kl_coef != 0.0:
        kl_tok = kl_penalty(logp, ref_logp, cfg.kl_kind)
        loss = loss + cfg.kl_coef * agg_loss(kl_tok, mask, cfg.agg_mode, scale=scale)
        kl_sum = (kl_tok.detach() * m).sum()
    with torch.no_grad():
        sums = torch.stack(
            [
                (tok.clipped.to(m.dtype) * m).sum(),
                (tok.dual_clipped.to(m.dtype) * m).sum(),
                (0.5 * log_ratio.square() * m).sum(),
                kl_sum,
                m.sum(),
            ]
        )
    return _Terms(loss.sum(), sums)


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float = 3.0,
    policy_loss: str = "dual-clip",
    agg_mode: str = "token-mean",
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_kind: str = "low_var_kl",
    horizon: int | None = None,
    scale: AggScale | None = None,
) -> PolicyLoss:
    """The registered policy loss ``policy_loss`` (default dual-clip PPO), aggregated, plus an optional KL penalty.

    ρ = exp(log π − log π_old) (log-ratio clamped to [−20, 20] as in verl); ℓ = the per-token loss of
    :data:`POLICY_LOSSES` (``ppo-clip``: max(−Â ρ, −Â clip(ρ, 1 − ε_low, 1 + ε_high)); ``dual-clip`` also caps it
    at −Â·c for Â < 0); loss = agg(ℓ) + β_KL · agg(KL(π ‖ π_ref)).

    Shapes ``(..., B, T)`` for log-probs and mask; ``advantages`` is ``(..., B, T)`` or ``(..., B)`` (one
    value per sample, broadcast over its tokens). ``scale``: see :class:`AggScale`.
    """
    scale = scale if scale is not None else AggScale.of(mask, horizon)
    cfg = PPOConfig.model_construct(  # not checked here: a bad argument fails where it is used, as it always did
        policy_loss=policy_loss,
        clip_ratio_low=clip_ratio_low,
        clip_ratio_high=clip_ratio_high,
        clip_ratio_c=clip_ratio_c,
        agg_mode=agg_mode,
        kl_coef=kl_coef,
        kl_kind=kl_kind,
    )
    t = _loss_terms(logp, old_logp, advantages, mask, scale, cfg, ref_logp)
    clipped, dual, akl, kl, tokens = t.sums.tolist()
    d = max(tokens, 1.0)
    return PolicyLoss(loss=t.loss, clipfrac=clipped / d, approx_kl=akl / d, kl=kl / d, dual_clipfrac=dual / d)


# ------------------------------------------------------------------------------------------- K epochs


@dataclass(frozen=True)
class RolloutBatch:
    """What one update consumes. Rows (dimension −2 of the log-prob tensors) are samples."""

    old_logps: torch.Tensor
    """(..., B, T) per-token log-probs under the policy that generated the samples (π_old)"""
    advantages: torch.Tensor
    """(..., B) one advantage per sample, or (..., B, T) per token"""
    mask: torch.Tensor
    """(..., B, T) 1 for real response tokens, 0 for padding and for samples left out of the loss"""
    ref_logps: torch.Tensor | None = None
    """(..., B, T) log-probs under the frozen reference policy, for the KL penalty; None for no KL"""

    @property
    def num_rows(self) -> int:
        return self.old_logps.shape[-2]

    def rows(self, idx: torch.Tensor) -> RolloutBatch:
        """The sub-batch of rows ``idx`` (along B); ``idx`` is moved to each tensor's device."""

        def pick(x: torch.Tensor, d: int) -> torch.Tensor:
            return x.index_select(x.dim() + d, idx.to(x.device))

        adv_dim = -1 if self.advantages.dim() == self.old_logps.dim() - 1 else -2
        ref = None if self.ref_logps is None else pick(self.ref_logps, -2)
        return RolloutBatch(pick(self.old_logps, -2), pick(self.advantages, adv_dim), pick(self.mask, -2), ref)


class PPOConfig(Config):
    """How one batch is optimised (a recipe's ``ppo:`` section). Defaults are verl's, except where noted."""

    epochs: PositiveInt = 1
    """K: passes over the same batch (verl ``ppo_epochs``; "Rewarding the Unlikely" uses 2)"""
    minibatch_rows: PositiveInt | None = None
    """rows per gradient step; None = the whole batch in one step per epoch (the official recipe: buffer 256,
    mini-batch 256)"""
    clip_ratio_low: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.2
    """ε_low: ρ is clipped below at 1 − ε_low"""
    clip_ratio_high: Annotated[float, Field(ge=0.0)] = 0.2
    """ε_high: ρ is clipped above at 1 + ε_high (DAPO's clip-higher sets this above ε_low)"""
    clip_ratio_c: Annotated[float, Field(gt=1.0)] = 3.0
    """c of dual-clip PPO: for Â < 0 the loss is capped at −Â·c (verl ``clip_ratio_c``, 3.0)"""
    policy_loss: Annotated[str, one_of(POLICY_LOSSES.names)] = "dual-clip"
    """per-token policy loss, a name in :data:`POLICY_LOSSES` (verl's default applies the dual clip)"""
    agg_mode: Annotated[str, one_of(AGG_MODES.names)] = "token-mean"
    """loss aggregation, a name in :data:`AGG_MODES`"""
    kl_coef: Annotated[float, Field(ge=0.0)] = 0.0
    """β_KL; 0 disables the penalty and the reference model (verl ``kl_loss_coef`` is 0.001 when
    ``use_kl_loss``; the paper uses 0.1)"""
    kl_kind: Annotated[str, one_of(KL_ESTIMATORS.names)] = "low_var_kl"
    """KL estimator, a name in :data:`KL_ESTIMATORS`"""
    max_grad_norm: Annotated[float, Field(gt=0.0)] | None = 1.0
    """clip the global gradient norm to this value (verl ``grad_clip`` and the unlikeliness code: 1.0); None = no
    clipping"""
    skip_grad_norm: Annotated[float, Field(gt=0.0)] | None = None
    """skip the optimiser step when the gradient norm is ≥ this (the official code uses 20); None = never. A
    non-finite gradient norm always skips the step"""
    horizon: PositiveInt | None = None
    """constant H for ``seq-mean-token-sum-norm`` (Dr.GRPO); None = the batch's padded length T (the LM loops pass
    the rollout's ``max_tokens``)"""
    shuffle: bool = True
    """shuffle rows into mini-batches each epoch (irrelevant when one mini-batch holds the whole batch)"""

    def with_horizon(self, max_tokens: int) -> PPOConfig:
        """These settings with H = ``max_tokens`` (the rollout's token budget) where ``horizon`` is unset: Dr.GRPO's
        divisor must not depend on which responses share an update."""
        return self if self.horizon is not None else self.model_copy(update={"horizon": max_tokens})


@dataclass(frozen=True)
class UpdateStats:
    """Means over the gradient steps of one :func:`ppo_update` call."""

    loss: float
    clipfrac: float
    approx_kl: float
    kl: float
    grad_norm: float
    """mean gradient norm before clipping, over the steps whose norm was finite"""
    steps: int
    """mini-batches (gradient computations), taken or skipped"""
    skipped: int
    """optimiser steps skipped (norm ≥ ``skip_grad_norm``, or not finite)"""
    nonfinite: int = 0
    """steps skipped because the gradient norm was inf or NaN"""
    dual_clipfrac: float = 0.0

    def to_json(self) -> dict[str, float]:
        return {f"loss/{k}": float(v) for k, v in self.__dict__.items()}


PolicyFn = Callable[[torch.Tensor], torch.Tensor]
"""``policy_fn(rows) -> (..., len(rows), T)``: the current policy's per-token log-probs of the batch rows
``rows`` (a LongTensor on the batch's device), with gradients."""


def row_order(n: int, shuffle: bool, generator: torch.Generator | None, device: torch.device | str) -> torch.Tensor:
    """The rows of one epoch, on ``device``: a permutation drawn from ``generator`` (on the generator's own
    device, then moved), or 0 … n−1."""
    if not shuffle:
        return torch.arange(n, device=device)
    gen_device = generator.device if generator is not None else torch.device("cpu")
    return torch.randperm(n, generator=generator, device=gen_device).to(device)


def ppo_update(
    policy_fn: PolicyFn,
    batch: RolloutBatch,
    optimizer: torch.optim.Optimizer,
    cfg: PPOConfig | None = None,
    *,
    micro_batch_rows: int | None = None,
    generator: torch.Generator | None = None,
) -> UpdateStats:
    """K epochs of PPO over one batch, with gradient accumulation; ``policy_fn`` (:data:`PolicyFn`) gives the
    current policy's log-probs (the toy MLP and the LM trainer each supply one).

    Each mini-batch (``cfg.minibatch_rows`` rows) is one optimiser step. It is cut into micro-batches of
    ``micro_batch_rows`` rows (None = the whole mini-batch), each with its own forward and backward pass; the
    aggregation divisors (tokens, rows, H: :class:`AggScale`) are the mini-batch's, fixed before the loop, so
    the accumulated gradient is the mini-batch's gradient. Then the gradient norm is clipped to
    ``cfg.max_grad_norm``, and the step is skipped (and counted) when the norm is not finite or is ≥
    ``cfg.skip_grad_norm``.

    Epoch 1 starts at ρ = 1 (the batch's ``old_logps`` are the current policy's), so with one epoch and one
    mini-batch PPO-clip reduces to the plain policy gradient; later epochs are where clipping acts. All index
    tensors live on the batch's device; one host synchronisation per optimiser step.
    """
    cfg = cfg if cfg is not None else PPOConfig()
    params = [p for g in optimizer.param_groups for p in g["params"]]
    n = batch.num_rows
    device = batch.old_logps.device
    mb = cfg.minibatch_rows or n
    micro = micro_batch_rows or mb
    totals = dict(loss=0.0, clipfrac=0.0, dual_clipfrac=0.0, approx_kl=0.0, kl=0.0, grad_norm=0.0)
    steps = skipped = nonfinite = 0
    for _ in range(cfg.epochs):
        shuffled = cfg.shuffle and mb < n
        order = row_order(n, shuffled, generator, device)
        for rows in order.split(mb):  # split/index_select, not [] indexing: see tests/test_devices.py
            whole = not shuffled and len(rows) == n
            sub = batch if whole else batch.rows(rows)
            scale = AggScale.of(sub.mask, cfg.horizon if cfg.horizon is not None else batch.mask.shape[-1])
            optimizer.zero_grad(set_to_none=True)
            loss_sum = torch.zeros((), device=device)
            sums = torch.zeros(5, device=device)
            for part_rows in rows.split(micro):
                part = sub if (whole and len(part_rows) == n) else batch.rows(part_rows)
                t = _loss_terms(
                    policy_fn(part_rows), part.old_logps, part.advantages, part.mask, scale, cfg, part.ref_logps
                )
                t.loss.backward()
                loss_sum = loss_sum + t.loss.detach()
                sums = sums + t.sums
            grads = [p.grad for p in params if p.grad is not None]
            norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=device)
            clipped, dual, akl, kl, tokens, loss_v, norm_v = torch.cat(
                [sums.float(), loss_sum.float().reshape(1), norm.to(device).float().reshape(1)]
            ).tolist()  # one sync
            d = max(tokens, 1.0)
            steps += 1
            if not math.isfinite(norm_v):
                nonfinite += 1
                skipped += 1
            elif cfg.skip_grad_norm is not None and norm_v >= cfg.skip_grad_norm:
                skipped += 1
            else:
                if cfg.max_grad_norm is not None:
                    torch.nn.utils.clip_grads_with_norm_(params, cfg.max_grad_norm, norm)
                optimizer.step()
            if math.isfinite(norm_v):
                totals["grad_norm"] += norm_v
            for k, v in (
                ("loss", loss_v),
                ("clipfrac", clipped / d),
                ("dual_clipfrac", dual / d),
                ("approx_kl", akl / d),
                ("kl", kl / d),
            ):
                totals[k] += v
    optimizer.zero_grad(set_to_none=True)  # free the gradients before the next rollout
    finite_steps = steps - nonfinite
    means = {k: v / max(finite_steps if k == "grad_norm" else steps, 1) for k, v in totals.items()}
    return UpdateStats(**means, steps=steps, skipped=skipped, nonfinite=nonfinite)


class GRPOStep(NamedTuple):
    advantages: torch.Tensor
    """(..., B) the group-relative advantages used"""
    stats: UpdateStats


def grpo_step(
    policy_fn: PolicyFn,
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    old_logps: torch.Tensor,
    mask: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    cfg: PPOConfig | None = None,
    *,
    advantage: str = "grpo",
    ref_logps: torch.Tensor | None = None,
    micro_batch_rows: int | None = None,
    generator: torch.Generator | None = None,
) -> GRPOStep:
    """One GRPO update, shared by the toy experiment and the LM trainer: group-relative advantages of the
    (already shaped) rewards by the estimator ``advantage`` (:data:`ADV_ESTIMATORS`), then :func:`ppo_update`.

    ``rewards (..., B)``; ``group_ids (B,)``: which group each row belongs to, one grouping for every leading
    index (groups of different leading indices, e.g. the toy's seeds, never mix); ``old_logps``, ``mask`` and
    ``ref_logps`` ``(..., B, T)``. Rows outside the loss (uninformative groups) have mask 0.
    """
    cfg = cfg if cfg is not None else PPOConfig()
    b = rewards.shape[-1]
    flat = rewards.reshape(-1, b)
    ids = group_ids.to(rewards.device)
    if flat.shape[0] > 1:  # disjoint ids per leading index: b·k + (index of the group among the row's groups)
        _, inv = torch.unique(ids, return_inverse=True)
        ids = inv.unsqueeze(0) + b * torch.arange(flat.shape[0], device=rewards.device).unsqueeze(1)
    adv = ADV_ESTIMATORS.get(advantage)(flat.reshape(-1), ids.reshape(-1)).reshape(rewards.shape)
    batch = RolloutBatch(old_logps=old_logps, advantages=adv, mask=mask, ref_logps=ref_logps)
    stats = ppo_update(policy_fn, batch, optimizer, cfg, micro_batch_rows=micro_batch_rows, generator=generator)
    return GRPOStep(adv, stats)


# ---------------------------------------------------------------------------------------------- buffer


class GroupBuffer(Generic[T]):
    """Collects groups until ``target_samples`` samples are held, dropping groups whose raw rewards are all equal.

    The official "Rewarding the Unlikely" loop: 16 problems × 32 samples per generation step, all-correct and
    all-wrong groups dropped (before the unlikeliness perturbation), an update once ≥ 256 samples are
    buffered, then the buffer is emptied. ``item`` is whatever the trainer needs later (tensors, rollouts).
    """

    def __init__(self, target_samples: int) -> None:
        if target_samples < 1:
            raise ValueError(f"target_samples must be ≥ 1, got {target_samples}")
        self.target_samples = target_samples
        self._items: list[T] = []
        self.num_samples = 0
        self.kept_groups = 0
        self.dropped_groups = 0

    def add(self, raw_rewards: Sequence[float] | torch.Tensor, item: T, *, keep_uninformative: bool = False) -> bool:
        """Offer one group (its verifier rewards, unshaped). Returns whether it was kept.

        ``keep_uninformative`` keeps all-equal groups too (plain GRPO without the skip rule); they still
        contribute zero advantage, but count towards ``target_samples``."""
        r = torch.as_tensor(raw_rewards, dtype=torch.float32)
        if r.numel() == 0 or not (keep_uninformative or bool(informative_groups(r.reshape(1, -1))[0])):
            self.dropped_groups += 1
            return False
        self._items.append(item)
        self.num_samples += r.numel()
        self.kept_groups += 1
        return True

    @property
    def ready(self) -> bool:
        """True once at least ``target_samples`` samples are held."""
        return self.num_samples >= self.target_samples

    def take(self) -> list[T]:
        """Return every held group and empty the buffer (the drop counters keep counting)."""
        items, self._items, self.num_samples = self._items, [], 0
        return items

    def __len__(self) -> int:
        return len(self._items)

    def state_dict(self) -> dict[str, Any]:
        """Everything held and counted (the items as they are: a checkpoint pickles them)."""
        return {
            "target_samples": self.target_samples,
            "items": list(self._items),
            "num_samples": self.num_samples,
            "kept_groups": self.kept_groups,
            "dropped_groups": self.dropped_groups,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s contents; ``target_samples`` stays this buffer's own (the config's)."""
        self._items = list(state["items"])
        self.num_samples = int(state["num_samples"])
        self.kept_groups = int(state.get("kept_groups", 0))
        self.dropped_groups = int(state.get("dropped_groups", 0))
