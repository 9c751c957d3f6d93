"""What the HTTP layer costs: proofs/second through ``/api/check`` versus direct pool calls, for the same
proofs, the same number of prover processes and the same arrival pattern.

    python benchmarks/server_overhead.py --n 500 --workers 2 --clients 8 --batch 4 --repeat 2

Three paths, each on a fresh pool warmed on one proof, run in turn ``--repeat`` times (so a change in the
machine's load hits all of them alike):

* ``direct``: ``clients`` threads, each calling ``pool.check_many`` on the next batch of ``batch`` proofs;
* ``HTTP``: ``clients`` asyncio clients, each posting the next batch to ``/api/check`` (uvicorn on loopback,
  in this process so the pool's counters can be read);
* ``one call``: a single ``check_many`` of all proofs (the best case for header grouping; a reference, not
  part of the ratio).

Both compared paths queue their jobs in the pool's one backlog, so they get the same header grouping; the
ratio is HTTP throughput / direct throughput. ``starts`` counts prover processes started (each loads a
header), the work besides the proofs themselves: equal starts mean equal work. Latency is per request
(one batch), as a client sees it. Proofs are Coq standard library theorems (``Coq.Arith.`` and ``Coq.Bool.``)
whose snippet the server accepts (a header that declares something, such as ``Implicit Types``, is refused
before any prover runs, so it would measure nothing), falling back to the bundled sample, repeated up to
``--n`` in file order, sorted by header.

    python benchmarks/server_overhead.py --smoke     # 8 proofs, one worker, one repeat: seconds
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass

import httpx
import uvicorn
from _bench import add_smoke, need_coq, ratio

from proofrl.check import bundled_sample
from proofrl.provers import sandbox
from proofrl.provers.base import Verdict
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig, ProverPool
from proofrl.provers.snippets import Job, make_job
from proofrl.server import ServeConfig, create_app

PREFIXES = ("Coq.Arith.", "Coq.Bool.")


def snippets(n: int) -> tuple[list[str], int]:
    """``n`` snippets the server accepts (repeated in file order), and how many distinct ones it refused."""
    try:
        from proofrl.data.coq_stdlib import load_stdlib

        records = [r for p in PREFIXES for r in load_stdlib(prefix=p)]
    except Exception:  # no Coq sources here: use the sample
        records = []
    records = records or bundled_sample()
    codes = [f"{r.get('header', '')}\n{r['formal_statement']}\n{r['proof']}" for r in records]
    out = [c for c in codes if isinstance(make_job(c, "coq"), Job)]
    return [out[i % len(out)] for i in range(n)], len(codes) - len(out)


def job(code: str) -> Job:
    j = make_job(code, "coq")
    assert not isinstance(j, Verdict), "snippets() keeps only accepted snippets"
    return j


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


@dataclass
class Run:
    path: str
    seconds: float
    latencies: list[float]  # per request
    statuses: list[str]  # per proof, in input order
    starts: int  # prover processes started (header loads), the warm-up's included

    def line(self, n: int) -> str:
        lat = f"request p50 {pct(self.latencies, 0.5) * 1000:6.0f} ms  p99 {pct(self.latencies, 0.99) * 1000:6.0f} ms"
        return f"{self.path:9s}: {n / self.seconds:6.1f} proofs/s ({self.seconds:5.1f} s)  {lat}  starts {self.starts}"


def fresh_pool(workers: int, timeout: float, first: str) -> ProverPool:
    pool = make_pool("coq", pool=PoolConfig(workers=workers, timeout=timeout))
    j = job(first)
    pool.check(j.theorem, j.proof)  # warm one process
    return pool


def batches(codes: list[str], batch: int) -> list[list[tuple[int, str]]]:
    numbered = list(enumerate(codes))
    return [numbered[i : i + batch] for i in range(0, len(codes), batch)]


def direct(codes: list[str], workers: int, timeout: float, clients: int, batch: int) -> Run:
    pool = fresh_pool(workers, timeout, codes[0])
    todo = batches(codes, batch)
    lock = threading.Lock()
    latencies: list[float] = []
    statuses = [""] * len(codes)

    def client() -> None:
        while True:
            with lock:
                if not todo:
                    return
                b = todo.pop(0)
            t = time.monotonic()
            jobs = [job(code) for _, code in b]
            verdicts = pool.check_many([(j.theorem, j.proof) for j in jobs], timeout=timeout)
            with lock:
                latencies.append(time.monotonic() - t)
                for (i, _), v in zip(b, verdicts, strict=True):
                    statuses[i] = v.status.value

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    pool.close()
    return Run("direct", elapsed, latencies, statuses, pool.stats.started)


def one_call(codes: list[str], workers: int, timeout: float) -> Run:
    pool = fresh_pool(workers, timeout, codes[0])
    jobs = [job(c) for c in codes]
    t0 = time.monotonic()
    verdicts = pool.check_many([(j.theorem, j.proof) for j in jobs], timeout=timeout)
    elapsed = time.monotonic() - t0
    pool.close()
    return Run("one call", elapsed, [elapsed], [v.status.value for v in verdicts], pool.stats.started)


def over_http(codes: list[str], workers: int, timeout: float, clients: int, batch: int) -> Run:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pool = fresh_pool(workers, timeout, codes[0])
    config = uvicorn.Config(
        create_app(pool, ServeConfig(max_inflight=4096)), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    todo = batches(codes, batch)
    latencies: list[float] = []
    statuses = [""] * len(codes)

    async def client() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600) as c:
            while todo:
                b = todo.pop(0)
                t = time.monotonic()
                body = {"snippets": [{"id": str(i), "code": code} for i, code in b], "timeout": int(timeout)}
                r = await c.post("/api/check", json=body)
                latencies.append(time.monotonic() - t)
                for (i, _), res in zip(b, r.json()["results"], strict=True):
                    statuses[i] = res["proofrl"]["status"]

    async def all_clients() -> None:
        await asyncio.gather(*(client() for _ in range(clients)))

    try:
        t0 = time.monotonic()
        asyncio.run(all_clients())
        elapsed = time.monotonic() - t0
    finally:
        server.should_exit = True
        thread.join(30)
    return Run("HTTP", elapsed, latencies, statuses, pool.stats.started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--repeat", type=int, default=2)
    add_smoke(ap)
    a = ap.parse_args()
    if a.smoke:
        a.n, a.workers, a.clients, a.repeat = 8, 1, 2, 1
    need_coq()
    codes, refused = snippets(a.n)
    codes.sort(key=lambda c: job(c).theorem.header)  # stable: file order within a header
    headers = len({job(c).theorem.header for c in codes})
    sb = sandbox.current()
    print(
        f"{a.n} proofs over {headers} headers ({refused} distinct snippets left out: refused by the snippet-header "
        f"allowlist), {a.workers} workers, {a.clients} clients x batches of {a.batch}, "
        f"sandbox {sb.mode}, {os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.2f}"
    )
    for r in range(1, a.repeat + 1):
        d = direct(codes, a.workers, a.timeout, a.clients, a.batch)
        h = over_http(codes, a.workers, a.timeout, a.clients, a.batch)
        o = one_call(codes, a.workers, a.timeout)
        print(f"-- run {r} (load average {os.getloadavg()[0]:.2f})")
        for run in (d, h, o):
            print("  " + run.line(a.n))
        same = sum(x == y for x, y in zip(d.statuses, h.statuses, strict=True))
        print(f"  verdicts equal {same}/{a.n}; statuses {dict(Counter(h.statuses))}")
        ratio("HTTP/direct throughput", d.seconds / h.seconds)


if __name__ == "__main__":
    main()
