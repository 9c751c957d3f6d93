"""How fast this machine does Coq's work now: the wall seconds of one fixed ``coqc`` job.

A search row's budget is wall seconds, so the same row on a machine half as fast is a row with half the budget;
a row that spans sittings may have run on several machines. The job (:data:`JOB`) loads ``ZArith`` and ``Lia``,
computes by ``vm_compute`` and by conversion, and proves two goals by ``lia`` and ``nia``: what a search step
spends its time on (loading a header, reducing, deciding arithmetic). It takes about 1.2 s on a 2-core machine
at rest; two machines' paces compare rows run on them, and the load average taken with it says how busy the
machine was. None where ``coqc`` is missing or the job fails (the pace is then unknown, never guessed). The job
runs through :func:`~proofrl.provers.process.run_once`, in the sandbox, as the search's Coq processes do, so its
pace includes what the sandbox costs them.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from ..process import run_once
from .session import coq_library

JOB = """\
Require Import ZArith Lia.
Fixpoint f (n : nat) : nat := match n with 0 => 1 | S m => f m + f m end.
Goal Nat.eqb (f 17) (f 16 + f 16) = true. Proof. vm_compute. reflexivity. Qed.
Goal Nat.eqb (f 12) (f 11 * 2) = true. Proof. reflexivity. Qed.
Open Scope Z_scope.
Goal forall x y z : Z, 0 <= x -> 0 <= y -> x * y * z <= x * y * z + x * x. Proof. intros; nia. Qed.
Goal forall a b c d : Z, a <= b -> c <= d -> a + c <= b + d + 0 * a. Proof. intros; lia. Qed.
"""


def machine_pace(timeout: float = 60.0) -> dict[str, Any] | None:
    """``{"pace_s": wall seconds of JOB through a fresh coqc, "load": 1-minute load average before it}``, or None."""
    load = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="proofrl-pace-") as d:
        (Path(d) / "Pace.v").write_text(JOB, encoding="utf-8")
        t0 = time.perf_counter()
        try:
            done = run_once(["coqc", "-q", "Pace.v"], timeout=timeout, cwd=d, readable=coq_library())
        except OSError:  # no coqc, or no sandbox to run it in
            return None
        wall = time.perf_counter() - t0
    ok = done.returncode == 0 and not done.timed_out
    return {"pace_s": round(wall, 3), "load": load} if ok else None
