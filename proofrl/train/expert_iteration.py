"""Search-and-learn (``proofrl train --recipe reap``): reap's RL stage / AlphaProof-style expert iteration.

A round (reap's blog, "RL stage"; the AlphaProof pseudocode's actor / replay buffer / learner):

1. **rollout**: draw ``rollout.problems_per_step`` training theorems; the search workers pick up the newest
   published weights and run ``rollout.passes`` AND-OR MCTS passes over the batch (reap: four), each pass with
   its own sampling seed, policy = the LM head, leaf values = the value head (or none: the policy-only
   baseline, GPT-f style expert iteration). ``rollout.sources`` pools other tactic sources with the LM head at
   every state (Tactician's k-NN over a proof memory, online or not; Coq's automation); an online memory learns
   each proof the rollouts find, so the search learns from its own proofs at once as well as through the
   weights;
2. **replay**: every exported tree gives (state, tactic, value target) samples (:mod:`proofrl.data.value_targets`,
   :mod:`proofrl.data.search_samples`) after reap's filters (proof length, root value); the buffer keeps the newest
   ``replay.capacity``;
3. **learn**: when the round solved something, both heads are updated on the buffer plus human-proof
   transitions rehearsed at ``replay.rehearsal_fraction`` of every update: loss = the SFT loss of the tactic
   (:func:`proofrl.policy.sft.completion_nll`, the one SFT loss) + ``value_coef`` × cross-entropy over the
   value bins. A round that solved nothing makes no update and says so in the log;
4. **publish** the weights as ``weights/vNNNN`` (``weights/latest.json`` names the newest), **evaluate** on
   held-out theorems (proved count at the search budget, fixed sampling seed), log to ``metrics.jsonl`` and
   TensorBoard (``tb/``) and checkpoint (``checkpoints/round_NNNN``: weights, optimiser, buffer, sampler, RNG
   states, the pairs the online memory learned), so a killed run resumes at the next round with the same buffer
   and memory. The held-out evaluation searches with a fork of the online memory: it learns online within the
   evaluation (Tactician's protocol) and none of it reaches training.

Rollout, serving and learning are kept apart: a :class:`RolloutWorker` only reads published weights (or calls
an OpenAI-compatible policy endpoint and a value endpoint), the :class:`Learner` only writes them. One process
runs all three by default.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from ..data.search_samples import human_samples, samples_from_tree
from ..errors import ConfigError
from ..policy.sources import MixedPolicy
from ..policy.tactic import NoValue, make_tactic_policy, make_value_fn, tactic_prompt
from ..problems import load_problems
from ..provers.pool import PoolConfig
from ..search.run import search_many
from . import checkpoints
from .checkpoints import load_state, save_state, set_rng_state
from .config import ExpertIterationConfig
from .recipes import LOOPS
from .replay_buffer import ReplayBuffer, rehearsal_draw

# -- the recipe ----------------------------------------------------------------------------------------------


def load_config(recipe: str | Path = "reap", overrides: list[str] | tuple[str, ...] = ()) -> ExpertIterationConfig:
    """A recipe name or YAML path with ``key.sub=value`` overrides (:mod:`proofrl.train.recipes`); any mistake is
    one :class:`ConfigError` line."""
    return LOOPS["expert-iteration"].config(recipe, overrides)


def run(cfg: ExpertIterationConfig) -> dict[str, Any]:
    """``proofrl train --recipe reap [--set key=value ...]`` (the ``reap`` loop of :mod:`proofrl.train.recipes`)."""
    r = cfg.rollout
    if not r.policy.startswith(("openai:", "openai-chat:")) and r.policy != "in-process":
        raise ConfigError(f"rollout.policy {r.policy!r}: valid: in-process, openai:URL, openai-chat:URL")
    if r.value != "in-process" and not r.value.startswith(("endpoint:", "http://", "https://")):
        raise ConfigError(f"rollout.value {r.value!r}: valid: in-process, endpoint:URL")
    from ..preflight import require_backend

    require_backend("coq")
    summary = ExpertIteration(cfg).run()
    Console().print(f"[bold]reap[/]: held-out proved by round {summary['proved_by_round']}; run folder {cfg.out}")
    return summary


# -- data -----------------------------------------------------------------------------------------------------


@dataclass
class RunData:
    train: list[Any]
    held_out: list[Any]
    human: list[Any]
    """rehearsal samples from the human proofs of the training split"""
    model_dir: Path


def load_data(cfg: ExpertIterationConfig, console: Any = None) -> RunData:
    from ..data.tactics import read_transitions

    d = cfg.data
    given = [bool(d.train), bool(d.eval), bool(d.transitions)]
    if any(given) and not all(given):
        raise ConfigError("data.train, data.eval and data.transitions go together (or none: the stdlib assets)")
    if all(given):
        train, held, trans = load_problems(d.train), load_problems(d.eval), read_transitions(d.transitions)
        model_dir = Path(cfg.model.path) if cfg.model.path else None
    else:
        from ..data.assets import tactic_assets

        a = tactic_assets(Path(d.assets or cfg.out), seed=cfg.seed, workers=cfg.verify.workers, console=console)
        train, held, trans = a.train_problems, a.held_out_problems, read_transitions(a.train_transitions)
        model_dir = Path(cfg.model.path) if cfg.model.path else a.model_dir
    if model_dir is None:
        raise ConfigError("model.path: required with data.train (or leave data empty: the tiny stdlib model)")
    train = train[: d.limit] if d.limit else train
    held = held[: d.eval_limit] if d.eval_limit else held
    if not train:
        raise ConfigError("data: no training theorems")
    return RunData(train, held, human_samples(trans), model_dir)


# -- learner, publication, workers ----------------------------------------------------------------------------


class Learner:
    """Owns the trainable policy+value model and its optimiser; updates both heads; publishes weights."""

    def __init__(self, cfg: ExpertIterationConfig, start: Path):
        from ..policy.value_head import load_policy_value

        self.cfg = cfg
        m = cfg.model
        bins = m.num_bins if m.value_head else None
        self.model = load_policy_value(start, num_bins=bins, device=m.device, lora=m.lora, seed=cfg.seed)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)

    def update(self, samples: list[Any], round_: int) -> dict[str, float]:
        """Epochs over ``samples`` (search and rehearsed human ones): SFT loss on those with a tactic +
        ``value_coef`` × bin cross-entropy on all (when the value head is on)."""
        from ..policy.sft import BatchLoss, completion_nll, encode_pairs, supervised_loop

        o, m, tok = self.cfg.optim, self.model, self.model.tokenizer

        def batch_loss(idx: list[int]) -> BatchLoss:
            b = [samples[i] for i in idx]
            loss, lm_v, v_v = torch.zeros((), device=m.device), 0.0, 0.0
            with_tactic = [x for x in b if x.tactic]
            if with_tactic:
                prompts, targets = encode_pairs(tok, [(tactic_prompt(x.state), x.tactic) for x in with_tactic])
                lm = completion_nll(m.lm, prompts, targets, tok.pad_token_id)
                loss, lm_v = loss + lm, float(lm.detach())
            if self.cfg.model.value_head and self.cfg.algorithm.value_coef > 0:
                v = m.value_loss([x.state for x in b], [x.cost for x in b])
                loss, v_v = loss + self.cfg.algorithm.value_coef * v, float(v.detach())
            return BatchLoss(loss, {"lm": (lm_v, 1.0), "value": (v_v, 1.0)})  # means over batches

        m.train()
        res = supervised_loop(
            self.optimizer,
            len(samples),
            batch_loss,
            epochs=o.epochs,
            batch=o.batch,
            generator=torch.Generator().manual_seed(self.cfg.seed * 7919 + round_),
            params=list(m.parameters()),
        )
        m.eval()
        return {
            "learn/lm_loss": res.overall.get("lm", 0.0),
            "learn/value_loss": res.overall.get("value", 0.0),
            "learn/batches": float(res.batches),
        }


def publish(learner: Learner, weights_root: Path, version: int) -> Path:
    """Write ``weights/vNNNN`` (whole, then renamed) and point ``weights/latest.json`` at it."""
    final = weights_root / f"v{version:04d}"
    with checkpoints.atomic_dir(final) as tmp:
        learner.model.save(tmp, head=learner.cfg.model.value_head)  # as a search policy loads it
    (weights_root / "latest.json").write_text(json.dumps({"version": version, "path": final.name}))
    checkpoints.prune(weights_root, "v", 2)  # the one in use and the newest are enough
    return final


class RolloutWorker:
    """The search side: a tactic policy and a value function, refreshed from ``weights/latest.json`` between
    rounds (in-process), or endpoints that serve them (``rollout.policy``, ``rollout.value``); with
    ``rollout.sources``, the other tactic sources pooled with the model, built once for the whole run so that an
    online memory keeps what every round's rollouts taught it."""

    def __init__(self, cfg: ExpertIterationConfig, weights_root: Path):
        self.cfg, self.weights_root = cfg, weights_root
        self.version: int | None = None
        self.model: Any = None
        self.value_fn: Any = None
        self.sources: list[Any] = []
        if cfg.rollout.sources:
            built = make_tactic_policy(cfg.rollout.sources)
            self.sources = list(built.sources) if isinstance(built, MixedPolicy) else [built]
        self.memory: Any = next((s for s in self.sources if getattr(s, "online", False)), None)
        """the online proof memory among the sources (None: none)"""

    def learned(self) -> list[dict[str, str]]:
        """The pairs the online memory learned from this run's rollouts, oldest first (for a checkpoint)."""
        if self.memory is None:
            return []
        return [
            {"state": p.state, "tactic": p.tactic, "theorem": p.theorem} for p in self.memory.memory.pairs() if p.online
        ]

    def relearn(self, pairs: list[dict[str, str]]) -> None:
        """Put a checkpoint's learned pairs back into the online memory, in their order."""
        if not pairs:
            return
        if self.memory is None:
            raise ConfigError(
                f"the checkpoint holds {len(pairs)} pairs an online memory learned, and rollout.sources "
                f"({self.cfg.rollout.sources!r}) has no knn-online:DIR to resume them into"
            )
        for p in pairs:
            self.memory.memory.add(p["state"], p["tactic"], theorem=p["theorem"], online=True)

    def refresh(self) -> int | None:
        """Load the newest published weights if they changed; returns the version in use."""
        latest = json.loads((self.weights_root / "latest.json").read_text())
        local = self.cfg.rollout.policy == "in-process" or (
            self.cfg.model.value_head and self.cfg.rollout.value == "in-process"
        )
        if latest["version"] != self.version and local:
            from ..policy.value_head import load_policy_value

            self.model = load_policy_value(
                self.weights_root / latest["path"],
                device=self.cfg.model.device,
                num_bins=self.cfg.model.num_bins if self.cfg.model.value_head else None,
            )
        if self.cfg.model.value_head:
            if self.cfg.rollout.value == "in-process":
                from ..policy.value_head import HeadValue

                self.value_fn = HeadValue(self.model)
            else:
                self.value_fn = make_value_fn(self.cfg.rollout.value)
        else:
            self.value_fn = NoValue()  # the policy-only baseline: every open state −1 (no value model)
        self.version = latest["version"]
        return self.version

    def policy(self, seed: int, *, held_out: bool = False) -> Any:
        """The searches' tactic policy: the model, pooled with the sources when there are any. ``held_out``: the
        online memory is a fork (:meth:`proofrl.policy.memory.KNNPolicy.fork`), so what it learns on held-out
        theorems stays out of the run's memory."""
        s = self.cfg.rollout
        if s.policy == "in-process":
            model = self.model.tactic_policy(temperature=s.temperature, max_tokens=s.max_tokens, seed=seed)
        else:
            model = make_tactic_policy(
                s.policy,
                model=s.model_name or None,
                temperature=s.temperature,
                max_tokens=s.max_tokens,
                seed=seed,
            )
        if not self.sources:
            return model
        return MixedPolicy([model, *(src.fork() if held_out and src is self.memory else src for src in self.sources)])


# -- the loop --------------------------------------------------------------------------------------------------


class ExpertIteration:
    def __init__(self, cfg: ExpertIterationConfig, console: Any = None, data: RunData | None = None):
        from .rundir import RunDir

        self.cfg = cfg
        self.out = Path(cfg.out)
        self.console = console or Console()
        self._data = data
        self.run_dir = RunDir(self.out, step_key="round", loggers=cfg.logger, name=cfg.name)

    def _search(
        self, worker: RolloutWorker, problems: list[Any], seed: int, out: Path, pool: Any, *, held_out: bool = False
    ) -> list[Any]:
        """Search ``problems``; a training search saves the online memory as it stands into ``memory/`` (the
        run's learned memory, one folder), a held-out one its fork into ``out``."""
        learning = worker.memory is not None and not held_out
        return search_many(
            problems,
            worker.policy(seed, held_out=held_out),
            out_dir=out,
            workers=self.cfg.verify.workers,
            config=self.cfg.search,
            pool=pool,
            progress=self.cfg.progress,
            value_fn=worker.value_fn,
            memory_out=self.out / "memory" if learning else None,
        )

    def evaluate(self, worker: RolloutWorker, round_: int, pool: Any) -> dict[str, float]:
        held = self.data.held_out[: self.cfg.eval.limit] if self.cfg.eval.limit else self.data.held_out
        if not held:
            return {}
        t = time.perf_counter()
        results = self._search(
            worker, held, self.cfg.seed + 99_991, self.out / "rounds" / f"{round_:04d}" / "eval", pool, held_out=True
        )
        proved = sum(r.status == "proved" for r in results)
        return {
            "eval/proved": proved,
            "eval/theorems": len(held),
            "eval/unsound": sum(r.status == "unsound" for r in results),
            "time/eval_s": time.perf_counter() - t,
        }

    def evaluated(self, round_: int) -> bool:
        """Whether ``round_``'s held-out evaluation is logged. Round 0's checkpoint is saved before its evaluation,
        so a run killed during that evaluation resumes from round 0 and evaluates again (its results folder starts
        afresh); testing for the checkpoint alone would skip it and leave a partial one behind."""
        return any(r.get("round") == round_ and "eval/theorems" in r for r in self.run_dir.rows())

    def run(self, *, stop_after: int | None = None) -> dict[str, Any]:
        """All rounds (resuming from the newest checkpoint); ``stop_after``: return after that round (tests)."""
        from ..provers.factory import make_pool
        from .whole_proof import ProblemSampler

        cfg = self.cfg
        self.out.mkdir(parents=True, exist_ok=True)
        self.data = self._data or load_data(cfg, self.console)
        ckpt = self.run_dir.latest()
        learner = Learner(cfg, ckpt or self.data.model_dir)
        buffer = ReplayBuffer(cfg.replay.capacity)
        sampler = ProblemSampler(len(self.data.train), cfg.seed)
        rng = random.Random(cfg.seed)
        weights = self.out / "weights"
        worker = RolloutWorker(cfg, weights)
        round_ = 0
        if ckpt is not None:
            state = load_state(ckpt)
            round_ = state["round"]
            learner.optimizer.load_state_dict(state["optimizer"])
            buffer.load_state_dict(state["buffer"])
            sampler.load_state_dict(state["problems"])
            set_rng_state(state["rng"], own=rng)
            worker.relearn(state.get("memory", []))
            self.console.print(f"reap: resumed from {ckpt.name} (round {round_}, {len(buffer)} replay samples)")
        self.run_dir.start(cfg, resumed_from=round_ if ckpt is not None else None)
        if ckpt is None:
            self.save_checkpoint(learner, buffer, sampler, rng, 0, worker)  # round 0: the start, RNG included
        weights.mkdir(exist_ok=True)
        publish(learner, weights, round_)
        pool = make_pool("coq", pool=PoolConfig(workers=cfg.verify.workers), step_timeout=cfg.search.tactic_timeout)
        try:
            if round_ == 0 and self.data.held_out and cfg.eval.before and not self.evaluated(0):
                worker.refresh()
                self.run_dir.log(0, self.evaluate(worker, 0, pool))
            while round_ < cfg.steps:
                round_ += 1
                m = self.round(round_, learner, worker, buffer, sampler, rng, pool)
                every = cfg.eval.every
                if (every and round_ % every == 0) or round_ == cfg.steps:
                    worker.refresh()
                    m.update(self.evaluate(worker, round_, pool))
                self.run_dir.log(round_, m)
                self.save_checkpoint(learner, buffer, sampler, rng, round_, worker)
                if stop_after is not None and round_ >= stop_after:
                    break
            return self.summary()
        finally:
            pool.close()
            self.run_dir.close()

    def round(
        self,
        round_: int,
        learner: Learner,
        worker: RolloutWorker,
        buffer: ReplayBuffer,
        sampler: Any,
        rng: random.Random,
        pool: Any,
    ) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        batch = [self.data.train[i] for i in sampler.take(cfg.rollout.problems_per_step)]
        version = worker.refresh()
        found: list[Any] = []
        solved: set[str] = set()
        dropped: dict[str, int] = {}
        for p in range(cfg.rollout.passes):
            folder = self.out / "rounds" / f"{round_:04d}" / f"pass_{p}"
            results = self._search(worker, batch, cfg.seed * 1_000_003 + round_ * 1000 + p, folder, pool)
            for r in results:
                tree = json.loads(json.dumps(r.tree_json(), default=str))  # as exported to trees/ (JSON values)
                if r.status == "proved":
                    solved.add(r.name)
                why = cfg.replay.why_dropped(tree) if r.status == "proved" else "unsolved"
                if why is not None:
                    dropped[why] = dropped.get(why, 0) + 1
                    continue
                found += samples_from_tree(tree, round_, cfg.replay, cfg.model.num_bins)
        added = buffer.add(found)
        m: dict[str, Any] = {
            **({"memory/learned": worker.memory.memory.online_count} if worker.memory is not None else {}),
            "weights_version": version,
            "rollout/theorems": len(batch),
            "rollout/solved": len(solved),
            "replay/added": added,
            "replay/size": len(buffer),
            **{f"replay/dropped_{k.replace(' ', '_')}": v for k, v in dropped.items()},
            "time/rollout_s": time.perf_counter() - t0,
        }
        if added == 0:
            m["learn/skipped"] = "nothing solved this round" if not solved else "no new replay samples"
            self.console.print(f"reap round {round_}: {m['learn/skipped']}: no update")
        else:
            t1 = time.perf_counter()
            items = list(buffer.items)
            if len(items) > cfg.replay.max_samples:
                items = rng.sample(items, cfg.replay.max_samples)
            human = rehearsal_draw(self.data.human, len(items), cfg.replay.rehearsal_fraction, rng)
            m.update(learner.update(items + human, round_))
            m["learn/samples"], m["learn/rehearsed"] = len(items), len(human)
            m["time/learn_s"] = time.perf_counter() - t1
        publish(learner, self.out / "weights", round_)
        return m

    def save_checkpoint(
        self, learner: Learner, buffer: Any, sampler: Any, rng: random.Random, round_: int, worker: RolloutWorker
    ) -> Path:
        name = f"round_{round_:04d}"
        with self.run_dir.checkpoint(name, self.cfg.keep_checkpoints) as tmp:
            learner.model.save(tmp, head=True)  # the value head too, even when off (then it is untouched)
            save_state(
                tmp,
                own_rng=rng,
                round=round_,
                optimizer=learner.optimizer.state_dict(),
                buffer=buffer.state_dict(),
                problems=sampler.state_dict(),
                memory=worker.learned(),
            )
        return self.run_dir.checkpoint_dir / name

    def summary(self) -> dict[str, Any]:
        rows = self.run_dir.rows()
        proved = {r["round"]: r["eval/proved"] for r in rows if "eval/proved" in r}
        summary = {"rounds": rows, "proved_by_round": proved, "value_head": self.cfg.model.value_head}
        self.run_dir.summary(summary)
        return summary
