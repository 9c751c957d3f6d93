"""The pool over real Coq processes: N jobs -> N verdicts, header reuse, kills, crashes, memory, recycling."""

import asyncio
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
GOOD, BAD, LOOP = "Proof. intros. lia. Qed.", "Proof. intros. reflexivity. Qed.", "Proof. intros. repeat (assert True by exact I). Qed."
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
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
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


def test_header_queues_keep_workers_on_their_header_and_split_the_largest_last():
    from proofrl.provers.pool import _HeaderQueues

    jobs = [(Theorem(f"a{i}", "", "A"), "") for i in range(6)] + [(Theorem(f"b{i}", "", "B"), "") for i in range(2)]
    q = _HeaderQueues(jobs)
    w1 = q.take(None)
    w2 = q.take(None)
    assert (w1, w2) == (("A", 0), ("B", 6))  # largest unclaimed header first, input order within it
    assert q.take("B") == ("B", 7)
    assert q.take("B") == ("A", 1)  # B is done and nothing is unclaimed: join A, the largest in progress
    assert [q.take("A") for _ in range(5)] == [("A", 2), ("A", 3), ("A", 4), ("A", 5), None]
