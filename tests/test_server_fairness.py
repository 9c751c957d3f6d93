"""Fairness and the event loop of the verification service, over real ``coqidetop`` processes and real uvicorn on
loopback: an item's size is checked before it is cut, cutting does not stop the event loop, headers that differ
in comments or blanks share a prover process, one caller's slow items do not hold another's, and idle sockets
do not lock clients out."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time

import httpx
import pytest
from conftest import requires_coq
from test_server import LOOPING, VALID, InProcess
from test_server_hardening import HEAD, Served

from proofrl.provers.coq.sentences import normalise, split_sentences
from proofrl.provers.snippets import make_job

pytestmark = requires_coq


def _statuses(r: httpx.Response) -> list[str]:
    assert r.status_code == 200, r.text
    return [x["proofrl"]["status"] for x in r.json()["results"]]


# -- size before cutting, cutting off the event loop --------------------------------------------------------------
def test_an_item_over_the_size_limit_is_refused_before_it_is_cut():
    long = VALID.replace("Proof.", "Proof. (* " + "x" * 30_000 + " *)")  # valid, and well within the prover's limit
    with InProcess(workers=1, max_code_chars=20_000) as s:
        snippets = [{"id": "long", "code": long}, {"id": "ok", "code": VALID}]
        r = httpx.post(s.url + "/api/check", json={"snippets": snippets}, timeout=60)
        assert _statuses(r) == ["error", "valid"]
        (ours, _) = (x["proofrl"] for x in r.json()["results"])
        assert ours["reasons"] == ["code too long"]
        assert ours["messages"][0]["text"] == f"{len(long)} characters > limit 20000 (max_code_chars)"
        assert s.pool.stats.started == 1  # only the short item reached a prover


@pytest.fixture
def frozen_heap():
    """The server of an in-process test runs in this process, so a full garbage collection over what earlier tests
    left here (1 to 3 s for 0.5 to 0.8 million objects, measured late in a loaded run) stops its loop as a blocking
    call would. Frozen, that heap is no longer scanned; collections of what the test itself allocates still happen
    and still count."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def test_cutting_big_items_leaves_the_event_loop_free(frozen_heap):
    """Items just under the size limit take a while to cut into sentences (pure Python); /health is answered
    meanwhile, instead of after all of them."""
    big = VALID.replace("Proof.", "Proof. (* " + "x " * 100_000 + "*)")  # 200 KB: about 0.2 s to cut
    t0 = time.monotonic()
    make_job(big, "coq")
    cut = 4 * (time.monotonic() - t0)  # what a request of four such items costs to cut, under this machine's load
    with InProcess(workers=1, max_code_chars=2**20) as s:
        done = threading.Event()
        calls: list[tuple[float, float]] = []  # each /health call's wait, and when it began

        def poll() -> None:
            with httpx.Client(timeout=60) as c:
                while not done.is_set():
                    t = time.monotonic()
                    assert c.get(s.url + "/health").status_code == 200
                    calls.append((time.monotonic() - t, t))
                    time.sleep(0.01)

        poller = threading.Thread(target=poll)
        poller.start()
        time.sleep(0.2)
        posted = time.monotonic()
        try:
            r = httpx.post(
                s.url + "/api/check", json={"snippets": [{"id": str(i), "code": big} for i in range(4)]}, timeout=120
            )
        finally:
            answered = time.monotonic()
            done.set()
            poller.join()
        assert _statuses(r) == ["valid"] * 4
        wait, began = max(calls, default=(0.0, posted))  # the longest, and whether it fell inside the request
        when = f"began {began - posted:+.2f} s from the request's start, which took {answered - posted:.2f} s"
        assert len(calls) >= 5 and wait < cut / 2, (wait, cut, when)  # was: the whole cut, on the loop


# -- header identity: comments and blanks do not count -------------------------------------------------------------
def test_normalised_sentences_are_the_same_tokens_for_coq():
    assert normalise("Require   Import\n\tArith (* lia? *)  Lia.") == "Require Import Arith Lia."
    assert normalise('Require (* (* nested *) "*)" *) Arith.') == "Require Arith."
    assert normalise('Set Foo "a  (* b *)  c".') == 'Set Foo "a  (* b *)  c".'  # strings as written
    # right after a period a comment is not a blank: Coq reads `Arith.(* c *)Check` as one sentence (an error)
    assert normalise("Require Import Arith.(* c *)Check 1.") == "Require Import Arith.(* c *)Check 1."
    assert normalise("Check 1\u00a0+ 1.") == "Check 1\u00a0+ 1."  # a no-break space is not a blank for Coq
    for text in ("Require Import Arith.(* c *)Lia.", "A (* c *). B.", 'Set Foo "x. y".  Check (1 (* . *)).\n'):
        cut = [s.text for s in split_sentences(text)]
        again = [s.text for s in split_sentences("\n".join(normalise(t) for t in cut))]
        assert again == [normalise(t) for t in cut]  # normalising never moves a sentence boundary


def test_headers_that_differ_in_comments_or_blanks_share_a_prover_process():
    header = "Require Import Arith Lia.\n"
    variants = [
        header,
        "Require  Import Arith\n  Lia.\n",
        "(* a note *)\nRequire Import Arith Lia. (* why *)\n",
        "Require Import (* lia *) Arith Lia.\n",
        "Require\tImport Arith Lia.\n\n\n",
    ]
    codes = [VALID.replace(header, v) for v in variants]
    assert len(set(codes)) == len(variants)
    with InProcess(workers=1) as s:
        r = httpx.post(
            s.url + "/api/check",
            json={"snippets": [{"id": str(i), "code": c} for i, c in enumerate(codes)]},
            timeout=120,
        )
        assert _statuses(r) == ["valid"] * len(variants)
        assert s.pool.stats.started == 1  # was: one process per spelling, each loading the header again
        other = VALID.replace(header, "Require Import Arith Lia ZArith.\n")  # another header: its own process
        r = httpx.post(s.url + "/api/check", json={"snippets": [{"id": "z", "code": other}]}, timeout=120)
        assert _statuses(r) == ["valid"] and s.pool.stats.started == 2


# -- fair scheduling between callers --------------------------------------------------------------------------------
def test_one_callers_slow_items_do_not_hold_another_callers_item():
    """Six items that run to their time limit on two workers, then one quick item of another request: the quick
    one goes to the first worker that frees, not after all six."""
    with InProcess(workers=2) as s:

        async def main() -> tuple[list[str], int, list[str]]:
            async with httpx.AsyncClient(timeout=120) as c:
                body = {"snippets": [{"id": str(i), "code": LOOPING} for i in range(6)], "timeout": 2}
                slow = asyncio.create_task(c.post(s.url + "/api/check", json=body))
                while s.pool.busy < 2:  # both workers on the slow request's items, four of them queued
                    await asyncio.sleep(0.05)
                quick = await c.post(
                    s.url + "/api/check", json={"snippets": [{"id": "q", "code": VALID}], "timeout": 10}
                )
                timed_out = s.pool.stats.verdicts["timeout"]  # the slow request's items judged before the quick one was
                return _statuses(quick), timed_out, _statuses(await slow)

        quick, timed_out_before, slow = asyncio.run(main())
        assert quick == ["valid"] and slow == ["timeout"] * 6
        # the quick item took the first worker that freed: meanwhile the other worker finished at most its first
        # item and one more (the fourth can only start after the quick one); was: five or six, first come first served
        assert timed_out_before <= 3, timed_out_before


# -- idle connections make room ------------------------------------------------------------------------------------
def test_idle_connections_are_closed_to_let_new_ones_in():
    with Served(max_connections=4) as s:  # request_read_seconds: 30, so nothing times out during the test
        idle = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(3)]
        idle[1].sendall(HEAD)  # a head that never ends is no better than silence
        kept = httpx.Client()
        assert kept.get(s.url + "/health").status_code == 200  # kept alive, idle from now on
        time.sleep(0.2)
        clients = [httpx.Client(timeout=10) for _ in range(4)]
        for n, c in enumerate(clients):  # more clients than the cap, each served, each staying connected
            assert c.get(s.url + "/health").status_code == 200, n  # was: 503, for request_read_seconds
            if n < 3:
                assert idle[n].recv(100) == b""  # the connection idle longest made room
        assert kept.get(s.url + "/health").status_code == 200  # its connection was closed last: it reconnects
        for c in (kept, *clients):
            c.close()
        for sock in idle:
            sock.close()


def test_connections_with_requests_in_progress_are_not_closed_for_new_ones():
    busy = 2
    with Served(workers=1, max_connections=busy) as s:

        def post() -> None:
            out.append(
                httpx.post(
                    s.url + "/api/check", json={"snippets": [{"id": "l", "code": LOOPING}], "timeout": 3}, timeout=60
                )
            )

        out: list[httpx.Response] = []
        posts = [threading.Thread(target=post) for _ in range(busy)]
        for t in posts:
            t.start()
        deadline = time.monotonic() + 20
        while s.pool.busy + s.pool.queued < busy:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        extra = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        got = extra.recv(65536)
        assert got.startswith(b"HTTP/1.1 503 ") and got.endswith(
            f'{{"detail":"too many connections (limit {busy})"}}'.encode()
        ), got
        assert extra.recv(100) == b""  # and closed
        extra.close()
        for t in posts:
            t.join(60)
        assert [_statuses(r) for r in out] == [["timeout"]] * busy  # the requests in progress were not cut off
        assert httpx.get(s.url + "/health").status_code == 200
