"""Every script under ``benchmarks/`` runs at its smoke size (``--smoke``), exits 0 and prints its ``ratio:`` line.

The scripts are found by globbing, so a new script without ``--smoke`` fails here (argparse exits 2 on the
unknown flag). A script whose optional need is missing here (TRL, a GPU, Coq) prints one ``skipped: REASON`` line
and exits 0; the test skips with that reason. All runs share one working directory: the tiny tactic assets that
several scripts need (``proofrl.data.assets.SMOKE_ASSETS``) are built there once, first, and loaded by the
rest. The scripts then run two at a time (much of a smoke run is waiting: imports, prover start-up).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
RATIO = re.compile(r"^ratio: \S.* (-?\d+\.\d+|nan)$")
SMOKE_SECONDS = 300
"""a smoke run takes seconds; this only stops a script that ignores ``--smoke`` from running at full size"""
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}


def run_smoke(script: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), "--smoke"],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=SMOKE_SECONDS,
    )


@pytest.fixture(scope="session")
def smoke_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The smoke run of every script this session selected, started two at a time in one shared working
    directory, by script."""
    selected = [
        s
        for s in SCRIPTS
        if any(
            getattr(item, "callspec", None) and item.callspec.params.get("script") == s
            for item in request.session.items
        )
    ]
    cwd = tmp_path_factory.mktemp("benchmarks-smoke")
    if shutil.which("coqidetop") or shutil.which("coqidetop.opt"):  # the shared assets, before any script loads them
        build = f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); import _bench; _bench.smoke_assets()"
        subprocess.run([sys.executable, "-c", build], cwd=cwd, env=ENV, capture_output=True, timeout=SMOKE_SECONDS)
    pool = ThreadPoolExecutor(max_workers=2)
    runs = {script: pool.submit(run_smoke, script, cwd) for script in selected}
    yield runs
    pool.shutdown(wait=True, cancel_futures=True)


def test_the_glob_finds_the_benchmarks():
    names = {p.stem for p in SCRIPTS}
    assert {"server_overhead", "rl_step", "verify_throughput", "eva", "memory"} <= names, names


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_every_benchmark_runs_at_smoke_size(script: Path, smoke_runs: dict[Path, Future]):
    r = smoke_runs[script].result()
    tail = f"\n--- stdout (tail)\n{r.stdout[-3000:]}\n--- stderr (tail)\n{r.stderr[-3000:]}"
    lines = r.stdout.splitlines()
    skipped = [x for x in lines if x.startswith("skipped: ")]
    if r.returncode == 0 and skipped:
        pytest.skip(f"{script.name}: {skipped[0].removeprefix('skipped: ')}")
    assert r.returncode == 0, f"{script.name} --smoke exited {r.returncode}{tail}"
    ratios = [x for x in lines if x.startswith("ratio:")]
    assert ratios, f"{script.name} --smoke printed no 'ratio:' line{tail}"
    bad = [x for x in ratios if not RATIO.match(x)]
    assert not bad, f"{script.name}: malformed ratio lines {bad} (want 'ratio: NAME VALUE')"
