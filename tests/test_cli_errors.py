"""A bad setting or a prover that is not installed is one line on stderr and exit status 2 from every command,
never a traceback: checked through the real command line (typer's runner, and real subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import programs_except
from typer.testing import CliRunner

from proofrl.cli import app

# The list: each value loaded before and failed later with a traceback.
BAD_RECIPE_VALUES = [
    ("reward.unlikeliness.beta_rank=2", "reward.unlikeliness.beta_rank must be in [0, 1], got 2"),
    ("ppo.beta_rank=2", "unknown keys in ppo: ['beta_rank']; known: ['agg_mode',"),
    (
        "ppo.agg_mode=mean",
        "ppo.agg_mode must be one of ['seq-mean-token-mean', "
        "'seq-mean-token-sum', 'seq-mean-token-sum-norm', 'token-mean', "
        "'token-sum-norm'], got 'mean'",
    ),
    (
        "ppo.kl_kind=k9",
        "ppo.kl_kind must be one of ['k1', 'k2', 'k3', 'kl', 'low_var_kl', 'mse'], got 'k9'",
    ),
    ("algorithm.advantage=ppo", "algorithm.advantage must be one of ['dr_grpo', 'grpo'], got 'ppo'"),
    ("rollout.generator=hf2", "rollout.generator must be one of ['hf', 'vllm', 'openai'], got 'hf2'"),
    ("model.dtype=fp8", "model.dtype must be one of ['auto', 'bfloat16', 'float32', 'float16'], got 'fp8'"),
    ("ppo.clip_ratio_c=0.5", "ppo.clip_ratio_c must be > 1, got 0.5"),
    ("rollout.error_correction.rate=1.5", "rollout.error_correction.rate must be in [0, 1], got 1.5"),
    ("eval.ks=[1, 0]", "eval.ks[1] must be >= 1, got 0"),
]


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text and "╭" not in text, text
    return lines[0]


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(("override", "message"), BAD_RECIPE_VALUES)
def test_train_names_the_bad_key_in_one_line(override, message):
    res = _invoke("train", "--recipe", "demo", "--set", override)
    assert res.exit_code == 2, res.output
    assert _one_line(res.stderr).startswith("proofrl train: ")
    assert message in res.stderr


def test_a_bad_value_in_a_recipe_file_is_one_line(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("algorithm:\n  advantage: ppo\nppo: {agg_mode: mean}\n")
    res = _invoke("train", "--recipe", str(recipe), "--show-config")
    assert res.exit_code == 2
    line = _one_line(res.stderr)
    assert "algorithm.advantage must be one of ['dr_grpo', 'grpo'], got 'ppo'" in line
    assert "ppo.agg_mode must be one of" in line


def test_missing_paths_are_one_line(tmp_path):
    args = ["train", "--recipe", "unlikeliness", "--set", "verify.server_url=http://127.0.0.1:9"]
    res = _invoke(*args)
    assert res.exit_code == 2
    assert "proofrl train: data.train is empty" in _one_line(res.stderr)
    problems = tmp_path / "p.jsonl"
    problems.write_text('{"name": "t", "formal_statement": "theorem t : True := by", "backend": "lean"}\n')
    res = _invoke(*args, "--set", f"data.train={problems}")
    assert res.exit_code == 2
    assert "proofrl train: model.path is empty" in _one_line(res.stderr)


def test_serve_names_the_bad_key_in_one_line(tmp_path):
    res = _invoke("serve", "--sandbox", "chroot")
    assert res.exit_code == 2
    assert (
        _one_line(res.stderr)
        == "proofrl serve: sandbox must be one of ['auto', 'bwrap', 'unshare', 'off'], got 'chroot'"
    )
    conf = tmp_path / "serve.yaml"
    conf.write_text("pool: {workers: 0, timeout: -1}\n")
    res = _invoke("serve", "--config", str(conf))
    assert res.exit_code == 2
    assert _one_line(res.stderr) == "proofrl serve: pool.workers must be >= 1, got 0; pool.timeout must be > 0, got -1"
    conf.write_text("prover: {memroy_mb: 1}\n")
    res = _invoke("serve", "--config", str(conf))
    assert res.exit_code == 2
    assert _one_line(res.stderr).startswith("proofrl serve: unknown keys in prover: ['memroy_mb']; known: [")


def test_check_and_eval_name_the_bad_value_in_one_line(tmp_path):
    res = _invoke("check", "--backend", "isabelle")
    assert res.exit_code == 2
    assert _one_line(res.stderr) == "proofrl check: backend must be one of ['coq', 'lean'], got 'isabelle'"
    problems = tmp_path / "p.jsonl"
    problems.write_text('{"name": "t", "formal_statement": "Theorem t : True.", "backend": "coq"}\n')
    res = _invoke("eval", "--model", str(tmp_path), "--problems", str(problems), "--format", "coq2")
    assert res.exit_code == 2
    assert "unknown prompt format 'coq2'" in _one_line(res.stderr)


def _run(args: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "proofrl.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def test_demo_refuses_a_bad_override_before_any_work():
    """Before: the demo taught the model for a minute, then died in the trainer with a traceback."""
    res = _run(["demo", "--set", "ppo.kl_kind=k9"], timeout=60)
    assert res.returncode == 2, res.stderr
    assert _one_line(res.stderr) == (
        "proofrl demo: ppo.kl_kind must be one of ['k1', 'k2', 'k3', 'kl', 'low_var_kl', 'mse'], got 'k9'"
    )


# -- a machine without Coq ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def path_without_coq(tmp_path_factory) -> str:
    """A PATH holding every program of this one except Coq's (links in one folder)."""
    return str(programs_except(("coq",), tmp_path_factory.mktemp("bin-without-coq")))


COQ_MISSING = "coq backend unavailable: coqidetop not found on PATH (Debian: apt-get install coq)"


def test_every_command_says_how_to_install_a_missing_coq(path_without_coq, tmp_path):
    """Before: `proofrl demo` ended in FileNotFoundError: 'coqc' (and the others in tracebacks of their own)."""
    commands = {
        "demo": ["demo", "--out", str(tmp_path / "demo")],
        "train": ["train", "--recipe", "demo", "--out", str(tmp_path / "train")],
        "eval": [
            "eval",
            "--model",
            str(tmp_path),
            "--problems",
            "coq-stdlib:held-out",
            "--out",
            str(tmp_path / "eval"),
        ],
        "check": ["check"],
        "serve": ["serve", "--port", "0"],
    }
    env = {"PATH": path_without_coq, "PYTHONUNBUFFERED": "1"}
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "proofrl.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        for name, args in commands.items()
    }
    for name, p in procs.items():
        try:
            _, err = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            pytest.fail(f"proofrl {name} did not stop at the missing prover")
        assert p.returncode == 2, (name, err)
        assert _one_line(err) == f"proofrl {name}: {COQ_MISSING}"
    res = _run(["doctor"], env=env)
    assert res.returncode == 0
    assert "apt-get install coq" in res.stdout and "Traceback" not in res.stdout + res.stderr


def test_lean_missing_is_one_line_with_how_to_install(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PROOFRL_LEAN_REPL", "PROOFRL_LEAN_PROJECT")}
    res = subprocess.run(
        [sys.executable, "-m", "proofrl.cli", "check", "--backend", "lean"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 2
    line = _one_line(res.stderr)
    assert line.startswith("proofrl check: lean backend unavailable: PROOFRL_LEAN_REPL is not set")
    assert "elan-init.sh" in line and "docs/lean.md" in line
