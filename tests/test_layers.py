"""The layer order of docs/architecture.md, enforced: ``lint-imports`` checks the import-linter contracts in
pyproject.toml (each package imports only the packages below it; one prover's folder never imports another's),
so a layer violation fails the tests. The second test adds an upward import to a copy of the package and
checks that the same command then fails, naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # the package in ``cwd`` is the one analysed
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold():
    r = lint_imports(ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 kept, 0 broken" in r.stdout


def test_an_upward_import_breaks_the_layers(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(ROOT / "proofrl", tmp_path / "proofrl", ignore=shutil.ignore_patterns("__pycache__"))
    base = tmp_path / "proofrl" / "provers" / "base.py"
    base.write_text(base.read_text() + "\n\ndef _upward() -> None:\n    from ..train import grpo  # noqa: F401\n")
    r = lint_imports(tmp_path)
    assert r.returncode != 0
    assert "proofrl.provers.base -> proofrl.train.grpo" in r.stdout, r.stdout[-3000:]
