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
        "hf": {"model": model, "tokenizer": tok, "batch_size": cfg.micro_batch * 4},
        "vllm": {"path": "/m"},
        "openai": {"base_url": "http://127.0.0.1:9", "model": "/m", "tokenizer": tok},
    }[kind]
    assert gen.kw == expected
