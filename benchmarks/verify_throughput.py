"""Verdicts per second on real Coq standard-library proofs, measured side by side in one run:

(a) naive: one fresh ``coqc`` process per proof (header, statement, proof, Print Assumptions);
(b) the pool with k = 1 and k = 2 warm ``coqidetop`` processes (prelude loaded once per process);
(c) the limit: the sum of in-process check times (each verdict's own seconds, measured in the k = 1 run) / k.

Prints (b)/(a) and (b)/(c), and how often (a) and (b) agree on the verdict.

    python benchmarks/verify_throughput.py --n 600 --naive 80
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from rich.console import Console
from rich.progress import track
from rich.table import Table

from proofrl.data.coq_stdlib import CORE_PREFIXES, load_stdlib
from proofrl.provers.base import Theorem
from proofrl.provers.coq import CoqConfig, coqc_check
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600, help="stdlib proofs for the pool runs")
    ap.add_argument("--naive", type=int, default=80, help="of which this many also go through fresh coqc (it is slow)")
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()
    console = Console()

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
        console.print(f"pool k={k}: {wall:.1f}s, {pool.stats.started} processes started, {Counter(v.status.value for v in verdicts)}")

    sample = jobs[: args.naive]
    cfg = CoqConfig(timeout=args.timeout)
    t0 = time.perf_counter()
    naive = [coqc_check(t, p, cfg) for t, p in track(sample, description="fresh coqc per proof")]
    naive_wall = time.perf_counter() - t0
    naive_rate = len(sample) / naive_wall
    agree = sum(a.status == b.status for a, b in zip(naive, results[1][1]))

    in_process = sum(v.seconds for v in results[1][1])  # time spent checking inside warm sessions
    table = Table(title="verdicts per second (higher is better)")
    for col in ("setting", "proofs", "wall s", "verdicts/s", "vs naive (b)/(a)", "vs limit (b)/(c)"):
        table.add_column(col, justify="right")
    table.add_row("(a) fresh coqc", str(len(sample)), f"{naive_wall:.1f}", f"{naive_rate:.2f}", "1.00", "")
    for k in (1, 2):
        wall, verdicts, _ = results[k]
        rate, limit = len(jobs) / wall, len(jobs) / (in_process / k)
        table.add_row(f"(b) pool k={k}", str(len(jobs)), f"{wall:.1f}", f"{rate:.2f}", f"{rate / naive_rate:.1f}x", f"{rate / limit:.2f}")
        table.add_row(f"(c) limit k={k}", str(len(jobs)), f"{in_process / k:.1f}", f"{limit:.2f}", "", "1.00")
    console.print(table)
    console.print(f"(a) and (b) agree on {agree}/{len(sample)} verdicts")
    for a, b, (t, _) in zip(naive, results[1][1], sample):
        if a.status != b.status:
            console.print(f"  differ on {t.name}: coqc {a} / pool {b}")


if __name__ == "__main__":
    main()
