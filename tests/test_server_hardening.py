"""Defects an attacker found in the verification service, each over real parts: real ``coqidetop``
processes, real uvicorn on loopback, raw sockets, ``proofrl serve`` as a subprocess."""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import threading
import time

import httpx
import pytest
from conftest import requires_coq
from test_server import LOOPING, VALID, InProcess, serve_process

from proofrl.provers.base import Status, Theorem
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig

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

    msg = (
        '<feedback object="state" route="0"><state_id val="4"/><feedback_content val="message">'
        '<message><message_level val="info"/><option val="none"/><richpp><_><pp>{}</pp></_></richpp></message>'
        '</feedback_content></feedback><value val="good"><unit/></value>'
    )
    for raw, text in [
        (b"x\x02y", "x\u2402y"),
        (b"x&#2;y&#x1F;z&#65;", "x\u2402y\u241fzA"),
        (b"bad \xff utf-8 \xef\xbf\xbe", "bad \ufffd utf-8 \ufffd"),
    ]:
        reply = xml.parse_reply(msg.encode().replace(b"{}", raw))
        assert reply.good and [f.text for f in reply.feedback] == [text]


# -- 2, 3. request limits answered precisely and counted ---------------------------------------------------------
def _metric(url: str, line: str) -> bool:
    return line in httpx.get(url + "/metrics").text.splitlines()


def test_a_huge_timeout_is_capped_not_a_500_and_counted():
    with InProcess(workers=1, max_timeout=2) as s:
        for path, items in (
            ("/api/check", '"snippets": [{"id": "a", "code": %s}]'),
            ("/verify", '"codes": [{"custom_id": 1, "proof": %s}]'),
        ):
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
            assert r.json() == {
                "detail": (
                    "batch of 3 items exceeds the limit of 2 (max_inflight: items in flight at once); send at most 2 "
                    "per request"
                )
            }
        r = httpx.post(
            s.url + "/api/check", json={"snippets": [{"id": str(i), "code": "x"} for i in range(11)]}, timeout=30
        )
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
    slow = Theorem(
        "t",
        "Theorem t : True.",
        "Require Import NArith.\nDefinition x := Eval vm_compute in (N.iter 300000000 N.succ 0%N).",
    )
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
    verdicts = [
        pool.check(t, f"Proof. pose (l := ltac:(let x := eval vm_compute in (List.repeat 0 {n}) in exact x)). Qed.")
        for n in (20000, 30000, 40000)
    ]
    assert not [v.reasons for v in verdicts if any("internal error" in r or "edit_at" in r for r in v.reasons)]
    assert all(v.status in (Status.ERROR, Status.REJECTED) for v in verdicts), [v.reasons for v in verdicts]
    unprintable = [v for v in verdicts if v.reasons == ("coq Goal failed: Stack overflow.",)]
    assert unprintable, [v.reasons for v in verdicts]  # at least one size overflows printing but not evaluation
    assert unprintable[0].messages[0].text == "Stack overflow."
    assert pool.check(T, "Proof. exact I. Qed.").valid


# -- 6. connections: a cap, and bounded time to send a request -------------------------------------------------------
class Served(InProcess):
    """:class:`InProcess`, run the way ``proofrl serve`` runs it (:func:`proofrl.server.run.make_server`)."""

    def __init__(self, workers: int = 1, **server_options):
        from proofrl.server import ServeConfig
        from proofrl.server.run import make_server

        super().__init__(workers, **server_options)
        self.server = make_server(
            self.server.config.app, ServeConfig(**server_options), host="127.0.0.1", port=self.port
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)


def _trickle(
    port: int, head: bytes, body: bytes = b"", *, every: float = 0.2, seconds: float = 6.0
) -> tuple[bytes, float]:
    """Send ``head`` whole if ``body`` is given (else two bytes at a time), then ``body`` two bytes at a time,
    one step every ``every`` seconds, until the server answers or closes; returns what it sent back and when
    (seconds after connecting), or ``(b"", seconds)`` if it kept waiting."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    t0 = time.monotonic()
    pending = body if body else head
    if body:
        sock.sendall(head)
    got = b""
    try:
        while time.monotonic() - t0 < seconds:
            if pending:
                sock.sendall(pending[:2])
                pending = pending[2:]
            ready, _, _ = select.select([sock], [], [], every)
            if ready:
                while chunk := sock.recv(65536):
                    got += chunk
                return got, time.monotonic() - t0
    except (BrokenPipeError, ConnectionResetError):
        return got, time.monotonic() - t0
    finally:
        sock.close()
    return b"", time.monotonic() - t0


HEAD = b"POST /api/check HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def test_a_request_head_sent_slowly_is_cut_off_with_408():
    with Served(request_read_seconds=1, keep_alive_seconds=1) as s:
        got, at = _trickle(s.port, HEAD + b"X-Slow: " + b"a" * 200 + b"\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 408 "), got
        assert b'{"detail":"request not received within 1 s"}' in got
        assert 0.9 < at < 3, at
        assert httpx.get(s.url + "/health").status_code == 200  # the server is fine


def test_a_body_sent_slowly_is_cut_off_with_408_and_counted():
    with Served(request_read_seconds=1, keep_alive_seconds=1) as s:
        body = json.dumps({"snippets": [{"id": "a", "code": VALID}]}).encode()
        got, at = _trickle(s.port, HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode(), body)
        assert got.startswith(b"HTTP/1.1 408 "), got
        assert got.endswith(b'{"detail":"request not received within 1 s"}')
        assert 0.9 < at < 3, at
        assert _metric(s.url, 'proofrl_responses_total{path="/api/check",code="408"} 1')


def test_idle_connections_are_closed():
    with Served(request_read_seconds=1.5, keep_alive_seconds=0.5) as s:
        fresh = socket.create_connection(("127.0.0.1", s.port), timeout=10)  # never sends a byte
        t0 = time.monotonic()
        assert fresh.recv(100) == b"" and 1.4 < time.monotonic() - t0 < 3.5  # closed, nothing said
        kept = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = b""
        while not got.endswith(b"}}"):  # the whole response (head, then the JSON body)
            got += kept.recv(65536)
        assert got.startswith(b"HTTP/1.1 200 ")
        t0 = time.monotonic()
        assert kept.recv(100) == b"" and time.monotonic() - t0 < 1.4  # keep-alive ends before the read bound
        fresh.close()
        kept.close()


# -- 7. SIGTERM drains in-flight requests -----------------------------------------------------------------------------
def _serve(tmp_path, yaml_text: str = "", workers: int = 2) -> tuple[subprocess.Popen, str]:
    args = ["--workers", str(workers)]
    if yaml_text:
        (tmp_path / "serve.yaml").write_text(yaml_text)
        args += ["--config", str(tmp_path / "serve.yaml")]
    with open(tmp_path / "serve.log", "w") as log:
        return serve_process(*args, stderr=log)


def _post_in_background(url: str, body: dict) -> tuple[threading.Thread, list]:
    out: list = []

    def go() -> None:
        try:
            out.append(httpx.post(url + "/api/check", json=body, timeout=90))
        except httpx.HTTPError as e:
            out.append(e)

    t = threading.Thread(target=go)
    t.start()
    return t, out


def _wait_inflight(url: str, n: int) -> None:
    deadline = time.monotonic() + 20
    while not _metric(url, f"proofrl_inflight_items {n}"):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_sigterm_drains_requests_in_flight(tmp_path):
    """A batch that outlasts uvicorn's old 10 s grace: SIGTERM during it, and the client still gets every verdict."""
    proc, url = _serve(tmp_path)
    try:
        t, out = _post_in_background(
            url, {"snippets": [{"id": "v", "code": VALID}, {"id": "l", "code": LOOPING}], "timeout": 12}
        )
        _wait_inflight(url, 2)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        t.join(60)
        assert isinstance(out[0], httpx.Response) and out[0].status_code == 200, out
        assert [x["proofrl"]["status"] for x in out[0].json()["results"]] == ["valid", "timeout"]
        assert proc.wait(20) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


def test_sigterm_past_the_drain_bound_answers_every_item_and_exits(tmp_path):
    proc, url = _serve(tmp_path, "drain_seconds: 2\n", workers=1)
    try:
        t, out = _post_in_background(
            url, {"snippets": [{"id": str(i), "code": LOOPING} for i in range(3)], "timeout": 60}
        )
        _wait_inflight(url, 3)
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        t.join(60)
        assert isinstance(out[0], httpx.Response) and out[0].status_code == 200, out
        assert [(x["proofrl"]["status"], x["proofrl"]["reasons"]) for x in out[0].json()["results"]] == [
            ("error", ["server shutting down"])
        ] * 3
        assert proc.wait(20) in (0, -signal.SIGTERM) and time.monotonic() - t0 < 2 + 6
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
