"""The EVA demo part runs alone through the real CLI at test size: Coq labels proposals, the tiny tactic model
learns L_SFT + α·L_EVA, the report holds the held-out metrics."""

from __future__ import annotations

import json

from conftest import requires_coq

# test size: one small stdlib module's short proofs (the search part's test assets), two theorems a side
ASSETS = dict(
    prefixes=("Coq.Bool.",),
    max_proof_chars=80,
    epochs=3,
    batch=16,
    lr=3e-3,
    held_out_theorems=3,
    model={"hidden": 64, "layers": 1, "heads": 4, "vocab_size": 400},
)
EVA = ["data.limit=2", "data.eval_limit=2", "search=null", "optim.epochs=1", "eval.max_tokens=16"]


@requires_coq
def test_the_eva_part_runs_alone_through_the_cli(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import proofrl.data.assets as assets
    import proofrl.demo.eva as part
    from proofrl.cli import app

    monkeypatch.setattr(assets, "SETTINGS", assets.AssetsConfig(**ASSETS))
    monkeypatch.setattr(part, "SETTINGS", [*part.SETTINGS, *EVA])
    r = CliRunner().invoke(app, ["demo", "--part", "eva", "--out", str(tmp_path), "--workers", "1"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "eva"
    assert (out / "table.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((out / "summary.json").read_text())
    assert list(json.loads((tmp_path / "summary.json").read_text())["parts"]) == ["eva"]
    held = [json.loads(x) for x in (out / "labels" / "held-out.jsonl").read_text().splitlines()]
    train = [json.loads(x) for x in (out / "labels" / "train.jsonl").read_text().splitlines()]
    assert held and train and {x["split"] for x in held} == {"held-out"} and {x["split"] for x in train} == {"train"}
    assert not {x["module"] for x in held} & {x["module"] for x in train}  # split by module
    assert {x["kind"] for x in train} == {"human", "other", "ghost", "broken"}
    for row in ("zero-shot", "eva-text", "eva"):
        m = summary["rows"][row]
        assert m["n"] == len(held) and set(m["mse"]) == {"logic", "align", "clarity"}
    assert summary["index"]["examples"] == len(train)
    report = (out / "report.md").read_text()
    assert "| EVA (E[R] over anchors) |" in report and "table.png" in report
