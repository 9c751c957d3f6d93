"""The backlog's starvation rule is between callers: within one batch (one check_many, one request) a header
switch for fairness only adds header loads, since the caller waits for the whole batch anyway."""

from proofrl.provers.base import Theorem
from proofrl.provers.pool import _Backlog, _Item


def batch(headers: str, t0: float = 0.0):
    done = lambda i, v: None  # noqa: E731 - one callback per batch, as check_many and acheck_many make
    return [_Item(Theorem(f"j{i}", "", h), "", None, i, done, t0 + i * 1e-3) for i, h in enumerate(headers)]


def taken(b, current):
    it = b.take(current)
    return None if it is None else (it.theorem.header, it.index)


def test_one_batch_stays_on_its_header_past_affinity_wait():
    now = [0.0]
    b = _Backlog(workers=1, affinity_wait=5, clock=lambda: now[0])
    b.put(batch("AAAB"))
    assert taken(b, None) == ("A", 0)
    now[0] = 60.0  # B has waited far past affinity_wait, but it is the same caller's
    assert [taken(b, "A"), taken(b, "A"), taken(b, "A")] == [("A", 1), ("A", 2), ("B", 3)]


def test_another_callers_header_is_still_served_past_affinity_wait():
    now = [0.0]
    b = _Backlog(workers=1, affinity_wait=5, clock=lambda: now[0])
    b.put(batch("AAAA"))
    b.put(batch("B", t0=0.5))  # a second caller
    assert taken(b, None) == ("A", 0)
    now[0] = 4.0
    assert taken(b, "A") == ("A", 1)
    now[0] = 6.0
    assert taken(b, "A") == ("B", 0)  # the other caller has waited 5.5 s > 5: served before A's remaining jobs
    assert [taken(b, "B"), taken(b, "A")] == [("A", 2), ("A", 3)]


def test_within_a_header_callers_share_the_workers():
    """Six jobs of one caller, two of them running on the two workers, then one job of another caller: the other
    caller's job is next once a worker frees, not after the other four; a caller's own jobs keep their order."""
    b = _Backlog(workers=2, affinity_wait=5, clock=lambda: 0.0)
    many, one = batch("AAAAAA"), batch("A", t0=1.0)
    b.put(many)
    first, second = b.take(None), b.take(None)
    assert (first.index, second.index) == (0, 1)
    b.put(one)
    b.finished(first)
    assert b.take("A") is one[0]  # the caller with no job running goes before the one with one running
    b.finished(second)
    assert [taken(b, "A") for _ in range(4)] == [("A", 2), ("A", 3), ("A", 4), ("A", 5)]
    assert taken(b, "A") is None and len(b) == 0
