"""Recycling by resident memory, read at most once per ``rss_every`` seconds per process (a read scans every
process on the machine: done after each job it cost more than a failed proof takes inside Coq)."""

from conftest import requires_coq

from proofrl.provers.base import Theorem
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig

pytestmark = requires_coq

T = Theorem("t", "Theorem t : True.", "")  # no header: a process starts fast
GOOD = "Proof. exact I. Qed."


def test_a_process_above_max_rss_is_recycled_after_each_job_when_read_every_time():
    with make_pool(
        "coq", pool=PoolConfig(workers=1, max_rss_mb=1, rss_every=0)
    ) as pool:  # every coqidetop is above 1 MB
        assert all(v.valid for v in pool.check_many([(T, GOOD)] * 3))
        assert pool.stats.recycled == 3 and pool.stats.started == 3


def test_memory_is_read_once_per_interval_not_after_every_job():
    with make_pool("coq", pool=PoolConfig(workers=1, max_rss_mb=1, rss_every=600)) as pool:
        assert all(v.valid for v in pool.check_many([(T, GOOD)] * 3))
        # the first job's release reads (and recycles); the next two fall inside the interval
        assert pool.stats.recycled == 1 and pool.stats.started == 2
