"""What the HTTP layer costs: proofs/second through ``/api/check`` versus direct ``pool.check_many`` calls,
for the same proofs and the same number of prover processes.

    python benchmarks/server_overhead.py --n 500 --workers 2 --clients 8 --batch 4

The direct run and the server run each use a fresh pool, warmed on one proof first. Proofs are Coq standard
library theorems (``Coq.Arith.``), falling back to the bundled sample repeated.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from collections import Counter
import threading
import time

import httpx
import uvicorn

from proofrl.check import bundled_sample
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig
from proofrl.server import ServerConfig, create_app
from proofrl.server.snippets import make_job


def snippets(n: int) -> list[str]:
    try:
        from proofrl.data.coq_stdlib import load_stdlib

        records = load_stdlib(prefix="Coq.Arith.", limit=n)
    except Exception:  # noqa: BLE001 - no Coq sources here: use the sample
        records = []
    records = records or bundled_sample()
    out = [f"{r.get('header', '')}\n{r['formal_statement']}\n{r['proof']}" for r in records]
    return [out[i % len(out)] for i in range(n)]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def direct(codes: list[str], workers: int, timeout: float) -> tuple[float, list[float], list[str]]:
    jobs = [(j.theorem, j.proof) for j in map(lambda c: make_job(c, "coq"), codes)]
    with make_pool("coq", pool=PoolConfig(workers=workers, timeout=timeout)) as pool:
        pool.check(*jobs[0])  # warm
        t0 = time.monotonic()
        verdicts = pool.check_many(jobs)
        elapsed = time.monotonic() - t0
    return elapsed, [v.seconds for v in verdicts], [v.status.value for v in verdicts]


def over_http(codes: list[str], workers: int, timeout: float, clients: int, batch: int) -> tuple[float, list[float], list[str]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pool = make_pool("coq", pool=PoolConfig(workers=workers, timeout=timeout))
    server = uvicorn.Server(uvicorn.Config(create_app(pool, ServerConfig(max_inflight=4096)), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    batches = [list(enumerate(codes))[i : i + batch] for i in range(0, len(codes), batch)]
    latencies: list[float] = []  # per request
    statuses: list[str] = [""] * len(codes)

    async def run() -> None:
        queue: asyncio.Queue = asyncio.Queue()
        for b in batches:
            queue.put_nowait(b)

        async def client() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=600) as c:
                while not queue.empty():
                    b = queue.get_nowait()
                    t = time.monotonic()
                    r = await c.post("/api/check", json={"snippets": [{"id": str(i), "code": code} for i, code in b], "timeout": int(timeout)})
                    latencies.append(time.monotonic() - t)
                    for (i, _), res in zip(b, r.json()["results"]):
                        statuses[i] = res["proofrl"]["status"]

        await asyncio.gather(*(client() for _ in range(clients)))

    try:
        httpx.post(url + "/api/check", json={"snippets": [{"id": "w", "code": codes[0]}]}, timeout=60)  # warm
        t0 = time.monotonic()
        asyncio.run(run())
        elapsed = time.monotonic() - t0
    finally:
        server.should_exit = True
        thread.join(30)
    return elapsed, latencies, statuses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--interleave", action="store_true", help="keep the file order (headers mixed across clients)")
    a = ap.parse_args()
    codes = snippets(a.n)
    if not a.interleave:  # the order check_many uses (by header), so both paths load each header as rarely
        codes.sort(key=lambda c: make_job(c, "coq").theorem.header)
    d_s, d_lat, d_st = direct(codes, a.workers, a.timeout)
    h_s, h_lat, h_st = over_http(codes, a.workers, a.timeout, a.clients, a.batch)
    print(f"{a.n} proofs, {a.workers} workers, {a.clients} HTTP clients x batches of {a.batch}")
    print(f"direct : {a.n / d_s:7.1f} proofs/s  ({d_s:.1f} s)  per-proof check p50 {pct(d_lat, .5)*1000:.0f} ms p99 {pct(d_lat, .99)*1000:.0f} ms")
    print(f"HTTP   : {a.n / h_s:7.1f} proofs/s  ({h_s:.1f} s)  per-request p50 {pct(h_lat, .5)*1000:.0f} ms p99 {pct(h_lat, .99)*1000:.0f} ms")
    print(f"ratio HTTP/direct throughput: {d_s / h_s:.3f}")
    same = sum(x == y for x, y in zip(d_st, h_st))
    print(f"verdicts equal: {same}/{a.n}; HTTP statuses {dict(Counter(h_st))}")


if __name__ == "__main__":
    main()
