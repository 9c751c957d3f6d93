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
