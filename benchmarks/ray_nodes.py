"""Verification throughput per Ray node added: items/s for 1, 2 and 3 simulated nodes on this machine's cores.

    python benchmarks/ray_nodes.py            # 48 proofs of 3 headers, each about 0.3 s of Coq
    python benchmarks/ray_nodes.py --smoke    # 6 proofs (CI: the code path, not the numbers)

The nodes are Ray's own test cluster (:class:`proofrl.distributed.simulated.SimCluster`: a raylet per node, one
declared CPU each, so each node's verification actor runs one Coq process). The batch goes through
:func:`proofrl.distributed.verification.averify_across_nodes` restricted to the first 1, 2, 3 nodes: split by
header, one share per node's actor. Every node's actor is warmed first (Coq started, headers loaded), so what is
timed is judging; the sizes are timed in rounds (1, 2, 3 nodes, then again) and each size's median is reported.

The simulated nodes share this machine's cores: k nodes run k Coq processes on ``os.cpu_count()`` cores, so on
an idle machine the speed-up is bounded by min(k, cores); on a busy one, k processes also take a larger share of
the cores from the other work, so the ratio mixes scaling with that share (the load average is printed beside
the numbers). With one node, its one Coq process also restarts for each header. On real machines each node
brings its own cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from _bench import add_smoke, div, need_coq, ratio

HEADERS = ("Require Import Arith Lia.", "Require Import Bool.", "Require Import List.")
WORK = "do {n} (assert True by exact I; clear H)."
"""a proof step whose Coq time grows with n (about 0.3 s at 5000 on one free core)"""


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def jobs(count: int, work: int) -> list:
    from proofrl.problems import Problem

    out = []
    for i in range(count):
        header = HEADERS[i % len(HEADERS)]
        p = Problem(f"t{i}", f"Theorem t{i} : True.", header)
        out.append((p, f"Proof. {WORK.format(n=work)} exact I. Qed."))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_smoke(ap)
    ap.add_argument("--items", type=int, default=None, help="proofs per batch (48; --smoke 6)")
    ap.add_argument("--work", type=int, default=None, help="the proof's loop count (5000; --smoke 200)")
    ap.add_argument("--nodes", type=int, default=3, help="simulated nodes (timed with 1..nodes)")
    ap.add_argument(
        "--repeats", type=int, default=None, help="rounds of 1..nodes; the median is reported (3; --smoke 1)"
    )
    args = ap.parse_args(argv)
    need_coq()
    items = args.items or (6 if args.smoke else 48)
    work = args.work or (200 if args.smoke else 5000)
    repeats = args.repeats or (1 if args.smoke else 3)

    import ray

    from proofrl.distributed.simulated import SimCluster
    from proofrl.distributed.verification import (
        averify_across_nodes,
        stop_verifiers,
        verifier,
    )

    sim = SimCluster()
    try:
        sim.ensure(args.nodes)
        ray.init(address=sim.address, namespace="proofrl", log_to_driver=False)
        nodes = [n.node_id for n in sim.nodes]
        batch = jobs(items, work)
        name = "bench-verifier"
        # warm-up: every node's actor starts its Coq process and loads each header
        warm = [(p, "Proof. exact I. Qed.") for p, _ in jobs(len(HEADERS) * len(nodes), 1)]
        for node in nodes:
            assert all(v.valid for v in asyncio.run(averify_across_nodes(warm, actor_name=name, nodes=[node])))
        print(f"machine: {os.cpu_count()} cores, load average {load()} before timing")
        times: dict[int, list[float]] = {k: [] for k in range(1, len(nodes) + 1)}
        for _ in range(repeats):  # rounds of 1, 2, 3 nodes side by side: load that drifts hits every size
            for k, ts in times.items():
                t0 = time.perf_counter()
                verdicts = asyncio.run(averify_across_nodes(batch, actor_name=name, nodes=nodes[:k]))
                ts.append(time.perf_counter() - t0)
                bad = [v for v in verdicts if not v.valid]
                if bad:
                    raise SystemExit(f"ray_nodes: {len(bad)} proofs not valid: {bad[0].reasons}")
        print(f"{'nodes':>5} {'items':>6} {'seconds':>8} {'items/s':>8} {'vs 1 node':>9}   (median of {repeats})")
        rates = {k: items / statistics.median(ts) for k, ts in times.items()}
        for k, ts in times.items():
            print(
                f"{k:>5} {items:>6} {statistics.median(ts):>8.2f} {rates[k]:>8.2f} {div(rates[k], rates[1]):>9.2f}"
                f"   (rounds: {', '.join(f'{t:.2f}' for t in ts)} s)",
                flush=True,
            )
        per_node = [ray.get(verifier(name, node_id=n).stats.remote())["coq"]["started"] for n in nodes]
        print(f"Coq processes started per node: {per_node}; load average after: {load()}")
        for k in range(2, len(nodes) + 1):
            ratio(f"items_per_s_{k}_over_1_nodes", div(rates[k], rates[1]))
        print(
            f"the cores limit: {len(nodes)} nodes share {os.cpu_count()} cores here; on an idle machine the ratio "
            f"for k nodes is at most min(k, {os.cpu_count()}), on a busy one k processes also take a larger share "
            "of the cores from other work"
        )
        stop_verifiers(name)
    finally:
        ray.shutdown()
        sim.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
