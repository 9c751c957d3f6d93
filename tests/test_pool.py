"""The pool over real Coq processes: N jobs -> N verdicts, header reuse, kills, crashes, memory, recycling."""

import asyncio
import contextlib
import os
import signal
import threading
import time

import pytest
from conftest import NAT, requires_coq

from proofrl.provers.base import Status, Theorem
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig

pytestmark = requires_coq

T = Theorem("t", "Theorem t : forall n : nat, n + 0 = n.", NAT)
TZ = Theorem("tz", "Theorem tz : forall x : Z, (x + 0 = x)%Z.", "Require Import ZArith Lia.")
GOOD, BAD, LOOP = (
    "Proof. intros. lia. Qed.",
    "Proof. intros. reflexivity. Qed.",
    "Proof. intros. repeat (assert True by exact I). Qed.",
)
SLOW_GOOD = "Proof. do 30000 (assert True by exact I; clear H). intros. lia. Qed."  # about 2 s


@pytest.fixture
def pool():
    p = make_pool("coq", pool=PoolConfig(workers=2, timeout=10))
    yield p
    p.close()


def test_a_mixed_batch_gets_one_verdict_per_job_in_order(pool):
    jobs = [(T, GOOD), (T, BAD), (TZ, GOOD), (T, "Proof. admit. Qed."), (T, LOOP), (TZ, "Proof. intros. lia")]
    got = [v.status for v in pool.check_many(jobs, timeout=2)]
    assert got == [Status.VALID, Status.ERROR, Status.VALID, Status.REJECTED, Status.TIMEOUT, Status.ERROR]


def test_header_is_loaded_once_per_process(pool):
    pool.check_many([(T, GOOD)] * 12 + [(TZ, GOOD)] * 12)
    assert pool.stats.started <= 4  # two processes, each switching header at most once


def test_prover_killed_mid_job_is_retried_on_a_fresh_process(pool):
    pool.check(T, GOOD)  # warm a process
    (victim,) = pool.pids()[:1]
    threading.Timer(0.7, os.kill, (victim, signal.SIGKILL)).start()
    v = pool.check(T, SLOW_GOOD)
    assert v.status is Status.VALID and pool.stats.crashes == 1 and victim not in pool.pids()


def test_a_prover_that_keeps_dying_gives_a_crash_verdict_and_the_batch_completes(pool):
    stop = time.monotonic() + 6
    killed: set[int] = set()

    def killer():  # kill every prover process as soon as it exists, for a few seconds
        while time.monotonic() < stop:
            for pid in pool.pids():
                if pid not in killed:
                    time.sleep(0.5)
                    killed.add(pid)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)

    pool.check(T, GOOD)
    threading.Thread(target=killer, daemon=True).start()
    v = pool.check(T, SLOW_GOOD)
    assert v.status is Status.CRASH and v.reasons == ("crash: prover died twice",)
    time.sleep(max(0, stop - time.monotonic()))
    assert pool.check(T, GOOD).valid


def test_silent_prover_is_killed_at_the_deadline_and_replaced(pool):
    pool.check(T, GOOD)
    (pid,) = pool.pids()[:1]
    threading.Timer(0.3, os.kill, (pid, signal.SIGSTOP)).start()  # frozen: neither Timeout nor SIGINT can act
    t0 = time.monotonic()
    v = pool.check(T, SLOW_GOOD, timeout=2)
    assert v.status is Status.TIMEOUT and time.monotonic() - t0 < 10
    assert pid not in pool.pids()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the frozen process group is gone, not orphaned
    assert pool.check(T, GOOD).valid


def test_memory_bomb_is_rejected_and_the_pool_survives():
    bomb = "Proof. assert (length (List.repeat 0 200000000) = 0) by (vm_compute; reflexivity). Qed."
    with make_pool("coq", pool=PoolConfig(workers=1), memory_mb=1500) as p:
        v = p.check(T, bomb, timeout=30)
        assert v.status is Status.REJECTED and v.reasons == ("out of memory",)
        assert p.check(T, GOOD).valid


def test_processes_are_recycled_after_max_uses():
    with make_pool("coq", pool=PoolConfig(workers=1, max_uses=3)) as p:
        assert all(v.valid for v in p.check_many([(T, GOOD)] * 7))
        assert p.stats.recycled == 2 and p.stats.started == 3


def test_header_that_fails_to_load_is_an_error_for_its_items_only(pool):
    broken = Theorem("b", "Theorem b : True.", "Require Import NoSuchLibrary.")
    got = pool.check_many([(broken, "Proof. exact I. Qed."), (T, GOOD)])
    assert [v.status for v in got] == [Status.ERROR, Status.VALID] and got[0].reasons == ("header failed to load",)


def test_asyncio_entry_point(pool):
    async def main():
        return await pool.acheck_many([(T, GOOD), (T, BAD), (TZ, GOOD)])

    assert [v.status for v in asyncio.run(main())] == [Status.VALID, Status.ERROR, Status.VALID]


def test_close_leaves_no_prover_process(pool):
    pool.check_many([(T, GOOD), (TZ, GOOD)])
    pids = pool.pids()
    pool.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# -- the shared backlog: header affinity for every caller ---------------------------------------------------------
def _items(headers: str, t0: float = 0.0):
    from proofrl.provers.pool import _Item

    return [
        _Item(Theorem(f"j{i}", "", h), "", None, i, lambda i, v: None, t0 + i * 1e-3) for i, h in enumerate(headers)
    ]


def _taken(backlog, current):
    it = backlog.take(current)
    return None if it is None else (it.theorem.header, it.index)


def test_backlog_keeps_workers_on_their_header_then_takes_the_unclaimed_one_waiting_longest():
    from proofrl.provers.pool import _Backlog

    b = _Backlog(workers=2, affinity_wait=10, clock=lambda: 1.0)
    assert b.put(_items("ABABAAC")) == 2  # two workers to start, never more than the pool has
    assert (_taken(b, None), _taken(b, None)) == (("A", 0), ("B", 1))  # different headers for the two
    assert _taken(b, "A") == ("A", 2)  # stays on A although B's job 3 arrived earlier than A's job 4
    assert _taken(b, "B") == ("B", 3)
    assert _taken(b, "B") == ("C", 6)  # B is done: C, which nobody works on, before joining A
    assert [_taken(b, "A"), _taken(b, "C")] == [("A", 4), ("A", 5)]  # C is done: join A
    assert (_taken(b, "A"), _taken(b, "A")) == (None, None) and len(b) == 0
    assert b.put(_items("A")) == 1  # both workers retired: the next job starts one again


def test_backlog_never_starves_a_header_past_affinity_wait():
    from proofrl.provers.pool import _Backlog

    now = [0.0]
    b = _Backlog(workers=1, affinity_wait=5, clock=lambda: now[0])
    b.put(_items("AAAB"))
    assert _taken(b, None) == ("A", 0)
    now[0] = 4.0
    assert _taken(b, "A") == ("A", 1)  # B has waited 4 s: affinity still wins
    now[0] = 6.0
    assert _taken(b, "A") == ("B", 3)  # B has waited 6 s > 5: served before A's last job
    assert _taken(b, "B") == ("A", 2)


def test_backlog_with_no_affinity_is_first_come_first_served():
    from proofrl.provers.pool import _Backlog

    b = _Backlog(workers=1, affinity_wait=0, clock=lambda: 1.0)
    b.put(_items("ABAB"))
    assert [_taken(b, h) for h in (None, "A", "B", "A")] == [("A", 0), ("B", 1), ("A", 2), ("B", 3)]


HEADERS = ("Require Import Arith.", "Require Import Bool.", "Require Import List.")


def _concurrent_mixed_headers(affinity_wait: float) -> tuple[list[Status], int]:
    """18 jobs over 3 headers, interleaved, each its own ``acheck`` call (as the server makes them)."""
    jobs = [(Theorem(f"t{i}", f"Theorem t{i} : True.", HEADERS[i % 3]), "Proof. exact I. Qed.") for i in range(18)]
    with make_pool("coq", pool=PoolConfig(workers=2, timeout=10, affinity_wait=affinity_wait)) as p:

        async def main():
            return await asyncio.gather(*(p.acheck(t, proof) for t, proof in jobs))

        verdicts = asyncio.run(main())
        return [v.status for v in verdicts], p.stats.started


def test_concurrent_callers_are_grouped_by_header():
    grouped, grouped_starts = _concurrent_mixed_headers(affinity_wait=10)
    naive, naive_starts = _concurrent_mixed_headers(affinity_wait=0)
    assert grouped == naive == [Status.VALID] * 18
    assert grouped_starts <= 4  # each header loaded once, plus one worker joining the last header
    assert naive_starts >= grouped_starts + 4  # first come, first served reloads a header on most jobs


def test_close_answers_every_queued_job():
    p = make_pool("coq", pool=PoolConfig(workers=1, timeout=10))
    out: list = []
    t = threading.Thread(target=lambda: out.append(p.check_many([(T, LOOP)] * 6, timeout=2)))
    t.start()
    deadline = time.monotonic() + 20
    while p.busy == 0:  # the first job is running; five are queued
        assert time.monotonic() < deadline
        time.sleep(0.05)
    p.close()
    t.join(20)
    (verdicts,) = out
    assert len(verdicts) == 6 and [v.reasons for v in verdicts[1:]] == [("pool is closed",)] * 5
    assert [v.reasons for v in p.check_many([(T, GOOD)])] == [("pool is closed",)]  # at once, never hangs
