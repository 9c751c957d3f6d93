"""GRPO as pure tensor maths: group-relative advantages, the PPO-clip surrogate, KL penalties, loss
aggregation, K optimisation epochs over one batch, and the sample buffer that skips uninformative groups.

This is the one implementation used by the toy experiment (:mod:`proofrl.toy`), the LM trainer and the verl
integration. Nothing here knows what a "sample" is: a policy is any callable that returns log-probabilities.

Papers and conventions:

* GRPO — DeepSeekMath, arXiv:2402.03300 (outcome supervision: one scalar reward per sample, the same
  advantage on every token of it).
* Dr.GRPO — arXiv:2503.20783: no division by the group std, ``seq-mean-token-sum-norm`` aggregation.
* PPO — arXiv:1707.06347; asymmetric clip bounds as in DAPO, arXiv:2503.14476 (``clip_ratio_low/high``).
* KL estimators k1/k2/k3 — http://joschu.net/blog/kl-approx.html, with verl's names and clamps
  (``low_var_kl`` is verl's name for k3; verl treats the two names as one).
* Loss aggregation modes — verl's ``loss_agg_mode`` semantics, see :func:`agg_loss`.

Shapes: ``B`` samples (rows), ``T`` tokens per sample (response length, padded; ``mask`` marks real tokens).
Leading dimensions before ``(B, T)`` in :func:`agg_loss` are independent problems (the toy runs its seeds
that way) and are reduced separately.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class Registry(Generic[F]):
    """Functions registered by name. An unknown name lists the valid ones; a second registration raises."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._fns: dict[str, F] = {}

    def register(self, *names: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            for name in names:
                if name in self._fns:
                    raise ValueError(f"{self.kind} {name!r} is already registered (by {self._fns[name].__name__})")
                self._fns[name] = fn
            return fn

        return deco

    def get(self, name: str) -> F:
        try:
            return self._fns[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; valid choices: {sorted(self._fns)}") from None

    def names(self) -> list[str]:
        return sorted(self._fns)

    def __contains__(self, name: object) -> bool:
        return name in self._fns


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
    std 1 there and passes the raw reward through, undocumented; we do not).
    """
    rewards = rewards.float()
    uniq, inv = torch.unique(group_ids, return_inverse=True)  # inv: (B,) group index in [0, n_groups)
    n = torch.zeros(len(uniq), dtype=rewards.dtype).index_add_(0, inv, torch.ones_like(rewards))  # (n_groups,)
    total = torch.zeros_like(n).index_add_(0, inv, rewards)
    mean = total / n  # (n_groups,)
    centred = rewards - mean[inv]  # (B,)
    if not scale_by_std:
        return centred
    sq = torch.zeros_like(n).index_add_(0, inv, centred.square())
    std = torch.sqrt(sq / (n - 1).clamp(min=1))  # (n_groups,); 0 for singletons (their centred reward is 0)
    return centred / (std[inv] + eps)


def group_advantages_loop(
    rewards: torch.Tensor, group_ids: torch.Tensor, *, scale_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Plain-loop reference for :func:`group_advantages` (kept for the equivalence test; slow)."""
    out = torch.zeros(len(rewards), dtype=torch.float32)
    for g in torch.unique(group_ids).tolist():
        idx = (group_ids == g).nonzero().flatten()
        r = rewards[idx].float()
        if len(r) == 1:
            continue  # singleton: advantage 0
        a = r - r.mean()
        out[idx] = a / (r.std() + eps) if scale_by_std else a
    return out


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


def _masked_sums(loss: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mask = mask.to(loss.dtype)
    return (loss * mask).sum(-1), mask.sum(-1)  # (..., B) token sums and token counts


def _seq_mean(seq_losses: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Mean over sequences that have at least one real token (empty rows do not count). ``(..., B) -> (...)``."""
    has = (counts > 0).to(seq_losses.dtype)
    return (seq_losses * has).sum(-1) / has.sum(-1).clamp(min=1)


@AGG_MODES.register("token-mean")
def agg_token_mean(loss: torch.Tensor, mask: torch.Tensor, horizon: int | None = None) -> torch.Tensor:
    """Σ_{i,t} ℓ_it m_it / Σ_{i,t} m_it: every token weighs the same (long answers weigh more)."""
    sums, counts = _masked_sums(loss, mask)
    return sums.sum(-1) / counts.sum(-1).clamp(min=1)


@AGG_MODES.register("seq-mean-token-mean")
def agg_seq_mean_token_mean(loss: torch.Tensor, mask: torch.Tensor, horizon: int | None = None) -> torch.Tensor:
    """mean_i (Σ_t ℓ_it m_it / Σ_t m_it): every sequence weighs the same (the original GRPO objective)."""
    sums, counts = _masked_sums(loss, mask)
    return _seq_mean(sums / counts.clamp(min=1), counts)


@AGG_MODES.register("seq-mean-token-sum")
def agg_seq_mean_token_sum(loss: torch.Tensor, mask: torch.Tensor, horizon: int | None = None) -> torch.Tensor:
    """mean_i Σ_t ℓ_it m_it."""
    sums, counts = _masked_sums(loss, mask)
    return _seq_mean(sums, counts)


@AGG_MODES.register("seq-mean-token-sum-norm")
def agg_seq_mean_token_sum_norm(
    loss: torch.Tensor, mask: torch.Tensor, horizon: int | None = None
) -> torch.Tensor:
    """Dr.GRPO (arXiv:2503.20783): Σ_i Σ_t ℓ_it m_it / H, with H a constant (the maximum response length).

    verl semantics: the sum over sequences is **not** divided by the number of sequences, and H defaults to
    ``mask.shape[-1]``; pass ``horizon`` to keep H constant when batches are padded to varying lengths.
    """
    sums, _ = _masked_sums(loss, mask)
    return sums.sum(-1) / float(horizon if horizon is not None else mask.shape[-1])


def agg_loss(loss: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean", horizon: int | None = None) -> torch.Tensor:
    """Reduce a per-token loss with verl's ``loss_agg_mode``. ``(..., B, T), (..., B, T) -> (...)``."""
    return AGG_MODES.get(mode)(loss, mask, horizon)


# ------------------------------------------------------------------------------------------- policy loss


@dataclass(frozen=True)
class PolicyLoss:
    """The aggregated loss and its diagnostics (diagnostics are detached token means over the mask)."""

    loss: torch.Tensor
    """the scalar to minimise: aggregated clipped surrogate (+ kl_coef · aggregated KL); summed over leading dims"""
    clipfrac: float
    """fraction of tokens where the clipped branch was taken"""
    approx_kl: float
    """mean of ½(log π − log π_old)² over tokens: how far this epoch moved from the sampling policy"""
    kl: float
    """mean KL estimate to the reference policy (0 when there is none)"""


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    agg_mode: str = "token-mean",
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_kind: str = "low_var_kl",
    horizon: int | None = None,
) -> PolicyLoss:
    """PPO-clip surrogate (arXiv:1707.06347 eq. 7) with asymmetric bounds, plus an optional KL penalty.

    ρ = exp(log π − log π_old) (log-ratio clamped to [−20, 20] as in verl);
    ℓ = max(−Â ρ, −Â clip(ρ, 1 − ε_low, 1 + ε_high)); loss = agg(ℓ) + β_KL · agg(KL(π ‖ π_ref)).

    Shapes ``(..., B, T)`` for log-probs and mask; ``advantages`` is ``(..., B, T)`` or ``(..., B)`` (one
    value per sample, broadcast over its tokens). With Â > 0 the gradient vanishes once ρ > 1 + ε_high, with
    Â < 0 once ρ < 1 − ε_low.
    """
    if advantages.dim() == logp.dim() - 1:
        advantages = advantages.unsqueeze(-1)  # (..., B, 1)
    log_ratio = (logp - old_logp).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)  # (..., B, T)
    surr = -advantages * ratio
    surr_clipped = -advantages * ratio.clamp(1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    per_token = torch.maximum(surr, surr_clipped)
    loss = agg_loss(per_token, mask, agg_mode, horizon)
    kl_value = 0.0
    m = mask.to(logp.dtype)
    denom = m.sum().clamp(min=1)
    if ref_logp is not None and kl_coef != 0.0:
        kl_tok = kl_penalty(logp, ref_logp, kl_kind)
        loss = loss + kl_coef * agg_loss(kl_tok, mask, agg_mode, horizon)
        kl_value = float((kl_tok.detach() * m).sum() / denom)
    with torch.no_grad():
        clipfrac = float(((surr_clipped > surr).to(m.dtype) * m).sum() / denom)
        approx_kl = float((0.5 * log_ratio.square() * m).sum() / denom)
    return PolicyLoss(loss=loss.sum(), clipfrac=clipfrac, approx_kl=approx_kl, kl=kl_value)


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
        """The sub-batch of rows ``idx`` (along B)."""
        pick = lambda x, d: None if x is None else x.index_select(x.dim() + d, idx)  # noqa: E731
        adv_dim = -1 if self.advantages.dim() == self.old_logps.dim() - 1 else -2
        return RolloutBatch(pick(self.old_logps, -2), pick(self.advantages, adv_dim), pick(self.mask, -2),
                            pick(self.ref_logps, -2))


@dataclass(frozen=True)
class PPOConfig:
    """How one batch is optimised. Defaults are verl's, except where noted."""

    epochs: int = 1
    """K: passes over the same batch (verl ``ppo_epochs``; "Rewarding the Unlikely" uses 2)"""
    minibatch_rows: int | None = None
    """rows per gradient step; None = the whole batch in one step per epoch (the official recipe: buffer 256,
    mini-batch 256)"""
    clip_ratio_low: float = 0.2
    """ε_low: ρ is clipped below at 1 − ε_low"""
    clip_ratio_high: float = 0.2
    """ε_high: ρ is clipped above at 1 + ε_high (DAPO's clip-higher sets this above ε_low)"""
    agg_mode: str = "token-mean"
    """loss aggregation, one of AGG_MODES"""
    kl_coef: float = 0.0
    """β_KL; 0 disables the penalty (verl ``kl_loss_coef`` is 0.001 when ``use_kl_loss``; the paper uses 0.1)"""
    kl_kind: str = "low_var_kl"
    """KL estimator, one of KL_ESTIMATORS"""
    max_grad_norm: float | None = None
    """clip the global gradient norm to this value; None = no clipping"""
    skip_grad_norm: float | None = None
    """skip the optimiser step when the gradient norm is ≥ this (the official code uses 20); None = never"""
    horizon: int | None = None
    """constant H for ``seq-mean-token-sum-norm``; None = the padded length T"""
    shuffle: bool = True
    """shuffle rows into mini-batches each epoch (irrelevant when one mini-batch holds the whole batch)"""


@dataclass(frozen=True)
class UpdateStats:
    """Means over the gradient steps of one :func:`ppo_update` call."""

    loss: float
    clipfrac: float
    approx_kl: float
    kl: float
    grad_norm: float
    steps: int
    skipped: int

    def to_json(self) -> dict[str, float]:
        return {f"loss/{k}": float(v) for k, v in self.__dict__.items()}


def ppo_update(
    logp_fn: Callable[[torch.Tensor], torch.Tensor],
    batch: RolloutBatch,
    optimizer: torch.optim.Optimizer,
    cfg: PPOConfig = PPOConfig(),
    *,
    generator: torch.Generator | None = None,
) -> UpdateStats:
    """K epochs of PPO-clip over one batch.

    ``logp_fn(rows)`` must return the *current* policy's per-token log-probs of the given rows, shape
    ``(..., len(rows), T)``, with gradients. The toy MLP and the LM trainer both supply one; this function
    owns the epochs, mini-batching, clipping, KL and gradient-norm handling.

    Epoch 1 starts at ρ = 1 (the batch's ``old_logps`` are the current policy's), so with one epoch and one
    mini-batch PPO-clip reduces to the plain policy gradient; later epochs are where clipping acts.
    """
    params = [p for g in optimizer.param_groups for p in g["params"]]
    n = batch.num_rows
    mb = cfg.minibatch_rows or n
    sums = dict(loss=0.0, clipfrac=0.0, approx_kl=0.0, kl=0.0, grad_norm=0.0)
    steps = skipped = 0
    for _ in range(cfg.epochs):
        order = torch.randperm(n, generator=generator) if cfg.shuffle and mb < n else torch.arange(n)
        for start in range(0, n, mb):
            rows = order[start : start + mb]
            sub = batch.rows(rows) if mb < n else batch
            out = ppo_clip_loss(
                logp_fn(rows), sub.old_logps, sub.advantages, sub.mask,
                clip_ratio_low=cfg.clip_ratio_low, clip_ratio_high=cfg.clip_ratio_high, agg_mode=cfg.agg_mode,
                ref_logp=sub.ref_logps, kl_coef=cfg.kl_coef, kl_kind=cfg.kl_kind, horizon=cfg.horizon,
            )  # fmt: skip
            optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            grad_norm = _grad_norm(params, cfg.max_grad_norm)
            if cfg.skip_grad_norm is not None and not grad_norm < cfg.skip_grad_norm:  # also skips NaN
                skipped += 1
            else:
                optimizer.step()
            steps += 1
            for k, v in (("loss", float(out.loss.detach())), ("clipfrac", out.clipfrac), ("approx_kl", out.approx_kl),
                         ("kl", out.kl), ("grad_norm", grad_norm)):  # fmt: skip
                sums[k] += v
    return UpdateStats(**{k: v / max(steps, 1) for k, v in sums.items()}, steps=steps, skipped=skipped)


def _grad_norm(params: Sequence[torch.nn.Parameter], max_norm: float | None) -> float:
    if max_norm is not None:
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    grads = [p.grad.detach().flatten() for p in params if p.grad is not None]
    return float(torch.cat(grads).norm()) if grads else 0.0


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
