"""Verification (the one client behind every reward) through a real Coq pool and a real ``proofrl serve`` on
loopback."""

from __future__ import annotations

import os
import time

import pytest
from conftest import requires_coq
from test_server import InProcess, free_port, serve_process

from proofrl.problems import Problem
from proofrl.provers.base import Message, Position, Status, Verdict
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig
from proofrl.provers.snippets import Snippet, snippet_for
from proofrl.rewards import RewardConfig, base_rewards
from proofrl.verification import ServerUnavailable, Verifier, verdict_from_result

KEY = "verifier-test-key"
H = "Require Import Arith Lia.\n"
ADD0 = Problem("add0", "Theorem add0 : forall n : nat, n + 0 = n /\\ True.", H)
SWAP = Problem("swap", "Lemma swap : forall a b : nat, a + b = b + a.", H)
LEAN = Problem("l", "theorem l : 1 = 1 := by", "import Mathlib\n", "lean")

ITEMS = [
    (ADD0, "Proof.\n  intros n. split.\n  - lia.\n  - exact I.\nQed."),  # valid
    (SWAP, "Proof.\n  intros a b.\n  rewrite foo.\nQed."),  # error on line 3
    (ADD0, None),  # extraction failed
    (ADD0, "Proof. intros. Admitted."),  # rejected: admitted
    (LEAN, "rfl"),  # another backend
    (SWAP, "Proof. intros. lia. Qed."),  # valid, second header-sharing problem
    (ADD0, "Proof.\n  intros n.\n  split.\n  - lia.\n  - exact 0.\nQed."),  # error on line 5
]
EXPECTED = [Status.VALID, Status.ERROR, Status.REJECTED, Status.REJECTED, Status.ERROR, Status.VALID, Status.ERROR]


@pytest.fixture(scope="module")
def pool():
    if requires_coq.args[0]:
        pytest.skip("Coq not installed")
    p = make_pool("coq", pool=PoolConfig(workers=2, timeout=10))
    yield p
    p.close()


@pytest.fixture(scope="module")
def served():
    """``proofrl serve`` in its own process, with an API key (as tests/test_server.py starts it)."""
    if requires_coq.args[0]:
        pytest.skip("Coq not installed")
    proc, url = serve_process("--workers", "2", "--timeout", "10", env={**os.environ, "PROOFRL_API_KEY": KEY})
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(20)


def error_lines(v: Verdict) -> list[int | None]:
    return [m.start.line if m.start else None for m in v.messages if m.severity == "error"]


# -- through a pool -------------------------------------------------------------------------------------
def test_pool_verdicts_in_input_order(pool) -> None:
    with Verifier(pool, timeout=10) as ver:
        verdicts = ver.verify(ITEMS)
    assert [v.status for v in verdicts] == EXPECTED
    assert verdicts[2].reasons == ("no proof",) and verdicts[2].prover == ""  # no prover was asked
    assert verdicts[3].reasons == ("admitted",)
    assert verdicts[4].reasons[0].startswith("backend mismatch: problem l is lean")
    assert error_lines(verdicts[1]) == [3] and error_lines(verdicts[6]) == [5]
    assert verdicts[1].messages[0].start == Position(3, 10)  # `foo` in "  rewrite foo."
    assert base_rewards([""] * len(ITEMS), [p for p, _ in ITEMS], verdicts, RewardConfig()) == [1.0, 0, 0, 0, 0, 1.0, 0]
    assert not pool._closed  # a pool passed in stays the caller's


def test_submit_overlaps_and_keeps_order(pool) -> None:
    ver = Verifier(pool, timeout=10)
    try:
        t0 = time.monotonic()
        first = ver.submit(ITEMS[:2])
        second = ver.submit(ITEMS[5:])
        returned = time.monotonic() - t0
        assert returned < 0.1  # submit does not wait for the prover
        assert [v.status for v in first.result(60)] == EXPECTED[:2]
        assert [v.status for v in second.result(60)] == EXPECTED[5:]
    finally:
        ver.close()


def test_no_items_and_non_text_proof(pool) -> None:
    ver = Verifier(pool)
    assert ver.verify([]) == []
    (v,) = ver.verify([(ADD0, b"Proof. Qed.")])  # type: ignore[list-item]
    assert v.status is Status.ERROR and v.reasons == ("proof is bytes, not text",)
    ver.close()


def test_a_borrowed_pool_keeps_its_own_timeout(pool) -> None:
    """No timeout given: the pool's configured one, never a silent default (the demo's 10 s became 60 s)."""
    short = make_pool("coq", pool=PoolConfig(workers=1, timeout=2))
    try:
        with Verifier(short) as ver:
            assert ver.timeout == 2
            (v,) = ver.verify([(ADD0, "Proof. repeat (assert True by exact I). Qed.")])
        assert v.status is Status.TIMEOUT and v.seconds < 10
    finally:
        short.close()
    with Verifier(pool, timeout=7) as ver:
        assert ver.timeout == 7


@requires_coq
def test_own_pool_is_built_with_the_one_timeout_and_closed_with_the_verifier() -> None:
    ver = Verifier(timeout=10, workers=1)
    assert ver.pool is not None and ver.pool.config.timeout == 10 and ver.pool.config.workers == 1
    ver.close()


@requires_coq
def test_own_pool_is_closed_with_the_verifier() -> None:
    ver = Verifier(timeout=10)
    assert [v.status for v in ver.verify(ITEMS[:2])] == EXPECTED[:2]
    assert ver.pool is not None and ver.pool.pids()
    ver.close()
    assert ver.pool.pids() == []


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="not both"):
        Verifier(make_pool("coq"), server_url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="timeout > 0"):
        Verifier(server_url="http://127.0.0.1:1", timeout=0)


# -- through a server -----------------------------------------------------------------------------------
def test_server_agrees_with_pool_including_positions(served, pool) -> None:
    with (
        Verifier(pool, timeout=10) as local,
        Verifier(server_url=served, api_key=KEY, timeout=10, batch_size=3) as remote,
    ):
        a, b = local.verify(ITEMS), remote.verify(ITEMS)
    assert [v.status for v in b] == EXPECTED
    for x, y in zip(a, b, strict=True):
        assert (x.status, x.reasons, x.axioms) == (y.status, y.reasons, y.axioms)
        assert [(m.severity, m.text, m.start, m.end) for m in x.messages] == [
            (m.severity, m.text, m.start, m.end) for m in y.messages
        ]
    assert b[0].prover.startswith("coq ")


def test_kimina_mapping_over_real_responses(served) -> None:
    """Without proofrl's field, the kimina-shaped response alone gives the same statuses where kimina can
    tell (valid, errors with their positions, timeouts); rejections read as errors, as in kimina-client."""
    items = [ITEMS[0], ITEMS[1], ITEMS[3], (ADD0, "Proof. intros. repeat (assert True by exact I). Qed.")]
    with Verifier(server_url=served, api_key=KEY, timeout=2, prefer_proofrl=False) as ver:
        v = ver.verify(items)
    assert [x.status for x in v] == [Status.VALID, Status.ERROR, Status.ERROR, Status.TIMEOUT]
    assert v[1].messages[0].start == Position(3, 10)
    assert v[2].reasons == ("the proof ends with Admitted",)
    assert v[3].reasons == ("coq command timed out in 2 seconds",)
    assert "kimina" in v[0].prover


def test_wrong_key_and_unreachable_server_raise(served) -> None:
    with Verifier(server_url=served, api_key="wrong") as ver, pytest.raises(ServerUnavailable) as e:
        ver.verify(ITEMS[:1])
    assert e.value.status == 401 and "missing or invalid API key" in str(e.value)
    with Verifier(server_url=f"http://127.0.0.1:{free_port()}", retries=1) as ver:
        t0 = time.monotonic()
        with pytest.raises(ServerUnavailable, match="failed 2 times; last: ConnectError"):
            ver.verify(ITEMS[:1])
        assert time.monotonic() - t0 < 5
        assert ver.verify([(ADD0, None)])[0].reasons == ("no proof",)  # nothing to send, nothing raised


@requires_coq
def test_busy_server_is_retried_then_reported() -> None:
    """A server with no room keeps answering 429: retried, then reported. A batch larger than the server could
    ever admit is refused at once (413, not retried). Batches it admits go through."""
    import threading

    import httpx
    from test_server import LOOPING

    with InProcess(workers=1, max_inflight=1) as srv:
        with Verifier(server_url=srv.url, batch_size=2, retries=1) as ver, pytest.raises(ServerUnavailable) as e:
            ver.verify(ITEMS[:2])
        assert e.value.status == 413 and "max_inflight" in str(e.value)
        hold = threading.Thread(
            target=lambda: httpx.post(
                srv.url + "/api/check", json={"snippets": [{"id": "x", "code": LOOPING}], "timeout": 4}, timeout=30
            )
        )
        hold.start()
        deadline = time.monotonic() + 10
        while "proofrl_inflight_items 1" not in httpx.get(srv.url + "/metrics").text.splitlines():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with Verifier(server_url=srv.url, batch_size=1, retries=1) as ver, pytest.raises(ServerUnavailable) as e:
            ver.verify(ITEMS[:1])
        assert e.value.status == 429 and "failed 2 times" in str(e.value)
        hold.join(30)
        with Verifier(server_url=srv.url, batch_size=1) as ver:
            assert [v.status for v in ver.verify(ITEMS[:2])] == EXPECTED[:2]


# -- snippets and mapping (pure) ------------------------------------------------------------------------
def test_lean_snippets_map_positions_back() -> None:
    p = Problem("t", "theorem t (x : ℕ) :\n    x = x := by", "import Mathlib\n\nopen Nat\n", "lean")
    body = snippet_for(p, "intro\nrfl")
    assert body.code == "import Mathlib\n\nopen Nat\ntheorem t (x : ℕ) :\n    x = x := by\n  intro\n  rfl"
    assert body.to_proof(Position(7, 2)) == Position(2, 0) and body.to_proof(Position(4, 0)) is None
    one = snippet_for(p, "rfl")
    assert one.code.endswith("x = x := by rfl") and one.to_proof(Position(5, 16)) == Position(1, 0)
    whole = snippet_for(p, "theorem t (x : ℕ) :\n    x = x := by\n  rfl")
    assert whole.code.startswith("import Mathlib\n\nopen Nat\ntheorem") and whole.to_proof(Position(6, 2)) == Position(
        3, 2
    )
    own = snippet_for(p, "import Mathlib\ntheorem t (x : ℕ) :\n    x = x := by rfl")
    assert own.code.startswith("import Mathlib\ntheorem") and own.line_offset == 0


def test_kimina_lean_result_shapes() -> None:
    s = Snippet("…", line_offset=8)
    err = {
        "id": "0",
        "time": 1.5,
        "response": {
            "env": 0,
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": 10, "column": 2},
                    "endPos": {"line": 10, "column": 9},
                    "data": "linarith failed\nx : ℕ",
                }
            ],
        },
    }
    v = verdict_from_result(err, s, "lean")
    assert v.status is Status.ERROR and v.reasons == ("linarith failed x : ℕ",) and v.seconds == 1.5
    assert v.messages == (Message("error", "linarith failed\nx : ℕ", Position(2, 2), Position(2, 9)),)
    sorry = {
        "id": "0",
        "response": {
            "env": 0,
            "sorries": [{"goal": "⊢ False"}],
            "messages": [{"severity": "warning", "pos": {"line": 9, "column": 8}, "data": "declaration uses `sorry`"}],
        },
    }
    assert verdict_from_result(sorry, s, "lean").reasons == ("sorry",)
    warn_only = {
        "id": "0",
        "response": {
            "env": 0,
            "messages": [{"severity": "warning", "pos": {"line": 9, "column": 0}, "data": "declaration uses 'sorry'"}],
        },
    }
    assert verdict_from_result(warn_only, s, "lean").status is Status.REJECTED
    assert verdict_from_result({"id": "0", "response": {"env": 0}}, s, "lean").status is Status.VALID
    assert (
        verdict_from_result({"id": "0", "response": {"message": "Unknown environment."}}, s, "lean").status
        is Status.ERROR
    )
    assert (
        verdict_from_result({"id": "0", "error": "Lean REPL command timed out in 60 seconds"}, s, "lean").status
        is Status.TIMEOUT
    )
    assert verdict_from_result({"id": "0", "error": "REPL died"}, s, "lean").status is Status.CRASH
    with pytest.raises(ValueError, match="neither"):
        verdict_from_result({"id": "0"}, s, "lean")


@requires_coq
def test_the_trainers_verifier_owns_and_closes_its_pool() -> None:
    from proofrl.train.config import load_recipe
    from proofrl.train.whole_proof import make_verifier

    ver = make_verifier(load_recipe("demo", ["verify.workers=1", "verify.timeout=7"]))
    assert ver.timeout == 7 and ver.pool is not None and ver.pool.config.timeout == 7
    assert [v.status for v in ver.verify(ITEMS[:1])] == EXPECTED[:1]
    assert ver.pool.pids()
    ver.close()
    assert ver.pool.pids() == []


def test_a_proof_that_puts_another_theorem_first_is_not_sent_to_a_server() -> None:
    """A server judges the first declaration of a snippet; a whole Lean file that starts with an easy theorem
    would earn `valid` for it. The client refuses it before sending (nothing listens on this port)."""
    with Verifier(server_url=f"http://127.0.0.1:{free_port()}", backend="lean", retries=0) as ver:
        easy, helper_first = ver.verify(
            [
                (LEAN, "theorem easy : True := trivial"),
                (LEAN, "theorem helper : 2 = 2 := rfl\ntheorem l : 1 = 1 := by rfl"),
            ]
        )
    assert easy.status is Status.REJECTED and easy.reasons[0].startswith("statement changed")
    assert helper_first.status is Status.REJECTED and "theorem helper" in helper_first.reasons[0]


def test_the_problems_own_statement_passes_the_client_check() -> None:
    from proofrl.verification import statement_mismatch

    assert statement_mismatch(LEAN, snippet_for(LEAN, "rfl")) is None
    assert statement_mismatch(LEAN, snippet_for(LEAN, "import Mathlib\ntheorem l : 1 = 1 := by rfl")) is None
    assert statement_mismatch(ADD0, snippet_for(ADD0, "Proof. intros. Qed.")) is None
    assert statement_mismatch(LEAN, snippet_for(LEAN, "theorem l : 1 = 2 := by rfl")).startswith("statement changed")
