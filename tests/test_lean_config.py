"""Pointing proofrl at a REPL: the one setting, and what ``proofrl doctor`` says about it."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from proofrl.cli import app
from proofrl.errors import BackendUnavailable
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
