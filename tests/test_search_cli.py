"""`proofrl search` end to end: a tiny tactic model taught here, real Coq, a fresh coqc for every `proved`."""

import json
import subprocess
import sys

import pytest
from conftest import requires_coq

from proofrl.policy.tactic import train_tiny_tactic_model

pytestmark = requires_coq

TRANSITIONS = [
    {"state_before": "⊢ True", "tactic": "exact I.", "structural": False},
    {"state_before": "b : bool\n⊢ negb (negb b) = b", "tactic": "destruct b; reflexivity.", "structural": False},
]
PROBLEMS = [
    {"name": "t_true", "header": "", "formal_statement": "Theorem t_true : True."},
    {"name": "t_negb", "header": "", "formal_statement": "Theorem t_negb (b : bool) : negb (negb b) = b."},
    {"name": "t_bad", "header": "", "formal_statement": "Theorem t_bad : undefined_thing."},
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tactic-model")
    train_tiny_tactic_model(
        TRANSITIONS,
        out,
        epochs=60,
        seed=0,
        lr=3e-3,
        batch=2,
        model={"hidden": 64, "layers": 2, "heads": 4, "vocab_size": 400},
    )
    return out


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "proofrl.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


@pytest.mark.parametrize("algorithm", ["best-first", "mcts"])
def test_search_proves_with_the_tiny_model_and_every_proof_passes_coqc(tmp_path, model_dir, algorithm):
    problems = tmp_path / "p.jsonl"
    problems.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    r = run(
        "search",
        str(problems),
        "--algorithm",
        algorithm,
        "--policy",
        f"hf:{model_dir}",
        "--out",
        str(tmp_path / "out"),
        "--width",
        "4",
        "--expansions",
        "4",
        "--max-steps",
        "8",
        "--threads",
        "1",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    results = {x["name"]: x for x in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    assert results["t_true"]["status"] == "proved" and results["t_negb"]["status"] == "proved"
    assert results["t_bad"]["status"] == "error"  # the statement does not elaborate; the others went on
    for name in ("t_true", "t_negb"):
        assert results[name]["verdict"]["status"] == "valid"
        assert (tmp_path / "out" / "trees" / f"{name}.json").exists()
    assert (tmp_path / "out" / "trace.jsonl").stat().st_size > 0
    # an independent check: the reported proofs through a fresh proofrl check (coqc final check) again
    from proofrl.provers.base import Theorem
    from proofrl.provers.coq.prover import CoqConfig, coqc_check

    for p in PROBLEMS[:2]:
        th = Theorem(p["name"], p["formal_statement"], "")
        assert coqc_check(th, results[p["name"]]["proof"], CoqConfig()).valid


def test_a_bad_policy_spec_is_one_line(tmp_path):
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps(PROBLEMS[0]) + "\n")
    r = run("search", str(problems), "--policy", "nonsense:x", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) <= 3, r.stderr
    r = run("search", str(problems), "--policy", "hf:/no/such/model", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "no model directory" in r.stderr


def test_search_through_an_openai_compatible_endpoint(tmp_path, model_dir):
    """The same tiny model served on loopback in the OpenAI completions shape (the tests' server, as vLLM would
    serve it); `proofrl search --policy openai:URL --model NAME --api-key KEY` proves with it."""
    from test_tactic_policy import KEY, policy_app, serve
    from typer.testing import CliRunner

    from proofrl.cli import app
    from proofrl.policy.model import load_policy

    srv_app, seen = policy_app(*load_policy(model_dir))
    url, stop = serve(srv_app)
    try:
        problems = tmp_path / "p.jsonl"
        problems.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS[:2]))
        r = CliRunner().invoke(
            app,
            [
                "search",
                str(problems),
                "--algorithm",
                "best-first",
                "--policy",
                f"openai:{url}",
                "--model",
                "tiny",
                "--api-key",
                KEY,
                "--out",
                str(tmp_path / "out"),
                "--width",
                "4",
                "--expansions",
                "4",
            ],
        )
        assert r.exit_code == 0, r.output
    finally:
        stop()
    results = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [x["status"] for x in results] == ["proved", "proved"]
    assert any(b.get("model") == "tiny" for b in seen)  # the proposals came from the endpoint


def test_a_policy_endpoint_that_is_not_there_is_one_line_and_exit_1(tmp_path):
    """Nothing listens at the URL: the search stops at its first theorem, writes it as ``error``, and says so in
    one line (exit status 1: the settings were fine, the run failed)."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    problems = tmp_path / "p.jsonl"
    problems.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS[:2]))
    out = tmp_path / "out"
    r = run("search", str(problems), "--algorithm", "best-first", "--policy", f"openai:http://127.0.0.1:{port}",
            "--model", "tiny", "--out", str(out))  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert lines[0].startswith("proofrl search: the policy failed; 1 of 2 theorems have results")
    assert "unreachable or died" in lines[0]
    (kept,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert kept["name"] == "t_true" and kept["status"] == "error"


def test_search_settings_are_overridden_with_set_and_a_bad_one_is_one_line(tmp_path):
    """``--set`` reaches the search (the tree records the settings it ran with; ``--set`` comes after the budget
    flags) and a bad key or value is one line naming it."""
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps(PROBLEMS[0]) + "\n")
    common = ("search", str(problems), "--policy", "auto:easy", "--algorithm", "best-first", "--seconds", "30")
    sets = ("--set", "alpha=0.5", "--set", "tactic_timeout=3", "--set", "seconds=20")
    r = run(*common, *sets, "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["proved"] == 1
    (tree,) = (tmp_path / "o" / "trees").iterdir()
    ran = json.loads(tree.read_text())["search"]["config"]
    assert (ran["alpha"], ran["tactic_timeout"], ran["seconds"], ran["width"]) == (0.5, 3, 20, 64)
    for bad, named in (("widht=2", "widht"), ("mcts.discount=2", "mcts.discount is discount"), ("nokey", "key")):
        r = run(*common, "--set", bad, "--out", str(tmp_path / "bad"))
        assert r.returncode != 0 and "Traceback" not in r.stderr and named in r.stderr, r.stderr
        assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) <= 3, r.stderr
