"""``proofrl train`` with vLLM rollouts on its CPU build: the whole-proof GRPO loop
(``proofrl.train.whole_proof.run``, what ``proofrl train`` runs) with ``rollout.generator: vllm``
for two steps on a taught tiny model, real Coq judging. vLLM samples every rollout, and after every update the
trained weights are pushed into the engine.

Skipped, naming the reason, where vLLM does not import or runs on an accelerator, and without Coq. One engine for the
module, in this process (what the loop sets up), ``enforce_eager``, a 1 GiB KV cache (the loop's CPU default).
Tolerance: ``ATOL`` of tests/test_vllm.py (fp32 on both sides through different kernels: measured ~2e-6).
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import requires_coq
from rl_support import build_taught_model, problems
from vllm_support import SKIP, engine_process

pytestmark = [pytest.mark.skipif(SKIP is not None, reason=SKIP or ""), requires_coq]

from proofrl.errors import ConfigError  # noqa: E402
from proofrl.policy import encode_prompts, load_policy, response_logprobs  # noqa: E402
from proofrl.policy.generation import VLLMGenerator  # noqa: E402
from proofrl.policy.prompts import get_format  # noqa: E402
from proofrl.problems import save_problems  # noqa: E402
from proofrl.train import whole_proof as run  # noqa: E402
from proofrl.train.config import load_recipe  # noqa: E402

ATOL = 1e-4
SMALL = [  # as tests/test_trainer.py
    "rollout.problems_per_step=4",
    "rollout.group_size=6",
    "rollout.max_tokens=24",
    "optim.lr=1e-3",
    "checkpoint_every=1",
    "optim.micro_batch=32",
    "verify.timeout=10",
    "verify.workers=1",
    "data.eval=",
    "rollout.generator=vllm",
    "rollout.enforce_eager=true",
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The taught tiny prover (two heads of 32: vLLM's CPU attention takes no head size 16) and its problems."""
    root = tmp_path_factory.mktemp("vllm-train")
    save_problems(problems(), root / "problems.jsonl")
    return build_taught_model(root / "model", heads=2), root / "problems.jsonl"


def test_an_engine_in_another_process_without_the_push_permission_is_one_line(inputs, monkeypatch):
    """Runs before the engine is built: nothing is built when the weight push could not reach the engine."""
    taught, data = inputs
    cfg = load_recipe("demo", [*SMALL, f"model.path={taught}", f"data.train={data}"])
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    monkeypatch.delenv("VLLM_ALLOW_INSECURE_SERIALIZATION", raising=False)
    with pytest.raises(ConfigError) as e:
        run.rollout_generator(cfg, *load_policy(taught))
    assert "VLLM_ALLOW_INSECURE_SERIALIZATION=1" in str(e.value) and "\n" not in str(e.value)


def test_a_model_the_cpu_build_cannot_run_is_one_line(inputs, tmp_path):
    """Heads of 16 (the demo's tactic model's shape): vLLM would load it and fail at its first step in a worker."""
    from proofrl.policy.tiny import build_tiny_model, sample_corpus

    path = build_tiny_model(tmp_path, sample_corpus(), vocab_size=300, hidden=64, heads=4)
    cfg = load_recipe("demo", [*SMALL, f"model.path={path}", f"data.train={inputs[1]}"])
    with pytest.raises(ConfigError) as e:
        run.rollout_generator(cfg, *load_policy(path))
    assert "attention heads of size 16" in str(e.value) and "\n" not in str(e.value)


@pytest.fixture(scope="module")
def trained(inputs, tmp_path_factory):
    """Two GRPO steps of the loop with vLLM rollouts (the engine's and the trainer's effects on this process given
    back when the module ends); the trainer and the run folder."""
    taught, data = inputs
    out = tmp_path_factory.mktemp("run")
    cfg = load_recipe("demo", [*SMALL, "steps=2", f"model.path={taught}", f"data.train={data}", f"out={out}"])
    with engine_process({}):
        yield run.run(cfg), out


def engine_logprobs(gen, prompt_ids, completion_ids):
    """The engine's raw log-probs of given completion tokens (``prompt_logprobs``: nothing is sampled)."""
    import vllm

    sp = vllm.SamplingParams(max_tokens=1, prompt_logprobs=0)
    reqs = [{"prompt_token_ids": p + c} for p, c in zip(prompt_ids, completion_ids, strict=True)]
    outs = gen.llm.generate(reqs, sp, use_tqdm=False)
    return [
        [d[t].logprob for d, t in zip(o.prompt_logprobs[len(p) :], c, strict=True)]
        for o, p, c in zip(outs, prompt_ids, completion_ids, strict=True)
    ]


def worst(engine, model, tok, prompt_ids, completion_ids):
    with torch.no_grad():
        logps, _ = response_logprobs(model.eval(), prompt_ids, completion_ids, pad_id=tok.pad_token_id)
    return max(abs(x - float(y)) for e, row in zip(engine, logps, strict=True) for x, y in zip(e, row, strict=False))


def test_train_with_vllm_rollouts_and_the_weight_push(trained, inputs):
    """Both steps sample with vLLM, update, log and checkpoint; afterwards the engine's log-probs of the taught
    proofs are the trained model's (to ATOL), and far from the starting model's, which an engine that missed the
    pushes would still give."""
    trainer, out = trained
    taught, _ = inputs
    assert isinstance(trainer.generator, VLLMGenerator)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["gen/tokens"] > 0 and sum(v for k, v in r.items() if k.startswith("verdicts/")) == 24 for r in rows)
    assert all(r.get("loss/steps", 0) > 0 for r in rows), rows  # an update (and so a push) in each step
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_000001", "step_000002"]
    saved, tok = load_policy(out / "checkpoints" / "step_000002")
    for (name, x), (_, y) in zip(saved.state_dict().items(), trainer.model.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0, msg=name)

    fmt = get_format("coq")
    probs = problems()
    prompt_ids = encode_prompts(tok, [fmt.prompt(p, tok) for p in probs])
    completion_ids = [tok(fmt.completion(p, p.proof), add_special_tokens=False)["input_ids"] for p in probs]
    engine = engine_logprobs(trainer.generator, prompt_ids, completion_ids)
    start, _ = load_policy(taught)
    pushed, stale = (worst(engine, m, tok, prompt_ids, completion_ids) for m in (trainer.model, start))
    print(f"engine vs trained model: {pushed:.2e}; vs the starting model: {stale:.2e}")
    assert pushed < ATOL
    assert stale > 100 * ATOL
