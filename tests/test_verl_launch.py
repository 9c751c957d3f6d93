"""``proofrl train --engine verl``: a recipe's overrides compose with verl's real config and pass verl's own checks
(its dataclasses and ``validate_config``); a key with no verl counterpart is named; mistakes are one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from proofrl.cli import app
from proofrl.train.config import load_recipe
from proofrl.verl.launch import verl_overrides


def _dry(*args: str):
    res = CliRunner().invoke(app, ["train", "--engine", "verl", "--dry-run", *args])
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize("recipe", ["kimina", "unlikeliness"])
def test_overrides_are_accepted_by_verls_config_schema(recipe: str, tmp_path: Path) -> None:
    pytest.importorskip("verl", reason='verl is not installed (the distributed extra: pip install -e ".[distributed]")')
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl_support import compose_verl

    cfg = load_recipe(recipe, ["model.path=/models/policy"])
    overrides, _ = verl_overrides(cfg, run_dir=tmp_path)
    config = compose_verl(overrides)
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    algorithm = omega_conf_to_dataclass(config.algorithm)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))

    g = cfg.rollout.group_size
    assert config.data.train_batch_size == cfg.rollout.problems_per_step and rollout.n == g
    assert actor.ppo_mini_batch_size * g == cfg.ppo.minibatch_rows  # verl counts prompts, proofrl rows
    assert actor.loss_agg_mode == cfg.ppo.agg_mode and actor.clip_ratio_high == cfg.ppo.clip_ratio_high
    assert actor.use_kl_loss == (cfg.ppo.kl_coef > 0) and actor.kl_loss_coef == cfg.ppo.kl_coef
    assert (
        actor.optim.lr == cfg.optim.lr and algorithm.filter_groups.enable and algorithm.filter_groups.metric == "score"
    )
    assert rollout.val_kwargs.n == cfg.eval.samples and rollout.val_kwargs.top_p == cfg.eval.top_p
    assert actor.loss_scale_factor == cfg.rollout.max_tokens  # Dr.GRPO's constant H, as the native trainer's
    assert config.reward.custom_reward_function.reward_kwargs.prompt_format == cfg.rollout.prompt_format
    if recipe == "kimina":  # Dr.GRPO: no std normalisation; the error-correction agent loop
        assert algorithm.norm_adv_by_std_in_grpo is False
        assert rollout.agent.default_agent_loop == "proofrl_error_correction"
        assert Path(rollout.agent.agent_loop_config_path).is_file()
    else:  # the unlikeliness trainer, and plain GRPO
        assert config.trainer.v1.trainer_mode == "proofrl_unlikeliness" and algorithm.norm_adv_by_std_in_grpo is True
        assert actor.kl_loss_type == "low_var_kl"


def test_keys_without_a_verl_counterpart_are_named() -> None:
    code, out, err = _dry(
        "--recipe",
        "unlikeliness",
        "--set",
        "ppo.policy_loss=ppo-clip",
        "--set",
        "verl.trainer.n_gpus_per_node=4",
    )
    assert code == 0, err
    named = [line.split("not applied: ")[1] for line in err.splitlines() if "no verl counterpart" in line]
    assert named == [
        "algorithm.buffer_samples=256",
        "ppo.policy_loss=ppo-clip",
        "ppo.skip_grad_norm=20.0",
        "eval.ks=[1,8,32,128,512]",
        "eval.max_tokens=1024",
    ]
    lines = out.splitlines()
    assert "actor_rollout_ref.rollout.n=32" in lines and "data.train_batch_size=16" in lines
    assert lines[-1] == "trainer.n_gpus_per_node=4"  # --set verl.KEY passes through, last so it wins
    code, _, err = _dry("--recipe", "kimina")
    assert "not applied: rollout.error_correction.rate=0.5" in err  # the agent loop has no cache to mix from
    engine = [
        "rollout.gpu_memory_utilization=0.3",
        "rollout.enforce_eager=true",
        "rollout.kv_cache_gib=2",
    ]
    code, out, err = _dry("--recipe", "kimina", *(a for s in engine for a in ("--set", s)))
    assert {
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
        "actor_rollout_ref.rollout.enforce_eager=true",
    } <= set(out.splitlines())
    assert "not applied: rollout.kv_cache_gib=2.0" in err  # verl sizes its KV cache by the share alone


def test_an_unknown_key_is_one_line() -> None:
    code, _, err = _dry("--recipe", "kimina", "--set", "ppo.skip_gradnorm=5")
    assert code == 2
    assert err.strip() == (
        "proofrl train: unknown keys in ppo: ['skip_gradnorm']; known: ['agg_mode', 'clip_ratio_c', "
        "'clip_ratio_high', 'clip_ratio_low', 'epochs', 'horizon', 'kl_coef', 'kl_kind', 'max_grad_norm', "
        "'minibatch_rows', 'policy_loss', 'shuffle', 'skip_grad_norm']"
    )
    code, _, err = _dry("--recipe", "kimina", "--set", "ppo.minibatch_rows=12")
    assert code == 2 and "minibatch_rows=12 is not a multiple of rollout.group_size=8" in err


def test_without_verl_the_launch_names_the_install_command(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "verl", None)  # `import verl` now fails as on a machine without the extra
    assert _dry("--recipe", "kimina")[0] == 0  # printing the overrides needs no verl
    res = CliRunner().invoke(app, ["train", "--engine", "verl", "--recipe", "kimina", "--set", "model.path=/m"])
    assert res.exit_code == 2
    assert res.stderr.strip() == 'proofrl train: verl is not installed here (verl): pip install -e ".[distributed]"'


def test_run_files_are_read_by_verls_dataset(tmp_path: Path) -> None:
    """The parquet rows the launch writes come out of verl's RLHFDataset as chat prompts with the problem record
    in ``extra_info``, which the reward function reads back into the same problem."""
    pytest.importorskip("verl", reason='verl is not installed (the distributed extra: pip install -e ".[distributed]")')
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl_support import compose_verl, tiny_model

    from proofrl.policy.prompts import get_format
    from proofrl.problems import load_problems
    from proofrl.verl.launch import write_run_files
    from proofrl.verl.reward import problem_of

    sample = Path(__file__).parents[1] / "proofrl" / "data" / "bundled" / "coq_sample.jsonl"
    cfg = load_recipe(
        "kimina", [f"data.train={sample}", "data.limit=3", "rollout.prompt_format=kimina-coq", "verify.backend=coq"]
    )
    write_run_files(cfg, tmp_path)
    assert load_recipe(str(tmp_path / "recipe.yaml")) == cfg  # what the reward function and agent loop read
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model(tmp_path / "model"))
    data = compose_verl([f"data.train_files={tmp_path / 'train.parquet'}", "data.max_prompt_length=2048"]).data
    rows = RLHFDataset(str(tmp_path / "train.parquet"), tok, data)
    problems = load_problems(sample, limit=3)
    assert len(rows) == 3
    for i, p in enumerate(problems):
        row = rows[i]
        assert list(row["raw_prompt"]) == get_format("kimina-coq").messages(p)
        assert problem_of(row["extra_info"]) == p.__class__(
            name=p.name, formal_statement=p.formal_statement, header=p.header, backend=p.backend
        )


def test_dr_grpos_horizon_is_always_a_constant_for_verl() -> None:
    """verl falls back to each micro-batch's padded width when ``loss_scale_factor`` is missing: it is emitted
    whether or not the recipe sets ``horizon`` (then the rollout's ``max_tokens``, the native trainer's H)."""
    code, out, err = _dry("--recipe", "kimina", "--set", "rollout.max_tokens=96")
    assert code == 0, err
    assert "actor_rollout_ref.actor.loss_scale_factor=96" in out.splitlines()
    code, out, _ = _dry("--recipe", "kimina", "--set", "ppo.horizon=40")
    assert "actor_rollout_ref.actor.loss_scale_factor=40" in out.splitlines()
    code, _, err = _dry("--recipe", "kimina", "--set", "ppo.agg_mode=token-sum-norm")
    assert code == 2 and err.strip().startswith("proofrl train: ppo.agg_mode=token-sum-norm: verl has no such")


def test_the_logger_list_becomes_verls_trainer_logger() -> None:
    code, out, err = _dry("--recipe", "kimina", "--set", "logger=[tensorboard,wandb,mlflow]")
    assert code == 0, err
    assert "trainer.logger=[file,tensorboard,wandb,mlflow]" in out.splitlines()  # jsonl is verl's file logger
    assert "logger" not in err
