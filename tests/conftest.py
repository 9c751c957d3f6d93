import os
import shutil
from pathlib import Path

import pytest
import torch

# Coq processes run beside the policy in most tests; a second torch thread on 2 cores only adds contention
# (sampling the tiny model measured 20x slower with 2 threads on busy cores).
torch.set_num_threads(1)

requires_coq = pytest.mark.skipif(
    shutil.which("coqidetop.opt") is None and shutil.which("coqidetop") is None, reason="Coq not installed"
)

NAT = "Require Import Arith Lia."


def usable_cpus(cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The CPUs this process may run on (its affinity), capped by a cgroup v2 quota (``cpu_max``: "QUOTA PERIOD",
    "max PERIOD" when there is none; unreadable: no cap)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()
        if quota != "max":
            cpus = min(cpus, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return cpus


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it (`-p no:xdist`), not an error
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject.toml's addopts): one worker per usable CPU. pytest-xdist's own count is the host's
    physical cores, which in a container limited to 2 CPUs can be dozens: each test then waits for the CPU its
    deadlines assume (4 workers on 2 cores put four tests past theirs)."""
    return usable_cpus()


@pytest.fixture(scope="session")
def coq():
    """One warm Coq prover for the tests that only need a session (loaded with Arith + Lia)."""
    if shutil.which("coqidetop.opt") is None and shutil.which("coqidetop") is None:
        pytest.skip("Coq not installed")
    from proofrl.provers.coq import CoqProver

    p = CoqProver(NAT)
    yield p
    p.close()


def programs_except(prefixes: tuple[str, ...], folder: Path) -> Path:
    """``folder`` filled with links to every program on this PATH whose name starts with none of ``prefixes``
    (the first of a name wins, as PATH lookup does): a PATH for a machine without those programs."""
    for where in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(where):
            continue
        for name in os.listdir(where):
            target, link = Path(where) / name, folder / name
            if name.startswith(prefixes) or link.exists() or link.is_symlink():
                continue
            if target.is_file() and os.access(target, os.X_OK):
                link.symlink_to(target)
    return folder


@pytest.fixture
def blind_session(monkeypatch):
    """Mutation: the session's audits of assumptions switched off (after ``Qed``, and of a partial term after a
    step that closed a goal), as in a session that misses what a fresh ``coqc`` sees. The header's axiom then
    closes goals and ends a proof in the session, and only the final check refuses it: what the search does
    with such a leaf."""
    from proofrl.provers.base import Status, Verdict
    from proofrl.provers.coq.prover import CoqProver

    monkeypatch.setattr(CoqProver, "_audit", lambda self, s, plan, after_qed, left, header, deep: Verdict(Status.VALID))
    monkeypatch.setattr(CoqProver, "_term_axioms", lambda self, s, term, here, timeout: None)
