"""train/whole_proof.py wires a recipe into parts; the rollout generator comes from the one factory in policy/."""

from __future__ import annotations

import sys

import pytest
import torch

import proofrl.policy.generation as generation
import proofrl.train.whole_proof as run
from proofrl.errors import ConfigError
from proofrl.train.config import load_recipe


class _Made:
    def __init__(self, kind, **kw):
        self.kind, self.kw = kind, kw

    def sync_weights(self, model):
        self.synced = model


@pytest.mark.parametrize("kind", ["hf", "vllm", "openai"])
def test_the_rollout_generator_comes_from_policy_make_generator(monkeypatch, kind):
    assert not hasattr(run, "make_generator")  # one factory: proofrl.policy.generation.make_generator
    for name in ("hf", "vllm", "openai"):
        monkeypatch.setitem(generation.GENERATORS, name, lambda _n=name, **kw: _Made(_n, **kw))
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # what the vllm generator sets where vLLM imports
    cfg = load_recipe("demo", [f"rollout.generator={kind}", "rollout.base_url=http://127.0.0.1:9", "model.path=/m"])
    model, tok = torch.nn.Linear(2, 2), object()  # fp32 weights: the update computes in fp32
    gen, sync = run.rollout_generator(cfg, model, tok)
    assert gen.kind == kind and sync == gen.sync_weights
    vllm = {"path": "/m", "dtype": "float32", "seed": 0, "gpu_memory_utilization": 0.5, "enforce_eager": False}
    expected = {
        "hf": {"model": model, "tokenizer": tok, "batch_size": cfg.rollout.generation_batch},
        # vLLM's CPU build: a KV cache of 1 GiB, not a share of RAM that the trainer's own memory is taken from
        "vllm": {**vllm, "kv_cache_memory_bytes": 2**30} if generation.vllm_on_cpu() else vllm,
        "openai": {"base_url": "http://127.0.0.1:9", "model": "/m", "tokenizer": tok},
    }[kind]
    assert gen.kw == expected


def test_the_vllm_engine_follows_the_update_precision_and_the_recipe(monkeypatch):
    """The engine samples in the dtype the update computes in (bf16 asked for, or bf16 weights under ``auto``) and
    takes the rollout's vLLM memory and compilation settings."""
    bf16 = load_recipe("demo", ["model.path=/m", "model.dtype=bfloat16", "seed=3"])
    fp32 = torch.nn.Linear(2, 2)
    assert run.vllm_engine_options(bf16, fp32)["dtype"] == "bfloat16"
    assert run.vllm_engine_options(load_recipe("demo"), torch.nn.Linear(2, 2).to(torch.bfloat16))["dtype"] == "bfloat16"
    assert run.vllm_engine_options(bf16, fp32)["seed"] == 3
    sets = ["rollout.gpu_memory_utilization=0.2", "rollout.kv_cache_gib=0.5"]
    sets.append("rollout.enforce_eager=true")
    options = run.vllm_engine_options(load_recipe("demo", sets), fp32)
    assert options["gpu_memory_utilization"] == 0.2 and options["kv_cache_memory_bytes"] == 2**29
    assert options["enforce_eager"] is True and options["dtype"] == "float32"
    with pytest.raises(ConfigError, match=r"rollout\.gpu_memory_utilization"):
        load_recipe("demo", ["rollout.gpu_memory_utilization=1.5"])


def test_without_vllm_the_vllm_generator_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` fails, as where the extra is not installed
    cfg = load_recipe("demo", ["rollout.generator=vllm", "model.path=/m"])
    with pytest.raises(ConfigError) as e:
        run.rollout_generator(cfg, torch.nn.Linear(2, 2), object())
    msg = str(e.value)
    assert msg.startswith("rollout.generator=vllm: ") and "pip install 'proofrl[gpu]'" in msg and "\n" not in msg


def test_the_update_micro_batch_does_not_change_the_generation_batch(monkeypatch):
    """``optim.micro_batch`` is a memory knob of the update; the HF generation batch (which changes the sampled
    rollouts) is ``rollout.generation_batch`` alone."""
    monkeypatch.setitem(generation.GENERATORS, "hf", lambda **kw: _Made("hf", **kw))
    sizes = {
        mb: run.rollout_generator(
            load_recipe("demo", [f"optim.micro_batch={mb}", "rollout.generation_batch=24"]), object(), object()
        )[0].kw["batch_size"]
        for mb in (1, 64)
    }
    assert sizes == {1: 24, 64: 24}
    assert load_recipe("demo").rollout.generation_batch == 256  # the demo's generation, as before the knob
