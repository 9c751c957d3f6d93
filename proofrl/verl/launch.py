"""``proofrl train --engine verl --recipe R [--set k=v ...] [--dry-run]``: a proofrl recipe as verl's Hydra overrides.

Every key of the resolved recipe is accounted for:

* mapped to verl keys (:data:`MAPPED`), e.g. problems per step → ``data.train_batch_size``, group size →
  ``actor_rollout_ref.rollout.n``, mini-batch rows / G → ``actor.ppo_mini_batch_size``, Dr.GRPO →
  ``adv_estimator=grpo`` + ``norm_adv_by_std_in_grpo=False`` (+ the recipe's ``seq-mean-token-sum-norm``), KL →
  ``use_kl_loss``/``kl_loss_coef``/``kl_loss_type``, dropping uninformative groups → ``filter_groups``,
  evaluation sampling → ``val_kwargs``;
* read by proofrl's own pieces inside verl (:data:`CONSUMED`): the reward function and the agent loop load the
  resolved recipe written beside the run (``reward:``, ``verify:``, the second-turn limits); the data keys
  decide which problems are written to verl's parquet files;
* or without a verl counterpart (anything else): when its value differs from proofrl's default it is named on
  one line each, never dropped silently (``skip_grad_norm``, ``buffer_samples``, ``eval.ks``, …).

``--set verl.KEY=VALUE`` passes a verl key through verbatim (``--set verl.trainer.n_gpus_per_node=8``); it comes
last, so it wins. ``--dry-run`` prints the overrides, one per line, and writes nothing.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..train.config import GRPOConfig, load_recipe

ACTOR = "actor_rollout_ref.actor"
ROLLOUT = "actor_rollout_ref.rollout"
KWARGS = "+reward.custom_reward_function.reward_kwargs"
VERL_AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
"""the aggregation modes proofrl and verl 0.9.1 share, with the same numbers (``token-sum-norm`` is proofrl's only)"""
PASS = "verl."
"""``--set`` prefix for a verl key passed through verbatim"""


def _v(value: Any) -> str:
    """A value in Hydra's override grammar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_v(x) for x in value) + "]"
    return str(value)


def _mini_batch(cfg: GRPOConfig) -> list[str]:
    """verl counts mini-batches in prompts and multiplies by n; proofrl counts rows."""
    rows, g = cfg.ppo.minibatch_rows, cfg.rollout.group_size
    if rows is None:
        return [f"{ACTOR}.ppo_mini_batch_size={cfg.rollout.problems_per_step}"]
    if rows % g:
        raise ConfigError(
            f"ppo.minibatch_rows={rows} is not a multiple of rollout.group_size={g}: "
            "verl's mini-batches are whole groups"
        )
    return [f"{ACTOR}.ppo_mini_batch_size={rows // g}"]


def _agg_mode(mode: str) -> list[str]:
    if mode not in VERL_AGG_MODES:
        raise ConfigError(
            f"ppo.agg_mode={mode}: verl has no such loss_agg_mode; valid with --engine verl: {sorted(VERL_AGG_MODES)}"
        )
    return [f"{ACTOR}.loss_agg_mode={mode}"]


def _kl(cfg: GRPOConfig) -> list[str]:
    coef = cfg.ppo.kl_coef
    return [f"{ACTOR}.use_kl_loss={_v(coef > 0)}", f"{ACTOR}.kl_loss_coef={coef}"]


Rule = Callable[[Any, GRPOConfig], list[str]]
MAPPED: dict[str, Rule] = {
    "name": lambda v, c: [f"trainer.experiment_name={v}"],
    # the same trackers through verl's own: jsonl is verl's `file` logger (metrics as JSON lines)
    "logger": lambda v, c: [f"trainer.logger={_v(list(dict.fromkeys(['file', *(x for x in v if x != 'jsonl')])))}"],
    "steps": lambda v, c: [f"trainer.total_training_steps={v}"],
    "seed": lambda v, c: [f"data.seed={v}", f"{ROLLOUT}.seed={v}"],
    "out": lambda v, c: [f"trainer.default_local_dir={Path(v).resolve() / 'checkpoints'}"],
    "checkpoint_every": lambda v, c: [f"trainer.save_freq={v}"],
    "keep_checkpoints": lambda v, c: [f"trainer.max_actor_ckpt_to_keep={v}"],
    "optim.micro_batch": lambda v, c: [
        f"{ACTOR}.ppo_micro_batch_size_per_gpu={v}",
        f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu={v}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={v}",
    ],
    "model.path": lambda v, c: [f"actor_rollout_ref.model.path={v}"] if v else [],
    "model.lora.r": lambda v, c: [f"actor_rollout_ref.model.lora_rank={v}"],
    "model.lora.alpha": lambda v, c: [f"actor_rollout_ref.model.lora_alpha={v}"],
    "model.lora.target_modules": lambda v, c: [f"actor_rollout_ref.model.target_modules={_v(v)}"],
    "model.gradient_checkpointing": lambda v, c: [f"actor_rollout_ref.model.enable_gradient_checkpointing={_v(v)}"],
    "model.ref_device": lambda v, c: [f"actor_rollout_ref.ref.fsdp_config.param_offload={_v(v == 'cpu')}"],
    "rollout.problems_per_step": lambda v, c: [f"data.train_batch_size={v}"],
    "rollout.group_size": lambda v, c: [f"{ROLLOUT}.n={v}"],
    "rollout.temperature": lambda v, c: [f"{ROLLOUT}.temperature={v}"],
    "rollout.top_p": lambda v, c: [f"{ROLLOUT}.top_p={v}"],
    "rollout.max_tokens": lambda v, c: [f"data.max_response_length={v}"],
    "rollout.prompt_format": lambda v, c: [f"{KWARGS}.prompt_format={v}"],
    "rollout.gpu_memory_utilization": lambda v, c: [f"{ROLLOUT}.gpu_memory_utilization={v}"],
    "rollout.enforce_eager": lambda v, c: [f"{ROLLOUT}.enforce_eager={_v(v)}"],
    "rollout.error_correction.enabled": lambda v, c: (
        [
            f"{ROLLOUT}.agent.agent_loop_config_path={Path(__file__).with_name('agent_loops.yaml')}",
            f"{ROLLOUT}.agent.default_agent_loop=proofrl_error_correction",
        ]
        if v
        else []
    ),
    "reward.unlikeliness": lambda v, c: ["trainer.v1.trainer_mode=proofrl_unlikeliness"] if v is not None else [],
    "algorithm.advantage": lambda v, c: [
        "algorithm.adv_estimator=grpo",
        f"algorithm.norm_adv_by_std_in_grpo={_v(v == 'grpo')}",
    ],
    "algorithm.skip_uninformative": lambda v, c: (
        [f"algorithm.filter_groups.enable={_v(v)}"] + (["algorithm.filter_groups.metric=score"] if v else [])
    ),
    "ppo.epochs": lambda v, c: [f"{ACTOR}.ppo_epochs={v}"],
    "ppo.minibatch_rows": lambda v, c: _mini_batch(c),
    "ppo.clip_ratio_low": lambda v, c: [f"{ACTOR}.clip_ratio_low={v}"],
    "ppo.clip_ratio_high": lambda v, c: [f"{ACTOR}.clip_ratio_high={v}"],
    "ppo.clip_ratio_c": lambda v, c: [f"{ACTOR}.clip_ratio_c={v}"],
    "ppo.agg_mode": lambda v, c: _agg_mode(v),
    "ppo.kl_coef": lambda v, c: _kl(c),
    "ppo.kl_kind": lambda v, c: [f"{ACTOR}.kl_loss_type={v}"],
    # H is always a constant: the recipe's horizon or max_tokens, as the native trainer (verl's fallback, the
    # padded width of each micro-batch, would weigh a group by its neighbours' lengths)
    "ppo.horizon": lambda v, c: [f"{ACTOR}.loss_scale_factor={v if v is not None else c.rollout.max_tokens}"],
    "ppo.shuffle": lambda v, c: [f"{ACTOR}.shuffle={_v(v)}"],
    "optim.lr": lambda v, c: [f"{ACTOR}.optim.lr={v}"],
    "optim.weight_decay": lambda v, c: [f"{ACTOR}.optim.weight_decay={v}"],
    "optim.betas": lambda v, c: [f"{ACTOR}.optim.betas={_v(v)}"],
    "eval.every": lambda v, c: [f"trainer.test_freq={v if v > 0 else -1}"],
    "eval.samples": lambda v, c: [f"{ROLLOUT}.val_kwargs.n={v}", f"{ROLLOUT}.val_kwargs.do_sample=true"],
    "eval.temperature": lambda v, c: [f"{ROLLOUT}.val_kwargs.temperature={v}"],
    "eval.top_p": lambda v, c: [f"{ROLLOUT}.val_kwargs.top_p={v}"],
}
# Values verl has only in one form: accepted when they are that form, named otherwise.
ONLY = {"ppo.policy_loss": "dual-clip", "model.lora.dropout": 0.0}
VANILLA = [f"{ACTOR}.policy_loss.loss_mode=vanilla"]  # verl's vanilla loss is PPO-clip with dual-clip (clip_ratio_c)

CONSUMED = (
    "data.",  # which problems go into the parquet files
    "verify.",  # the reward function and agent loop read the recipe written beside the run
    "reward.format",
    "reward.unlikeliness.",  # UnlikelinessTrainer reads β_rank, convention and reduction from that recipe
    "rollout.error_correction.",  # max_*: the agent loop's limits, from that recipe; rate, cache_size: named above
)


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v and key not in MAPPED:
            out.update(_leaves(v, key + "."))
        else:
            out[key] = v
    return out


def _same(a: Any, b: Any) -> bool:
    return (list(a) if isinstance(a, (list, tuple)) else a) == (list(b) if isinstance(b, (list, tuple)) else b)


def verl_overrides(cfg: GRPOConfig, *, run_dir: Path) -> tuple[list[str], list[str]]:
    """``(overrides, unmapped)``: verl's Hydra overrides for ``cfg``, and one line per recipe key that is set
    away from proofrl's default and has no verl counterpart. Data and the resolved recipe are expected in
    ``run_dir`` (:func:`write_run_files`)."""
    from . import reward

    out = [
        # a full verl step generates with vLLM (or SGLang: --set verl.actor_rollout_ref.rollout.name=sglang)
        f"{ROLLOUT}.name=vllm",
        f"reward.custom_reward_function.path={reward.__file__}",
        "reward.custom_reward_function.name=compute_score",
        f"{KWARGS}.recipe={run_dir / 'recipe.yaml'}",
        f"data.train_files={run_dir / 'train.parquet'}",
        f"data.val_files={run_dir / ('val.parquet' if cfg.data.eval else 'train.parquet')}",
        *VANILLA,
    ]
    # verl's agent loop runs the second turn in the same trajectory for every failed sample (see
    # proofrl.verl.agent_loop): kimina's cache and its mixing rate have no counterpart, whatever their values
    ec = cfg.rollout.error_correction
    unmapped = (
        [f"rollout.error_correction.rate={ec.rate}", f"rollout.error_correction.cache_size={ec.cache_size}"]
        if ec.enabled
        else []
    )
    defaults = _leaves(GRPOConfig().to_dict())
    for key, value in _leaves(cfg.to_dict()).items():
        if key in MAPPED:
            out += MAPPED[key](value, cfg)
        elif key in ONLY:
            if not _same(value, ONLY[key]):
                unmapped.append(f"{key}={_v(value)}")
        elif any(key == p or key.startswith(p) for p in CONSUMED) or (key in defaults and _same(value, defaults[key])):
            continue
        else:
            unmapped.append(f"{key}={_v(value)}")
    return out, unmapped


def write_run_files(cfg: GRPOConfig, run_dir: Path) -> None:
    """The resolved recipe (read by the reward function, the agent loop and the unlikeliness trainer) and verl's
    parquet files: one row per problem, the prompt as chat messages, the problem record in ``extra_info``."""
    import yaml

    from ..data.splits import problem_set

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    d = cfg.data
    if not d.train:
        raise ConfigError("data.train is empty: give the problems (--set data.train=FILE.jsonl or coq-stdlib:train)")
    train = problem_set(d.train, split=d.split or None, limit=d.limit, max_proof_chars=d.max_proof_chars, seed=cfg.seed)
    _write_parquet(train, cfg.rollout.prompt_format, run_dir / "train.parquet")
    if d.eval:
        held = problem_set(
            d.eval, split=d.split or None, limit=d.eval_limit, max_proof_chars=d.max_proof_chars, seed=cfg.seed
        )
        _write_parquet(held, cfg.rollout.prompt_format, run_dir / "val.parquet")


def _write_parquet(problems: Sequence[Any], format_name: str, path: Path) -> None:
    import pandas as pd

    from ..policy.prompts import get_format

    fmt = get_format(format_name)
    rows = []
    for i, p in enumerate(problems):
        # verl renders every prompt through the tokenizer's chat template; a completion format's text is one user turn
        messages = fmt.messages(p) or [{"role": "user", "content": fmt.prompt(p)}]
        record = {
            "name": p.name,
            "header": p.header,
            "formal_statement": p.formal_statement,
            "backend": p.backend,
            "index": i,
        }
        rows.append(
            {
                "data_source": "proofrl",
                "prompt": messages,
                "ability": "theorem-proving",
                "reward_model": {"style": "rule", "ground_truth": ""},
                "extra_info": record,
            }
        )
    pd.DataFrame(rows).to_parquet(path)


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """``--set`` items for the recipe, and ``verl.KEY=VALUE`` items passed to verl as ``KEY=VALUE``."""
    ours, theirs = [], []
    for item in overrides:
        (theirs.append(item[len(PASS) :]) if item.startswith(PASS) else ours.append(item))
    return ours, theirs


def cli_launch(recipe: str, overrides: Sequence[str], *, dry_run: bool) -> None:
    """``proofrl train --engine verl``: print (``dry_run``) or write the run files and launch verl's trainer."""
    from . import require_verl

    ours, passthrough = split_overrides(overrides)
    cfg = load_recipe(recipe, ours)  # a wrong key is one ConfigError line before verl is even looked for
    run_dir = Path(cfg.out).resolve() / "verl"
    args, unmapped = verl_overrides(cfg, run_dir=run_dir)
    args += passthrough
    if not dry_run:  # a launch needs verl and a model; printing the overrides needs neither
        require_verl()
        if not cfg.model.path:
            raise ConfigError("model.path is empty: give the policy's local path (--set model.path=DIR)")
    for line in unmapped:
        print(f"proofrl train --engine verl: no verl counterpart, not applied: {line}", file=sys.stderr)
    if dry_run:
        print("\n".join(args))
        return
    write_run_files(cfg, run_dir)
    rc = subprocess.call([sys.executable, "-m", "proofrl.verl.main", *args])
    if rc:
        raise SystemExit(rc)
