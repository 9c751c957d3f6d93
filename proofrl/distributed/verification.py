"""One verification actor per Ray node, shared by every reward worker on it: ``await averify_on_ray(jobs)``.

verl starts many reward workers (8 by default), each scoring one sample at a time. A pool per worker would
split header affinity eight ways and start eight times the prover processes; this actor holds one
:class:`~proofrl.provers.pool.ProverPool` per backend for the whole node, so every caller's jobs join one
backlog and go to processes already holding their header.

* **Get or create by name.** The actor is ``{actor_name}@{node id}`` in the ``proofrl`` namespace, pinned to
  its node and detached (it outlives the job that started it: :func:`stop_verifiers` ends it). The first caller
  on a node starts it; every later caller, from any job, finds it.
* **Every item gets an answer.** A prover killed mid-batch is the pool's business (one retry on a fresh
  process, then ``crash``). A dead actor is restarted by Ray (``max_restarts``) and the calls it was running
  are sent again (``max_task_retries``); if the actor stays unreachable, the caller asks for it once more by
  name (a new one is started if it is gone for good), and past that each item is an ``error`` verdict
  ``verifier unavailable: ...`` — never a missing or reordered item.
* **A batch over every node.** :func:`averify_across_nodes` splits a batch by header over the actors of all
  nodes with CPUs. A node lost mid-batch takes its actor with it (the actor is pinned there): its items go to
  the verifier of the surviving node given the fewest items of the batch, started there if it has none. A node without
  the prover says so in one line and its items go elsewhere.
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ..errors import BackendUnavailable
from ..problems import Problem
from ..provers.base import Status, Theorem, Verdict, loaded_header
from ..provers.factory import make_pool
from ..provers.pool import PoolConfig, ProverPool
from ..verification import DEFAULT_TIMEOUT, answer_unchecked
from . import NAMESPACE, connect

ACTOR_NAME = "proofrl-verifier"
MAX_RESTARTS = -1
"""Ray restarts a dead verification actor without limit (its start is cheap: pools start processes lazily)"""
MAX_TASK_RETRIES = 2
"""calls in flight on an actor that died are sent again this many times (a verdict is idempotent)"""


class VerificationService:
    """The actor's body: one pool per backend, made on first use, shared by every caller's jobs."""

    def __init__(self, workers: int, timeout: float):
        self.workers, self.timeout = workers, timeout
        self._pools: dict[str, ProverPool] = {}

    def _pool(self, backend: str) -> ProverPool:
        if backend not in self._pools:
            self._pools[backend] = make_pool(backend, pool=PoolConfig(workers=self.workers, timeout=self.timeout))
        return self._pools[backend]

    async def check(self, backend: str, jobs: list[tuple[Theorem, str]], timeout: float | None) -> list[Verdict] | str:
        """The verdicts, in order; or, on a node without the backend's prover, one line saying so (the caller
        sends the jobs elsewhere)."""
        from ..preflight import require_backend

        try:
            require_backend(backend)
        except BackendUnavailable as e:
            return f"node {self.node()[:12]}: {e}"
        return await self._pool(backend).acheck_many(jobs, timeout=timeout)

    def pid(self) -> int:
        return os.getpid()

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def prover_pids(self, backend: str = "coq") -> list[int]:
        """Live prover processes (tests kill these)."""
        return self._pools[backend].pids() if backend in self._pools else []

    def stats(self) -> dict[str, Any]:
        return {
            b: {
                "started": p.stats.started,
                "crashes": p.stats.crashes,
                "verdicts": dict(p.stats.verdicts),
                "queued": p.queued,
                "busy": p.busy,
            }
            for b, p in self._pools.items()
        }


_actor_class: Any = None
_handles: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()


def verifier(
    actor_name: str = ACTOR_NAME,
    *,
    workers: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    node_id: str | None = None,
) -> Any:
    """The verification actor of this node (or ``node_id``), started if it does not exist. ``workers`` (prover
    processes per backend; default: the node's CPUs as Ray counts them) and ``timeout`` (seconds per proof when a
    call gives none) apply only when this call starts it."""
    global _actor_class
    ray = connect()
    node = node_id or ray.get_runtime_context().get_node_id()
    with _lock:
        if (actor_name, node) in _handles:
            return _handles[(actor_name, node)]
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if _actor_class is None:
            _actor_class = ray.remote(VerificationService)
        if workers is None:
            cpus = next((n["Resources"].get("CPU", 1) for n in ray.nodes() if n["NodeID"] == node and n["Alive"]), 1)
            workers = max(1, int(cpus))
        handle = _actor_class.options(
            name=f"{actor_name}@{node}",
            namespace=NAMESPACE,
            get_if_exists=True,
            lifetime="detached",
            max_restarts=MAX_RESTARTS,
            max_task_retries=MAX_TASK_RETRIES,
            num_cpus=0,  # a service: its prover processes are bounded by `workers`, not by Ray's CPU accounting
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote(workers, timeout)
        _handles[(actor_name, node)] = handle
        return handle


def _forget(actor_name: str, node: str | None = None) -> None:
    with _lock:
        for key in [k for k in _handles if k[0] == actor_name and node in (None, k[1])]:
            del _handles[key]


async def averify_on_ray(
    jobs: Sequence[tuple[Problem, str | None]],
    *,
    backend: str = "coq",
    timeout: float | None = None,
    actor_name: str = ACTOR_NAME,
) -> list[Verdict]:
    """One verdict per ``(problem, proof)`` pair, in input order, from this node's verification actor. Items that
    need no prover (no proof, another backend) are answered here, as :class:`~proofrl.verification.Verifier`
    answers them. ``timeout``: seconds per proof (None: the actor's default)."""
    from ray.exceptions import RayActorError, RayTaskError

    out: list[Verdict | None] = [answer_unchecked(problem, proof, backend) for problem, proof in jobs]
    todo = [i for i, v in enumerate(out) if v is None]
    if not todo:
        return out  # type: ignore[return-value]
    send = [(jobs[i][0].theorem, jobs[i][1]) for i in todo]
    why = ""
    for _ in range(2):  # a second time by name: a new actor if the old one is gone for good
        try:
            got = await verifier(actor_name).check.remote(backend, send, timeout)
            break
        except RayTaskError as e:  # the actor ran and raised (an unknown backend): that is every item's answer
            got = [Verdict(Status.ERROR, (f"verifier failed: {type(e.cause).__name__}: {e.cause}"[:300],))] * len(send)
            break
        except RayActorError as e:
            why = " ".join(str(e).split())[:300]
            _forget(actor_name)
    else:
        got = [Verdict(Status.ERROR, (f"verifier unavailable: {why}",))] * len(send)
    if isinstance(got, str):  # this node has no such prover
        got = [Verdict(Status.ERROR, (f"verifier unavailable: {got}"[:300],))] * len(send)
    for i, v in zip(todo, got, strict=True):
        out[i] = v
    return out  # type: ignore[return-value]


def verify_on_ray(
    jobs: Sequence[tuple[Problem, str | None]],
    *,
    backend: str = "coq",
    timeout: float | None = None,
    actor_name: str = ACTOR_NAME,
) -> list[Verdict]:
    """:func:`averify_on_ray` for code without an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(averify_on_ray(jobs, backend=backend, timeout=timeout, actor_name=actor_name))
    raise RuntimeError("verify_on_ray was called inside a running event loop: use `await averify_on_ray(...)`")


def working_nodes() -> list[str]:
    """Ids of the alive nodes that declare CPUs (a node with none, such as a head kept for the driver, does no
    work), in the order Ray lists them."""
    ray = connect()
    return [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]


def _split(jobs: Sequence[tuple[Problem, str | None]], todo: list[int], nodes: int) -> list[list[int]]:
    """``todo`` cut into ``nodes`` shares: a header's items together, in pieces of at most n / nodes, each piece
    to the share with the fewest items so far."""
    size = max(1, math.ceil(len(todo) / nodes))
    by_header: dict[str, list[int]] = defaultdict(list)
    for i in todo:
        by_header[loaded_header(jobs[i][0].header)].append(i)  # one process serves every placement
    pieces = sorted(
        (g[k : k + size] for g in by_header.values() for k in range(0, len(g), size)), key=len, reverse=True
    )
    shares: list[list[int]] = [[] for _ in range(nodes)]
    for piece in pieces:
        min(shares, key=len).extend(piece)
    return shares


async def averify_across_nodes(
    jobs: Sequence[tuple[Problem, str | None]],
    *,
    backend: str = "coq",
    timeout: float | None = None,
    actor_name: str = ACTOR_NAME,
    nodes: Sequence[str] | None = None,
    moves: list[dict[str, Any]] | None = None,
) -> list[Verdict]:
    """One verdict per pair, in input order, from the verification actors of ``nodes`` (default: every
    :func:`working_nodes`), the batch split by header. A share whose node is lost mid-batch, or whose node has
    no prover, is sent to the actor of the surviving node given the fewest items of this batch (started there
    if needed); each such move is
    one line on stderr and, when ``moves`` is given, a dict appended to it (``from``, ``to``, ``items``, ``why``).
    Past every node, the items left are ``error`` verdicts ``verifier unavailable: ...``."""
    from ray.exceptions import ActorUnschedulableError, NodeDiedError, RayActorError, RayTaskError, WorkerCrashedError

    lost = (RayActorError, ActorUnschedulableError, NodeDiedError, WorkerCrashedError)
    out: list[Verdict | None] = [answer_unchecked(problem, proof, backend) for problem, proof in jobs]
    todo = [i for i, v in enumerate(out) if v is None]
    if not todo:
        return out  # type: ignore[return-value]
    targets = list(nodes) if nodes is not None else working_nodes()
    if not targets:
        raise RuntimeError("no alive Ray node with CPUs to verify on")
    load: dict[str, int] = defaultdict(int)  # items given to each node in this batch
    gone: set[str] = set()  # nodes lost or without the prover, for this batch

    def send(node: str, share: list[int]) -> Any:
        load[node] += len(share)
        return verifier(actor_name, node_id=node).check.remote(
            backend, [(jobs[i][0].theorem, jobs[i][1]) for i in share], timeout
        )

    running: dict[asyncio.Future, tuple[str, list[int]]] = {}
    for node, share in zip(targets, _split(jobs, todo, len(targets)), strict=True):
        if share:
            running[asyncio.ensure_future(send(node, share))] = (node, share)
    while running:
        finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        for fut in finished:
            node, share = running.pop(fut)
            try:
                got = fut.result()
                if not isinstance(got, str):
                    for i, v in zip(share, got, strict=True):
                        out[i] = v
                    continue
                why = got  # no prover on that node
            except RayTaskError as e:  # the actor ran and raised: that is the share's answer
                for i in share:
                    out[i] = Verdict(Status.ERROR, (f"verifier failed: {type(e.cause).__name__}: {e.cause}"[:300],))
                continue
            except lost as e:  # the node died: its pinned actor cannot be restarted there
                why = "node lost: " + " ".join(str(e).split())[:200]
                _forget(actor_name, node)
            gone.add(node)
            alive = [n for n in working_nodes() if n not in gone]
            if not alive:
                for i in share:
                    out[i] = Verdict(Status.ERROR, (f"verifier unavailable: {why}"[:300],))
                continue
            to = min(alive, key=lambda n: load[n])
            print(
                f"proofrl verify: {len(share)} items moved from node {node[:12]} to node {to[:12]}: {why}",
                file=sys.stderr,
                flush=True,
            )
            if moves is not None:
                moves.append({"from": node, "to": to, "items": len(share), "why": why})
            running[asyncio.ensure_future(send(to, share))] = (to, share)
    return out  # type: ignore[return-value]


def stop_verifiers(actor_name: str = ACTOR_NAME) -> int:
    """Kill the verification actors of every node (they are detached: they outlive jobs); returns how many."""
    ray = connect()
    killed = 0
    for a in ray.util.list_named_actors(all_namespaces=True):
        if a["namespace"] == NAMESPACE and a["name"].startswith(f"{actor_name}@"):
            ray.kill(ray.get_actor(a["name"], namespace=NAMESPACE))
            killed += 1
    _forget(actor_name)
    return killed
