"""The verification service over real Coq, real uvicorn on loopback and real HTTP (httpx, kimina-client)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

import httpx
import pytest
from conftest import requires_coq
from lean_replay_support import needs_transcripts

from proofrl.provers import sandbox
from proofrl.provers.factory import make_pool
from proofrl.provers.pool import PoolConfig, ProverPool
from proofrl.provers.snippets import make_job
from proofrl.server import ServeConfig, create_app

pytestmark = requires_coq

KEY = "s3cret-test-key"
H = "Require Import Arith Lia.\n"
VALID = H + "Theorem add_zero : forall n : nat, n + 0 = n.\nProof. intros. lia. Qed."
WRONG = H + "Theorem add_zero : forall n : nat, n + 0 = n.\nProof. intros. reflexivity. Qed."
ADMITTED = H + "Theorem add_zero : forall n : nat, n + 0 = n.\nProof. Admitted."
LOOPING = H + "Theorem loops : True.\nProof. repeat (assert True by exact I). Qed."
SWAP = H + "Lemma swap : forall a b : nat, a + b = b + a.\nProof. intros. lia. Qed."
SWAP_BAD = H + "Lemma swap : forall a b : nat, a + b = b + a.\nProof. intros. simpl. reflexivity. Qed."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen | None = None, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise TimeoutError(url)


def serve_process(
    *args: str, env: dict[str, str] | None = None, stderr=subprocess.PIPE
) -> tuple[subprocess.Popen, str]:
    """``proofrl serve --backend coq --port FREE ARGS…`` in its own process, once it answers ``/health``."""
    port = free_port()
    cmd = [sys.executable, "-c", "from proofrl.cli import app; app()", "serve", "--backend", "coq"]
    proc = subprocess.Popen([*cmd, "--port", str(port), *args], env=env, stderr=stderr, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
    except BaseException:
        proc.kill()
        raise
    return proc, url


class InProcess:
    """uvicorn in a thread, so a test can reach the pool (its pids) while real HTTP goes over loopback."""

    def __init__(self, workers: int = 2, pool: ProverPool | None = None, **server_options):
        import uvicorn

        self.pool = pool or make_pool("coq", pool=PoolConfig(workers=workers, timeout=5))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = create_app(self.pool, ServeConfig(**server_options))
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> InProcess:
        self.thread.start()
        wait_healthy(self.url)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)
        assert not self.pool.pids(), "the app's shutdown closes its pool"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``proofrl serve`` as a subprocess, with an API key and a 64 KiB body limit from a YAML file."""
    cfg = tmp_path_factory.mktemp("serve") / "serve.yaml"
    cfg.write_text("pool: {max_uses: 200}\nmax_body_bytes: 65536\nmax_batch: 50\n")
    env = {**os.environ, "PROOFRL_API_KEY": KEY}
    proc, url = serve_process("--workers", "2", "--timeout", "10", "--config", str(cfg), env=env)
    try:
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(20)


def post(url: str, path: str, body, *, key: str | None = KEY, **kw) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if isinstance(body, (bytes, str)):
        return httpx.post(
            url + path, content=body, headers={**headers, "content-type": "application/json"}, timeout=30, **kw
        )
    return httpx.post(url + path, json=body, headers=headers, timeout=30, **kw)


# -- kimina-client, unchanged, against proofrl serve -----------------------------------------------------
def _kimina():
    import typing

    import typing_extensions

    typing.TypedDict = typing_extensions.TypedDict  # kimina-client needs this on Python < 3.12 (see notes)
    import kimina_client

    return kimina_client


def test_kimina_client_checks_valid_and_invalid_proofs(served):
    url, _ = served
    kc = _kimina()
    client = kc.KiminaClient(api_url=url, api_key=KEY, n_retries=1)
    snippets = [
        kc.Snippet(id="ok", code=VALID),
        kc.Snippet(id="wrong", code=WRONG),
        kc.Snippet(id="admitted", code=ADMITTED),
    ]
    out = client.check(snippets, timeout=10, show_progress=False)
    by_id = {r.id: r for r in out.results}
    assert {i: r.analyze().status.value for i, r in by_id.items()} == {
        "ok": "valid",
        "wrong": "lean_error",
        "admitted": "lean_error",
    }
    assert client.health()["status"] == "ok"
    # the extra field is ours; the raw response still carries it
    raw = post(url, "/api/check", {"snippets": [{"id": "a", "code": ADMITTED}]}).json()["results"][0]
    assert raw["proofrl"]["status"] == "rejected" and raw["proofrl"]["reasons"] == ["admitted"]
    assert set(raw) == {"id", "time", "response", "proofrl"}  # exclude_none: no error, no diagnostics


def test_kimina_timeout_reads_as_timeout_error(served):
    url, _ = served
    kc = _kimina()
    out = kc.KiminaClient(api_url=url, api_key=KEY, n_retries=1).check(
        [kc.Snippet(id="loop", code=LOOPING)], timeout=1, show_progress=False
    )
    assert out.results[0].analyze().status.value == "timeout_error"
    assert out.results[0].error == "coq command timed out in 1 seconds"


def test_legacy_verify(served):
    url, _ = served
    r = post(
        url,
        "/verify",
        {"codes": [{"custom_id": 7, "proof": VALID}, {"custom_id": "x", "code": WRONG}, {"custom_id": "none"}]},
    )
    assert r.status_code == 200
    res = r.json()["results"]
    assert [x["custom_id"] for x in res] == [7, "x", "none"]
    assert [x["proofrl"]["status"] for x in res] == ["valid", "error", "error"]
    assert "time" in res[0]["response"] and "error" not in res[0]


# -- security and hostile input ----------------------------------------------------------------------------
def test_api_key(served):
    url, _ = served
    body = {"snippets": [{"id": "a", "code": VALID}]}
    for key in (None, "wrong"):
        r = post(url, "/api/check", body, key=key)
        assert r.status_code == 401
        assert r.json() == {"detail": "missing or invalid API key"}
        assert r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(url + "/health").json()["status"] == "ok"


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        (b'{"snippets": [', 400, "malformed JSON"),
        (b"\xff\xfe not json", 400, "There was an error parsing the body"),  # not UTF-8: FastAPI's own 400
        (
            {"snippets": "abc"},
            422,
            [{"loc": ["body", "snippets"], "msg": "Input should be a valid list", "type": "list_type"}],
        ),
        (
            {"snippets": [{"id": 1, "code": VALID}]},
            422,
            [{"loc": ["body", "snippets", 0, "id"], "msg": "Input should be a valid string", "type": "string_type"}],
        ),
        (
            {"snippets": [{"id": "a", "code": VALID}], "timeout": "soon"},
            422,
            [
                {
                    "loc": ["body", "timeout"],
                    "msg": "Input should be a valid integer, unable to parse string as an integer",
                    "type": "int_parsing",
                }
            ],
        ),
        (
            {"snippets": [{"id": "a", "code": VALID}], "disallow_sorry": True},
            422,
            [{"loc": ["body", "disallow_sorry"], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}],
        ),
        (
            {"snippets": []},
            422,
            [{"loc": ["body"], "msg": "Value error, `snippets` must be non empty", "type": "value_error"}],
        ),
        (
            {"snippets": [{"id": "a", "code": "x"}, {"id": "a", "code": "y"}]},
            422,
            [{"loc": ["body"], "msg": "Value error, `snippets` must have unique ids", "type": "value_error"}],
        ),
        (
            [1, 2],
            422,
            [
                {
                    "loc": ["body"],
                    "msg": "Input should be a valid dictionary or object to extract fields from",
                    "type": "model_attributes_type",
                }
            ],
        ),
        (
            {"snippets": [{"id": "a", "code": VALID}], "backend": "isabelle"},
            422,
            [{"loc": ["body", "backend"], "msg": "Input should be 'coq' or 'lean'", "type": "literal_error"}],
        ),
        (
            {"snippets": [{"id": "a", "code": VALID}], "backend": "lean"},
            400,
            "backend 'lean' is not served here; served: ['coq']",
        ),
        (
            {"snippets": [{"id": str(i), "code": "x"} for i in range(51)]},
            413,
            "batch of 51 items exceeds the limit of 50",
        ),
    ],
)
def test_hostile_input_gets_exact_4xx(served, body, status, detail):
    url, _ = served
    r = post(url, "/api/check", body)
    assert r.status_code == status
    assert r.json() == {"detail": detail}


def test_huge_body_is_413_by_length_and_when_chunked(served):
    url, _ = served
    huge = json.dumps({"snippets": [{"id": "a", "code": "(*" + "x" * 100_000 + "*)" + VALID}]}).encode()
    r = post(url, "/api/check", huge)
    assert (r.status_code, r.json()) == (413, {"detail": "request body exceeds 65536 bytes"})

    def chunks():
        for i in range(0, len(huge), 8192):
            yield huge[i : i + 8192]

    r = httpx.post(
        url + "/api/check",
        content=chunks(),
        headers={"Authorization": f"Bearer {KEY}", "content-type": "application/json"},
    )
    assert (r.status_code, r.json()) == (413, {"detail": "request body exceeds 65536 bytes"})


def test_bad_items_never_sink_the_batch(served):
    url, _ = served
    items = [VALID, "Definition x := 1.", "Theorem t : True. Proof (* never closed", "\x00\ud7ff" * 10, WRONG]
    r = post(url, "/api/check", {"snippets": [{"id": str(i), "code": c} for i, c in enumerate(items)], "timeout": 5})
    assert r.status_code == 200
    assert [x["proofrl"]["status"] for x in r.json()["results"]] == ["valid", "error", "error", "error", "error"]


# -- hostile Coq: commands that reach outside the prover ---------------------------------------------------------
PROBE = "/var/tmp/proofrl-hostile-probe"  # no test may ever create it
THM = "Theorem t : True.\nProof. exact I. Qed."


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        # in the header, which a kimina snippet lets the client write
        ('Load "/etc/passwd".\n' + THM, "forbidden: Load"),
        (H + f'Redirect "{PROBE}" Print nat.\n' + THM, "forbidden: Redirect"),
        ('Cd "/var/tmp".\n' + THM, "forbidden: Cd"),
        ('Fail Time Load "/etc/passwd".\n' + THM, "forbidden: Load"),  # under control prefixes
        (f'#[local] Redirect "{PROBE}" Print nat.\n' + THM, "forbidden: Redirect"),
        ('(* a comment *) Declare ML Module "coq-core.plugins.ltac".\n' + THM, "forbidden: Declare ML Module"),
        ('Add LoadPath "/etc" as Etc.\n' + THM, "forbidden: Add LoadPath"),
        (f'Extraction "{PROBE}" nat.\n' + THM, "forbidden: Extraction"),
        # in the proof, where any command is refused
        (f'Theorem t : True.\nProof. Redirect "{PROBE}" Print nat. exact I. Qed.', "forbidden: Redirect"),
        ('Theorem t : True.\nProof. idtac. Load "/etc/passwd". exact I. Qed.', "forbidden: Load"),
        (f'Theorem t : True.\nProof. exact I. Qed.\nRedirect "{PROBE}" Print t.', "forbidden: Qed"),
    ],
)
def test_file_commands_in_a_snippet_are_refused_and_say_so(served, code, reason):
    url, _ = served
    r = post(url, "/api/check", {"snippets": [{"id": "x", "code": code}], "timeout": 10})
    (res,) = r.json()["results"]
    assert (res["proofrl"]["status"], res["proofrl"]["reasons"]) == ("rejected", [reason])
    assert reason in res["response"]["messages"][0]["data"]  # kimina clients see it as a lean_error
    assert not any(os.path.exists(PROBE + ext) for ext in ("", ".out"))


def test_health_reports_the_sandbox(served):
    url, _ = served
    mode = next((m for m in ("bwrap", "unshare") if sandbox.probe(m) is None), "off")
    body = httpx.get(url + "/health").json()
    assert body["status"] == "ok"
    assert (body["sandbox"]["mode"], body["sandbox"]["network"], body["sandbox"]["filesystem"]) == (
        mode,
        mode != "off",
        mode != "off",
    )
    assert f'proofrl_sandbox{{mode="{mode}"}} {int(mode != "off")}' in httpx.get(url + "/metrics").text


# -- Lean through the server (the transcript replay stands in for the REPL) -------------------------------------
def _lean_server(tmp_path):
    """A server whose default backend is Lean; each header's process replays its own transcript."""
    from lean_replay_support import recorded, replay_config, synthetic_axioms, write_transcript

    from proofrl.provers.lean import LeanProver
    from proofrl.provers.lean.prover import EXAMPLE_NAME

    header_req, header_ans = recorded("Mathlib/test/H20231020", 1)
    lines = header_req["cmd"].count("\n") + 1
    mathlib = [(header_req, header_ans)]
    for i, env in ((2, 1), (3, 2)):  # mathd 188 and 403: the recorded answers, the body as a whole file sends it
        req, ans = recorded("Mathlib/test/H20231020", i)
        name = req["cmd"].split()[1]
        mathlib += [
            ({"cmd": "\n" * lines + req["cmd"], "env": 0}, ans),
            ({"cmd": f"#print axioms {name}", "env": env}, synthetic_axioms(name, ["propext"], env + 10)),
        ]
    kernel_req, kernel_ans = recorded("app_type_mismatch2", 1)  # the recorded answer; the request names the example
    renamed = {"cmd": kernel_req["cmd"].replace("example", f"theorem {EXAMPLE_NAME}", 1)}
    transcripts = {
        header_req["cmd"]: write_transcript(tmp_path, "mathlib", mathlib),
        "": write_transcript(tmp_path, "kernel", [(renamed, kernel_ans)]),
    }
    pool = ProverPool(lambda h: LeanProver(replay_config(transcripts[h]), h), PoolConfig(workers=1, timeout=10))
    return InProcess(pool=pool, backends=["lean"]), header_req["cmd"], kernel_req["cmd"]


@needs_transcripts
def test_lean_through_the_server_with_kimina_client(tmp_path):
    server, header, kernel_code = _lean_server(tmp_path)
    kc = _kimina()
    with server as s:
        t188 = header + "\ntheorem mathd_numbertheory_188 : Nat.gcd 180 168 = 12 := by norm_num"
        t403 = header + (
            "\ntheorem mathd_numbertheory_403 : ∑ k ∈ (Nat.properDivisors 198), k = 270 := by simp (config := "
            "{decide := true})"
        )
        cheat = header + "\ntheorem mathd_numbertheory_188 : Nat.gcd 180 168 = 12 := by sorry"
        out = kc.KiminaClient(api_url=s.url, n_retries=1).check(
            [kc.Snippet(id="188", code=t188), kc.Snippet(id="403", code=t403), kc.Snippet(id="cheat", code=cheat)],
            timeout=10,
            show_progress=False,
        )
        assert {r.id: r.analyze().status.value for r in out.results} == {
            "188": "valid",
            "403": "valid",
            "cheat": "lean_error",
        }
        raw = httpx.post(s.url + "/api/check", json={"snippets": [{"id": "c", "code": cheat}]}, timeout=30).json()[
            "results"
        ][0]
        assert (raw["proofrl"]["backend"], raw["proofrl"]["reasons"]) == ("lean", ["forbidden: sorry"])  # never sent
        r = httpx.post(
            s.url + "/api/check", json={"snippets": [{"id": "k", "code": kernel_code}], "backend": "lean"}, timeout=30
        )
        (k,) = r.json()["results"]
        assert (k["proofrl"]["status"], k["proofrl"]["reasons"]) == ("rejected", ["kernel: application type mismatch"])
        assert s.pool.stats.started == 2  # one process per header, the Mathlib header run once for two proofs


# -- backpressure, load, faults, shutdown ------------------------------------------------------------------
def test_full_queue_answers_429_with_retry_after():
    with InProcess(workers=1, max_inflight=2, retry_after=3) as s:
        body = {"snippets": [{"id": "1", "code": LOOPING}, {"id": "2", "code": LOOPING}], "timeout": 1}
        first: list[httpx.Response] = []
        t = threading.Thread(target=lambda: first.append(httpx.post(s.url + "/api/check", json=body, timeout=30)))
        t.start()
        deadline = time.monotonic() + 5
        while "proofrl_inflight_items 2" not in httpx.get(s.url + "/metrics").text:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        t0 = time.monotonic()
        r = httpx.post(s.url + "/api/check", json={"snippets": [{"id": "x", "code": VALID}]}, timeout=30)
        assert time.monotonic() - t0 < 1, "refused at once, never queued"
        assert (r.status_code, r.headers["retry-after"]) == (429, "3")
        assert r.json() == {"detail": "server busy: 2 items in flight, limit 2"}
        t.join(30)
        assert first[0].status_code == 200
        assert [x["proofrl"]["status"] for x in first[0].json()["results"]] == ["timeout", "timeout"]
        assert "proofrl_rejected_busy_total 1" in httpx.get(s.url + "/metrics").text


ZH = "Require Import ZArith Lia.\n"
Z_VALID = ZH + "Theorem zadd : forall x : Z, (x + 0 = x)%Z.\nProof. intros. lia. Qed."
Z_WRONG = ZH + "Theorem zadd : forall x : Z, (x + 0 = x)%Z.\nProof. intros. reflexivity. Qed."
MIX = [VALID, WRONG, ADMITTED, SWAP, SWAP_BAD, LOOPING, Z_VALID, Z_WRONG]  # two headers, so grouping matters
LOAD_TIMEOUT = 2  # seconds per item: LOOPING times out, the others finish far sooner even on a busy machine


def _direct(codes: list[str], timeout: float) -> dict[str, str]:
    """The verdict of each code from a pool called directly (no HTTP, no server)."""
    jobs = {c: make_job(c, "coq") for c in codes}
    with make_pool("coq", pool=PoolConfig(workers=2)) as pool:
        return {c: pool.check(j.theorem, j.proof, timeout=timeout).status.value for c, j in jobs.items()}


Sent = tuple[float, float, "int | str", list[tuple[str, str]]]


async def _hammer(url: str, clients: int, seconds: float, seed: int) -> list[Sent]:
    """``clients`` concurrent clients posting random batches of 1-2 MIX items for ``seconds``; returns
    ``(time sent, time answered, http status or exception name, [(code, verdict status)])`` per request."""
    out: list[Sent] = []
    stop = time.monotonic() + seconds

    async def client(i: int) -> None:
        rng = random.Random(seed + i)
        async with httpx.AsyncClient(base_url=url, timeout=120) as c:
            while (sent := time.monotonic()) < stop:
                codes = [rng.choice(MIX) for _ in range(rng.randint(1, 2))]
                body = {"snippets": [{"id": str(k), "code": x} for k, x in enumerate(codes)], "timeout": LOAD_TIMEOUT}
                try:
                    r = await c.post("/api/check", json=body)
                except httpx.HTTPError as e:  # recorded, never raised: every request must be answered
                    out.append((sent, time.monotonic(), type(e).__name__, []))
                    continue
                got = [x["proofrl"]["status"] for x in r.json()["results"]] if r.status_code == 200 else []
                assert len(got) == len(codes) or r.status_code != 200
                out.append((sent, time.monotonic(), r.status_code, list(zip(codes, got, strict=True))))

    await asyncio.gather(*(client(i) for i in range(clients)))
    return out


def _provers_of(server_pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(server_pid).children(recursive=True) if p.name().startswith("coqidetop")]
    except psutil.Error:
        return []


@pytest.mark.slow
def test_load_32_clients_60s_with_kills_matches_direct_pool_calls(tmp_path):
    """``proofrl serve`` (a real subprocess, real uvicorn) under 32 concurrent clients for 60 s of mixed
    valid, invalid, admitted and looping proofs over two headers. First half: no faults, every verdict
    equals the direct pool's. Second half: a random prover process is SIGKILLed every 2 s; every item
    still gets a verdict, and one differs only as ``crash`` (a job killed on its retry too)."""
    expected = _direct(MIX, LOAD_TIMEOUT)
    assert expected[VALID] == expected[Z_VALID] == "valid" and expected[LOOPING] == "timeout"
    port = free_port()
    cmd = [sys.executable, "-c", "from proofrl.cli import app; app()", "serve", "--port", str(port), "--workers", "2"]
    with open(tmp_path / "serve.log", "w") as log:  # a file, not a pipe nobody reads for a minute
        proc = subprocess.Popen(cmd, stderr=log, text=True)
    url = f"http://127.0.0.1:{port}"
    killed: list[tuple[float, int]] = []
    stop_killing = threading.Event()
    try:
        wait_healthy(url, proc)
        t0 = time.monotonic()
        half = t0 + 30

        def killer() -> None:
            rng = random.Random(7)
            while not stop_killing.wait(2.0) and time.monotonic() < t0 + 60:
                pids = _provers_of(proc.pid)
                if time.monotonic() >= half and pids:
                    pid = rng.choice(pids)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        killed.append((time.monotonic(), pid))

        k = threading.Thread(target=killer)
        k.start()
        try:
            results = asyncio.run(_hammer(url, clients=32, seconds=60, seed=1))
        finally:
            stop_killing.set()
            k.join()
        assert proc.poll() is None, "the server survived"
        metrics = httpx.get(url + "/metrics").text
    finally:
        proc.terminate()
        proc.wait(20)
    assert Counter(code for _, _, code, _ in results) == Counter({200: len(results)})  # no 5xx, no 4xx, no drops
    first_kill = killed[0][0] if killed else half
    calm = [item for _, answered, _, got in results if answered < first_kill for item in got]
    stormy = [item for sent, _, _, got in results if sent >= half for item in got]
    assert len(calm) > 60 and len(stormy) > 30 and len(killed) >= 8
    print(
        f"{len(results)} requests, {len(calm)} items before the first kill, {len(stormy)} during kills, "
        f"{len(killed)} kills, latency max {max(a - s for s, a, _, _ in results):.1f}s"
    )
    assert [(c, v) for c, v in calm if v != expected[c]] == []
    differing = [(c, v) for c, v in stormy if v != expected[c]]
    assert all(v == "crash" for _, v in differing) and len(differing) <= len(killed), differing
    assert 'proofrl_process_crashes_total{backend="coq"} 0' not in metrics  # the kills were seen as crashes


def test_sigterm_leaves_no_prover_process(tmp_path):
    import psutil

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from proofrl.cli import app; app()", "serve", "--port", str(port), "--workers", "2"],
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        r = httpx.post(
            url + "/api/check", json={"snippets": [{"id": "a", "code": VALID}, {"id": "b", "code": SWAP}]}, timeout=30
        )
        assert [x["proofrl"]["status"] for x in r.json()["results"]] == ["valid", "valid"]
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "provers are running"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean shutdown
        _, alive = psutil.wait_procs(children, timeout=5)
        assert alive == []
    finally:
        if proc.poll() is None:
            proc.kill()
