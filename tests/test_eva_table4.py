"""The EVA paper's Table 4 as an experiment (``proofrl eval rm --train T --base B``): every model of the table
trained from one real tiny Llama and scored on held-out records; the value-head baseline learns."""

from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from proofrl.bench.eva_table4 import RegressionHeadRM, train_value_head
from proofrl.cli import app
from proofrl.eval.rm import Record, prompt_of
from proofrl.rewards.eva import render_target

torch.set_num_threads(2)


def _records(n: int) -> list[Record]:
    good, bad = {"logic": 4.6, "align": 4.2, "clarity": 4.8}, {"logic": 1.5, "align": 1.8, "clarity": 2.2}
    return [
        Record(
            f"n : nat\n⊢ n + {i} = {i} + n",
            "lia." if i % 2 else "apply foo.",
            "Coq accepted the step." if i % 2 else "Coq rejected the step.",
            good if i % 2 else bad,
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from proofrl.policy.tiny import build_tiny_model

    d = tmp_path_factory.mktemp("table4-tiny")
    texts = [prompt_of(r) + render_target(r.critique, r.scores) for r in _records(16)] * 4
    build_tiny_model(d, texts, vocab_size=400, hidden=32, layers=1, heads=2, max_positions=512, seed=0)
    return d


def test_table4_trains_and_scores_every_row(tiny, tmp_path):
    data = tmp_path / "records.jsonl"
    data.write_text(
        "".join(
            json.dumps({"state": r.state, "proposal": r.proposal, "critique": r.critique, "scores": r.scores}) + "\n"
            for r in _records(6)
        )
    )
    out = tmp_path / "t4"
    res = CliRunner().invoke(
        app,
        [
            "eval",
            "rm",
            "--data",
            str(data),
            "--train",
            str(data),
            "--base",
            str(tiny),
            "--epochs",
            "1",
            "--max-new-tokens",
            "8",
            "--threads",
            "2",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["rows"]) == ["zero-shot", "sft-text", "sft-eR", "value-head", "eva-text", "eva"]
    assert summary["train"] == summary["held_out"] == 6 and summary["index"]["examples"] == 6
    assert all(math.isfinite(v) for v in summary["rows"]["value-head"]["mse"].values())
    assert (out / "eva-model" / "adapter_config.json").is_file() and (out / "report.md").is_file()
    one = CliRunner().invoke(app, ["eval", "rm", "--data", str(data), "--train", str(data)])
    assert one.exit_code != 0 and "needs both --train" in one.output


def test_the_value_head_baseline_learns_the_scores(tiny):
    from proofrl.policy.model import load_policy

    torch.manual_seed(0)
    m, tok = load_policy(tiny, device="cpu")
    rm = RegressionHeadRM(m, tok)
    records = _records(8)
    target = torch.tensor([[r.scores[d] for d in rm.dims] for r in records])

    def mse() -> float:
        pred = torch.tensor([[p[d] for d in rm.dims] for p in rm.predict(records)])
        return float(((pred - target) ** 2).mean())

    before = mse()
    hist = train_value_head(rm, records, lr=1e-3, batch=4, epochs=3)
    assert len(hist) == 3 and mse() < before
