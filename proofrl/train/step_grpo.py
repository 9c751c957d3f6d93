"""Online step-level GRPO with the prover in the loop: LeanListener (arXiv:2503.09730), ``proofrl train --recipe
leanlistener``.

One update (``steps`` of them; the paper: 10,000):

1. **States.** ``rollout.problems_per_step`` states (paper: batch 16): from the training transitions (a human proof's
   prefix) and, with probability ``rollout.own_state_share``, from states the policy itself reached with a valid
   tactic in an earlier step. Where the data names premises (LeanDojo), each is dropped from the prompt with
   probability ``data.premise_dropout`` (premise dropout).
2. **Tactics.** ``rollout.group_size`` tactics per state (paper: 8) sampled at temperature 1 from the *sampling*
   copy of the policy, whose weights are refreshed from the trained ones every ``rollout.sync_every`` updates
   (paper: every 50).
3. **Prover.** Every tactic of a group runs in the one prover session leased for its state
   (:func:`proofrl.rollout.tactics.run_group`: the state reached by replaying its path, a dead session re-reached the
   same way, loops stopped by ``verify.timeout``, forbidden tactics refused before the prover).
4. **Reward.** r = softplus(G(s_t) − G(s_{t+1})) for a valid tactic, ``algorithm.failed_reward`` (0) otherwise
   (the ``subgoal`` step reward, :mod:`proofrl.rewards.subgoal`; any of ``STEP_REWARDS`` by name).
5. **Update.** ``algorithm.objective: grpo``: group = the tactics of one state; the one GRPO step
   (:func:`proofrl.objectives.grpo.grpo_step`: Â = (r − mean_g r) / std_g r, PPO-clip, KL to the frozen starting model,
   β = ``ppo.kl_coef``); groups whose rewards are all equal carry no advantage and are left out.
   ``objective: dpo`` is the online DPO baseline (:mod:`proofrl.objectives.dpo`, binary validity).

Written to ``out``: ``config.yaml``, ``metrics.jsonl`` (one line per update), ``tactics.jsonl`` (every tactic:
state, tactic, valid, failure kind, reward), ``checkpoints/step_N/`` (weights, optimiser, sampler weights, RNG
states, the policy's own states) — a rerun in the same ``out`` resumes from the newest one.

With no ``model.path`` and no ``data.train`` the run builds (once) the Coq standard library's tactic data and the
tiny tactic model under ``data.assets`` (:func:`proofrl.data.assets.tactic_assets`), so it works on a fresh machine.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from ..errors import ConfigError
from ..objectives.grpo import informative_groups
from ..policy.generation import encode_prompts
from ..policy.model import load_policy, load_weights
from ..provers.backend import state_text
from ..rewards import subgoal as _subgoal  # noqa: F401  (registers the ``subgoal`` step reward)
from ..rewards.combine import STEP_REWARDS
from ..rollout.tactics import GroupRun, StatePoint, TacticRun, TacticSampler, run_groups, state_points, tactic_of
from .checkpoints import load_state, save_state, set_rng_state
from .config import StepGRPOConfig
from .lm_update import LMPolicy, lm_grpo_update
from .recipes import LOOPS
from .rundir import RunDir


def load_config(recipe: str | Path | None = "leanlistener", overrides: Sequence[str] = ()) -> StepGRPOConfig:
    """The recipe's mapping with ``key.sub=value`` overrides (:mod:`proofrl.train.recipes`), checked: one
    :class:`ConfigError` line naming the key on any mistake."""
    return LOOPS["step-grpo"].config(recipe, overrides)


# ---------------------------------------------------------------------------------------------------- parts


def with_premises(point: StatePoint, dropout: float, rng: random.Random) -> str:
    """The text the policy is prompted with: the state, after the premises the data names for it, each left
    out with probability ``dropout`` (premise dropout). States without premises are their text alone."""
    if not point.premises:
        return point.text
    kept = [p for p in point.premises if rng.random() >= dropout]
    return (f"premises: {', '.join(kept)}\n\n" if kept else "") + point.text


class StateSource:
    """Where states come from: the training transitions, and the states the policy reached by itself."""

    def __init__(self, data: Sequence[StatePoint], *, own_share: float, own_cap: int, rng: random.Random):
        if not data:
            raise ConfigError("data.train: no training states (every transition structural or too long)")
        self.data, self.own_share, self.rng = list(data), own_share, rng
        self.own: deque[StatePoint] = deque(maxlen=own_cap)
        self._seen: set[str] = set()

    def draw(self, n: int) -> list[StatePoint]:
        return [
            self.rng.choice(self.own) if self.own and self.rng.random() < self.own_share else self.rng.choice(self.data)
            for _ in range(n)
        ]

    def add_reached(self, group: GroupRun) -> int:
        """States reached by the group's valid tactics that still have goals; returns how many were new."""
        new = 0
        for run in group.runs.values():
            st = run.result.state if run.valid and run.result is not None else None
            if st is None or st.solved:
                continue
            p = StatePoint(
                group.point.theorem, (*group.point.path, run.tactic), state_text(st), group.point.premises, "policy"
            )
            if p.key not in self._seen:
                self._seen.add(p.key)
                self.own.append(p)
                new += 1
        return new

    def state_dict(self) -> dict[str, Any]:
        return {"own": [p.to_json() for p in self.own], "seen": sorted(self._seen)}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.own.clear()
        self.own.extend(StatePoint.from_json(x) for x in d["own"])
        self._seen = set(d["seen"])


def step_rewards(
    group: GroupRun, tactics: Sequence[str | None], *, name: str = "subgoal", failed: float = 0.0, **settings: Any
) -> list[float]:
    """The reward of each sample of a group by the registered step reward ``name`` (``settings`` go to it): a
    valid tactic's from the state before and its result, ``failed`` for any other (cut, empty, refused, rejected,
    timed out)."""
    fn = STEP_REWARDS.get(name)
    out = []
    for t in tactics:
        run = group.of(t)
        ok = run.valid and run.result is not None and group.before is not None
        out.append(fn(group.before, run.result, failed=failed, **settings) if ok else float(failed))
    return out


def group_ids(sizes: Sequence[int]) -> torch.Tensor:
    """Row → group: the rows of the i-th state's tactics all get id i (one GRPO group per state)."""
    return torch.tensor([i for i, n in enumerate(sizes) for _ in range(n)], dtype=torch.long)


# -------------------------------------------------------------------------------------------------- trainer


class StepLevelTrainer:
    """The loop of the module docstring. Build with :meth:`from_config`; :meth:`fit` trains and resumes."""

    def __init__(
        self,
        cfg: StepGRPOConfig,
        model: Any,
        tokenizer: Any,
        train: Sequence[StatePoint],
        pool: Any,
        *,
        held_out: Sequence[StatePoint] = (),
        out: Path | None = None,
    ):
        self.cfg, self.model, self.tokenizer, self.pool = cfg, model, tokenizer, pool
        self.out = Path(out or cfg.out)
        self.run_dir = RunDir(self.out, step_key="step", loggers=cfg.logger, name=cfg.name, logs=("tactics.jsonl",))
        self.rng = random.Random(cfg.seed)
        self.source = StateSource(
            train, own_share=cfg.rollout.own_state_share, own_cap=cfg.rollout.own_state_cap, rng=self.rng
        )
        self.held_out = list(held_out)
        # the one LM update's policy side: precision, π_ref (the starting model: LoRA adapter off, or a frozen copy;
        # the online DPO baseline needs it too), log-probs at the sampling temperature
        self.lm = LMPolicy(
            model,
            pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
            micro_batch=cfg.optim.micro_batch,
            temperature=cfg.rollout.temperature,
            dtype=cfg.model.dtype,
            reference=True,
            ref_device=cfg.model.ref_device,
        )
        self.sampler_model = copy.deepcopy(model).eval().requires_grad_(False)  # refreshed every sync_every
        self.sampler = TacticSampler(
            self.sampler_model,
            tokenizer,
            temperature=cfg.rollout.temperature,
            max_tokens=cfg.rollout.max_tokens,
            seed=cfg.seed,
        )
        self.optimizer = torch.optim.AdamW(self.lm.params, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
        self.ppo = cfg.ppo.with_horizon(cfg.rollout.max_tokens)
        self.step = 0
        self.synced_at = 0
        self.last_advantages: torch.Tensor | None = None

    # -- one update ---------------------------------------------------------------------------------------
    def rollout(self) -> tuple[list[GroupRun], list[list[Any]], list[list[int]], list[list[float]]]:
        """Draw states, sample tactics, run them; returns (groups, completions, prompt ids, rewards) of the groups
        whose state was reached."""
        r, d = self.cfg.rollout, self.cfg.data
        points = self.source.draw(r.problems_per_step)
        texts = [with_premises(p, d.premise_dropout, self.rng) for p in points]
        comps = self.sampler.sample(texts, r.group_size)
        tactics = [[tactic_of(c) for c in g] for g in comps]
        groups = run_groups(
            self.pool,
            list(zip(points, tactics, strict=True)),
            timeout=self.cfg.verify.timeout,
            workers=self.cfg.verify.workers,
        )
        prompts = encode_prompts(self.tokenizer, [self.sampler.prompt(t) for t in texts])
        kept: tuple[list, list, list, list] = ([], [], [], [])
        a = self.cfg.algorithm
        for g, c, t, p in zip(groups, comps, tactics, prompts, strict=True):
            extra = {} if a.unchanged_reward is None else {"unchanged": a.unchanged_reward}
            rewards = (
                step_rewards(g, t, name=a.step_reward, failed=a.failed_reward, **extra) if g.before is not None else []
            )
            self._log_tactics(g, t, rewards)
            if g.before is None:
                continue
            for x, v in zip(kept, (g, c, p, rewards), strict=True):
                x.append(v)
        return kept

    def _log_tactics(self, g: GroupRun, tactics: Sequence[str | None], rewards: Sequence[float]) -> None:
        with open(self.out / "tactics.jsonl", "a") as f:
            if g.before is None:
                f.write(json.dumps({"step": self.step + 1, "state": g.point.key, "error": g.error}) + "\n")
                return
            for t, rew in zip(tactics, rewards, strict=True):
                run = g.of(t)
                f.write(
                    json.dumps(
                        {
                            "step": self.step + 1,
                            "state": g.point.key,
                            "origin": g.point.origin,
                            "tactic": t,
                            "valid": run.valid,
                            "failure": run.failure,
                            "reward": rew,
                        }
                    )
                    + "\n"
                )

    def grpo_update(
        self, comps: Sequence[Sequence[Any]], prompts: Sequence[Sequence[int]], rewards: Sequence[Sequence[float]]
    ) -> dict[str, float]:
        """GRPO over the informative groups (one group = the tactics of one state), by the one LM GRPO update
        (:func:`.lm_update.lm_grpo_update`)."""
        keep = [i for i, r in enumerate(rewards) if bool(informative_groups(torch.tensor(r)))]
        stats: dict[str, float] = {
            "update/groups": float(len(keep)),
            "update/dropped_groups": float(len(rewards) - len(keep)),
        }
        if not keep:
            return stats
        rows_p = [prompts[i] for i in keep for _ in comps[i]]
        rows_r = [c.token_ids for i in keep for c in comps[i]]
        r = torch.tensor([x for i in keep for x in rewards[i]], dtype=torch.float32)
        out = lm_grpo_update(
            self.lm,
            self.optimizer,
            rows_p,
            rows_r,
            r,
            group_ids([len(comps[i]) for i in keep]),
            self.ppo,
            advantage=self.cfg.algorithm.advantage,
            seed=self.cfg.seed + self.step,
        )
        self.last_advantages = out.step.advantages  # (rows,) kept for inspection (tests, debugging)
        return stats | out.step.stats.to_json()

    def dpo_update(
        self, runs: Sequence[Sequence[TacticRun]], comps: Sequence[Sequence[Any]], prompts: Sequence[Sequence[int]]
    ) -> dict[str, float]:
        """The online DPO baseline: pairs of a valid and an invalid sample of the current group."""
        from ..objectives.dpo import dpo_update, online_pairs

        valid = [[r.valid for r in rs] for rs in runs]
        pairs = online_pairs(prompts, [[c.token_ids for c in cs] for cs in comps], valid, self.rng)
        a = self.cfg.algorithm
        return dpo_update(
            self.model,
            self.lm.ref_model,
            pairs,
            self.optimizer,
            pad_id=self.lm.pad_id,
            beta=a.dpo_beta,
            max_grad_norm=self.cfg.ppo.max_grad_norm,
            micro_batch=self.cfg.optim.micro_batch,
        ).to_json()

    def train_step(self) -> dict[str, float]:
        t0 = time.perf_counter()
        groups, comps, prompts, rewards = self.rollout()
        runs = [[g.of(tactic_of(c)) for c in cs] for g, cs in zip(groups, comps, strict=True)]  # each sample's run
        t1 = time.perf_counter()
        if self.cfg.algorithm.objective == "grpo":
            upd = self.grpo_update(comps, prompts, rewards)
        else:
            upd = self.dpo_update(runs, comps, prompts)
        self.step += 1
        if self.step % self.cfg.rollout.sync_every == 0:
            self.sampler_model.load_state_dict(self.model.state_dict())
            self.synced_at = self.step
        new_states = sum(self.source.add_reached(g) for g in groups)
        samples = [r for rs in runs for r in rs]
        fails = Counter(s.failure for s in samples if not s.valid)
        n = max(len(samples), 1)
        flat = [x for r in rewards for x in r]
        return {
            "step": self.step,
            "reward/mean": sum(flat) / max(len(flat), 1),
            "tactics/valid": sum(s.valid for s in samples) / n,
            "states/zero_valid": sum(not any(r.valid for r in rs) for rs in runs) / max(len(groups), 1),
            "states/reached": float(len(groups)),
            "states/own_pool": float(len(self.source.own)),
            "states/new_own": float(new_states),
            "prover/replays": float(sum(g.replays for g in groups)),
            **{f"failures/{k}": float(v) for k, v in fails.items()},
            **upd,
            "time/rollout_s": t1 - t0,
            "time/update_s": time.perf_counter() - t1,
        }

    # -- the loop -----------------------------------------------------------------------------------------
    def fit(self, *, progress: Callable[[int, dict[str, float]], None] | None = None) -> list[dict[str, float]]:
        """Train until ``cfg.steps`` updates, resuming from the newest checkpoint in ``out``."""

        def step() -> tuple[int, dict[str, float]]:
            m = self.train_step()
            e = self.cfg.eval
            if e.every and self.held_out and self.step % e.every == 0:
                m |= self.evaluate()
            return self.step, m

        done = self.run_dir.fit(self, step, progress)
        return [m for _, m in done]

    def evaluate(self) -> dict[str, float]:
        from ..eval.tactics import tactic_metrics

        e, v = self.cfg.eval, self.cfg.verify
        res = tactic_metrics(
            self.model,
            self.tokenizer,
            self.held_out[: e.limit],
            self.pool,
            k=e.ks[0],
            timeout=v.timeout,
            workers=v.workers,
            max_tokens=self.cfg.rollout.max_tokens,
            seed=self.cfg.seed,
        )
        return {
            f"eval/prec@{e.ks[0]}": res.prec_at_k,
            "eval/zero_precision": res.zero_precision,
            "eval/mean_length": res.mean_length,
        }

    # -- checkpoints --------------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Weights (``save_pretrained``) and the saved state (:func:`.checkpoints.save_state`); written to a
        temporary folder, then renamed, so a run killed mid-write leaves the previous checkpoint as the newest."""
        name = f"step_{self.step:06d}"
        with self.run_dir.checkpoint(name, self.cfg.keep_checkpoints) as tmp:
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            save_state(
                tmp,
                own_rng=self.rng,
                step=self.step,
                synced_at=self.synced_at,
                optimizer=self.optimizer.state_dict(),
                sampler_model=self.sampler_model.state_dict(),
                sampler_calls=self.sampler.calls,
                problems=self.source.state_dict(),
            )
        return self.run_dir.checkpoint_dir / name

    def resume(self) -> int:
        """Load the newest complete checkpoint, if any (:meth:`fit` then cuts the logs back to its step)."""
        ckpt = self.run_dir.latest()
        if ckpt is None:
            return 0
        load_weights(self.model, ckpt)
        st = load_state(ckpt)
        self.optimizer.load_state_dict(st["optimizer"])
        self.sampler_model.load_state_dict(st["sampler_model"])
        self.sampler.calls = st["sampler_calls"]
        set_rng_state(st["rng"], own=self.rng)
        self.source.load_state_dict(st["problems"])
        self.step, self.synced_at = st["step"], st["synced_at"]
        return self.step


# ------------------------------------------------------------------------------------------------- building


def resolve_inputs(cfg: StepGRPOConfig, console: Any = None) -> tuple[str, str, str]:
    """(model dir, training transitions, held-out transitions): the config's, or the shared tactic assets built
    (once) under ``data.assets`` for whatever is empty."""
    model, train, held = cfg.model.path, cfg.data.train, cfg.data.eval
    if not (model and train and held):
        from ..data.assets import tactic_assets

        a = tactic_assets(Path(cfg.data.assets), seed=cfg.seed, workers=cfg.verify.workers, console=console)
        model, train = model or str(a.model_dir), train or str(a.train_transitions)
        held = held or str(a.held_out_transitions)
    for key, path, want_dir in (("model.path", model, True), ("data.train", train, False)):
        if not (Path(path).is_dir() if want_dir else Path(path).is_file()):
            raise ConfigError(f"{key}: no {'model directory' if want_dir else 'file'} at {path!r}")
    return model, train, held


def build_trainer(cfg: StepGRPOConfig, *, pool: Any, console: Any = None) -> StepLevelTrainer:
    from ..data.tactics import read_transitions

    model_dir, train_path, held_path = resolve_inputs(cfg, console)
    try:
        train = state_points(read_transitions(train_path), max_state_chars=cfg.data.max_state_chars)
        held = (
            state_points(read_transitions(held_path), max_state_chars=cfg.data.max_state_chars)
            if Path(held_path).is_file()
            else []
        )
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"data.train / data.eval: not tactic transitions JSONL ({type(e).__name__}: {e})") from None
    if cfg.data.limit:
        train = random.Random(cfg.seed).sample(train, min(cfg.data.limit, len(train)))
    if held:
        held = random.Random(cfg.seed + 1).sample(held, min(cfg.eval.limit or len(held), len(held)))
    model, tok = load_policy(model_dir, device="cpu")
    return StepLevelTrainer(cfg, model, tok, train, pool, held_out=held)


def run(cfg: StepGRPOConfig, *, console: Any = None) -> StepLevelTrainer:
    """``proofrl train --recipe leanlistener``: train by ``cfg`` with a rich progress bar; returns the trainer (its
    ``out`` holds everything)."""
    from ..preflight import require_backend
    from ..progress import progress_bar
    from ..rollout.tactics import coq_pool

    require_backend("coq")
    console = console or Console()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    with coq_pool(cfg.verify.workers, cfg.verify.timeout) as pool:
        trainer = build_trainer(cfg, pool=pool, console=console)
        with progress_bar(console=console) as bar:
            task = bar.add_task(f"step-level {cfg.algorithm.objective}", total=cfg.steps)

            def show(step: int, m: dict[str, float]) -> None:
                bar.update(task, completed=step)
                if step % 10 == 0 or step == cfg.steps:
                    keys = ("reward/mean", "tactics/valid", "states/zero_valid", "loss/loss", "dpo/loss", "eval/prec@8")
                    console.print(f"step {step}: " + "  ".join(f"{k} {m[k]:.3g}" for k in keys if k in m))

            trainer.fit(progress=show)
    console.print(f"done: {trainer.out}/metrics.jsonl, checkpoints in {trainer.run_dir.checkpoint_dir}")
    return trainer
