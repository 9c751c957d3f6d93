"""The step loop every step-counted training loop runs through (RunDir.run_steps): logging, checkpoints every N
steps and after the last, the summary, and a resumed run that logs each step once."""

from __future__ import annotations

import json

import pytest

from proofrl.train.rundir import RunDir


def _run(out, *, at, total, resumed, fail_at=None):
    saved, shown = [], []
    state = {"n": at}

    def step():
        state["n"] += 1
        if state["n"] == fail_at:
            raise RuntimeError("killed")
        return state["n"], {"loss": float(state["n"])}

    run = RunDir(out, loggers=())
    done = run.run_steps(
        {"seed": 0},
        step,
        at=at,
        total=total,
        resumed=resumed,
        checkpoint_every=3,
        save=lambda: saved.append(state["n"]),
        progress=lambda n, m: shown.append(n),
    )
    return run, done, saved, shown


def test_steps_are_logged_and_checkpointed_every_n_and_after_the_last(tmp_path):
    run, done, saved, shown = _run(tmp_path, at=0, total=7, resumed=False)
    assert [n for n, _ in done] == shown == [1, 2, 3, 4, 5, 6, 7]
    assert saved == [3, 6, 7]
    assert [r["step"] for r in run.rows()] == [1, 2, 3, 4, 5, 6, 7]
    assert json.loads((tmp_path / "summary.json").read_text()) == {"steps": 7, "last": {"loss": 7.0}}


def test_a_resumed_run_logs_each_step_once(tmp_path):
    with pytest.raises(RuntimeError):
        _run(tmp_path, at=0, total=7, resumed=False, fail_at=6)  # steps 1-5 logged, checkpoint at 3
    run, done, saved, _ = _run(tmp_path, at=3, total=7, resumed=True)
    assert [n for n, _ in done] == [4, 5, 6, 7] and saved == [6, 7]
    assert [r["step"] for r in run.rows()] == [1, 2, 3, 4, 5, 6, 7]
    # nothing left to do: the summary says so, and nothing is saved
    run, done, saved, _ = _run(tmp_path, at=7, total=7, resumed=True)
    assert done == [] and saved == []
    assert json.loads((tmp_path / "summary.json").read_text()) == {"steps": 7, "last": {}}


def test_a_resumed_run_with_other_settings_is_refused_in_one_line(tmp_path, caplog):
    """What a run computes may not change across a resume (torchtune refuses the same); how long it runs and
    how it is logged may, and the change is said. Nothing of the folder is touched by a refused resume."""
    from proofrl.errors import ConfigError

    settings = {"seed": 0, "steps": 4, "optim": {"lr": 1e-5, "betas": [0.9, 0.99]}, "logger": ["jsonl"]}
    RunDir(tmp_path, loggers=()).start(settings)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    changed = {**settings, "optim": {"lr": 3e-5, "betas": [0.9, 0.99]}, "seed": 1}
    with pytest.raises(ConfigError, match=r"optim\.lr: 1e-05 -> 3e-05; seed: 0 -> 1; resume with") as e:
        RunDir(tmp_path, loggers=()).start(changed, resumed_from=1)
    assert "\n" not in str(e.value)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'
    longer = {**settings, "steps": 8, "logger": ["jsonl", "wandb"]}
    with caplog.at_level("WARNING"):
        RunDir(tmp_path, loggers=()).start(longer, resumed_from=1)
    assert "steps: 4 -> 8" in caplog.text
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 1}\n'
    # a fresh start over the folder is a new run: nothing is compared
    RunDir(tmp_path, loggers=()).start(changed)
