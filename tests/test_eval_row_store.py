"""``proofrl eval search`` resumes: a finished row is kept on disk with the run's key and not run again.

Real Coq on the two smoke theorems, row (a) with one tactic: a first run writes ``OUT/rows``; a rerun with the
same settings keeps every row without starting a prover (its ``one_shot`` replaced by one that fails the test),
and its records match the first run's; other settings, or a damaged row file, run the row again.
"""

from __future__ import annotations

import json

import pytest
from conftest import requires_coq

import proofrl.eval.provers as provers
from proofrl.eval.provers import RowsConfig, run_rows, smoke_problems

pytestmark = requires_coq


def _rows(out, seconds=3.0, said=None, transitions=()):
    settings = RowsConfig(rows=("a",), seconds=seconds, workers=1, tactics=("auto",))
    say = said.append if said is not None else print
    return run_rows(smoke_problems(), settings, out, progress=False, say=say, transitions=transitions)


def _never(*args, **kwargs):
    raise AssertionError("a kept row started a prover")


def test_a_finished_row_is_kept_and_other_settings_run_it_again(tmp_path, monkeypatch) -> None:
    first = _rows(tmp_path)
    assert [r.name for r in first] == ["(a) auto", "(a) best combination"]
    assert sorted(p.name for p in (tmp_path / "rows").iterdir()) == ["_a__auto.json", "_a__best_combination.json"]
    records = (tmp_path / "results.jsonl").read_text()

    monkeypatch.setattr(provers, "one_shot", _never)
    said: list[str] = []
    again = _rows(tmp_path, said=said)
    assert [(r.name, r.results, r.wall) for r in again] == [(r.name, r.results, r.wall) for r in first]
    assert all("kept_from" in r.notes for r in again)
    assert sum("kept from the run that finished it" in s for s in said) == 2
    assert (tmp_path / "results.jsonl").read_text() == records  # the report's records, as the first run wrote them
    settings = RowsConfig(rows=("a",), seconds=3.0, workers=1, tactics=("auto",))
    provers.write_report(tmp_path, again, label="smoke", settings=settings, command="c", load={"before": 0, "after": 0})
    assert "Kept from an earlier run" in (tmp_path / "report.md").read_text()

    with pytest.raises(AssertionError, match="kept row started a prover"):  # another budget: another run
        _rows(tmp_path, seconds=4.0)


def test_a_damaged_row_file_runs_the_row_again(tmp_path) -> None:
    first = _rows(tmp_path)
    (tmp_path / "rows" / "_a__auto.json").write_text('{"format": 1, "key": ')  # cut mid-write
    said: list[str] = []
    again = _rows(tmp_path, said=said)
    assert any("cannot be read" in s for s in said)
    assert [r.proved for r in again] == [r.proved for r in first]
    assert "kept_from" not in again[0].notes and "kept_from" in again[1].notes
    assert json.loads((tmp_path / "rows" / "_a__auto.json").read_text())["row"]["name"] == "(a) auto"


def test_the_key_holds_the_memory_the_premises_and_the_prover(tmp_path, monkeypatch) -> None:
    """A memory of the same size with one tactic changed, or other premises, is another key; the prover's version
    is in it; and a run given another memory runs its rows again."""
    from proofrl.eval.row_store import run_key
    from proofrl.provers.coq.prover import coq_version

    step = {"module": "M", "theorem": "M.t", "state_before": "⊢ True", "tactic": "exact I."}
    other = {**step, "tactic": "auto."}
    settings = RowsConfig(rows=("a",))
    key = run_key(smoke_problems(), settings, memory=[step])
    assert key == run_key(smoke_problems(), settings, memory=[dict(step)])
    assert key["prover"] == coq_version() and key["memory_pairs"] == 1
    assert key != run_key(smoke_problems(), settings, memory=[other])
    premises = {"M": [("M.t", "Lemma t : True.")]}
    with_premises = run_key(smoke_problems(), settings, memory=[step], premises=premises)
    assert with_premises != key
    assert with_premises != run_key(
        smoke_problems(), settings, memory=[step], premises={"M": [("M.t", "Lemma t : 1 = 1.")]}
    )

    _rows(tmp_path, transitions=[step])
    monkeypatch.setattr(provers, "one_shot", _never)
    _rows(tmp_path, transitions=[step])  # the same memory: kept
    said: list[str] = []
    with pytest.raises(AssertionError, match="kept row started a prover"):
        _rows(tmp_path, transitions=[other], said=said)
    path = tmp_path / "rows" / "_a__auto.json"
    assert said == [f"(a) auto: {path} was finished under another key (memory_digest); running the row again"]


def test_a_refused_key_names_the_parts_that_differ() -> None:
    """A memory rebuilt one pair larger, or another budget, is named with its old and new value; a digest by name."""
    from proofrl.eval.row_store import key_difference

    key = {"problems": 2, "digest": "a" * 64, "settings": {"seconds": 5.0, "width": 4}, "memory_pairs": 34474}
    rebuilt = {**key, "memory_pairs": 34475, "memory_digest": "b" * 64}
    assert key_difference(key, rebuilt) == "memory_digest, memory_pairs 34474 → 34475"
    assert key_difference({**key, "memory_digest": "c" * 64}, rebuilt) == "memory_digest, memory_pairs 34474 → 34475"
    assert key_difference(key, {**key, "settings": {"seconds": 3.0, "width": 4}}) == "settings.seconds 5.0 → 3.0"
    assert key_difference(key, key) == "" and key_difference(None, key) == "no key"
