"""The one runner of demo, bench and toy: parts chosen by name, one JSONL line per finished part, resume after a
kill (a cut last line ignored), settings that differ refused in one line."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from proofrl.errors import ConfigError
from proofrl.runner import Runner, read_rows, select


def test_select_keeps_the_known_order_and_names_the_valid_ones_in_one_line():
    assert select(None, ["a", "b", "c"], flag="--part", what="part") == ["a", "b", "c"]
    assert select(["c", "a"], ["a", "b", "c"], flag="--part", what="part") == ["a", "c"]
    with pytest.raises(ConfigError) as e:
        select(["a", "x"], ["a", "b"], flag="--part", what="demo part")
    assert str(e.value) == "--part 'x' is not a demo part; valid: a, b"


def test_a_recorded_part_is_kept_and_a_cut_line_is_ignored(tmp_path):
    calls = []

    def part(n):
        calls.append(n)
        return {"value": n * 10}

    runner = Runner(tmp_path, ("name", "seed"), log="log.jsonl")
    row = runner.run({"name": "a", "seed": 0}, lambda: part(1), label="a 0")
    assert row["value"] == 10 and row["seconds"] >= 0 and row["cpu_seconds"] >= 0
    assert {"load_before", "load_after"} <= set(row)
    runner.run({"name": "a", "seed": 1}, lambda: part(2), label="a 1")
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    (tmp_path / "log.jsonl").write_text(lines[0] + "\n" + lines[1][:20])  # killed while writing seed 1

    again = Runner(tmp_path, ("name", "seed"), log="log.jsonl")
    kept = again.run({"name": "a", "seed": 0}, lambda: part(3), label="a 0")
    redone = again.run({"name": "a", "seed": 1}, lambda: part(4), label="a 1")
    assert calls == [1, 2, 4] and kept["value"] == 10 and redone["value"] == 40
    assert [(r["seed"], r["value"]) for r in read_rows(tmp_path / "log.jsonl")] == [(0, 10), (1, 40)]


def test_other_settings_are_refused_in_one_line_naming_the_first_that_differs(tmp_path):
    Runner(tmp_path, ("part",), config={"seed": 0, "whole": {"steps": 2, "tag": "x"}})
    Runner(tmp_path, ("part",), config={"seed": 0, "whole": {"steps": 2, "tag": "x"}})  # the same: resumes
    with pytest.raises(ConfigError) as e:
        Runner(tmp_path, ("part",), config={"seed": 0, "whole": {"steps": 3, "tag": "x"}})
    assert "was run with whole.steps=2, not 3" in str(e.value) and "\n" not in str(e.value)
    configs = [r for r in read_rows(tmp_path / "runs.jsonl") if "config" in r]
    assert len(configs) == 1  # written once, first


def test_a_folder_from_a_version_with_other_settings_is_refused_in_one_line_naming_the_setting(tmp_path):
    """A setting only the folder's record has (or only this version has) cannot be matched by any rerun."""
    Runner(tmp_path / "old", ("part",), config={"seed": 0, "clip_ratio": 0.2})
    with pytest.raises(ConfigError) as e:
        Runner(tmp_path / "old", ("part",), config={"seed": 0, "ppo": {"clip_ratio_low": 0.2}})
    msg = str(e.value)
    assert "was run with clip_ratio=0.2, a setting this version of proofrl does not have" in msg and "\n" not in msg
    Runner(tmp_path / "new", ("part",), config={"seed": 0})
    with pytest.raises(ConfigError, match=r"was run without ppo\.epochs, a setting this version of proofrl has"):
        Runner(tmp_path / "new", ("part",), config={"seed": 0, "ppo": {"epochs": 1}})


def test_the_bar_moves_by_a_kept_part_s_steps(tmp_path):
    Runner(tmp_path, ("v",)).run({"v": "a"}, lambda: {}, label="a")
    runner = Runner(tmp_path, ("v",))
    with runner.progress(5, show=False):
        runner.run({"v": "a"}, lambda: {}, label="a", steps=3)
        runner.run({"v": "b"}, lambda: runner.advance() or {}, label="b", steps=3)
        task = runner._bar.tasks[0]
        assert task.completed == 4 and task.description == "b"


def test_a_toy_rerun_keeps_finished_variants_and_writes_the_same_records(tmp_path, monkeypatch):
    import proofrl.toy.run as toy_run
    from proofrl.toy.experiment import ToyConfig

    cfg = ToyConfig(seeds=2, steps=2, eval_every=1, eval_states=16, eval_samples=32)
    first = toy_run.run_experiment(cfg, ["grpo-default"], tmp_path, show_progress=False).results.read_text()
    ran = []
    real = toy_run.run_variant
    monkeypatch.setattr(toy_run, "run_variant", lambda v, c, **kw: ran.append(v.name) or real(v, c, **kw))
    run = toy_run.run_experiment(cfg, ["grpo-default", "grpo-epochs-2"], tmp_path, show_progress=False)
    assert ran == ["grpo-epochs-2"]  # grpo-default was kept
    lines = run.results.read_text().splitlines()
    old = first.splitlines()
    assert lines[1 : len(old)] == old[1:]  # grpo-default's records, as the first run wrote them
    assert {json.loads(x)["variant"] for x in lines[1:]} == {"grpo-default", "grpo-epochs-2"}
    with pytest.raises(ConfigError, match="was run with steps=2, not 3"):
        toy_run.run_experiment(replace(cfg, steps=3), ["grpo-default"], tmp_path, show_progress=False)


def probe_part(ctx):
    (ctx.out / "report.md").write_text(f"# probe {ctx.seed}\n")
    PROBE_CALLS.append(ctx.seed)
    return {"seed": ctx.seed}


PROBE_CALLS: list[int] = []


def test_a_demo_rerun_keeps_finished_parts_and_refuses_another_seed(tmp_path, monkeypatch):
    from proofrl.demo import DEMO_PARTS, DemoPart, run_parts

    monkeypatch.setitem(DEMO_PARTS, "probe", DemoPart("probe", "test_runner:probe_part", "a probe"))
    PROBE_CALLS.clear()
    first = run_parts(tmp_path, ["probe"], seed=3, workers=1)
    again = run_parts(tmp_path, ["probe"], seed=3, workers=1)
    assert PROBE_CALLS == [3] and again["parts"] == first["parts"] == {"probe": {"seed": 3}}
    assert "# probe 3" in (tmp_path / "report.md").read_text()
    with pytest.raises(ConfigError, match="was run with seed=3, not 4"):
        run_parts(tmp_path, ["probe"], seed=4, workers=1)
