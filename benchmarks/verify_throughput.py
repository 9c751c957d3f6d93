"""Verdicts per second on real Coq standard-library proofs, measured side by side in one run:

(a) naive: one fresh ``coqc`` process per proof (header, statement, proof, Print Assumptions);
(b) the pool with k = 1 and k = 2 warm ``coqidetop`` processes (prelude loaded once per process);
(c) the limit: the sum of in-process check times (each verdict's own seconds, measured in the k = 1 run) / k.

Prints (b)/(a) and (b)/(c), and how often (a) and (b) agree on the verdict.

Then the RL-shaped workload (``--rl``, theorems): 32 samples per theorem as a policy in training writes them,
mostly wrong (see :func:`rl_samples`), through the pool at k = 1 and 2, each against its in-process limit (the
sum of the verdicts' own seconds at that k, / k). Most of these proofs fail within a few milliseconds inside
Coq, so whatever the pool spends per proof outside the check shows here.

    python benchmarks/verify_throughput.py --n 600 --naive 80 --rl 40
    python benchmarks/verify_throughput.py --smoke   # 8 proofs, 2 through coqc, 2 RL-shaped theorems: seconds

The ``ratio:`` lines are (b)/(a) and (b)/(c) at k = 2.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import Counter
from typing import Any

from _bench import add_smoke, need_coq, ratio
from rich.console import Console
from rich.progress import track
from rich.table import Table

from proofrl.data.coq_stdlib import CORE_PREFIXES, load_stdlib
from proofrl.provers.base import Theorem
from proofrl.provers.coq import CoqConfig, coqc_check
from proofrl.provers.factory import make_pool, prover_factory
from proofrl.provers.pool import PoolConfig, ProverPool

WRONG_STEPS = ("reflexivity.", "exact I.", "apply proofrl_no_such_lemma.", "intros ))).", "discriminate.", "lia.")


def rl_samples(record: dict, k: int, rng: random.Random) -> list[tuple[Theorem, str]]:
    """``k`` completions for one stdlib theorem, shaped like a policy's group early in RL: 2 copies of the
    human proof, the rest wrong in the ways samples are (a wrong or unknown tactic in place of one step, a
    truncated proof, an ``admit``, ``Admitted``, a syntax error)."""
    theorem = Theorem.from_json(record)
    lines = [ln for ln in record["proof"].splitlines() if ln.strip() and ln.strip() not in ("Proof.", "Qed.")]
    out = [record["proof"]] * 2
    while len(out) < k:
        kind = rng.randrange(5)
        body = list(lines)
        if kind == 0 and body:  # one step replaced by a wrong tactic
            body[rng.randrange(len(body))] = rng.choice(WRONG_STEPS)
        elif kind == 1:  # stops early: goals left
            body = body[: rng.randrange(len(body) + 1)]
        elif kind == 2 and body:  # admit in the middle
            body.insert(rng.randrange(len(body)), "admit.")
        elif kind == 3:  # gives up at the end
            out.append("Proof.\n" + "\n".join(body) + "\nAdmitted.")
            continue
        else:  # a wrong first step
            body.insert(0, rng.choice(WRONG_STEPS))
        out.append("Proof.\n" + "\n".join(body) + "\nQed.")
    rng.shuffle(out)
    return [(theorem, p) for p in out]


def _timed_factory(make: Any, loading: list[float]) -> Any:
    """``make`` with the seconds of every call added to ``loading[0]``."""

    def timed(header: str, timeout: float | None = None) -> Any:
        t = time.perf_counter()
        try:
            return make(header, timeout=timeout)
        finally:
            loading[0] += time.perf_counter() - t

    return timed


def rl_workload(console: Console, records: list[dict], timeout: float) -> None:
    rng = random.Random(0)
    jobs = [j for r in records for j in rl_samples(r, 32, rng)]
    console.print(f"RL-shaped: {len(records)} theorems x 32 samples = {len(jobs)} proofs")
    table = Table(title=f"RL-shaped workload, verdicts per second (load average {os.getloadavg()[0]:.1f} at start)")
    for col in (
        "pool",
        "proofs",
        "wall s",
        "verdicts/s",
        "limit/s",
        "(b)/(c)",
        "outside check ms/proof",
        "header loads",
        "outside check less loads ms/proof",
    ):
        table.add_column(col, justify="right")
    notes = []
    # the last row is the pool as it was: memory read after every job (psutil scans every process on the machine)
    for label, k, extra in (("k=1", 1, {}), ("k=2", 2, {}), ("k=1, RSS read per job", 1, {"rss_every": 0.0})):
        loading = [0.0]  # seconds spent starting processes and loading headers (a header switch costs one)
        timed = _timed_factory(prover_factory("coq"), loading)
        with ProverPool(timed, PoolConfig(workers=k, timeout=timeout, **extra)) as pool:
            pool.check_many(jobs[: 32 * k])  # start and load every process's header before the clock starts
            loading[0], started = 0.0, pool.stats.started
            t0 = time.perf_counter()
            verdicts = pool.check_many(jobs)
            wall = time.perf_counter() - t0
            loads = pool.stats.started - started
        in_process = sum(v.seconds for v in verdicts)
        rate, limit = len(jobs) / wall, len(jobs) / (in_process / k)
        outside = (wall * k - in_process) / len(jobs) * 1000
        rest = (wall * k - in_process - loading[0]) / len(jobs) * 1000
        counts = ", ".join(f"{s} {n}" for s, n in Counter(v.status.value for v in verdicts).most_common())
        table.add_row(
            label,
            str(len(jobs)),
            f"{wall:.2f}",
            f"{rate:.0f}",
            f"{limit:.0f}",
            f"{rate / limit:.2f}",
            f"{outside:.2f}",
            f"{loads} in {loading[0]:.1f}s",
            f"{rest:.2f}",
        )
        notes.append(f"{label}: {counts}")
    console.print(table)
    console.print("verdicts: " + "; ".join(notes) + f"; load average {os.getloadavg()[0]:.1f} at the end")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600, help="stdlib proofs for the pool runs")
    ap.add_argument("--naive", type=int, default=80, help="of which this many also go through fresh coqc (it is slow)")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument(
        "--rl", type=int, default=40, help="theorems for the RL-shaped workload (32 samples each); 0 skips it"
    )
    ap.add_argument("--rl-only", action="store_true", help="only the RL-shaped workload")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.n, args.naive, args.rl = 8, 2, 2
    need_coq()
    console = Console()
    if args.rl or args.rl_only:
        stdlib = [r for p in CORE_PREFIXES for r in load_stdlib(prefix=p)]
        rl_workload(console, stdlib[: args.rl or 40], args.timeout)
    if args.rl_only:
        return

    records = [r for p in CORE_PREFIXES for r in load_stdlib(prefix=p)][: args.n]
    jobs = [(Theorem.from_json(r), r["proof"]) for r in records]
    headers = len({t.header for t, _ in jobs})
    console.print(f"{len(jobs)} proofs from {len({r['module'] for r in records})} modules ({headers} distinct headers)")

    results = {}
    for k in (1, 2):
        with make_pool("coq", pool=PoolConfig(workers=k, timeout=args.timeout)) as pool:
            t0 = time.perf_counter()
            verdicts = pool.check_many(jobs)
            wall = time.perf_counter() - t0
            results[k] = (wall, verdicts, pool.stats.started)
        console.print(
            f"pool k={k}: {wall:.1f}s, {pool.stats.started} processes started, "
            f"{Counter(v.status.value for v in verdicts)}"
        )

    sample = jobs[: args.naive]
    cfg = CoqConfig(timeout=args.timeout)
    t0 = time.perf_counter()
    naive = [coqc_check(t, p, cfg) for t, p in track(sample, description="fresh coqc per proof")]
    naive_wall = time.perf_counter() - t0
    naive_rate = len(sample) / naive_wall
    agree = sum(a.status == b.status for a, b in zip(naive, results[1][1], strict=False))

    in_process = sum(v.seconds for v in results[1][1])  # time spent checking inside warm sessions
    table = Table(title="verdicts per second (higher is better)")
    for col in ("setting", "proofs", "wall s", "verdicts/s", "vs naive (b)/(a)", "vs limit (b)/(c)"):
        table.add_column(col, justify="right")
    table.add_row("(a) fresh coqc", str(len(sample)), f"{naive_wall:.1f}", f"{naive_rate:.2f}", "1.00", "")
    for k in (1, 2):
        wall, verdicts, _ = results[k]
        rate, limit = len(jobs) / wall, len(jobs) / (in_process / k)
        table.add_row(
            f"(b) pool k={k}",
            str(len(jobs)),
            f"{wall:.1f}",
            f"{rate:.2f}",
            f"{rate / naive_rate:.1f}x",
            f"{rate / limit:.2f}",
        )
        table.add_row(f"(c) limit k={k}", str(len(jobs)), f"{in_process / k:.1f}", f"{limit:.2f}", "", "1.00")
    console.print(table)
    console.print(f"(a) and (b) agree on {agree}/{len(sample)} verdicts")
    wall2 = results[2][0]
    ratio("pool k=2 / fresh coqc, verdicts/s (b)/(a)", len(jobs) / wall2 / naive_rate)
    ratio("pool k=2 / its limit, verdicts/s (b)/(c)", (len(jobs) / wall2) / (len(jobs) / (in_process / 2)))
    for a, b, (t, _) in zip(naive, results[1][1], sample, strict=False):
        if a.status != b.status:
            console.print(f"  differ on {t.name}: coqc {a} / pool {b}")


if __name__ == "__main__":
    main()
