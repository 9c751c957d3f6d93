"""The recipes' ``logger:`` list, implemented once in the run folder (train/rundir, train/tracking): every tracker
gets the config, each step's metrics and the final summary, and the values are read back from what each library
wrote (no network: wandb offline, mlflow with a local file store). A resumed run truncates its log and continues
the same wandb and mlflow runs."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from proofrl.errors import ConfigError
from proofrl.train.rundir import RunDir

CONFIG = {"name": "t", "optim": {"lr": 0.001}, "eval": {"ks": [1, 8]}}


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("WANDB_PROJECT", raising=False)


def wandb_records(run_file: Path) -> list:
    """The protobuf records of a ``run-ID.wandb`` file: a 7-byte header (``:W&B``, magic, version), then
    LevelDB-log records in 32 KiB blocks (crc32c, length, type; FULL=1, FIRST=2, MIDDLE=3, LAST=4)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = run_file.read_bytes()
    assert data[:4] == b":W&B"
    pos, out, part = 7, [], b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:  # block trailer
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0:
            break
        part += chunk
        if kind in (1, 4):
            r = pb.Record()
            r.ParseFromString(part)
            out.append(r)
            part = b""
    return out


def wandb_history(folder: Path) -> tuple[list[dict], dict, dict]:
    """(history rows, config, summary) of the offline runs under ``folder/wandb``."""
    history, config, summary = [], {}, {}
    for f in sorted((folder / "wandb").glob("offline-run-*/run-*.wandb")):
        for r in wandb_records(f):
            kind = r.WhichOneof("record_type")
            if kind == "history":
                history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item})
            elif kind == "config":
                config.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.config.update})
            elif kind == "summary":
                summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.summary.update})
    return history, config, summary


def mlflow_run(folder: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient((folder / "mlruns").resolve().as_uri())
    run_id = json.loads((folder / "trackers.json").read_text())["mlflow"]
    return client, client.get_run(run_id)


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder / "tb"))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_every_tracker_gets_config_metrics_and_summary(tmp_path, offline, capsys):
    pytest.importorskip("wandb", reason='the tracking extra is not installed: pip install -e ".[tracking]"')
    pytest.importorskip("mlflow", reason='the tracking extra is not installed: pip install -e ".[tracking]"')
    run = RunDir(tmp_path, step_key="round", loggers=["console", "tensorboard", "wandb", "mlflow"], name="t").start(
        CONFIG
    )
    run.log(1, {"loss/loss": 0.5, "eval/pass@1": 0.25, "learn/skipped": "nothing solved", "round": 1})
    run.log(2, {"loss/loss": 0.25, "eval/pass@1": 0.5})
    run.summary({"proved_by_round": {"1": 2}, "rounds": 2})
    run.close()

    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [
        {"round": 1, "loss/loss": 0.5, "eval/pass@1": 0.25, "learn/skipped": "nothing solved"},
        {"round": 2, "loss/loss": 0.25, "eval/pass@1": 0.5},
    ]  # jsonl always, keyed by the loop's step name
    assert json.loads((tmp_path / "summary.json").read_text())["rounds"] == 2
    assert "round 2: loss/loss 0.25  eval/pass@1 0.5" in capsys.readouterr().out

    assert tensorboard_scalars(tmp_path)["loss/loss"] == [(1, 0.5), (2, 0.25)]

    history, config, summary = wandb_history(tmp_path)
    assert [(h["_step"], h["loss/loss"], h["eval/pass@1"]) for h in history] == [(1, 0.5, 0.25), (2, 0.25, 0.5)]
    assert config["optim"] == {"lr": 0.001} and config["eval"] == {"ks": [1, 8]}
    assert summary["rounds"] == 2 and summary["proved_by_round.1"] == 2

    client, r = mlflow_run(tmp_path)
    assert [(m.step, m.value) for m in client.get_metric_history(r.info.run_id, "loss/loss")] == [(1, 0.5), (2, 0.25)]
    assert [m.value for m in client.get_metric_history(r.info.run_id, "eval/pass_1")] == [0.25, 0.5]
    assert r.data.params["optim.lr"] == "0.001" and r.data.params["eval.ks"] == "[1, 8]"
    assert r.info.status == "FINISHED" and r.info.run_name == "t"
    art = Path(client.download_artifacts(r.info.run_id, "summary.json", str(tmp_path / "dl")))
    assert json.loads(art.read_text())["proved_by_round"] == {"1": 2}


def test_a_resumed_run_truncates_its_log_and_continues_the_same_runs(tmp_path, offline):
    pytest.importorskip("wandb", reason='the tracking extra is not installed: pip install -e ".[tracking]"')
    pytest.importorskip("mlflow", reason='the tracking extra is not installed: pip install -e ".[tracking]"')
    first = RunDir(tmp_path, loggers=["wandb", "mlflow"]).start(CONFIG)
    for step in (1, 2, 3):
        first.log(step, {"x": float(step)})
    first.close()  # killed after step 3 was logged, resumed from the step-2 checkpoint
    ids = json.loads((tmp_path / "trackers.json").read_text())
    again = RunDir(tmp_path, loggers=["wandb", "mlflow"]).start(CONFIG, resumed_from=2)
    assert [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    again.log(3, {"x": 30.0})
    again.close()
    assert json.loads((tmp_path / "trackers.json").read_text()) == ids
    client, r = mlflow_run(tmp_path)
    assert (
        r.info.run_id == ids["mlflow"] and [m.value for m in client.get_metric_history(r.info.run_id, "x")][-1] == 30.0
    )
    runs = {p.stem.removeprefix("run-") for p in (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")}
    assert runs == {ids["wandb"]}  # one wandb run id, resumed


def test_a_fresh_run_starts_an_empty_log_and_an_unknown_logger_is_one_line(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 7}\n')  # a stale log without a checkpoint
    RunDir(tmp_path, loggers=[]).start(CONFIG).close()
    assert (tmp_path / "metrics.jsonl").read_text() == "" and (tmp_path / "config.yaml").is_file()
    with pytest.raises(ValueError, match=r"unknown logger 'wandbb'; valid choices: \['console', 'jsonl', 'mlflow'"):
        RunDir(tmp_path, loggers=["wandbb"])
    from proofrl.train.config import load_recipe

    with pytest.raises(
        ConfigError,
        match=r"logger\[1\] must be one of \['console', 'jsonl', 'mlflow', 'tensorboard', "
        r"'wandb'\], got 'tb'",
    ):
        load_recipe("demo", ["logger=[jsonl,tb]"])


def test_a_run_folder_saved_before_a_key_moved_resumes():
    from proofrl.train.rundir import settings_changed

    before = {"serving": {"policy": "in-process", "model_name": "", "value": "in-process"}, "rollout": {"passes": 4}}
    now = {"rollout": {"passes": 4, "policy": "in-process", "model_name": "", "value": "in-process"}}
    assert settings_changed(before, now) == ([], [])
    served = {"rollout": {**now["rollout"], "policy": "openai:http://x"}}
    assert settings_changed(before, served) == (["rollout.policy: 'in-process' -> 'openai:http://x'"], [])


def test_a_run_folder_saved_with_the_search_engines_sections_resumes():
    """A search-and-learn run saved when the search had ``best_first:`` and ``mcts:`` sections compares equal to
    the same settings now (one flat section); a changed budget is still refused, by its key now."""
    from proofrl.search.config import BEST_FIRST_KEYS, MCTS_KEYS
    from proofrl.train.recipes import LOOPS
    from proofrl.train.rundir import settings_changed

    now = LOOPS["expert-iteration"].config("reap").to_dict()
    flat = now["search"]
    budget = ("max_steps", "seconds", "tactic_timeout")
    before = {
        **now,
        "search": {
            "algorithm": "mcts",
            "final_check_timeout": flat["final_check_timeout"],
            "backend": flat["backend"],
            "best_first": {
                **{k: flat[k] for k in BEST_FIRST_KEYS},
                **{"width": 64, "max_expansions": None, "seconds": 600.0, "tactic_timeout": 10.0},
            },
            "mcts": {"num_samples": flat["width"], **{k: flat[k] for k in (*MCTS_KEYS, *budget)}},
        },
    }
    assert settings_changed(before, now) == ([], [])
    wider = {**now, "search": {**flat, "width": flat["width"] + 1}}
    assert settings_changed(before, wider)[0] == [f"search.width: {flat['width']} -> {flat['width'] + 1}"]
