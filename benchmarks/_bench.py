"""What every script under ``benchmarks/`` shares: the ``--smoke`` flag and the ``ratio:`` line.

``--smoke`` runs the script at a size that finishes in seconds (CI runs every script so, see
``tests/test_benchmarks_smoke.py``): the same code path, too small for its numbers to mean anything.
Each script prints its headline comparison as one or more lines starting with ``ratio:``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

SMOKE_ROOT = Path("runs/bench-smoke")
"""where ``--smoke`` runs write (relative to the working directory), the shared tiny tactic assets included"""


def add_smoke(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--smoke", action="store_true", help="a size that finishes in seconds (CI): the code path, not the numbers"
    )


def ratio(name: str, value: float) -> None:
    """Print the headline ``ratio: NAME VALUE`` line (``nan`` when a side measured nothing)."""
    print(f"ratio: {name} {value:.3f}" if math.isfinite(value) else f"ratio: {name} nan", flush=True)


def skip(reason: str) -> None:
    """Exit 0 with one ``skipped:`` line: what this script needs and this machine lacks."""
    print(f"skipped: {reason}", flush=True)
    sys.exit(0)


def div(a: float, b: float) -> float:
    return a / b if b else math.nan


def need_coq() -> None:
    """Skip (exit 0, one line naming the install command) where Coq is not installed."""
    from proofrl.errors import BackendUnavailable
    from proofrl.preflight import require_backend

    try:
        require_backend("coq")
    except BackendUnavailable as e:
        skip(str(e))


def smoke_assets(root: Path | None = None) -> Any:
    """The tiny tactic assets under ``root`` (default :data:`SMOKE_ROOT`), built there once (seconds) and loaded
    by every later ``--smoke`` run."""
    from proofrl.data.assets import SMOKE_ASSETS, AssetsConfig, tactic_assets

    return tactic_assets(root or SMOKE_ROOT, settings=AssetsConfig(**SMOKE_ASSETS), workers=1)
