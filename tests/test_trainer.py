"""The whole-proof GRPO trainer with a real tiny model and real Coq: steps, logging, checkpoints, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from rl_support import build_taught_model, problems

from proofrl.policy.generation import HFGenerator
from proofrl.policy.model import load_policy
from proofrl.policy.prompts import get_format
from proofrl.problems import save_problems
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig
from proofrl.train.config import load_recipe
from proofrl.train.whole_proof import ProblemSampler, Trainer, pad_rows
from proofrl.verification import Verifier

pytestmark = pytest.mark.skipif(not __import__("shutil").which("coqidetop.opt"), reason="needs Coq")

SMALL = [
    "rollout.problems_per_step=4",
    "rollout.group_size=6",
    "rollout.max_tokens=24",
    "rollout.chunk_prompts=2",
    "optim.lr=1e-3",
    "checkpoint_every=1",
    "optim.micro_batch=32",
    "verify.timeout=10",
]


@pytest.fixture(scope="module")
def taught(tmp_path_factory) -> Path:
    return build_taught_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def verifier():
    pool = make_pool("coq", pool=PoolConfig(workers=2, timeout=10))
    v = Verifier(pool)
    yield v
    v.close()
    pool.close()


def _trainer(cfg, taught, verifier) -> Trainer:
    model, tok = load_policy(taught, device="cpu")
    return Trainer(cfg, model, tok, HFGenerator(model, tok, batch_size=32), verifier, problems())


def test_sampler_resumes_the_same_sequence():
    a = ProblemSampler(5, seed=3)
    first = a.take(7)
    state = a.state_dict()
    rest = a.take(9)
    b = ProblemSampler(5, seed=3)
    b.load_state_dict(state)
    assert b.take(9) == rest
    assert sorted(first[:5]) == list(range(5))  # an epoch visits every problem once


def test_pad_rows():
    assert pad_rows([[1.0, 2.0], [3.0, 4.0]], 3).tolist() == [[1, 2, 0], [3, 4, 0]]
    assert pad_rows(torch.ones(1, 4), 2).shape == (1, 2)


def test_steps_verify_update_and_log(tmp_path, taught, verifier):
    cfg = load_recipe("demo", [*SMALL, "steps=2", f"out={tmp_path}"])
    tr = _trainer(cfg, taught, verifier)
    before = {k: v.clone() for k, v in tr.model.state_dict().items()}
    tr.fit()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert 0.0 <= r["valid/turn1"] <= 1.0 and r["gen/tokens"] > 0
        assert sum(v for k, v in r.items() if k.startswith("verdicts/")) == 4 * 6
    # The taught model solves some samples but not all, so groups are informative and updates run.
    assert any(r.get("loss/steps", 0) > 0 for r in rows), rows
    changed = any(not torch.equal(before[k], v) for k, v in tr.model.state_dict().items())
    assert changed
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_000001", "step_000002"]
    assert (tmp_path / "tb").is_dir() and (tmp_path / "config.yaml").exists()


def test_unlikeliness_changes_the_shaped_reward(tmp_path, taught, verifier):
    cfg = load_recipe("demo", [*SMALL, "steps=1", f"out={tmp_path}", "reward.unlikeliness={beta_rank: 0.25}"])
    tr = _trainer(cfg, taught, verifier)
    m = tr.fit()[0].metrics
    assert m.get("loss/steps", 0) > 0, "no informative group in this step"
    # Every correct sample loses between β/G and β of its reward, so the shaped mean is strictly lower.
    raw, shaped = m["reward/update_raw_mean"], m["reward/update_shaped_mean"]
    assert raw * (1 - 0.25) <= shaped < raw


def _run_cli(recipe: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "proofrl.cli", "train", "--recipe", str(recipe), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


@pytest.mark.slow
def test_killed_run_resumes_and_matches_an_uninterrupted_one(tmp_path, taught):
    """`proofrl train` killed with SIGKILL after a checkpoint, then rerun, ends where an unkilled run ends."""
    data = tmp_path / "problems.jsonl"
    save_problems(problems(), data)
    recipe = load_recipe(
        "demo", [*SMALL, "steps=3", f"model.path={taught}", f"data.train={data}", "data.eval=", "verify.workers=1"]
    ).to_dict()
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))

    full = _run_cli(path, tmp_path / "full")
    killed = _run_cli(path, tmp_path / "killed")
    deadline = time.monotonic() + 240
    while not (tmp_path / "killed" / "checkpoints" / "step_000001" / "state.pt").exists():
        assert killed.poll() is None, killed.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    resumed = _run_cli(path, tmp_path / "killed")
    for p in (full, resumed):
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out
    steps = [json.loads(line)["step"] for line in (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]  # each step logged once, even the one that was running when killed
    a, _ = load_policy(tmp_path / "full" / "checkpoints" / "step_000003", device="cpu")
    b, _ = load_policy(tmp_path / "killed" / "checkpoints" / "step_000003", device="cpu")
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, msg=name)


def test_error_correction_turn_feeds_failures_back(tmp_path, taught, verifier):
    """kimina's second turn: failed proofs come back as prompts that quote Coq's error, mixed into batches."""
    cfg = load_recipe(
        "demo",
        [
            *SMALL,
            "steps=2",
            f"out={tmp_path}",
            "rollout.error_correction.enabled=true",
            "rollout.error_correction.rate=0.5",
        ],
    )
    tr = _trainer(cfg, taught, verifier)
    records = tr.fit()
    first = records[0].metrics
    assert first["correction/added"] > 0 and "valid/turn2" not in first
    second = records[1].metrics
    assert "valid/turn2" in second  # with 4 slots at rate 0.5, P(no second-turn slot) = 1/16 for this seed
    item = tr.cache.state_dict()["items"][0]
    assert item.turn == 2 and item.prompt == item.messages  # a completion format: the second turn is plain text
    first_prompt = get_format("coq").prompt(item.problem, tr.tokenizer)
    assert item.prompt.startswith(first_prompt) and len(item.prompt) > len(first_prompt)
    assert "Error" in item.prompt[len(first_prompt) :]


def test_resume_with_a_non_empty_buffer_equals_an_uninterrupted_run(tmp_path, taught, verifier):
    """A run stopped after step 1 with samples waiting in the buffer (``buffer_samples`` > 0), then resumed by a
    fresh trainer from its checkpoint, ends with the weights and metrics of a run that was never stopped."""
    over = [*SMALL, "algorithm.buffer_samples=8"]  # about one informative group of 6 a step: step 1 only buffers
    full = _trainer(load_recipe("demo", [*over, "steps=3", f"out={tmp_path / 'full'}"]), taught, verifier)
    whole = {r.step: r.metrics for r in full.fit()}
    assert any(m.get("loss/steps", 0) > 0 for m in whole.values()), "no update ran: the test would prove nothing"
    first = _trainer(load_recipe("demo", [*over, "steps=1", f"out={tmp_path / 'cut'}"]), taught, verifier)
    first.fit()
    state = torch.load(tmp_path / "cut" / "checkpoints" / "step_000001" / "state.pt", weights_only=False)
    assert state["buffer"]["num_samples"] > 0 and state["buffer"]["items"]
    resumed = _trainer(load_recipe("demo", [*over, "steps=3", f"out={tmp_path / 'cut'}"]), taught, verifier)
    rest = {r.step: r.metrics for r in resumed.fit()}
    assert sorted(rest) == [2, 3]
    for step, m in rest.items():
        untimed = lambda d: {k: v for k, v in d.items() if not k.startswith(("time/", "gen/tokens_per_s"))}  # noqa: E731
        assert untimed(m) == untimed(whole[step]), step
    for (name, x), (_, y) in zip(full.model.state_dict().items(), resumed.model.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0, msg=name)
