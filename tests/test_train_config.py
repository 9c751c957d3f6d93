"""Recipes load into typed configs; overrides and mistakes behave as a user expects."""

from __future__ import annotations

import pytest

from proofrl.train.config import ConfigError, GRPOConfig, load_recipe, recipe_names


def test_every_shipped_recipe_loads():
    """Whole-proof recipes through ``load_recipe``; recipes of another loop (reap, leanlistener, eva) through their
    loop's own schema (``--show-config``), and ``load_recipe`` names the command instead of a schema error."""
    from typer.testing import CliRunner

    from proofrl.cli import app
    from proofrl.train.recipes import loop_for

    assert {"unlikeliness", "kimina", "deepseek-v1.5", "demo", "reap", "leanlistener", "eva"} <= set(recipe_names())
    for name in recipe_names():
        loop = loop_for(name)
        if loop.name == "grpo":  # whole-proof GRPO, registered like the others
            cfg = load_recipe(name)
            assert isinstance(cfg, GRPOConfig) and cfg.name == name
            continue
        with pytest.raises(ConfigError, match=f"proofrl train --recipe {name}"):
            load_recipe(name)
        shown = CliRunner().invoke(app, ["train", "--recipe", name, "--show-config"])
        assert shown.exit_code == 0, shown.output
        assert f"loop: {loop.name}" in shown.output, name


def test_recipes_carry_the_papers_hyperparameters():
    u = load_recipe("unlikeliness")
    assert (u.rollout.problems_per_step, u.rollout.group_size, u.algorithm.buffer_samples) == (16, 32, 256)
    assert (u.ppo.epochs, u.ppo.kl_coef, u.ppo.skip_grad_norm) == (2, 0.1, 20.0)
    assert u.optim.lr == 1e-6 and u.reward.unlikeliness["beta_rank"] == 0.25
    k = load_recipe("kimina")
    assert k.algorithm.advantage == "dr_grpo" and k.ppo.agg_mode == "seq-mean-token-sum-norm"
    assert (k.ppo.clip_ratio_low, k.ppo.clip_ratio_high, k.ppo.kl_coef) == (0.2, 0.3, 0.0)
    assert k.rollout.group_size == 8 and k.rollout.error_correction.enabled and k.reward.format is not None
    d = load_recipe("deepseek-v1.5")
    assert (d.optim.lr, d.ppo.kl_coef, d.rollout.group_size) == (5e-6, 0.02, 32)


def test_overrides_are_parsed_as_yaml_and_reach_nested_sections():
    cfg = load_recipe("demo", ["rollout.group_size=4", "eval.ks=[1, 2]", "ppo.kl_coef=0", "out=x/y"])
    assert cfg.rollout.group_size == 4 and cfg.eval.ks == (1, 2) and cfg.out == "x/y"
    assert cfg.ppo.kl_coef == 0.0 and isinstance(cfg.ppo.kl_coef, float)
    assert load_recipe("demo", ["optim.lr=1e-3"]).optim.lr == 1e-3  # YAML 1.1 reads this as a string


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.grup_size=4", "unknown key"),
        ("steps=many", "expected int"),
        ("ppo.epochs=1.5", "expected int"),
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
    from proofrl.train.rundir import RunDir

    cfg = load_recipe("kimina", ["steps=3"])
    RunDir(tmp_path, loggers=()).start(cfg)  # the run folder's config.yaml
    assert load_recipe(tmp_path / "config.yaml") == cfg


def test_one_config_error_class():
    import proofrl.errors
    import proofrl.rewards.compose

    assert ConfigError is proofrl.errors.ConfigError and issubclass(ConfigError, ValueError)
    with pytest.raises(proofrl.errors.ConfigError, match=r"reward.unlikeliness.beta_rank must be in \[0, 1\], got 2"):
        load_recipe("demo", ["reward.unlikeliness.beta_rank=2"])
    with pytest.raises(proofrl.errors.ConfigError, match=r"beta_rank must be in \[0, 1\], got 2"):
        proofrl.rewards.compose.UnlikelinessConfig(beta_rank=2)


def test_keys_of_the_update_path_and_their_defaults():
    from proofrl.objectives.grpo import PPOConfig

    cfg = load_recipe("demo")
    ppo, model = cfg.ppo, cfg.model
    assert (ppo.clip_ratio_c, ppo.max_grad_norm, ppo.horizon) == (3.0, 1.0, None)
    assert (model.gradient_checkpointing, model.ref_device, model.dtype) == (False, "same", "auto")
    cfg = load_recipe(
        "demo",
        [
            "ppo.clip_ratio_c=10",
            "ppo.max_grad_norm=null",
            "ppo.horizon=48",
            "model.gradient_checkpointing=true",
            "model.ref_device=cpu",
            "model.dtype=bfloat16",
        ],
    )
    assert (cfg.ppo.clip_ratio_c, cfg.ppo.max_grad_norm, cfg.ppo.horizon) == (
        10.0,
        None,
        48,
    )
    assert (cfg.model.gradient_checkpointing, cfg.model.ref_device, cfg.model.dtype) == (True, "cpu", "bfloat16")
    # the recipe's ppo section is the settings ppo_update takes, not a copy of them
    kimina = load_recipe("kimina").ppo
    assert type(kimina) is PPOConfig and kimina.agg_mode == "seq-mean-token-sum-norm"
    assert kimina.clip_ratio_high == 0.3


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("reward.unlikeliness.beta_rank=2", r"reward.unlikeliness.beta_rank must be in \[0, 1\], got 2"),
        (
            "ppo.agg_mode=mean",
            r"ppo.agg_mode must be one of \[.*'token-mean', 'token-sum-norm'\], got 'mean'",
        ),
        ("ppo.kl_kind=k9", r"ppo.kl_kind must be one of \[.*'low_var_kl'.*\], got 'k9'"),
        ("algorithm.advantage=ppo", r"algorithm.advantage must be one of \['dr_grpo', 'grpo'\], got 'ppo'"),
        ("rollout.generator=hf2", r"rollout.generator must be one of \['hf', 'vllm', 'openai'\], got 'hf2'"),
        ("rollout.generator=openai", r"rollout: generator=openai needs base_url"),
        ("ppo.policy_loss=clip", r"ppo.policy_loss must be one of \[.*'dual-clip'.*\], got 'clip'"),
        ("rollout.prompt_format=lean", r"rollout.prompt_format must be one of \[.*'coq'.*\], got 'lean'"),
        ("verify.backend=isabelle", r"verify.backend must be one of \['coq', 'lean'\], got 'isabelle'"),
        ("model.ref_device=gpu", r"model.ref_device must be one of \['same', 'cpu'\], got 'gpu'"),
        ("ppo.clip_ratio_c=1", r"ppo.clip_ratio_c must be > 1, got 1"),
        ("ppo.max_grad_norm=0", r"ppo.max_grad_norm must be > 0, got 0"),
        ("rollout.top_p=1.5", r"rollout.top_p must be in \(0, 1\], got 1.5"),
        ("rollout.group_size=0", r"rollout.group_size must be >= 1, got 0"),
        ("optim.betas=[0.9, 1.0]", r"optim.betas\[1\] must be < 1, got 1.0"),
        ("verify.timeout=0", r"verify.timeout must be > 0, got 0"),
        ("eval.ks=[1, 8", r"override 'eval.ks=\[1, 8': the value is not YAML"),
    ],
)
def test_every_enumeration_and_range_is_checked_at_load(override, message):
    with pytest.raises(ConfigError, match=message) as e:
        load_recipe("demo", [override])
    assert "\n" not in str(e.value)


def test_each_loop_reads_its_own_keys_of_the_shared_components():
    """A component is defined once; a loop refuses the keys of it that it does not read (naming the ones it does),
    and a section given in part keeps the loop's own defaults for the rest."""
    from proofrl.train.recipes import LOOPS

    with pytest.raises(ConfigError, match=r"unknown keys in data: \['assets'\]; the grpo loop reads: \[.*'train'"):
        load_recipe("demo", ["data.assets=somewhere"])  # a step-level key on the whole-proof loop
    with pytest.raises(ConfigError, match=r"unknown keys in rollout: \['overlap'\]; the step-grpo loop reads"):
        LOOPS["step-grpo"].config("leanlistener", ["rollout.overlap=true"])
    # a recipe written for the earlier per-loop schemas is told where its keys went
    with pytest.raises(ConfigError, match=r"\(algorithm.ppo is now ppo\)"):
        load_recipe("demo", ["algorithm.ppo.epochs=2"])
    with pytest.raises(ConfigError, match=r"\(rollout.batch_states is now rollout.problems_per_step\)"):
        LOOPS["step-grpo"].config("leanlistener", ["rollout.batch_states=4"])
    step = LOOPS["step-grpo"].config(None, ["optim.lr=1e-5"])  # no recipe: the loop's own defaults
    assert (step.optim.lr, step.optim.weight_decay, step.optim.micro_batch) == (1e-5, 0.0, 32)
    assert (step.ppo.kl_coef, step.ppo.agg_mode, step.rollout.group_size) == (0.04, "seq-mean-token-mean", 8)
    eva = LOOPS["eva"].config(None, ["model.lora.r=8"])
    assert eva.model.lora.r == 8 and "gate_proj" in eva.model.lora.target_modules
    # what a loop writes down is what it reads, and it loads back equal
    saved = step.to_dict()
    assert set(saved["optim"]) == {"lr", "weight_decay", "micro_batch"} and "batch" not in saved["optim"]
    assert LOOPS["step-grpo"].config(None, [f"optim.lr={saved['optim']['lr']}"]) == step
    from proofrl.schema import validate
    from proofrl.train.config import StepGRPOConfig

    assert validate(StepGRPOConfig, saved) == step
