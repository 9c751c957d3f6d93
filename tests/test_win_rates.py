"""``proofrl filter``: kimina's data filter end to end. Win rates measured, the filtered set written, a killed
run resumed without sampling a problem twice, another run's folder refused; and the command on a tiny model
taught here, judged by real Coq, whose filtered set ``proofrl train`` reads."""

from __future__ import annotations

import json
import shutil

import pytest
from rl_support import build_taught_model, problems
from typer.testing import CliRunner

from proofrl.cli import app
from proofrl.errors import ConfigError
from proofrl.eval.win_rates import FILTERED, RATES, FilterRule, measure_and_filter, read_rates
from proofrl.problems import Problem, load_problems, save_problems

needs_coq = pytest.mark.skipif(not shutil.which("coqidetop.opt"), reason="needs Coq")

PROBLEMS = [Problem(n, f"Theorem {n} : True.") for n in ("easy", "middle", "hard", "never")]
WINS = {"easy": 7, "middle": 3, "hard": 1, "never": 0}
KEY = {"model": "m", "temperature": 1.0}


def judge(part):
    return [[i < WINS[p.name] for i in range(8)] for p in part]


def test_win_rates_and_the_filtered_set(tmp_path):
    summary = measure_and_filter(PROBLEMS, judge, tmp_path, n=8, run_key=KEY, chunk=3)
    rates = read_rates(tmp_path / RATES)
    assert {k: r["win_rate"] for k, r in rates.items()} == {"easy": 7 / 8, "middle": 3 / 8, "hard": 1 / 8, "never": 0}
    assert [p.name for p in load_problems(tmp_path / FILTERED)] == ["middle", "hard", "hard", "never", "never"]
    assert (summary["dropped_as_easy"], summary["kept_once"], summary["repeated"], summary["filtered_set"]) == (
        1,
        1,
        2,
        5,
    )
    one = measure_and_filter(PROBLEMS, judge, tmp_path / "b", n=8, run_key=KEY, rule=FilterRule(duplicate_below=None))
    assert one["filtered_set"] == 3


def test_a_killed_run_resumes_without_sampling_a_problem_twice(tmp_path):
    asked: list[str] = []

    def dies_on_the_second_chunk(part):
        if asked:
            raise KeyboardInterrupt
        asked.extend(p.name for p in part)
        return judge(part)

    with pytest.raises(KeyboardInterrupt):
        measure_and_filter(PROBLEMS, dies_on_the_second_chunk, tmp_path, n=8, run_key=KEY, chunk=2)
    assert set(read_rates(tmp_path / RATES)) == {"easy", "middle"}
    with open(tmp_path / RATES, "a") as f:
        f.write('{"key": "hard", "wins"')  # a line cut by the kill: that problem is sampled again
    again: list[str] = []
    summary = measure_and_filter(
        PROBLEMS, lambda part: again.extend(p.name for p in part) or judge(part), tmp_path, n=8, run_key=KEY, chunk=2
    )
    assert again == ["hard", "never"] and summary["sampled_now"] == 2 and summary["filtered_set"] == 5


def test_another_run_s_folder_and_a_set_with_a_problem_twice_are_refused(tmp_path):
    measure_and_filter(PROBLEMS, judge, tmp_path, n=8, run_key=KEY)
    with pytest.raises(ConfigError) as e:
        measure_and_filter(PROBLEMS, judge, tmp_path, n=4, run_key=KEY)
    assert "\n" not in str(e.value) and "n differ" in str(e.value)
    with pytest.raises(ConfigError) as e:
        measure_and_filter([*PROBLEMS, PROBLEMS[0]], judge, tmp_path / "twice", n=8, run_key=KEY)
    assert "twice" in str(e.value)


@needs_coq
def test_the_filter_command_on_a_taught_model_and_train_reads_its_set(tmp_path):
    model = build_taught_model(tmp_path, epochs=30)
    data = tmp_path / "p.jsonl"
    save_problems(problems()[:4], data)
    out = tmp_path / "filter"
    args = [
        "filter",
        "--model",
        str(model),
        "--problems",
        str(data),
        "-n",
        "4",
        "--max-tokens",
        "24",
        "--out",
        str(out),
    ]
    r = CliRunner().invoke(app, [*args, "--timeout", "10"])
    assert r.exit_code == 0, r.output
    rates = read_rates(out / RATES)
    assert len(rates) == 4 and all(x["samples"] == 4 for x in rates.values())
    assert any(x["wins"] > 0 for x in rates.values())  # the taught model wins something, judged by Coq
    kept = load_problems(out / FILTERED)
    easy = {k for k, x in rates.items() if x["win_rate"] > 0.5}
    assert not easy & {p.key for p in kept} and len({p.key for p in kept}) == 4 - len(easy)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["filtered_set"] == len(kept)
    r = CliRunner().invoke(app, [*args, "--timeout", "10"])  # done already: nothing is sampled again
    assert r.exit_code == 0 and json.loads((out / "summary.json").read_text())["sampled_now"] == 0
    r = CliRunner().invoke(app, [*args, "--temperature", "0.5"])
    assert r.exit_code != 0 and "temperature" in r.output

    from proofrl.train.recipes import LOOPS

    cfg = LOOPS["grpo"].config("demo", [f"data.train={out / FILTERED}"])
    assert cfg.data.train == str(out / FILTERED)
