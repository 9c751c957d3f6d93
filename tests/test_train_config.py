"""Recipes load into typed configs; overrides and mistakes behave as a user expects."""

from __future__ import annotations

import pytest

from proofrl.train.config import ConfigError, TrainConfig, load_recipe, recipe_names, save_config


def test_every_shipped_recipe_loads():
    assert {"unlikeliness", "kimina", "deepseek-v1.5", "demo"} <= set(recipe_names())
    for name in recipe_names():
        cfg = load_recipe(name)
        assert isinstance(cfg, TrainConfig) and cfg.name == name


def test_recipes_carry_the_papers_hyperparameters():
    u = load_recipe("unlikeliness")
    assert (u.rollout.problems_per_step, u.rollout.group_size, u.algorithm.buffer_samples) == (16, 32, 256)
    assert (u.algorithm.ppo.epochs, u.algorithm.ppo.kl_coef, u.algorithm.ppo.skip_grad_norm) == (2, 0.1, 20.0)
    assert u.optim.lr == 1e-6 and u.reward.unlikeliness["beta_rank"] == 0.25
    k = load_recipe("kimina")
    assert k.algorithm.advantage == "dr_grpo" and k.algorithm.ppo.agg_mode == "seq-mean-token-sum-norm"
    assert (k.algorithm.ppo.clip_ratio_low, k.algorithm.ppo.clip_ratio_high, k.algorithm.ppo.kl_coef) == (0.2, 0.3, 0.0)
    assert k.rollout.group_size == 8 and k.rollout.error_correction.enabled and k.reward.format is not None
    d = load_recipe("deepseek-v1.5")
    assert (d.optim.lr, d.algorithm.ppo.kl_coef, d.rollout.group_size) == (5e-6, 0.02, 32)


def test_overrides_are_parsed_as_yaml_and_reach_nested_sections():
    cfg = load_recipe("demo", ["rollout.group_size=4", "eval.ks=[1, 2]", "algorithm.ppo.kl_coef=0", "out=x/y"])
    assert cfg.rollout.group_size == 4 and cfg.eval.ks == (1, 2) and cfg.out == "x/y"
    assert cfg.algorithm.ppo.kl_coef == 0.0 and isinstance(cfg.algorithm.ppo.kl_coef, float)
    assert load_recipe("demo", ["optim.lr=1e-3"]).optim.lr == 1e-3  # YAML 1.1 reads this as a string


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.grup_size=4", "unknown key"),
        ("steps=many", "expected int"),
        ("algorithm.ppo.epochs=1.5", "expected int"),
        ("rollout.error_correction.enabled=3", "true/false"),
        ("steps", "key.sub=value"),
    ],
)
def test_mistakes_are_named(override, message):
    with pytest.raises(ConfigError, match=message):
        load_recipe("demo", [override])


def test_unknown_recipe_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="unlikeliness"):
        load_recipe("no-such-recipe")


def test_saved_config_loads_back_identically(tmp_path):
    cfg = load_recipe("kimina", ["steps=3"])
    save_config(cfg, tmp_path / "c.yaml")
    assert load_recipe(tmp_path / "c.yaml") == cfg
