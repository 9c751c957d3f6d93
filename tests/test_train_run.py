"""train/run.py wires a recipe into parts; the rollout generator comes from the one factory in policy/."""

from __future__ import annotations

import pytest

import proofrl.policy.generation as generation
import proofrl.train.run as run
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
    cfg = load_recipe("demo", [f"rollout.generator={kind}", "rollout.base_url=http://127.0.0.1:9", "model.path=/m"])
    model, tok = object(), object()
    gen, sync = run.rollout_generator(cfg, model, tok)
    assert gen.kind == kind and sync == gen.sync_weights
    expected = {
        "hf": {"model": model, "tokenizer": tok, "batch_size": cfg.rollout.generation_batch},
        "vllm": {"path": "/m"},
        "openai": {"base_url": "http://127.0.0.1:9", "model": "/m", "tokenizer": tok},
    }[kind]
    assert gen.kw == expected


def test_the_update_micro_batch_does_not_change_the_generation_batch(monkeypatch):
    """``micro_batch`` is a memory knob of the update; the HF generation batch (which changes the sampled
    rollouts) is ``rollout.generation_batch`` alone."""
    monkeypatch.setitem(generation.GENERATORS, "hf", lambda **kw: _Made("hf", **kw))
    sizes = {
        mb: run.rollout_generator(
            load_recipe("demo", [f"micro_batch={mb}", "rollout.generation_batch=24"]), object(), object()
        )[0].kw["batch_size"]
        for mb in (1, 64)
    }
    assert sizes == {1: 24, 64: 24}
    assert load_recipe("demo").rollout.generation_batch == 256  # the demo's generation, as before the knob
