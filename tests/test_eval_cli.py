"""`proofrl eval` on a real tiny model with real Coq: pass@k by both estimators, unique proofs, uplift, report."""

from __future__ import annotations

import json
import shutil

import pytest
from rl_support import build_taught_model, problems
from typer.testing import CliRunner

from proofrl.cli import app
from proofrl.eval.evaluate import EvalResult, ProblemResult, markdown_table
from proofrl.problems import save_problems

needs_coq = pytest.mark.skipif(not shutil.which("coqidetop.opt"), reason="needs Coq")


def test_pass_at_table_uses_both_estimators():
    res = EvalResult(
        "m",
        [
            ProblemResult("a", [True, False, False, False], ["valid"] + ["error"] * 3, 1),
            ProblemResult("b", [False] * 4, ["error"] * 4, 0),
        ],
        ks=(1, 2, 4, 3),
    )
    tab = res.table()
    assert tab[1]["unbiased"] == pytest.approx(0.125)  # (1/4 + 0) / 2
    assert tab[4]["unbiased"] == pytest.approx(0.5) and tab[4]["chunked"] == pytest.approx(0.5)
    assert tab[2]["chunked"] == pytest.approx(0.25) and tab[2]["chunked_std"] == pytest.approx(0.25)
    assert "chunked" not in tab[3]  # 3 does not divide 4 attempts: the chunked estimate is undefined
    assert "| m |" in markdown_table({"m": res}) and "1/2" in markdown_table({"m": res})


@needs_coq
def test_eval_command_reports_and_measures_uplift(tmp_path):
    model = build_taught_model(tmp_path, epochs=30)
    data = tmp_path / "p.jsonl"
    save_problems(problems(), data)
    out = tmp_path / "eval"
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            str(model),
            "--problems",
            str(data),
            "-n",
            "8",
            "--ks",
            "1,8",
            "--max-tokens",
            "24",
            "--timeout",
            "10",
            "--baseline",
            str(model),
            "--out",
            str(out),
            "--threads",
            "1",
        ],
    )
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    ev = summary["eval"]
    assert ev["problems"] == 8 and ev["samples_per_problem"] == 8
    assert set(ev["pass_at"]) == {"1", "8"}
    assert 0 < ev["pass_at"]["1"]["unbiased"] <= ev["pass_at"]["8"]["unbiased"] <= 1
    assert ev["solved"] >= 1 and ev["unique_valid_proofs"] >= ev["solved"]
    assert sum(ev["verdicts"].values()) == 64
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 64 and {"name", "completion", "proof", "status"} <= set(json.loads(lines[0]))
    # Against itself a model uplifts nothing: the same log-probs are recomputed for the same samples.
    up = summary["uplift"]
    assert len(up["rates"]) == 8 and sum(up["counts"]) == summary["baseline"]["verdicts"].get("valid", 0) > 0
    assert all(r == 0.0 for r, c in zip(up["rates"], up["counts"], strict=True) if c)
    assert (out / "pass_at_k.png").stat().st_size > 0 and (out / "uplift.png").exists()
    assert "pass@8" in (out / "report.md").read_text()


def test_eval_rejects_more_than_512_samples(tmp_path):
    r = CliRunner().invoke(app, ["eval", "--model", str(tmp_path), "--problems", "x.jsonl", "-n", "513"])
    assert r.exit_code != 0 and "512" in r.output
