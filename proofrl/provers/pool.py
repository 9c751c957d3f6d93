"""Many prover processes behind one call: ``pool.check_many(jobs) -> verdicts``.

* **Header affinity.** A job goes to an idle process already loaded with its header (Coq prelude, Lean
  imports), so the 0.4 s (Coq) to 10+ s (Mathlib) of loading is paid once per process, not per proof.
* **Timeouts are kills.** Backends kill their process group when the deadline passes and report
  ``timeout``; the pool throws the dead process away and starts a replacement in the background.
* **Recycling.** A process is retired after ``max_uses`` jobs or above ``max_rss_mb`` (Coq's memory grows;
  the Lean REPL never frees an env or proof state).
* **A batch of N jobs yields N verdicts.** A crash is retried once on a fresh process, then reported as
  ``crash``; any other surprise becomes an ``error`` verdict for that item only.

Sync (``check``, ``check_many``) and asyncio (``acheck``, ``acheck_many``) entry points share one scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import ProverCrashed, ProverError, ProverTimeout, StatementError
from .base import Message, Prover, Status, Theorem, Verdict

ProverFactory = Callable[[str], Prover]
"""Makes a started prover for a header (the header is loaded once, at start)."""


@dataclass
class PoolConfig:
    workers: int = 2
    """prover processes running at once (one per core is right for Coq)"""
    timeout: float = 30.0
    """default seconds per whole-proof check"""
    max_uses: int = 500
    """jobs before a process is recycled"""
    max_rss_mb: int = 2048
    """resident memory above which a process is recycled after its job"""
    retries: int = 1
    """fresh-process retries of a job whose process crashed"""


@dataclass
class _Slot:
    index: int
    prover: Prover | None = None
    header: str | None = None
    busy: bool = False


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
        self.config = config or PoolConfig()
        self._slots = [_Slot(i) for i in range(self.config.workers)]
        self._cond = threading.Condition()
        self._executor = ThreadPoolExecutor(max_workers=self.config.workers, thread_name_prefix="prover")
        self.stats = PoolStats()
        self._closed = False
        self._mine = threading.local()  # the slot this thread used last: reused first when no header matches

    # -- leasing a process ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def lease(self, header: str) -> Iterator[Prover]:
        """A process loaded with ``header``, exclusively yours inside the ``with`` (search uses this)."""
        slot = self._acquire(header)
        try:
            if slot.prover is None or not slot.prover.alive or slot.header != header:
                self._replace(slot, header)
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
        if p is not None and (
            not p.alive or p.uses >= self.config.max_uses or p.rss_bytes() > self.config.max_rss_mb * 2**20
        ):
            self.stats.recycled += p.alive
            self._discard(slot)
        with self._cond:
            slot.busy = False
            self._cond.notify()

    def _replace(self, slot: _Slot, header: str) -> None:
        self._discard(slot)
        slot.prover = self.factory(header)
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
            try:
                with self.lease(theorem.header) as prover:
                    v = prover.check(theorem, proof, timeout=timeout)
                self.stats.verdicts[v.status.value] += 1
                return v
            except ProverCrashed as e:
                self.stats.crashes += 1
                crash = e
            except StatementError as e:  # the header itself does not load
                v = Verdict(Status.ERROR, ("header failed to load",), tuple(e.messages), seconds=time.monotonic() - t0)
                break
            except ProverTimeout as e:  # e.g. a slow header (Mathlib) while starting a process
                v = Verdict(Status.TIMEOUT, (f"prover start: {e}",), seconds=time.monotonic() - t0)
                break
            except ProverError as e:  # a reply we could not read (ProtocolError): not retried, reported
                v = Verdict(Status.CRASH, (f"prover error: {e}",), seconds=time.monotonic() - t0)
                break
            except Exception as e:  # noqa: BLE001 - one item never sinks a batch
                v = Verdict(Status.ERROR, (f"internal error: {type(e).__name__}: {e}",), seconds=time.monotonic() - t0)
                break
        else:
            v = Verdict(
                Status.CRASH,
                ("crash: prover died twice",),
                (Message("error", str(crash)[-2000:]),),
                seconds=time.monotonic() - t0,
            )
        self.stats.verdicts[v.status.value] += 1
        return v

    def check_many(
        self,
        jobs: Sequence[tuple[Theorem, str]],
        *,
        timeout: float | None = None,
        on_done: Callable[[int, Verdict], None] | None = None,
    ) -> list[Verdict]:
        """Judge ``jobs`` in parallel; the i-th verdict belongs to the i-th job. ``on_done(i, verdict)`` is
        called as each finishes (progress bars, streaming JSONL)."""

        def one(i: int) -> Verdict:
            v = self.check(*jobs[i], timeout=timeout)
            if on_done is not None:
                on_done(i, v)
            return v

        queues = _HeaderQueues(jobs)
        results: list[Verdict | None] = [None] * len(jobs)

        def worker() -> None:
            header = None
            while (item := queues.take(header)) is not None:
                header, i = item
                results[i] = one(i)

        futures = [self._executor.submit(worker) for _ in range(min(self.config.workers, len(jobs)))]
        for f in futures:
            f.result()
        return results  # type: ignore[return-value]

    async def acheck(self, theorem: Theorem, proof: str, *, timeout: float | None = None) -> Verdict:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self.check(theorem, proof, timeout=timeout))

    async def acheck_many(self, jobs: Sequence[tuple[Theorem, str]], *, timeout: float | None = None) -> list[Verdict]:
        return list(await asyncio.gather(*(self.acheck(t, p, timeout=timeout) for t, p in jobs)))

    # -- introspection and shutdown ------------------------------------------------------------------
    @property
    def busy(self) -> int:
        return sum(s.busy for s in self._slots)

    def pids(self) -> list[int]:
        """Process ids of live provers (tests kill these to inject faults)."""
        return [pid for s in self._slots if s.prover is not None and (pid := s.prover.pid)]

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
        for s in self._slots:
            self._discard(s)

    def __enter__(self) -> ProverPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _HeaderQueues:
    """Jobs grouped by header, claimed so that each header is loaded by as few processes as possible: a
    worker stays on its header while it has jobs, then takes the largest header nobody works on, and only
    when none is left joins the largest one in progress (so one big group still ends in parallel)."""

    def __init__(self, jobs: Sequence[tuple[Theorem, str]]):
        self._lock = threading.Lock()
        self._todo: dict[str, list[int]] = {}
        for i, (theorem, _) in enumerate(jobs):
            self._todo.setdefault(theorem.header, []).append(i)
        for q in self._todo.values():
            q.reverse()  # pop() from the end keeps input order within a header
        self._workers: Counter = Counter()

    def take(self, current: str | None) -> tuple[str, int] | None:
        with self._lock:
            if current is not None and self._todo.get(current):
                return current, self._todo[current].pop()
            left = [h for h, q in self._todo.items() if q]
            if not left:
                return None
            h = min(left, key=lambda h: (self._workers[h] > 0, -len(self._todo[h])))
            self._workers[h] += 1
            if current is not None:
                self._workers[current] -= 1
            return h, self._todo[h].pop()
