"""`proofrl demo`, scaled down: every stage runs for real (stdlib data, tiny model, SFT, GRPO, Coq, report)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from proofrl.demo.whole_proof import demo_config, demo_problems, run_demo

needs_coq = pytest.mark.skipif(not shutil.which("coqidetop.opt"), reason="needs Coq")


@needs_coq
def test_held_out_theorems_come_from_modules_never_trained_on():
    train, held = demo_problems(demo_config(["data.eval_limit=20"]))
    assert len(held) == 20 and len(train) > 200
    assert not {p.module for p in train} & {p.module for p in held}
    assert all(p.proof and len(p.proof) <= 60 for p in train)


@needs_coq
@pytest.mark.slow
def test_demo_runs_end_to_end_and_reports(tmp_path):
    cfg = demo_config(
        [
            f"out={tmp_path}",
            "data.eval_limit=6",
            "steps=1",
            "rollout.problems_per_step=4",
            "rollout.group_size=4",
            "eval.samples=8",
            "eval.ks=[1, 8]",
            "rollout.max_tokens=24",
            "eval.max_tokens=24",
        ]
    )
    summary = run_demo(cfg, sft_epochs=2, model={"hidden": 64, "layers": 1, "heads": 4, "vocab_size": 512})
    assert set(summary["eval"]) == {"SFT (before RL)", "after grpo", "after grpo-unlikeliness"}
    for ev in summary["eval"].values():
        assert ev["problems"] == 6 and ev["samples_per_problem"] == 8 and set(ev["pass_at"]) == {"1", "8"}
        assert sum(ev["verdicts"].values()) == 48
    for run in ("grpo", "grpo-unlikeliness"):
        rows = [json.loads(x) for x in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [1]
        assert (tmp_path / run / "checkpoints" / "step_000001").is_dir()
    assert json.loads((tmp_path / "summary.json").read_text())["timings"]["total_s"] > 0
    assert summary["verify"] == {"backend": "coq", "workers": 2, "timeout": 10.0}  # the demo recipe's, not 60 s
    # what the numbers depend on besides the settings, and how near a verdict came to the time limit
    assert summary["environment"] == {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }
    assert all(ev["slowest_verdict_s"] > 0 for ev in summary["eval"].values())
    for run in ("grpo", "grpo-unlikeliness"):
        row = json.loads((tmp_path / run / "metrics.jsonl").read_text().splitlines()[0])
        assert row["run/threads"] == torch.get_num_threads() and row["verify/limit_s"] == 10.0
    report = (tmp_path / "report.md").read_text()
    assert "pass@8" in report and "grpo-unlikeliness" in report
    for png in ("pass_at_k.png", "train_valid.png", "uplift.png"):
        assert (tmp_path / png).stat().st_size > 1000


@pytest.mark.parametrize(("overrides", "timeout"), [((), 10.0), (("verify.timeout=7",), 7.0)])
def test_demo_judges_with_the_recipes_verifier_and_its_timeout(monkeypatch, tmp_path, overrides, timeout):
    """The demo's verifier is the recipe's (``make_verifier``): its timeout, not 60 s, and closed at the end."""
    import proofrl.demo.whole_proof as demo
    import proofrl.train.whole_proof as run

    made = []

    def spy(cfg):
        made.append(real(cfg))
        return made[-1]

    class Stop(Exception):
        pass

    def stop(cfg, **_):
        raise Stop

    real = run.make_verifier
    monkeypatch.setattr(run, "make_verifier", spy)
    monkeypatch.setattr(demo, "demo_problems", stop)
    with pytest.raises(Stop):
        run_demo(demo_config([f"out={tmp_path}", "verify.workers=1", *overrides]))
    (verifier,) = made
    assert verifier.timeout == timeout and verifier.pool.config.timeout == timeout
    assert verifier.pool.config.workers == 1
    assert verifier.pool._closed  # closed even though the demo failed
