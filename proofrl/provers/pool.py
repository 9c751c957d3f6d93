"""Many prover processes behind one call: ``pool.check_many(jobs) -> verdicts``.

* **Header affinity.** A job goes to an idle process already loaded with its header (Coq prelude, Lean
  imports), so the 0.4 s (Coq) to 10+ s (Mathlib) of loading is paid once per process, not per proof.
* **Timeouts are kills.** Backends kill their process group when the deadline passes and report
  ``timeout``; the pool throws the dead process away and starts a replacement in the background.
* **Recycling.** A process is retired after ``max_uses`` jobs or above ``max_rss_mb`` (Coq's memory grows;
  the Lean REPL never frees an env or proof state).
* **A batch of N jobs yields N verdicts.** A crash is retried once on a fresh process, then reported as
  ``crash``; any other surprise becomes an ``error`` verdict for that item only.

* **One queue for every caller.** ``check_many``, ``acheck`` and ``acheck_many`` (the server's concurrent
  requests) all queue jobs in one backlog; free workers take jobs whose header their process already holds
  (see :class:`_Backlog`), so mixed-header traffic does not reload headers over and over.
* **Fair between callers.** Among the jobs of one header, a free worker takes one of the caller (one call, or
  the ``caller`` it names: the server's request) with the fewest jobs running, so one caller's many slow jobs
  do not hold another's few behind them.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from ..errors import OutputTooLarge, ProverCrashed, ProverError, ProverFailed, ProverTimeout, StatementError
from ..schema import Config
from .base import Message, Prover, Status, Theorem, Verdict, loaded_header

ProverFactory = Callable[..., Prover]
"""``factory(header)``: a started prover for a header (the header is loaded once, at start). A factory that
takes a ``timeout`` keyword is given the job's time limit and must load the header within it (raising
:class:`~proofrl.errors.ProverTimeout` otherwise, its process killed)."""


def _takes_timeout(factory: ProverFactory) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        (p.name == "timeout" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)) or p.kind is p.VAR_KEYWORD
        for p in params
    )


class PoolConfig(Config):
    """A prover pool's settings (``proofrl serve``'s ``pool:`` section), checked when built."""

    workers: Annotated[int, Field(ge=1)] = 2
    """prover processes running at once (one per core is right for Coq)"""
    timeout: Annotated[float, Field(gt=0.0)] = 30.0
    """default seconds per whole-proof check"""
    max_uses: Annotated[int, Field(ge=1)] = 500
    """jobs before a process is recycled"""
    max_rss_mb: Annotated[int, Field(ge=1)] = 2048
    """resident memory above which a process is recycled after its job"""
    rss_every: Annotated[float, Field(ge=0.0)] = 1.0
    """seconds between two resident-memory reads of one process: a read walks every process on the machine
    (psutil's children scan, about 3 ms, more than a failed proof takes inside Coq), so it is done after the
    first job that ends past this interval, not after every job (RLIMIT_AS stays the hard cap meanwhile)"""
    retries: Annotated[int, Field(ge=0)] = 1
    """fresh-process retries of a job whose process crashed"""
    affinity_wait: Annotated[float, Field(ge=0.0)] = 10.0
    """seconds a header's queued jobs may go unserved while every worker stays on headers it holds; past
    that the next free worker switches to them (bounds the wait header affinity adds for each caller: jobs of
    the caller a worker is already serving do not count as waiting; 0 = headers first come, first served, for
    comparison)"""


@dataclass
class _Slot:
    index: int
    prover: Prover | None = None
    header: str | None = None
    busy: bool = False
    rss_at: float = float("-inf")  # when this slot's process memory was last read


@dataclass
class PoolStats:
    """Counters for ``/metrics`` and benchmarks."""

    verdicts: Counter = field(default_factory=Counter)
    started: int = 0
    recycled: int = 0
    crashes: int = 0
    waiting: int = 0


class ProverPool:
    def __init__(self, factory: ProverFactory, config: PoolConfig | None = None):
        self.factory = factory
        self._timed_start = _takes_timeout(factory)
        self.config = config or PoolConfig()
        self._slots = [_Slot(i) for i in range(self.config.workers)]
        self._cond = threading.Condition()
        self._executor = ThreadPoolExecutor(max_workers=self.config.workers, thread_name_prefix="prover")
        self.stats = PoolStats()
        self._closed = False
        self._closed_reason = "pool is closed"
        self._mine = threading.local()  # the slot this thread used last: reused first when no header matches
        self._backlog = _Backlog(self.config.workers, self.config.affinity_wait)

    # -- leasing a process ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def lease(self, header: str, *, timeout: float | None = None) -> Iterator[Prover]:
        """A process loaded with ``header``, exclusively yours inside the ``with`` (search uses this). A process
        started for it loads the header within ``timeout`` seconds when the factory takes a time limit."""
        header = loaded_header(header)
        slot = self._acquire(header)
        try:
            if slot.prover is None or not slot.prover.alive or slot.header != header:
                self._replace(slot, header, timeout)
            assert slot.prover is not None
            yield slot.prover
        finally:
            self._release(slot)

    def _acquire(self, header: str) -> _Slot:
        with self._cond:
            self.stats.waiting += 1
            try:
                while True:
                    if self._closed:
                        raise RuntimeError("pool is closed")
                    idle = [s for s in self._slots if not s.busy]
                    if idle:
                        # same header first, then this thread's own slot, then an empty one, then evict
                        mine = getattr(self._mine, "index", None)
                        idle.sort(key=lambda s: (s.header != header, s.index != mine, s.prover is not None))
                        slot = idle[0]
                        slot.busy = True
                        self._mine.index = slot.index
                        return slot
                    self._cond.wait()
            finally:
                self.stats.waiting -= 1

    def _release(self, slot: _Slot) -> None:
        p = slot.prover
        if p is not None and (not p.alive or p.uses >= self.config.max_uses or self._too_big(slot, p)):
            self.stats.recycled += p.alive
            self._discard(slot)
        with self._cond:
            slot.busy = False
            self._cond.notify()

    def _too_big(self, slot: _Slot, p: Prover) -> bool:
        now = time.monotonic()
        if now - slot.rss_at < self.config.rss_every:
            return False
        slot.rss_at = now
        return p.rss_bytes() > self.config.max_rss_mb * 2**20

    def _replace(self, slot: _Slot, header: str, timeout: float | None = None) -> None:
        self._discard(slot)
        slot.prover = (
            self.factory(header, timeout=timeout) if self._timed_start and timeout is not None else self.factory(header)
        )
        slot.header = header
        self.stats.started += 1

    def _discard(self, slot: _Slot) -> None:
        if slot.prover is not None:
            with contextlib.suppress(Exception):
                slot.prover.close()
        slot.prover, slot.header = None, None

    # -- whole-proof checks --------------------------------------------------------------------------
    def check(self, theorem: Theorem, proof: str, *, timeout: float | None = None) -> Verdict:
        """Judge one proof. Never raises for a bad proof or a bad prover: the verdict says what happened."""
        timeout = self.config.timeout if timeout is None else timeout
        t0 = time.monotonic()
        crash: ProverCrashed | None = None
        for _ in range(1 + self.config.retries):
            if self._closed:  # e.g. closed while this job ran (its process killed): no retry
                v = self._closed_verdict()
                break
            try:
                with self.lease(theorem.header, timeout=timeout) as prover:
                    v = prover.check(theorem, proof, timeout=timeout)
                self.stats.verdicts[v.status.value] += 1
                return v
            except ProverCrashed as e:
                self.stats.crashes += 1
                crash = e
            except StatementError as e:  # the header itself does not load
                v = Verdict(Status.ERROR, ("header failed to load",), tuple(e.messages), seconds=time.monotonic() - t0)
                break
            except ProverTimeout as e:  # a header that does not load within the job's time, or a slow start (Mathlib)
                reason = f"header: timeout after {timeout:g}s" if self._timed_start else f"prover start: {e}"
                v = Verdict(Status.TIMEOUT, (reason,), seconds=time.monotonic() - t0)
                break
            except OutputTooLarge as e:  # the proof printed without end: its doing, the process is gone
                v = Verdict(
                    Status.REJECTED,
                    ("output too large",),
                    (Message("error", f"rejected: {e}"),),
                    seconds=time.monotonic() - t0,
                )
                break
            except ProverFailed as e:  # the prover refused a call of the judge's own (e.g. goals it cannot print)
                v = Verdict(
                    Status.ERROR, (e.reason,), (Message("error", str(e)[-2000:]),), seconds=time.monotonic() - t0
                )
                break
            except ProverError as e:  # a reply we could not read (ProtocolError): not retried, reported
                v = Verdict(Status.CRASH, (f"prover error: {e}",), seconds=time.monotonic() - t0)
                break
            except Exception as e:  # one item never sinks a batch
                v = Verdict(Status.ERROR, (f"internal error: {type(e).__name__}: {e}",), seconds=time.monotonic() - t0)
                break
        else:
            v = Verdict(
                Status.CRASH,
                ("crash: prover died twice",),
                (Message("error", str(crash)[-2000:]),),
                seconds=time.monotonic() - t0,
            )
        if self._closed:  # whatever went wrong, it went wrong because the pool closed under the job
            v = self._closed_verdict()
        self.stats.verdicts[v.status.value] += 1
        return v

    def check_many(
        self,
        jobs: Sequence[tuple[Theorem, str]],
        *,
        timeout: float | None = None,
        on_done: Callable[[int, Verdict], object] | None = None,
    ) -> list[Verdict]:
        """Judge ``jobs`` in parallel; the i-th verdict belongs to the i-th job. ``on_done(i, verdict)`` is
        called as each finishes (progress bars, streaming JSONL); its first exception is raised at the end."""
        if not jobs:
            return []
        results: list[Verdict | None] = [None] * len(jobs)
        left = len(jobs)
        finished = threading.Event()
        failures: list[BaseException] = []
        lock = threading.Lock()

        def done(i: int, v: Verdict) -> None:
            nonlocal left
            results[i] = v
            try:
                if on_done is not None:
                    on_done(i, v)
            except BaseException as e:  # re-raised in the caller's thread
                failures.append(e)
            with lock:
                left -= 1
                if left == 0:
                    finished.set()

        self._submit(jobs, timeout, done)
        finished.wait()
        if failures:
            raise failures[0]
        return results  # type: ignore[return-value]

    async def acheck(
        self, theorem: Theorem, proof: str, *, timeout: float | None = None, caller: Hashable | None = None
    ) -> Verdict:
        return (await self.acheck_many([(theorem, proof)], timeout=timeout, caller=caller))[0]

    async def acheck_many(
        self, jobs: Sequence[tuple[Theorem, str]], *, timeout: float | None = None, caller: Hashable | None = None
    ) -> list[Verdict]:
        """The asyncio entry point: the jobs join the same queue as every other caller's. ``caller``: whom the
        workers are shared fairly between (the server passes one per request, so a request's items, each its
        own call, count as one caller); by default this call."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in jobs]

        def settle(f: asyncio.Future, v: Verdict) -> None:
            if not f.done():
                f.set_result(v)

        self._submit(jobs, timeout, lambda i, v: loop.call_soon_threadsafe(settle, futures[i], v), caller)
        return list(await asyncio.gather(*futures))

    def _submit(
        self,
        jobs: Sequence[tuple[Theorem, str]],
        timeout: float | None,
        done: Callable[[int, Verdict], object],
        caller: Hashable | None = None,
    ) -> None:
        now = time.monotonic()
        items = [_Item(theorem, proof, timeout, i, done, now, caller) for i, (theorem, proof) in enumerate(jobs)]
        start = self._backlog.put(items)
        if start is None:  # closed: nobody will drain the queue
            for it in items:
                it.done(it.index, self._closed_verdict())
            return
        for _ in range(start):
            self._executor.submit(self._drain)

    def _drain(self) -> None:
        """One worker: judge queued jobs, preferring those whose header this worker's process holds."""
        header: str | None = None
        while (item := self._backlog.take(header)) is not None:
            header = loaded_header(item.theorem.header)
            try:
                v = self.check(item.theorem, item.proof, timeout=item.timeout)
            except BaseException as e:  # one item never sinks a batch
                v = Verdict(Status.ERROR, (f"internal error: {type(e).__name__}: {e}",))
            self._backlog.finished(item)
            with contextlib.suppress(RuntimeError):  # the caller's event loop has closed: nobody to tell
                item.done(item.index, v)

    @property
    def queued(self) -> int:
        """Jobs waiting for a worker."""
        return len(self._backlog)

    def _closed_verdict(self) -> Verdict:
        return Verdict(Status.ERROR, (self._closed_reason,))

    # -- introspection and shutdown ------------------------------------------------------------------
    @property
    def busy(self) -> int:
        return sum(s.busy for s in self._slots)

    def pids(self) -> list[int]:
        """Process ids of live provers (tests kill these to inject faults)."""
        return [pid for s in self._slots if s.prover is not None and (pid := s.prover.pid)]

    def close(self, reason: str = "pool is closed") -> None:
        """Refuse new jobs, answer queued ones with ``error: reason``, kill every process (a job running on one
        gets the same verdict). Idempotent: the first reason stays."""
        with self._cond:
            if not self._closed:
                self._closed_reason = reason
            self._closed = True
            self._cond.notify_all()
        self._backlog.close(self._closed_verdict)
        self._executor.shutdown(wait=False, cancel_futures=True)
        for s in self._slots:
            self._discard(s)

    def __enter__(self) -> ProverPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class _Item:
    theorem: Theorem
    proof: str
    timeout: float | None
    index: int
    done: Callable[[int, Verdict], object]
    queued_at: float
    caller: Hashable | None = None
    """whom this job is scheduled fairly against; None: its call (``done``)"""

    @property
    def owner(self) -> Hashable:
        return self.done if self.caller is None else self.caller


class _Backlog:
    """Every caller's queued jobs, by header and then by caller, shared by at most ``workers`` draining threads.

    ``take(header)`` is the scheduling rule: a worker stays on the header its process holds while that
    header has jobs (a switch costs a header load: 0.4 s for Coq, 10+ s for Mathlib); a worker that must
    switch takes the header nobody works on whose jobs have waited longest, else joins the longest-waiting
    one (so one big group still ends in parallel). A header that has gone ``affinity_wait`` seconds without
    service is taken next whatever the worker holds, so affinity never starves a header, unless its next job
    belongs to the same caller as the worker's own next job. Within a header the job is the next of the caller
    with the fewest jobs running (ties: the one whose next job has waited longest), so callers share the
    workers of a header round-robin rather than first come, first served: six slow jobs of one request no
    longer hold a one-job request of another until all six are done. A caller's own jobs go in arrival order.
    """

    def __init__(self, workers: int, affinity_wait: float, clock: Callable[[], float] = time.monotonic):
        self._lock = threading.Lock()
        self._queues: dict[str, dict[Hashable, deque[_Item]]] = {}  # header -> caller -> jobs; no empty entries
        self._served: dict[str, float] = {}  # header -> when a job of it was last taken
        self._on: Counter = Counter()  # header -> workers on it
        self._running: Counter = Counter()  # caller -> its jobs taken and not finished
        self._workers, self._max_workers = 0, workers
        self._closed = False
        self.affinity_wait, self._clock = affinity_wait, clock

    def __len__(self) -> int:
        with self._lock:
            return sum(len(q) for by in self._queues.values() for q in by.values())

    def put(self, items: Sequence[_Item]) -> int | None:
        """Queue ``items``; returns how many new workers the caller must start, or None once closed."""
        with self._lock:
            if self._closed:
                return None
            for it in items:
                self._queues.setdefault(loaded_header(it.theorem.header), {}).setdefault(it.owner, deque()).append(it)
            start = min(self._max_workers - self._workers, len(items))
            self._workers += start
            return start

    def take(self, current: str | None) -> _Item | None:
        """The next job for a worker whose process holds ``current``; None (and the worker retires) when
        nothing is queued. Tell :meth:`finished` when the job is judged."""
        with self._lock:
            if not self._queues:
                self._on[current] -= current is not None
                self._workers -= 1
                return None
            heads = {h: self._next(by) for h, by in self._queues.items()}
            h = self._choose(current, heads, self._clock())
            if h != current:
                self._on[current] -= current is not None
                self._on[h] += 1
            self._served[h] = self._clock()
            by = self._queues[h]
            item = by[heads[h]].popleft()
            if not by[heads[h]]:
                del by[heads[h]]
                if not by:
                    del self._queues[h]
            self._running[item.owner] += 1
            return item

    def finished(self, item: _Item) -> None:
        """``item`` (from :meth:`take`) is judged: its caller has one job fewer running."""
        with self._lock:
            self._running[item.owner] -= 1
            if self._running[item.owner] <= 0:
                del self._running[item.owner]

    def _next(self, by_caller: dict[Hashable, deque[_Item]]) -> Hashable:
        """The caller whose job a worker on this header takes next: the fewest running, then the longest waiting."""
        return min(by_caller, key=lambda c: (self._running[c], by_caller[c][0].queued_at))

    def _choose(self, current: str | None, heads: dict[str, Hashable], now: float) -> str:
        oldest = {h: min(q[0].queued_at for q in by.values()) for h, by in self._queues.items()}
        if self.affinity_wait <= 0:  # first come, first served
            return min(oldest, key=oldest.__getitem__)
        unserved = {h: now - max(self._served.get(h, 0.0), t) for h, t in oldest.items()}
        starving = max(unserved, key=unserved.__getitem__)
        # Fairness is between callers: when the starving header's next job is of the same caller (one check_many,
        # one request) as this worker's next job, the caller waits for all its jobs either way, and a switch
        # would only add header loads (under load, one batch of many headers used to reload each).
        same_caller = current in heads and heads[current] == heads[starving]
        if unserved[starving] > self.affinity_wait and not same_caller:
            return starving
        if current in heads:
            return current
        idle = [h for h in heads if self._on[h] <= 0] or list(heads)
        return max(idle, key=unserved.__getitem__)

    def close(self, verdict: Callable[[], Verdict]) -> None:
        """Refuse new jobs and answer every queued one with ``verdict()``."""
        with self._lock:
            self._closed = True
            items = [it for by in self._queues.values() for q in by.values() for it in q]
            self._queues.clear()
        for it in items:
            it.done(it.index, verdict())
