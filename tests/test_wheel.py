"""The package as a wheel: what pyproject.toml puts in it and where the version comes from. CI builds and installs
the real wheel (scripts/check_wheel.sh: sdist, wheel, a fresh venv, doctor / check / a recipe / view from it);
these checks catch at once, without a build, a data file no package-data pattern takes."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib
from pathlib import Path

import proofrl

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_files() -> list[str]:
    """Files under proofrl/ other than Python source, relative to it (git's view where there is one)."""
    r = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "proofrl"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    paths = (
        r.stdout.split()
        if r.returncode == 0
        else [
            str(p.relative_to(ROOT))
            for p in (ROOT / "proofrl").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        ]
    )
    return sorted(p.removeprefix("proofrl/") for p in paths if not p.endswith((".py", ".pyc")))


def test_every_data_file_of_the_package_goes_into_the_wheel():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["proofrl"]
    files = _package_files()
    assert {"py.typed", "view/viewer.js", "view/viewer.css", "data/bundled/coq_sample.jsonl"} <= set(files)
    assert any(f.startswith("recipes/") for f in files)
    left_out = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert not left_out, f"add these to [tool.setuptools.package-data] in pyproject.toml: {left_out}"


def test_the_version_is_written_once():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "proofrl.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]|rc)?\d*", proofrl.__version__)


def test_ci_checks_the_wheel_before_the_tests():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    ci = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert ci.index("bash scripts/setup.sh") < ci.index("bash scripts/check_wheel.sh") < len(ci) - 1
    assert any(r.startswith("build") for r in PYPROJECT["project"]["optional-dependencies"]["test"])
