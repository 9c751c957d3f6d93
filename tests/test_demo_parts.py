"""Each demo part runs alone through the real CLI (here: the search part, at test size), and an unknown part is
one line on stderr with exit code 2."""

from __future__ import annotations

import json

from conftest import requires_coq

# test size: one small stdlib module's short proofs, a tiny model taught for a few epochs, 3 held-out theorems
ASSETS = dict(
    prefixes=("Coq.Bool.",),
    max_proof_chars=80,
    epochs=3,
    batch=16,
    lr=3e-3,
    held_out_theorems=3,
    model={"hidden": 64, "layers": 1, "heads": 4, "vocab_size": 400},
)
SEARCH = dict(expansions=2, width=2, tactic_timeout=2.0)


def test_an_unknown_part_is_one_line_and_exit_2(tmp_path):
    from typer.testing import CliRunner

    from proofrl.cli import app

    r = CliRunner().invoke(app, ["demo", "--part", "nope", "--out", str(tmp_path)])
    assert r.exit_code == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "'nope' is not a demo part" in lines[0] and "search" in lines[0], r.stderr
    assert not any(tmp_path.iterdir())  # nothing ran


@requires_coq
def test_the_search_part_runs_alone_through_the_cli(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import proofrl.data.assets as assets
    import proofrl.demo.search as part
    from proofrl.cli import app
    from proofrl.provers.base import Theorem
    from proofrl.provers.coq.prover import CoqConfig, coqc_check

    monkeypatch.setattr(assets, "SETTINGS", assets.AssetsConfig(**ASSETS))
    monkeypatch.setattr(part, "THEOREMS", 3)
    monkeypatch.setattr(part, "SETTINGS", part.equal_budget(**SEARCH))
    r = CliRunner().invoke(app, ["demo", "--part", "search", "--out", str(tmp_path), "--workers", "1"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "search"
    for name in ("report.md", "summary.json", "proved.png", "proved_vs_budget.png"):
        assert (out / name).is_file(), name
    assert (out / "proved.png").read_bytes()[:4] == b"\x89PNG"
    top = json.loads((tmp_path / "summary.json").read_text())
    assert list(top["parts"]) == ["search"]  # only this part ran
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["engines"]) == {"best-first", "mcts"}
    held = assets.tactic_assets(tmp_path).held_out_problems  # the same settings: loaded, not built again
    by_name = {p.name: p for p in held}
    for engine, e in summary["engines"].items():
        lines = [json.loads(x) for x in (out / engine / "results.jsonl").read_text().splitlines()]
        assert sorted(x["name"] for x in lines) == sorted(by_name) and e["theorems"] == 3
        assert e["proved"] == sum(x["status"] == "proved" for x in lines)
        assert all(x["expansions"] <= SEARCH["expansions"] for x in lines)  # the equal budget held
        for name, proof in e["proofs"].items():  # every reported proof passes an independent coqc again
            p = by_name[name]
            assert coqc_check(Theorem(p.name, p.formal_statement, p.header), proof, CoqConfig()).valid
    report = (out / "report.md").read_text()
    assert "best-first" in report and "mcts" in report and "proved.png" in report
    # the policy is the k-NN memory of the training proofs beside the model: both propose in the searches' trees
    memory = json.loads((tmp_path / "tactic-assets" / "memory" / "manifest.json").read_text())
    assert memory["pairs"] > 0 and memory["online"] == 0
    sources = {
        e["source"]
        for engine in summary["engines"]
        for tree in (out / engine / "trees").glob("*.json")
        for e in _edges(json.loads(tree.read_text()))
    }
    assert {"knn", "hf"} <= {part for s in sources for part in s.split("+")}, sources
    assert json.loads((tmp_path / "tactic-assets" / "ready.json").read_text())["settings"]["epochs"] == 3


@requires_coq
def test_tactic_assets_are_rebuilt_only_when_their_settings_change(tmp_path):
    """``ready.json`` records the settings; other settings mean other assets (a stale model is never reused)."""
    import proofrl.data.assets as assets

    s = assets.AssetsConfig(**(ASSETS | {"limit": 8}))
    assert assets.built_settings(tmp_path) is None
    a = assets.tactic_assets(tmp_path, settings=s)
    assert assets.built_settings(tmp_path) == s  # what a later run passes to load them whatever the defaults
    stamp = (a.model_dir / "model.safetensors").stat().st_mtime_ns
    assert assets.tactic_assets(tmp_path, settings=s).build == a.build
    assert (a.model_dir / "model.safetensors").stat().st_mtime_ns == stamp  # loaded, not taught again
    b = assets.tactic_assets(tmp_path, settings=assets.AssetsConfig(**(ASSETS | {"limit": 8, "epochs": 2})))
    assert b.build["settings"]["epochs"] == 2 and len(b.build["losses"]) == 2
    assert (b.model_dir / "model.safetensors").stat().st_mtime_ns != stamp


def _edges(tree):
    """Every mapping in an exported tree that names the policy source of its tactic."""
    if isinstance(tree, dict):
        if "source" in tree:
            yield tree
        for v in tree.values():
            yield from _edges(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from _edges(v)
