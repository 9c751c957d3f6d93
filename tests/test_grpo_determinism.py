"""A seeded whole-proof GRPO run does not depend on when its verdicts come back, and its thread count is a
setting it records and honours.

The verifier here is a stand-in with a fixed rule (no Coq), so that the only thing that differs between two runs
is the order and timing in which verdicts are delivered: each chunk's future is resolved late and out of order,
and within a chunk the items are judged in a shuffled order with random pauses."""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
import torch
from rl_support import build_taught_model, problems

from proofrl.policy.generation import HFGenerator
from proofrl.policy.model import load_policy
from proofrl.provers.base import Status, Verdict
from proofrl.train.config import load_recipe
from proofrl.train.whole_proof import Trainer, set_threads, verdict_metrics

SMALL = [
    "rollout.problems_per_step=4",
    "rollout.group_size=6",
    "rollout.max_tokens=24",
    "rollout.chunk_prompts=1",
    "rollout.overlap=true",
    "optim.lr=1e-3",
    "checkpoint_every=10",
    "optim.micro_batch=32",
    "logger=[jsonl]",
]


def judge(proof: str | None) -> Verdict:
    """A fixed rule that passes some samples of each group and fails others."""
    if proof is None:
        return Verdict(Status.REJECTED, ("no proof",))
    return Verdict(Status.VALID if len(proof) % 2 == 0 else Status.ERROR, seconds=0.01)


class ScrambledVerifier:
    """The verifier's interface; with ``scramble``, every batch is judged in a shuffled order with pauses, and
    the batches of a step are resolved from other threads in reverse order of submission (the last one first)."""

    timeout = 10.0

    def __init__(self, scramble: bool, seed: int = 0):
        self.scramble, self.rng = scramble, random.Random(seed)
        self.submitted = 0

    def verify(self, items):
        order = list(range(len(items)))
        out: list[Verdict | None] = [None] * len(items)
        if self.scramble:
            self.rng.shuffle(order)
        for i in order:
            if self.scramble:
                time.sleep(self.rng.random() * 0.003)
            out[i] = judge(items[i][1])
        return out

    def submit(self, items) -> Future:
        fut: Future = Future()
        verdicts = self.verify(items)
        if not self.scramble:
            fut.set_result(verdicts)
            return fut
        self.submitted += 1
        later = max(0.0, 0.2 - 0.04 * (self.submitted % 4)) + self.rng.random() * 0.01
        threading.Timer(later, fut.set_result, (verdicts,)).start()
        return fut

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def taught(tmp_path_factory) -> Path:
    return build_taught_model(tmp_path_factory.mktemp("model"), epochs=20)


def _run(taught: Path, out: Path, verifier: ScrambledVerifier, *extra: str) -> tuple[list[dict], dict]:
    cfg = load_recipe("demo", [*SMALL, "steps=2", f"out={out}", *extra])
    set_threads(cfg)
    model, tok = load_policy(taught, device="cpu")
    Trainer(cfg, model, tok, HFGenerator(model, tok, batch_size=32), verifier, problems()).fit()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows, {k: v.clone() for k, v in model.state_dict().items()}


def _untimed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/") and k != "gen/tokens_per_s"} for r in rows]


def test_verdicts_delivered_late_and_out_of_order_give_the_same_run(tmp_path, taught):
    threads = torch.get_num_threads()
    try:
        rows_a, weights_a = _run(taught, tmp_path / "in-order", ScrambledVerifier(scramble=False))
        rows_b, weights_b = _run(taught, tmp_path / "scrambled", ScrambledVerifier(scramble=True))
    finally:
        torch.set_num_threads(threads)
    assert [r["step"] for r in rows_a] == [1, 2]
    assert any(r.get("loss/steps", 0) > 0 for r in rows_a), "no update ran: the check would be empty"
    assert 0 < sum(r["verdicts/valid"] for r in rows_a) < 2 * 4 * 6  # the rule passed some samples, not all
    assert _untimed(rows_a) == _untimed(rows_b)
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)


def test_the_thread_count_is_a_setting_the_run_honours_and_logs(tmp_path, taught):
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)  # another count than the run's, so only the run's setting can make it 1
        rows, _ = _run(taught, tmp_path / "one", ScrambledVerifier(scramble=False), "threads=1")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    assert [r["run/threads"] for r in rows] == [1.0, 1.0]
    assert "threads: 1" in (tmp_path / "one" / "config.yaml").read_text()
    assert load_recipe("demo").threads == 0  # torch's choice unless the run sets it


def test_a_step_says_how_near_its_verdicts_came_to_the_time_limit():
    got = verdict_metrics([Verdict(Status.VALID, seconds=0.5), Verdict(Status.ERROR, seconds=8.6)], 10.0)
    assert got == {
        "verdicts/timeout": 0.0,
        "verdicts/valid": 1.0,
        "verdicts/error": 1.0,
        "time/verify_slowest_s": 8.6,
        "verify/limit_s": 10.0,
    }
    timed_out = verdict_metrics([Verdict(Status.TIMEOUT, ("timeout after 10s",), seconds=10.0)], 10.0)
    assert timed_out["verdicts/timeout"] == 1.0 and timed_out["time/verify_slowest_s"] == 10.0


def test_proofrl_demo_passes_its_thread_count_to_the_whole_proof_runs(monkeypatch, tmp_path):
    """``proofrl demo --threads N`` is a setting of the GRPO runs (their config.yaml, the demo's runs.jsonl)."""
    from typer.testing import CliRunner

    import proofrl.demo
    import proofrl.preflight
    from proofrl.cli import app

    got: dict = {}
    monkeypatch.setattr(proofrl.preflight, "require_backend", lambda *a, **k: None)
    monkeypatch.setattr(proofrl.demo, "run_parts", lambda *a, **kw: got.update(kw))
    threads = torch.get_num_threads()
    try:
        r = CliRunner().invoke(app, ["demo", "--part", "whole-proof", "--out", str(tmp_path), "--threads", "1"])
    finally:
        torch.set_num_threads(threads)
    assert r.exit_code == 0, r.output
    overrides = got["whole_proof"]["overrides"]
    assert "threads=1" in overrides
    assert load_recipe("demo", overrides).threads == 1
