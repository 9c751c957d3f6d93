"""``proofrl eval search``: the provers benchmark's rows through the command line, on real Coq.

One run on two smoke theorems with the cheap rows (two automation tactics and their combination; best-first
search with an untaught tiny model and the automation added), its report files checked against each other
and every proof it reports rechecked by a fresh ``coqc``; bad input as one line and exit status 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import requires_coq

from proofrl.eval.provers import hammer_says, proof_kind, proofs_by_source, smoke_problems

CLI = [sys.executable, "-m", "proofrl.cli", "eval", "search"]


def _smoke_file(folder: Path) -> Path:
    path = folder / "smoke.jsonl"
    path.write_text("".join(json.dumps(p.to_json()) + "\n" for p in smoke_problems()))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    """One CLI run: rows a and d, 2 theorems, 3 s each, one at a time."""
    from proofrl.policy.tiny import build_tiny_model, sample_corpus

    d = tmp_path_factory.mktemp("eval-search")
    model = build_tiny_model(d / "tiny", sample_corpus(), vocab_size=512, hidden=32, layers=1, heads=2)
    out = d / "out"
    argv = [
        *CLI,
        str(_smoke_file(d)),
        "--rows",
        "a,d",
        "--tactics",
        "lia,intuition",
        "--engines",
        "best-first",
        "--seconds",
        "3",
        "--workers",
        "1",
        "--width",
        "2",
        "--policy",
        f"hf:{model}",
        "--out",
        str(out),
    ]
    r = subprocess.run(argv, cwd=d, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, r


@requires_coq
def test_the_report_files_agree_with_each_other(run):
    out, r = run
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    want = ["(a) lia", "(a) intuition", "(a) best combination", "(d) best-first + automation"]
    assert list(summary["rows"]) == want
    for row, t in summary["rows"].items():
        mine = [x for x in records if x["row"] == row]
        assert sorted(x["name"] for x in mine) == ["smoke_nat", "smoke_r"]
        assert t["theorems"] == 2
        assert t["proved"] == sum(x["proved"] for x in mine)
        assert t["proved_names"] == sorted(x["name"] for x in mine if x["proved"])
        assert t["cpu_s"] == pytest.approx(sum(x["cpu_s"] for x in mine), abs=0.01)
        for x in mine:
            assert x["wall_s"] > 0 and x["cpu_s"] >= 0
            assert x["proved"] == (x["final_check"] == "valid") == bool(x["proof"])
    assert summary["rows"]["(a) best combination"]["script"].startswith("intros; solve [ timeout 1 ")
    d = summary["rows"]["(d) best-first + automation"]
    assert sum(d["proof_kinds"].values()) == d["proved"]
    report = (out / "report.md").read_text()
    assert "proofrl eval search" in report and "--rows a,d" in report  # the command that made it
    for row, t in summary["rows"].items():
        assert f"| {row} | {t['proved']}/2 |" in report
        assert row in r.stdout  # the console table


@requires_coq
def test_every_reported_proof_passes_a_fresh_coqc(run):
    from proofrl.eval.provers import AUTOMATION_HEADER, HAMMER_TACTICS_HEADER, hammer_installed, with_header
    from proofrl.provers.coq.prover import CoqConfig, coqc_check

    out, _ = run
    problems = {p.name: p for p in smoke_problems()}
    proved = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    proved = [x for x in proved if x["proved"]]
    assert proved, "intuition proves smoke_nat: some row must have proved something"
    header = AUTOMATION_HEADER + (HAMMER_TACTICS_HEADER if hammer_installed() else "")
    for x in proved:
        th = with_header(problems[x["name"]], header).theorem
        assert coqc_check(th, x["proof"], CoqConfig(timeout=30)).valid, x


@pytest.mark.parametrize(
    "args, env, words",
    [
        (["nosuch:set"], {}, "give a JSONL file"),
        (["{smoke}", "--rows", "a,x"], {}, "valid: a, b, c, d"),
        (["{smoke}", "--engines", "dfs"], {}, "valid: best-first, mcts"),
        (["{smoke}", "--rows", "c", "--policy", "hf:/no/such/model"], {}, "hf:DIR"),
        (["{smoke}:valid"], {}, "no problems"),
        (["{smoke}", "--rows", "b"], {"COQLIB": "{empty}"}, "scripts/setup.sh"),  # a Coq without CoqHammer
        (["coq-stdlib-files:2", "--rows", "a,c"], {}, "do not run in file order"),
        (["coq-stdlib-files:two"], {}, "coq-stdlib-files:N"),
    ],
    ids=["unknown-set", "bad-row", "bad-engine", "no-model", "empty-split", "no-coqhammer", "files-c", "files-n"],
)
@requires_coq
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, env, words):
    import os

    smoke, empty = _smoke_file(tmp_path), tmp_path / "empty-coqlib"
    empty.mkdir()
    fill = lambda s: s.format(smoke=smoke, empty=empty)  # noqa: E731
    r = subprocess.run(
        [*CLI, *map(fill, args), "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        env={**os.environ, **{k: fill(v) for k, v in env.items()}},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("proofrl eval search: ") and words in lines[0], lines[0]
    assert not (tmp_path / "out").exists()  # nothing ran


def test_hammer_output_names_the_atp_and_the_replacement():
    printed = (  # what CoqHammer 1.3.2 printed proving length (l1 ++ l2) = length (l2 ++ l1) here
        "Replace the hammer tactic with:\n\tscongruence use: app_length, Nat.add_comm.\n"
    )
    assert hammer_says("CVC4 (nbayes-128) succeeded\n- dependencies: a, b\n" + printed) == (
        "CVC4 (nbayes-128)",
        "scongruence use: app_length, Nat.add_comm.",
    )
    assert hammer_says("Replace the hammer tactic with: sfirstorder") == ("", "sfirstorder")  # no ATP ran


def test_proof_kind_tells_automation_from_the_model():
    auto = ("intros; lia.", "intros; sauto.")
    assert proof_kind("intros; lia.", auto) == "one automation tactic at the root"
    assert proof_kind("intro n.\nintros; lia.", auto) == "model + automation"
    assert proof_kind("intro n.\n{\n  reflexivity.\n}", auto) == "model"


def test_with_no_rows_every_row_runs_and_b_and_j_only_with_coqhammer(monkeypatch):
    from proofrl.eval import search_command
    from proofrl.eval.library import FILE_ROWS
    from proofrl.eval.provers import ALL_ROWS

    monkeypatch.setattr(search_command, "hammer_installed", lambda: True)
    assert search_command.default_rows(False) == ALL_ROWS == ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k")
    assert search_command.default_rows(True) == FILE_ROWS
    monkeypatch.setattr(search_command, "hammer_installed", lambda: False)
    without = search_command.default_rows(False)
    assert {"b", "j"}.isdisjoint(without) and len(without) == 9


def test_proofs_by_source_count_each_source_once_per_proof():
    """A step that two sources proposed (``knn+auto``) and a proof with several steps of one source count each
    source once: the combination is a set."""
    proved = [
        {"proved": True, "proof_sources": {"knn": 2, "sauto": 1}},
        {"proved": True, "proof_sources": {"knn+auto": 1, "knn": 1, "sauto": 1}},
        {"proved": True, "proof_sources": {"sauto": 1}},
        {"proved": False, "proof_sources": {}},
    ]
    assert proofs_by_source(proved) == {"knn+sauto": 1, "auto+knn+sauto": 1, "sauto": 1}
