"""Search-and-learn over real Coq with a tiny real model: the recipe's bad keys, a round that solves nothing
(no update, logged, the loop goes on), exact resume after an interruption between rounds (same buffer,
same next round, same weights and logs as an uninterrupted run), and other tactic sources beside the model (an
online memory that learns the rollouts' proofs, keeps them across a resume, and never a held-out one)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import requires_coq
from typer.testing import CliRunner

from proofrl.cli import app
from proofrl.errors import ConfigError
from proofrl.policy.tactic import tactic_prompt
from proofrl.policy.tiny import build_tiny_model
from proofrl.problems import Problem, save_problems
from proofrl.train.expert_iteration import ExpertIteration, load_config

# closed by computation (no header to load, so the fresh-process final checks are quick)
TRAIN = [
    ("zero_add", "forall n : nat, 0 + n = n"),
    ("one_add", "forall n : nat, 1 + n = S n"),
    ("succ_add", "forall n m : nat, S n + m = S (n + m)"),
]
HELD = [("two_add", "forall n : nat, 2 + n = S (S n)")]


def problems(pairs, split):
    return [Problem(n, f"Theorem {n} : {s}.", "", split=split) for n, s in pairs]


def transitions():
    return [
        {
            "theorem": n,
            "module": "T",
            "step": 0,
            "state_before": f"⊢ {s}",
            "tactic": "intros; reflexivity.",
            "structural": False,
            "goals_before": 1,
            "goals_after": 0,
        }
        for n, s in TRAIN
    ]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Problem files, human transitions, an untaught tiny model and one taught to answer ``intros; reflexivity.``."""
    from proofrl.policy.model import load_policy
    from proofrl.policy.sft import supervised_finetune

    d = tmp_path_factory.mktemp("reap-data")
    save_problems(problems(TRAIN, "train"), d / "train.jsonl")
    save_problems(problems(HELD, "held-out"), d / "held.jsonl")
    (d / "trans.jsonl").write_text("".join(json.dumps(t) + "\n" for t in transitions()))
    pairs = [(tactic_prompt(t["state_before"]), t["tactic"]) for t in transitions()]
    build_tiny_model(d / "untaught", [p + t for p, t in pairs] * 4, hidden=32, layers=1, heads=2, vocab_size=300)
    build_tiny_model(d / "taught", [p + t for p, t in pairs] * 4, hidden=32, layers=1, heads=2, vocab_size=300)
    m, tok = load_policy(d / "taught", device="cpu")
    supervised_finetune(m, tok, pairs * 8, epochs=12, lr=1e-2, batch=8, seed=0)
    m.save_pretrained(d / "taught")
    return d


def config(files, out, model, *more):
    return load_config(
        "reap",
        [
            f"out={out}",
            f"model.path={files / model}",
            f"data.train={files / 'train.jsonl'}",
            f"data.eval={files / 'held.jsonl'}",
            f"data.transitions={files / 'trans.jsonl'}",
            "model.num_bins=8",
            "verify.workers=1",
            "progress=false",
            "rollout.problems_per_step=2",
            "rollout.passes=1",
            "search.width=2",
            "search.max_steps=3",
            "rollout.max_tokens=12",
            "rollout.temperature=0.5",
            "optim.epochs=1",
            "optim.batch=4",
            "replay.rehearsal_fraction=0.5",
            *more,
        ],
    )


def test_a_bad_recipe_key_is_one_line():
    with pytest.raises(
        ConfigError,
        match=r"unknown keys in rollout: \['pases'\]; the expert-iteration loop reads: "
        r"\['max_tokens', 'model_name', 'passes', 'policy', 'problems_per_step', 'sources', 'temperature', 'value'\]",
    ):
        load_config("reap", ["rollout.pases=4"])
    with pytest.raises(ConfigError, match=r"replay.rehearsal_fraction must be in \[0, 1\), got 1.5"):
        load_config("reap", ["replay.rehearsal_fraction=1.5"])
    with pytest.raises(ConfigError, match=r"serving is now rollout \(policy, model_name, value\)"):
        load_config("reap", ["serving.policy=in-process"])  # a recipe written before serving moved
    with pytest.raises(ConfigError, match=r"expected key\.sub=value"):
        load_config("reap", ["steps"])
    res = CliRunner().invoke(app, ["train", "--recipe", "reap", "--set", "rollout.pases=4"])  # the real command line
    assert res.exit_code == 2 and res.stderr.strip().splitlines() == [
        "proofrl train: unknown keys in rollout: ['pases']; the expert-iteration loop reads: "
        "['max_tokens', 'model_name', 'passes', 'policy', 'problems_per_step', 'sources', 'temperature', 'value']"
    ]
    res = CliRunner().invoke(app, ["train", "--recipe", "reap", "--show-config", "--set", "steps=5"])
    assert res.exit_code == 0 and "loop: expert-iteration" in res.output and "steps: 5" in res.output


@requires_coq
def test_a_round_that_solves_nothing_makes_no_update_and_the_loop_goes_on(files, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow", reason='the tracking extra is not installed: pip install -e ".[tracking]"')
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    torch.manual_seed(0)
    run = ExpertIteration(config(files, tmp_path / "run", "untaught", "steps=2", "logger=[tensorboard,mlflow]"))
    summary = run.run()
    rows = {r["round"]: r for r in summary["rounds"]}
    assert sorted(rows) == [0, 1, 2]  # evaluated before, and after each round
    for r in (1, 2):
        assert rows[r]["rollout/solved"] == 0 and rows[r]["replay/size"] == 0
        assert rows[r]["learn/skipped"] == "nothing solved this round" and "learn/lm_loss" not in rows[r]
        assert rows[r]["eval/theorems"] == 1
    assert (tmp_path / "run" / "checkpoints" / "round_0002" / "state.pt").exists()
    assert json.loads((tmp_path / "run" / "weights" / "latest.json").read_text())["version"] == 2
    # the recipe's logger list, through the one run folder: mlflow holds each round's values and the config
    client = mlflow.tracking.MlflowClient((tmp_path / "run" / "mlruns").resolve().as_uri())
    run_id = json.loads((tmp_path / "run" / "trackers.json").read_text())["mlflow"]
    history = client.get_metric_history(run_id, "eval/theorems")
    assert [(m.step, m.value) for m in history] == [(0, 1.0), (1, 1.0), (2, 1.0)]
    assert client.get_run(run_id).data.params["steps"] == "2"


@requires_coq
def test_an_interrupted_run_resumes_exactly(files, tmp_path):
    """Two rounds straight vs one round, a stop, and a second process-like start (a new ExpertIteration reading
    only the run folder) that goes on: same replay buffer, same sampled theorems, same weights, same logs."""
    keep = (
        "round",
        "rollout/solved",
        "replay/added",
        "replay/size",
        "learn/lm_loss",
        "learn/value_loss",
        "learn/rehearsed",
        "eval/proved",
        "weights_version",
    )

    def rows(out):
        return [{k: r.get(k) for k in keep} for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]

    def final_state(out):
        st = torch.load(out / "checkpoints" / "round_0002" / "state.pt", weights_only=False)
        from safetensors.torch import load_file

        return st, load_file(str(out / "checkpoints" / "round_0002" / "model.safetensors"))

    torch.manual_seed(0)
    quick = ("steps=2", "eval.before=false", "eval.every=0")  # one evaluation, after the last round
    ExpertIteration(config(files, tmp_path / "straight", "taught", *quick)).run()
    torch.manual_seed(0)
    ExpertIteration(config(files, tmp_path / "cut", "taught", *quick)).run(stop_after=1)
    assert not (tmp_path / "cut" / "checkpoints" / "round_0002").exists()
    with open(tmp_path / "cut" / "metrics.jsonl", "a") as f:  # killed after logging round 2, before its checkpoint
        f.write(json.dumps({"round": 2, "rollout/solved": -1}) + "\n")
    torch.manual_seed(123)  # the resumed run restores the RNG from the checkpoint, not from here
    ExpertIteration(config(files, tmp_path / "cut", "taught", *quick)).run()

    a, b = rows(tmp_path / "straight"), rows(tmp_path / "cut")
    assert [r["round"] for r in b] == [1, 2]  # each round logged once: the stale round 2 is gone
    assert a == b
    assert a[0]["rollout/solved"] > 0 and a[0]["replay/size"] > 0 and a[0]["learn/lm_loss"] > 0  # it did learn
    (sa, wa), (sb, wb) = final_state(tmp_path / "straight"), final_state(tmp_path / "cut")
    assert sa["buffer"] == sb["buffer"] and sa["problems"] == sb["problems"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@requires_coq
def test_a_run_killed_during_its_first_evaluation_evaluates_again_when_resumed(files, tmp_path, monkeypatch):
    """Round 0's checkpoint is saved before its held-out evaluation; a run killed during that evaluation resumes
    from round 0 and evaluates it again, whole, instead of going on with the part written before the kill."""

    class Killed(Exception):
        pass

    out = tmp_path / "run"
    cfg = config(files, out, "taught", "steps=1", "eval.before=true", "eval.every=0")
    real = ExpertIteration.evaluate

    def killed_in_round_0(self, worker, round_, pool):
        (out / "rounds" / "0000" / "eval").mkdir(parents=True, exist_ok=True)
        (out / "rounds" / "0000" / "eval" / "results.jsonl").write_text("")  # part of it written, then the kill
        raise Killed

    monkeypatch.setattr(ExpertIteration, "evaluate", killed_in_round_0)
    with pytest.raises(Killed):
        ExpertIteration(cfg).run()
    assert (out / "checkpoints" / "round_0000").is_dir() and not (out / "metrics.jsonl").read_text().strip()
    monkeypatch.setattr(ExpertIteration, "evaluate", real)
    ExpertIteration(cfg).run()
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["round"], r.get("eval/theorems")) for r in rows] == [(0, len(HELD)), (1, len(HELD))]
    for round_ in ("0000", "0001"):
        assert len((out / "rounds" / round_ / "eval" / "results.jsonl").read_text().splitlines()) == len(HELD)


def test_rollout_sources_that_name_a_model_or_nothing_known_are_one_line():
    with pytest.raises(ConfigError, match=r"rollout.sources='auto\+hf:m': hf is a model; the model is rollout.policy"):
        load_config("reap", ["rollout.sources=auto+hf:m"])
    with pytest.raises(ConfigError, match=r"unknown tactic policy 'knn' in 'auto\+knn': name its DIR \(knn:DIR\)"):
        load_config("reap", ["rollout.sources=auto+knn"])


@requires_coq
def test_an_online_memory_learns_the_rollouts_proofs_across_a_resume_and_never_a_held_out_one(files, tmp_path):
    """The untaught model beside Coq's automation and an online memory that starts empty: the rollouts' proofs
    go into the memory, each checkpoint keeps them, a run resumed between rounds ends with the memory of one that
    ran straight (resuming it without an online memory to put them back into is refused), and the held-out theorem
    (proved in every evaluation) never enters it."""
    from proofrl.policy.memory import ProofMemory

    ProofMemory().save(tmp_path / "empty")
    sources = f"rollout.sources=knn-online:{tmp_path / 'empty'}+auto:auto"
    quick = ("steps=2", "eval.before=true", "eval.every=1", sources)

    def learned(out, round_):
        return torch.load(out / "checkpoints" / f"round_{round_:04d}" / "state.pt", weights_only=False)["memory"]

    torch.manual_seed(0)
    straight = ExpertIteration(config(files, tmp_path / "straight", "untaught", *quick)).run()
    rows = {r["round"]: r for r in straight["rounds"]}
    assert [rows[r]["eval/proved"] for r in (0, 1, 2)] == [1, 1, 1]  # the automation proves the held-out one
    assert rows[1]["rollout/solved"] == 2 and rows[1]["memory/learned"] > 0
    assert rows[2]["memory/learned"] >= rows[1]["memory/learned"]
    memory = learned(tmp_path / "straight", 2)
    train = {n for n, _ in TRAIN}
    assert len(memory) == rows[2]["memory/learned"] and {p["theorem"] for p in memory} <= train
    saved = (tmp_path / "straight" / "memory" / "pairs.jsonl").read_text().splitlines()
    assert {json.loads(x)["theorem"] for x in saved} <= train  # the run's memory: the rollouts' proofs only
    held = (tmp_path / "straight" / "rounds" / "0002" / "eval" / "memory" / "pairs.jsonl").read_text()
    assert "two_add" in held  # the evaluation's fork learned it, online, and kept it to itself

    torch.manual_seed(0)
    ExpertIteration(config(files, tmp_path / "cut", "untaught", *quick)).run(stop_after=1)
    without = (*quick[:-1], "rollout.sources=auto:auto")  # the same run, its sources without the memory
    with pytest.raises(ConfigError, match=r"pairs an online memory learned.*has no knn-online"):
        ExpertIteration(config(files, tmp_path / "cut", "untaught", *without)).run()  # they would be lost
    torch.manual_seed(123)
    ExpertIteration(config(files, tmp_path / "cut", "untaught", *quick)).run()
    assert learned(tmp_path / "cut", 1) == learned(tmp_path / "straight", 1)
    assert learned(tmp_path / "cut", 2) == memory
