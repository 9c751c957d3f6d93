"""scripts/setup.sh, the README's first command and CI's set-up, run against stand-ins for apt-get, sudo, id and
Python (nothing is installed): it installs what is missing, in order, or says in one line what to run instead."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import programs_except

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "setup.sh"
STANDS_IN = ("coq", "bwrap", "apt-get", "sudo", "id", "python", "pip", "proofrl")

FAKE_PYTHON = """#!/bin/bash
echo "python $*" >> "$LOG"
case "$*" in
  *EXTERNALLY-MANAGED*) echo "${MANAGED:-0}";;
  *"import sys, torch"*) exit "${NO_TORCH:-1}";;
  *sysconfig*) echo /somewhere/bin;;
esac
exit 0
"""
FAKE_APT = """#!/bin/bash
echo "apt-get $*" >> "$LOG"
if [ "$1" = install ]; then
  for tool in coqc coqidetop.opt bwrap; do
    printf '#!/bin/bash\\necho "The Coq Proof Assistant, version 8.16.1"\\n' > "$BIN/$tool"; chmod +x "$BIN/$tool"
  done
fi
"""
FAKE_SUDO = '#!/bin/bash\necho "sudo $*" >> "$LOG"\nexec "$@"\n'
FAKE_ID = '#!/bin/bash\necho "${FAKE_UID:-1000}"\n'


@pytest.fixture(scope="module")
def system_tools(tmp_path_factory) -> Path:
    """This machine's programs, without the ones the script looks for or runs."""
    return programs_except(STANDS_IN, tmp_path_factory.mktemp("tools"))


def _setup(tmp_path: Path, tools: Path, *, sudo: bool = True, have: tuple[str, ...] = (), **env: str):
    bin_dir, log = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir()
    log.write_text("")
    scripts = {"python": FAKE_PYTHON, "apt-get": FAKE_APT, "id": FAKE_ID, **({"sudo": FAKE_SUDO} if sudo else {})}
    for tool in have:
        scripts[tool] = '#!/bin/bash\necho "The Coq Proof Assistant, version 8.16.1"\n'
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    res = subprocess.run(
        ["bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": f"{bin_dir}:{tools}", "LOG": str(log), "BIN": str(bin_dir), "HOME": str(tmp_path), **env},
    )
    return res, log.read_text().splitlines()


def test_root_on_a_fresh_machine_installs_everything_in_order(tmp_path, system_tools):
    res, calls = _setup(tmp_path, system_tools, FAKE_UID="0")
    assert res.returncode == 0, res.stderr
    apt = [c for c in calls if c.startswith("apt-get")]
    assert apt == ["apt-get update -qq", "apt-get install -y -qq coq bubblewrap"]
    pip = [c for c in calls if " pip install " in c]
    assert pip == [
        "python -m pip install -q torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu",
        "python -m pip install -q -e .[test]",
    ]
    assert calls.index(apt[-1]) < calls.index(pip[0])
    assert "The Coq Proof Assistant, version 8.16.1" in res.stderr and "ready: proofrl demo" in res.stderr


def test_a_user_with_sudo_installs_through_sudo(tmp_path, system_tools):
    res, calls = _setup(tmp_path, system_tools, FAKE_UID="1000")
    assert res.returncode == 0, res.stderr
    assert "sudo apt-get install -y -qq coq bubblewrap" in calls


def test_a_user_without_root_or_sudo_gets_the_line_to_run(tmp_path, system_tools):
    res, calls = _setup(tmp_path, system_tools, sudo=False, FAKE_UID="1000")
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        "setup: coq bubblewrap missing: as root, run apt-get install -y coq bubblewrap; then rerun bash "
        "scripts/setup.sh"
    ]
    assert not [c for c in calls if c.startswith("apt-get") or " pip install " in c]


def test_nothing_is_installed_twice(tmp_path, system_tools):
    res, calls = _setup(tmp_path, system_tools, have=("coqc", "coqidetop.opt", "bwrap"), NO_TORCH="0")
    assert res.returncode == 0, res.stderr
    assert not [c for c in calls if c.startswith(("apt-get", "sudo"))]
    assert [c for c in calls if " pip install " in c] == ["python -m pip install -q -e .[test]"]


def test_extras_come_from_proofrl_extras_and_a_bad_list_is_one_line(tmp_path, system_tools):
    """CI installs the distributed extra through the same script (PROOFRL_EXTRAS), never a pip line of its own."""
    have = ("coqc", "coqidetop.opt", "bwrap")
    res, calls = _setup(tmp_path, system_tools, have=have, NO_TORCH="0", PROOFRL_EXTRAS="test,distributed")
    assert res.returncode == 0, res.stderr
    assert [c for c in calls if " pip install " in c] == ["python -m pip install -q -e .[test,distributed]"]
    (tmp_path / "bad").mkdir()
    res, calls = _setup(tmp_path / "bad", system_tools, have=have, NO_TORCH="0", PROOFRL_EXTRAS="test; rm -rf /")
    assert res.returncode == 1 and not [c for c in calls if " pip install " in c]
    assert (
        res.stderr.strip().splitlines()[-1].startswith("setup: PROOFRL_EXTRAS=test; rm -rf /: a comma-separated list")
    )


def test_a_system_python_is_refused_with_the_venv_line(tmp_path, system_tools):
    res, calls = _setup(tmp_path, system_tools, MANAGED="1")
    assert res.returncode == 1
    assert "python3 -m venv .venv && . .venv/bin/activate && bash scripts/setup.sh" in res.stderr
    assert not [c for c in calls if c.startswith("apt-get") or " pip install " in c]


def test_readme_and_ci_run_the_same_setup_and_test_command():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    first, tests = (line.split("#")[0].strip() for line in block[:2])
    assert first == "bash scripts/setup.sh && proofrl demo"
    assert tests == "python -m pytest -q -p no:cacheprovider"
    ci = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert "bash scripts/setup.sh" in ci and ci[-1] == tests
    assert not any("apt-get" in line or "pip install" in line for line in ci)  # one set-up, in the script


def test_coq_libraries_and_atps_only_when_asked(tmp_path):
    (tmp_path / "tools").mkdir()
    tools = programs_except((*STANDS_IN, "eprover", "z3", "cvc4"), tmp_path / "tools")
    (tmp_path / "run").mkdir()
    res, calls = _setup(tmp_path / "run", tools, FAKE_UID="0", PROOFRL_COQ_LIBS="1")
    assert res.returncode == 0, res.stderr
    assert [c for c in calls if c.startswith("apt-get install")] == [
        "apt-get install -y -qq coq bubblewrap libcoq-mathcomp-ssreflect libcoq-stdpp libcoq-hammer "
        "libcoq-coquelicot eprover z3 cvc4"
    ]
