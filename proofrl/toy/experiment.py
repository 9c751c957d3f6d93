"""GRPO variants on the toy environment (arXiv:2506.02355, Appendix A and Table 1).

Each step draws ``states_per_step`` states per run, samples a group of G actions for each from the current
policy, scores them at τ = 1, masks out groups whose raw rewards are all equal (the buffer's skip rule,
:func:`proofrl.objectives.grpo.informative_groups`), optionally applies the unlikeliness reward, computes GRPO
advantages and runs K PPO epochs (:func:`proofrl.objectives.grpo.grpo_step`, the LM trainer's step) — all with the
shared code in :mod:`proofrl.objectives.grpo`,
:mod:`proofrl.rewards.unlikeliness` and :mod:`proofrl.eval`. Seeds run side by side as batched tensors.

Where Appendix A gives no value we chose one (marked "our choice" in :class:`ToyConfig`). One deliberate
simplification: every step is one update on that step's groups (no cross-step buffer), so the seeds of a
batch stay in lock-step; uninformative groups are masked out of the loss instead of being dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch

from proofrl.eval.diversity import entropy, unique_counts
from proofrl.eval.passk import pass_at_k_exact, pass_at_k_unbiased
from proofrl.eval.uplift import uplift_rate
from proofrl.objectives.grpo import PPOConfig, grpo_step, informative_groups
from proofrl.rewards.unlikeliness import unlikeliness_reward
from proofrl.runner import select
from proofrl.toy.env import BatchedMLP, ToyEnv, sample_actions


@dataclass(frozen=True)
class Variant:
    """One row of the paper's Table 1."""

    name: str
    beta_rank: float
    """β_rank of the unlikeliness reward; 0 = plain GRPO"""
    epochs: int
    """K, PPO epochs per batch"""


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("grpo-default", 0.0, 1),
        Variant("grpo-unlikeliness-1", 0.25, 1),
        Variant("grpo-unlikeliness-2", 0.25, 2),
        Variant("grpo-epochs-2", 0.0, 2),
        Variant("grpo-epochs-3", 0.0, 3),
    )
}


def get_variants(names: Iterable[str] | None) -> list[Variant]:
    """Variants by name, in Table 1's order (all when ``names`` is empty); an unknown name is a ``ConfigError``
    (a ``ValueError``) listing the valid ones."""
    return [VARIANTS[n] for n in select(names, VARIANTS, flag="--variants", what="toy variant")]


@dataclass(frozen=True)
class ToyConfig:
    """Everything one toy run needs. Paper values cite Appendix A; the rest are our choices."""

    seeds: int = 5
    """independent runs per variant (environment, policy init and sampling all differ)"""
    steps: int = 200
    """GRPO steps (Appendix A: 200)"""
    dim: int = 10
    """state dimension D (Appendix A: R^10)"""
    num_actions: int = 128
    """A (Appendix A: 128)"""
    hidden: int = 64
    """MLP hidden width (our choice)"""
    states_per_step: int = 16
    """states (problems) per step (our choice, as the paper's 16 problems per LM step)"""
    group_size: int = 32
    """G, actions sampled per state (our choice, as the paper's 32 samples per problem)"""
    lr: float = 3e-3
    """Adam learning rate (our choice: the smallest of 1e-3, 3e-3, 1e-2 at which GRPO-Default's pass@1 at
    τ = 1 saturates (≈ 0.98) within 200 steps; see docs/toy.md for the other two)"""
    train_tau: float = 1.0
    """τ of the training reward (Appendix A: 1)"""
    eval_taus: tuple[float, ...] = (1.0, 4.0, 5.0)
    """τ values evaluated (Appendix A: 1, 4, 5)"""
    ks: tuple[int, ...] = (1, 4, 8, 16, 32)
    """N of pass@N (Appendix A)"""
    eval_states: int = 256
    """fixed held-out states per run (our choice)"""
    eval_samples: int = 128
    """attempts per evaluation state for the unbiased pass@N estimator (our choice; must be ≥ max(ks))"""
    eval_every: int = 10
    """evaluate every this many steps, and at steps 0 and ``steps``"""
    uplift_group: int = 32
    """G of the uplift-rate groups drawn from the initial policy (paper §3.5: 32)"""
    ppo: PPOConfig = field(
        default_factory=lambda: PPOConfig(
            clip_ratio_low=0.2, clip_ratio_high=0.2, policy_loss="ppo-clip", agg_mode="token-mean", max_grad_norm=None
        )
    )
    """the PPO section of every GRPO loop (:class:`~proofrl.objectives.grpo.PPOConfig`), with ε = 0.2 on both sides
    (paper), plain PPO-clip (our choice, as in the runs of docs/toy.md; verl's default ``dual-clip`` only differs
    where Â < 0 and ρ > 3), ``token-mean`` (the official code's verl default; every mode but the -norm one agrees
    when T = 1) and no gradient-norm clipping (our choice, as in docs/toy.md); each variant sets ``epochs`` (K)"""
    seed: int = 0
    """base seed; run r of every variant uses the same environment and initial policy"""

    def to_json(self) -> dict[str, Any]:
        """The settings as plain JSON values (the run folder's record of them)."""
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "ppo": self.ppo.model_dump(mode="json")}


@dataclass
class Timings:
    """Seconds spent per phase, summed over steps."""

    sampling: float = 0.0
    reward: float = 0.0
    update: float = 0.0
    eval: float = 0.0
    steps: int = 0

    def add(self, other: Timings) -> None:
        for k in ("sampling", "reward", "update", "eval", "steps"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


@dataclass(frozen=True)
class Trained:
    """The runs' policies as a variant's training left them, beside what they were measured on."""

    policy: BatchedMLP
    """the trained policies"""
    initial: BatchedMLP
    """π_0, the same for every variant"""
    env: ToyEnv
    eval_states: torch.Tensor
    """(S, E, D) the fixed held-out states"""
    uplift_groups: UpliftGroups
    """the groups drawn once from π_0 on those states, the same for every variant"""


@dataclass
class VariantResult:
    """What a variant's runs leave behind: its records (one per run and step or evaluation) and timings, and the
    trained policies (not part of any record)."""

    variant: Variant
    records: list[dict[str, Any]] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)
    trained: Trained | None = None


def _mean_per_run(x: torch.Tensor) -> list[float]:
    return x.reshape(x.shape[0], -1).to(torch.float64).mean(-1).tolist()


@torch.no_grad()
def exact_pass_at_k(policy: BatchedMLP, env: ToyEnv, states: torch.Tensor, tau: float, k: int) -> torch.Tensor:
    """pass@k at threshold τ of each state, exact from π: 1 − (1 − p)^k where p is the probability π puts on the
    actions correct at τ. ``(S, E, D) -> (S, E)`` float64."""
    probs = policy(states).exp()
    return pass_at_k_exact((probs * env.correct(states, tau)).sum(-1), k)


@torch.no_grad()
def evaluate(
    policy: BatchedMLP, env: ToyEnv, states: torch.Tensor, cfg: ToyConfig, gen: torch.Generator
) -> dict[str, list[float]]:
    """pass@N per τ (unbiased estimator from ``eval_samples`` attempts, and the exact value from π), policy
    entropy and unique actions among 32 samples. Each metric is a list with one value per run."""
    logps = policy(states)  # (S, E, A)
    probs = logps.exp()
    actions = sample_actions(logps, cfg.eval_samples, generator=gen)  # (S, E, n)
    out: dict[str, list[float]] = {}
    for tau in cfg.eval_taus:
        correct = env.correct(states, tau)  # (S, E, A)
        c = correct.gather(-1, actions).sum(-1)  # (S, E) correct attempts
        p = (probs * correct).sum(-1)  # (S, E) exact success probability of one attempt
        for k in cfg.ks:
            out[f"eval/tau={tau:g}/pass@{k}"] = _mean_per_run(pass_at_k_unbiased(cfg.eval_samples, c, k))
            out[f"exact/tau={tau:g}/pass@{k}"] = _mean_per_run(pass_at_k_exact(p, k))
    out["eval/entropy"] = _mean_per_run(entropy(probs))
    s, e, _ = actions.shape
    out["eval/unique@32"] = _mean_per_run(unique_counts(actions[..., :32].reshape(s * e, -1)).reshape(s, e).float())
    return out


def train_step(
    policy: BatchedMLP, opt: torch.optim.Optimizer, env: ToyEnv, variant: Variant, cfg: ToyConfig, gen: torch.Generator
) -> tuple[list[float], Timings]:
    """One GRPO step for every run. Returns the mean raw training reward per run and the phase timings."""
    t = Timings(steps=1)
    t0 = time.perf_counter()
    s_, b, g = env.action_vectors.shape[0], cfg.states_per_step, cfg.group_size
    states = env.sample_states(b, generator=gen)  # (S, B, D)
    with torch.no_grad():
        logps = policy(states)  # (S, B, A)
        actions = sample_actions(logps, g, generator=gen)  # (S, B, G)
        old_logps = logps.gather(-1, actions)  # (S, B, G): sequence log-prob = the action's log-prob
    t1 = time.perf_counter()
    raw = env.reward(states, actions, cfg.train_tau)  # (S, B, G)
    keep = informative_groups(raw)  # (S, B), decided on raw rewards before any shaping
    shaped = unlikeliness_reward(raw, old_logps, beta_rank=variant.beta_rank) if variant.beta_rank else raw
    group_ids = torch.arange(b, device=raw.device).repeat_interleave(g)  # (B·G,): the same groups in every run
    mask = keep.unsqueeze(-1).expand(s_, b, g).reshape(s_, b * g, 1)  # (S, B·G, 1)
    t2 = time.perf_counter()

    def logp_fn(rows: torch.Tensor) -> torch.Tensor:
        new = policy(states).gather(-1, actions).reshape(s_, b * g, 1)  # (S, B·G, 1)
        return new if len(rows) == b * g else new.index_select(1, rows)

    ppo = cfg.ppo.model_copy(update={"epochs": variant.epochs})
    grpo_step(
        logp_fn,
        shaped.reshape(s_, b * g),
        group_ids,
        old_logps.reshape(s_, b * g, 1),
        mask,
        opt,
        ppo,
        advantage="grpo",
        generator=gen,
    )
    t3 = time.perf_counter()
    t.sampling, t.reward, t.update = t1 - t0, t2 - t1, t3 - t2
    return _mean_per_run(raw), t


@dataclass(frozen=True)
class UpliftGroups:
    """Fixed groups drawn once from the initial policy π_0, for the uplift rate (§3.5)."""

    actions: torch.Tensor
    """(S, E, G) actions sampled from π_0 on the evaluation states"""
    init_logps: torch.Tensor
    """(S, E, G) their log π_0"""
    correct: torch.Tensor
    """(S, E, G) bool, correct at the training τ"""


@torch.no_grad()
def draw_uplift_groups(
    initial: BatchedMLP, env: ToyEnv, states: torch.Tensor, cfg: ToyConfig, gen: torch.Generator
) -> UpliftGroups:
    init_all = initial(states)  # (S, E, A)
    actions = sample_actions(init_all, cfg.uplift_group, generator=gen)  # (S, E, G)
    return UpliftGroups(actions, init_all.gather(-1, actions), env.reward(states, actions, cfg.train_tau).bool())


@torch.no_grad()
def uplift_now(policy: BatchedMLP, groups: UpliftGroups, states: torch.Tensor) -> list[dict[str, Any]]:
    """Uplift rate per rank of the current policy against π_0, one entry per run."""
    new_lp = policy(states).gather(-1, groups.actions)  # (S, E, G)
    return [uplift_rate(groups.init_logps[r], new_lp[r], groups.correct[r]).to_json() for r in range(len(new_lp))]


def run_variant(variant: Variant, cfg: ToyConfig, *, on_step: Callable[[], None] | None = None) -> VariantResult:
    """Train all seeds of one variant; evaluate every ``eval_every`` steps; ``on_step`` after each step."""
    gen = torch.Generator().manual_seed(cfg.seed)  # same environments and initial policies for every variant
    env = ToyEnv.make(cfg.seeds, cfg.dim, cfg.num_actions, generator=gen)
    policy = BatchedMLP(cfg.seeds, cfg.dim, cfg.hidden, cfg.num_actions, generator=gen)
    initial = BatchedMLP(cfg.seeds, cfg.dim, cfg.hidden, cfg.num_actions, generator=gen)
    initial.load_state_dict(policy.state_dict())
    eval_states = env.sample_states(cfg.eval_states, generator=gen)
    uplift_groups = draw_uplift_groups(initial, env, eval_states, cfg, gen)
    gen.manual_seed(cfg.seed + 1 + sum(map(ord, variant.name)))  # sampling noise differs per variant
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    result = VariantResult(variant)

    def emit(rec: dict[str, Any]) -> None:
        result.records.append(rec)

    def do_eval(step: int, train_reward: list[float] | None) -> None:
        t0 = time.perf_counter()
        metrics = evaluate(policy, env, eval_states, cfg, gen)
        result.timings.eval += time.perf_counter() - t0
        for r in range(cfg.seeds):
            rec = {"kind": "eval", "variant": variant.name, "seed": cfg.seed + r, "step": step}
            if train_reward is not None:
                rec["train/reward"] = train_reward[r]
            rec.update({k: v[r] for k, v in metrics.items()})
            emit(rec)
        if step > 0:
            for r, u in enumerate(uplift_now(policy, uplift_groups, eval_states)):
                emit({"kind": "uplift", "variant": variant.name, "seed": cfg.seed + r, "step": step, **u})

    do_eval(0, None)
    for step in range(1, cfg.steps + 1):
        reward, t = train_step(policy, opt, env, variant, cfg, gen)
        result.timings.add(t)
        for r in range(cfg.seeds):
            emit(
                {
                    "kind": "train",
                    "variant": variant.name,
                    "seed": cfg.seed + r,
                    "step": step,
                    "train/reward": reward[r],
                }
            )
        if step % cfg.eval_every == 0 or step == cfg.steps:
            do_eval(step, reward)
        if on_step is not None:
            on_step()
    result.trained = Trained(policy, initial, env, eval_states, uplift_groups)
    return result


def config_record(cfg: ToyConfig, variants: list[Variant]) -> dict[str, Any]:
    return {"kind": "config", **cfg.to_json(), "variants": [asdict(v) for v in variants]}
