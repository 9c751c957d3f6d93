"""Defects an attacker found in the verification service, each over real parts: real ``coqidetop``
processes, real uvicorn on loopback, raw sockets, ``proofrl serve`` as a subprocess."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from conftest import requires_coq
from proofrl.provers.base import Status, Theorem
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig
from test_server import LOOPING, VALID, InProcess

pytestmark = requires_coq

T = Theorem("t", "Theorem t : True.", "Require Import Arith Lia.")


@pytest.fixture(scope="module")
def pool():
    p = make_pool("coq", pool=PoolConfig(workers=1, timeout=10))
    yield p
    p.close()


# -- 1. characters that are not legal XML 1.0 in a Coq message ----------------------------------------------------
@pytest.mark.parametrize("char", ["\x01", "\x02", "\x08", "\x0b", "\x1f"])
def test_a_control_character_in_a_message_is_text_not_a_crash(pool, char):
    failed = pool.check(T, f'Proof. fail "a{char}b". Qed.')
    assert failed.status is Status.ERROR, failed.reasons
    shown = chr(0x2400 + ord(char))  # the control picture: visible, one character for one
    assert failed.reasons == (f"Tactic failure: a{shown}b.",)
    assert failed.messages[0].text == f"Tactic failure: a{shown}b."
    printed = pool.check(T, f'Proof. idtac "{char}". exact I. Qed.')
    assert printed.status is Status.VALID, printed.reasons
    assert pool.stats.crashes == 0


def test_illegal_xml_in_a_reply_is_made_visible_not_refused():
    from proofrl.provers.coq import xml

    msg = '<feedback object="state" route="0"><state_id val="4"/><feedback_content val="message"><message><message_level val="info"/><option val="none"/><richpp><_><pp>{}</pp></_></richpp></message></feedback_content></feedback><value val="good"><unit/></value>'
    for raw, text in [(b"x\x02y", "x\u2402y"), (b"x&#2;y&#x1F;z&#65;", "x\u2402y\u241fzA"), (b"bad \xff utf-8 \xef\xbf\xbe", "bad \ufffd utf-8 \ufffd")]:
        reply = xml.parse_reply(msg.encode().replace(b"{}", raw))
        assert reply.good and [f.text for f in reply.feedback] == [text]


# -- 2, 3. request limits answered precisely and counted ---------------------------------------------------------
def _metric(url: str, line: str) -> bool:
    return line in httpx.get(url + "/metrics").text.splitlines()


def test_a_huge_timeout_is_capped_not_a_500_and_counted():
    with InProcess(workers=1, max_timeout=2) as s:
        for path, items in (("/api/check", '"snippets": [{"id": "a", "code": %s}]'), ("/verify", '"codes": [{"custom_id": 1, "proof": %s}]')):
            body = "{" + items % json.dumps(LOOPING) + ', "timeout": 1' + "0" * 400 + "}"
            r = httpx.post(s.url + path, content=body, headers={"content-type": "application/json"}, timeout=30)
            assert r.status_code == 200, r.text
            (res,) = r.json()["results"]
            assert res["proofrl"]["status"] == "timeout"
            assert res["error"] == "coq command timed out in 2 seconds"  # capped at max_timeout
            assert _metric(s.url, f'proofrl_responses_total{{path="{path}",code="200"}} 1')


def test_a_batch_above_the_inflight_limit_is_413_at_once_not_429_forever():
    with InProcess(workers=1, max_inflight=2, max_batch=10) as s:
        big = {"snippets": [{"id": str(i), "code": VALID} for i in range(3)]}
        for _ in range(2):  # an idle server: it would never fit, so it is not "busy"
            r = httpx.post(s.url + "/api/check", json=big, timeout=30)
            assert r.status_code == 413
            assert r.json() == {"detail": "batch of 3 items exceeds the limit of 2 (max_inflight: items in flight at once); send at most 2 per request"}
        r = httpx.post(s.url + "/api/check", json={"snippets": [{"id": str(i), "code": "x"} for i in range(11)]}, timeout=30)
        assert (r.status_code, r.json()) == (413, {"detail": "batch of 11 items exceeds the limit of 10"})
        r = httpx.post(s.url + "/api/check", json={"snippets": big["snippets"][:2]}, timeout=30)
        assert r.status_code == 200 and [x["proofrl"]["status"] for x in r.json()["results"]] == ["valid", "valid"]
        assert _metric(s.url, 'proofrl_responses_total{path="/api/check",code="413"} 3')
        assert _metric(s.url, "proofrl_rejected_busy_total 0")


# -- 4. a proof that prints without end ---------------------------------------------------------------------------
BIG_GOAL = "Proof. pose (l := ltac:(let x := eval vm_compute in (List.repeat 0 20000) in exact x)). "  # ~100 KB a Show


def test_a_flood_of_output_is_read_in_linear_time_and_capped():
    import tracemalloc

    from proofrl.provers.coq.session import MAX_REPLY_BYTES

    t = Theorem("t", "Theorem t : True.", "Require Import List.")
    with make_pool("coq", pool=PoolConfig(workers=1, timeout=20)) as p:
        assert p.check(t, BIG_GOAL + "Show. exact I. Qed.").valid  # one Show of the big goal is fine
        tracemalloc.start()
        try:
            t0 = time.monotonic()
            v = p.check(t, BIG_GOAL + "Show. " * 400 + "exact I. Qed.")  # about 40 MB of goals
            seconds = time.monotonic() - t0
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert (v.status, v.reasons) == (Status.REJECTED, ("output too large",)), v.reasons
        assert f"{MAX_REPLY_BYTES >> 20} MiB" in v.messages[0].text
        assert seconds < 20, seconds  # was quadratic: 200 Shows took minutes (here a timeout at 20 s)
        assert peak < 4 * MAX_REPLY_BYTES, peak  # what is kept of one reply is bounded
        assert p.stats.crashes == 0 and p.check(t, "Proof. exact I. Qed.").valid  # a fresh process took over


# -- 5. a header that takes long to load ---------------------------------------------------------------------------
def test_a_slow_header_is_judged_under_the_jobs_time_limit():
    slow = Theorem("t", "Theorem t : True.", "Require Import NArith.\nDefinition x := Eval vm_compute in (N.iter 300000000 N.succ 0%N).")
    with make_pool("coq", pool=PoolConfig(workers=1, timeout=10)) as p:
        t0 = time.monotonic()
        v = p.check(slow, "Proof. exact I. Qed.", timeout=2)
        seconds = time.monotonic() - t0
        assert v.status is Status.TIMEOUT and v.reasons == ("header: timeout after 2s",), v.reasons
        assert seconds < 2 + 5, seconds  # was: as long as the header takes, up to 120 s
        assert p.pids() == [] and p.stats.started == 0  # the process loading it was killed, never used
        assert p.check(T, "Proof. exact I. Qed.", timeout=2).valid


# -- 8. a call of the judge's own that Coq refuses (Coq's "edit_at dummy" anomaly) ---------------------------------
def test_a_goal_coq_cannot_print_gets_a_precise_verdict_not_an_internal_error(pool):
    """Coq answers the judge's ``Goal`` call with a failure naming no state (state 0, "dummy") when printing the
    goals overflows its stack; going back to that state was ``Anomaly "edit_at dummy."`` and an internal error."""
    t = Theorem("t", "Theorem t : True.", "Require Import List.")
    verdicts = [pool.check(t, f"Proof. pose (l := ltac:(let x := eval vm_compute in (List.repeat 0 {n}) in exact x)). Qed.") for n in (20000, 30000, 40000)]
    assert not [v.reasons for v in verdicts if any("internal error" in r or "edit_at" in r for r in v.reasons)]
    assert all(v.status in (Status.ERROR, Status.REJECTED) for v in verdicts), [v.reasons for v in verdicts]
    unprintable = [v for v in verdicts if v.reasons == ("coq Goal failed: Stack overflow.",)]
    assert unprintable, [v.reasons for v in verdicts]  # at least one size overflows printing but not evaluation
    assert unprintable[0].messages[0].text == "Stack overflow."
    assert pool.check(T, "Proof. exact I. Qed.").valid
