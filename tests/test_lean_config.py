"""Pointing proofrl at a REPL: the one setting, and what ``proofrl doctor`` says about it."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from proofrl.cli import app
from proofrl.errors import BackendUnavailable, ConfigError
from proofrl.provers.lean.config import ENV_PROJECT, ENV_REPL, LeanConfig, diagnose


def test_unset_setting_is_unavailable(monkeypatch) -> None:
    monkeypatch.delenv(ENV_REPL, raising=False)
    with pytest.raises(BackendUnavailable, match=ENV_REPL):
        LeanConfig.from_env()
    ok, why = diagnose()
    assert not ok and ENV_REPL in why


def test_setting_is_a_shell_command(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(ENV_REPL, f"{sys.executable} -I '/opt/my repl/bin/repl'")
    monkeypatch.setenv(ENV_PROJECT, str(tmp_path))
    cfg = LeanConfig.from_env(timeout=5.0)
    assert cfg.command == (sys.executable, "-I", "/opt/my repl/bin/repl") and cfg.cwd == str(tmp_path)
    assert cfg.timeout == 5.0
    ok, why = diagnose()
    assert not ok and "does not exist" in why  # the REPL path it names is missing


def test_doctor_reports_both_backends(monkeypatch) -> None:
    monkeypatch.setenv(ENV_REPL, "definitely-not-a-lean-binary")
    out = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    assert "coq" in out.output and "lean" in out.output and "not an executable" in out.output


def test_backends_built_by_name_read_the_setting_and_the_toolchain(monkeypatch, tmp_path) -> None:
    """``proofrl serve/check/search --backend lean`` build provers through the factory: it reads
    ``PROOFRL_LEAN_REPL`` (and ``PROOFRL_LEAN_VERSION``), a config's ``prover: {version: ...}`` overrides the
    toolchain, and the prover it starts answers (here the replay of a v4.9 recording)."""
    from lean_conformance import VERSIONS
    from lean_replay_support import replay_config

    from proofrl.provers.factory import prover_factory
    from proofrl.server.config import load_serve_config

    monkeypatch.delenv(ENV_REPL, raising=False)
    with pytest.raises(BackendUnavailable, match=ENV_REPL):
        prover_factory("lean")
    inp = VERSIONS / "v4.9.0-rc1" / "trace_simp.in"
    if not inp.exists():
        pytest.skip(f"no recordings at {VERSIONS}")
    monkeypatch.setenv(ENV_REPL, " ".join(f"'{a}'" for a in replay_config(inp).command))
    monkeypatch.setenv("PROOFRL_LEAN_VERSION", "v4.9.0")
    prover = prover_factory("lean")("")
    try:
        assert prover.config.version == "v4.9.0" and prover.alive
    finally:
        prover.close()
    yaml = tmp_path / "serve.yaml"
    yaml.write_text("backends: [lean]\nprover: {version: v4.18.0}\n")
    cfg = load_serve_config(yaml)
    assert cfg.prover == {"version": "v4.18.0"}
    prover = prover_factory("lean", **cfg.prover)("")
    try:
        assert prover.config.version == "v4.18.0"
    finally:
        prover.close()
    with pytest.raises(ConfigError, match="expected a toolchain"):
        prover_factory("lean", version="newest")
