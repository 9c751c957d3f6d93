"""The verification service: kimina-lean-server's HTTP API over proofrl's prover pools.

Every item of a batch gets its own result, whatever happens to the others; the response is 200 whenever
the request itself was acceptable. What is refused is refused up front and explicitly:

=====  ==========================================================================================
400    malformed JSON, or a ``backend`` this server does not serve
401    missing or wrong ``Authorization: Bearer`` key (when the server has one)
408    the body did not arrive within ``request_read_seconds`` (the head is timed by :mod:`.run`)
413    body larger than ``max_body_bytes``, or more items than ``max_batch`` or ``max_inflight``
422    well-formed JSON that does not fit the schema (wrong types, unknown fields, empty batch, ...)
429    admitting the batch would put more than ``max_inflight`` items in flight (``Retry-After`` set)
=====  ==========================================================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from ..provers import sandbox
from ..provers.base import Message, Status, Verdict
from ..provers.pool import ProverPool
from ..provers.snippets import Job, make_job
from .config import ServeConfig
from .schemas import (
    CheckRequest,
    CheckResponse,
    CheckResult,
    ProofrlVerdict,
    VerifyRequest,
    VerifyResponse,
    VerifyResult,
)
from .snippets import kimina_fields

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


@dataclass
class Metrics:
    verdicts: Counter = field(default_factory=Counter)  # (backend, status) -> n
    responses: Counter = field(default_factory=Counter)  # (path, code) -> n
    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    latency_sum: float = 0.0
    latency_count: int = 0
    rejected_busy: int = 0

    def observe(self, backend: str, verdict: Verdict, seconds: float) -> None:
        self.verdicts[backend, verdict.status.value] += 1
        self.latency_sum += seconds
        self.latency_count += 1
        for i, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1


@dataclass
class Judged:
    verdict: Verdict
    job: Job | None
    seconds: float
    timeout: float


class Service:
    """The state behind the routes: pools, admission count, metrics."""

    def __init__(self, pools: Mapping[str, ProverPool], config: ServeConfig):
        if config.backend not in pools:
            raise ValueError(f"default backend {config.backend!r} has no pool")
        self.pools = dict(pools)
        self.config = config
        self.inflight = 0
        self.metrics = Metrics()

    def admit(self, n: int) -> None:
        """Count ``n`` items in, or refuse the whole request (the event loop is single-threaded, no lock)."""
        if n > self.config.max_batch:
            raise HTTPException(413, f"batch of {n} items exceeds the limit of {self.config.max_batch}")
        if n > self.config.max_inflight:  # could never be admitted, however long the client waits: not "busy"
            m = self.config.max_inflight
            raise HTTPException(
                413,
                f"batch of {n} items exceeds the limit of {m} (max_inflight: items in flight at once); send at most "
                f"{m} per request",
            )
        if self.inflight + n > self.config.max_inflight:
            self.metrics.rejected_busy += 1
            raise HTTPException(
                429,
                f"server busy: {self.inflight} items in flight, limit {self.config.max_inflight}",
                headers={"Retry-After": str(self.config.retry_after)},
            )
        self.inflight += n

    def pool_for(self, backend: str | None) -> tuple[str, ProverPool]:
        name = backend or self.config.backend
        if name not in self.pools:
            raise HTTPException(400, f"backend {name!r} is not served here; served: {sorted(self.pools)}")
        return name, self.pools[name]

    def item_timeout(self, pool: ProverPool, requested: int) -> float:
        """Seconds per item: ``requested`` (a JSON integer, so of any size) capped by ``max_timeout`` before it
        becomes a float; ``0``: the pool's default."""
        if requested <= 0:
            return float(min(pool.config.timeout, self.config.max_timeout))
        return float(min(requested, self.config.max_timeout))

    async def judge(self, backend: str | None, codes: list[str | None], requested_timeout: int) -> list[Judged]:
        name, pool = self.pool_for(backend)
        timeout = self.item_timeout(pool, requested_timeout)
        self.admit(len(codes))
        try:
            t0 = time.monotonic()
            # Cutting snippets is pure Python: in a thread, so that the event loop answers /health and other
            # requests meanwhile. Each request is one caller for the pool, which shares its workers fairly
            # between callers.
            made = await asyncio.to_thread(lambda: [self._cut(name, c) for c in codes])
            request = object()
            return list(await asyncio.gather(*(self._one(name, pool, m, timeout, t0, request) for m in made)))
        finally:
            self.inflight -= len(codes)

    def _cut(self, backend: str, code: str | None) -> Job | Verdict:
        """The item as a job for the pool, or its verdict when it cannot be one (size checked before cutting)."""
        if code is None:
            return Verdict(Status.ERROR, ("no proof or code given",), prover=backend)
        if len(code) > self.config.max_code_chars:
            text = f"{len(code)} characters > limit {self.config.max_code_chars} (max_code_chars)"
            return Verdict(Status.ERROR, ("code too long",), (Message("error", text),), prover=backend)
        try:
            return make_job(code, backend)
        except Exception as e:  # one item never sinks a batch
            return Verdict(Status.ERROR, (f"internal error: {type(e).__name__}: {e}",), prover=backend)

    async def _one(
        self, backend: str, pool: ProverPool, made: Job | Verdict, timeout: float, t0: float, caller: object
    ) -> Judged:
        job = made if isinstance(made, Job) else None
        try:
            verdict = (
                await pool.acheck(made.theorem, made.proof, timeout=timeout, caller=caller)
                if isinstance(made, Job)
                else made
            )
        except Exception as e:  # one item never sinks a batch
            verdict = Verdict(Status.ERROR, (f"internal error: {type(e).__name__}: {e}",), prover=backend)
        seconds = time.monotonic() - t0
        self.metrics.observe(backend, verdict, seconds)
        return Judged(verdict, job, seconds, timeout)

    def metrics_text(self) -> str:
        m = self.metrics
        sb = sandbox.current()
        lines = [
            "# HELP proofrl_sandbox Prover processes confined (1) or not (0), by mechanism.",
            "# TYPE proofrl_sandbox gauge",
            f'proofrl_sandbox{{mode="{sb.mode}"}} {int(sb.confined)}',
            "# HELP proofrl_inflight_items Items admitted and not yet judged.",
            "# TYPE proofrl_inflight_items gauge",
            f"proofrl_inflight_items {self.inflight}",
            "# HELP proofrl_rejected_busy_total Requests refused with 429.",
            "# TYPE proofrl_rejected_busy_total counter",
            f"proofrl_rejected_busy_total {m.rejected_busy}",
        ]
        gauges = {
            "proofrl_queue_depth": ("Items waiting for a prover process.", lambda p: p.queued + p.stats.waiting),
            "proofrl_busy_processes": ("Prover processes working on an item.", lambda p: p.busy),
            "proofrl_idle_processes": ("Prover slots not working on an item.", lambda p: p.config.workers - p.busy),
            "proofrl_processes_started_total": ("Prover processes started.", lambda p: p.stats.started),
            "proofrl_processes_recycled_total": (
                "Prover processes retired after use or memory.",
                lambda p: p.stats.recycled,
            ),
            "proofrl_process_crashes_total": ("Prover processes that died under a job.", lambda p: p.stats.crashes),
        }
        for metric, (help_text, get) in gauges.items():
            kind = "counter" if metric.endswith("_total") else "gauge"
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
            lines += [f'{metric}{{backend="{b}"}} {get(p)}' for b, p in sorted(self.pools.items())]
        lines += ["# HELP proofrl_verdicts_total Verdicts given, by status.", "# TYPE proofrl_verdicts_total counter"]
        for b in sorted(self.pools):
            for s in Status:
                lines.append(f'proofrl_verdicts_total{{backend="{b}",status="{s.value}"}} {m.verdicts[b, s.value]}')
        lines += [
            "# HELP proofrl_responses_total HTTP responses, by path and code.",
            "# TYPE proofrl_responses_total counter",
        ]
        for (path, code), n in sorted(m.responses.items()):
            lines.append(f'proofrl_responses_total{{path="{path}",code="{code}"}} {n}')
        lines += ["# HELP proofrl_item_seconds Time to judge one item.", "# TYPE proofrl_item_seconds histogram"]
        lines += [
            f'proofrl_item_seconds_bucket{{le="{b}"}} {n}' for b, n in zip(LATENCY_BUCKETS, m.buckets, strict=True)
        ]
        lines += [
            f'proofrl_item_seconds_bucket{{le="+Inf"}} {m.latency_count}',
            f"proofrl_item_seconds_sum {m.latency_sum:.6f}",
            f"proofrl_item_seconds_count {m.latency_count}",
        ]
        return "\n".join(lines) + "\n"


def _verdict_model(v: Verdict, backend: str) -> ProofrlVerdict:
    d = v.to_json()
    fields = ("status", "reasons", "messages", "axioms", "seconds", "prover")
    return ProofrlVerdict.model_validate({"backend": backend, **{k: d[k] for k in fields}})


READ_DEADLINE = "proofrl.read_deadline"
"""scope key: when (``time.monotonic()``) the whole request must have arrived, set by the server's protocol
(:mod:`proofrl.server.run`), which times the head; :class:`BodyLimit` times the body against it"""


class BodyLimit:
    """ASGI middleware: 413 for a body above ``limit`` bytes, by its Content-Length or, when chunked, as it
    arrives (the body is buffered, at most ``limit`` bytes, then replayed to the app); 408 for a body that has
    not arrived by the request's read deadline (``scope[READ_DEADLINE]``, else ``read_seconds`` from now;
    uvicorn has no body timeout). ``on_refused(path, code)`` counts each refusal."""

    def __init__(self, app: Any, limit: int, read_seconds: float | None = None, on_refused: Any = None):
        self.app, self.limit, self.read_seconds, self.on_refused = app, limit, read_seconds, on_refused

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return await self._refuse(scope, receive, send)
        deadline = scope.get(READ_DEADLINE)
        if deadline is None and self.read_seconds is not None:
            deadline = time.monotonic() + self.read_seconds
        chunks, size, more = [], 0, True
        while more:
            try:
                if deadline is None:
                    message = await receive()
                else:
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return await self._refuse(
                    scope, receive, send, 408, f"request not received within {self.read_seconds:g} s"
                )
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.limit:
                return await self._refuse(scope, receive, send)
        body, replayed = b"".join(chunks), False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    async def _refuse(self, scope: dict, receive: Any, send: Any, code: int = 413, detail: str = "") -> None:
        detail = detail or f"request body exceeds {self.limit} bytes"
        response = JSONResponse(
            {"detail": detail}, status_code=code, headers={"connection": "close"} if code == 408 else None
        )
        if self.on_refused is not None:
            self.on_refused(scope.get("path", ""), code)
        await response(scope, receive, send)


def create_app(pools: ProverPool | Mapping[str, ProverPool], config: ServeConfig | None = None) -> FastAPI:
    """The app over ``pools`` (one pool, for ``config.backend``, or one per backend name). The app owns the
    pools: its shutdown closes them, so no prover process outlives the server."""
    config = config or ServeConfig()
    service = Service({config.backend: pools} if isinstance(pools, ProverPool) else pools, config)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for pool in service.pools.values():
                await asyncio.to_thread(pool.close)

    app = FastAPI(title="proofrl verification service", lifespan=lifespan)
    app.state.service = service
    _answer_errors(app, service)
    _add_routes(app, service, config)

    def refused(path: str, code: int) -> None:
        service.metrics.responses[path if path in _PATHS else "other", code] += 1

    app.add_middleware(
        BodyLimit, limit=config.max_body_bytes, read_seconds=config.request_read_seconds, on_refused=refused
    )
    return app


def _answer_errors(app: FastAPI, service: Service) -> None:
    """Every response counted by path and status; a malformed body is a short 400/422 in JSON, a bug of ours a
    logged 500 in JSON."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return JSONResponse({"detail": "malformed JSON"}, status_code=400)
        slim = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in errors]
        return JSONResponse({"detail": slim}, status_code=422)

    @app.middleware("http")
    async def count_responses(request: Request, call_next: Any) -> Any:
        path = request.url.path if request.url.path in _PATHS else "other"
        try:
            response = await call_next(request)
        except Exception as e:  # a bug of ours: counted, logged once, answered in JSON
            log.error("%s %s: %s: %s", request.method, path, type(e).__name__, e, exc_info=e)
            response = JSONResponse({"detail": "internal server error"}, status_code=500)
        service.metrics.responses[path, response.status_code] += 1
        return response


def _add_routes(app: FastAPI, service: Service, config: ServeConfig) -> None:
    """``/health`` and ``/metrics``; kimina's ``/api/check`` and ``/verify`` (also ``/one_pass_verify_batch``)
    behind the API key when one is set."""

    def authorise(request: Request) -> None:
        if config.api_key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, key = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode(), config.api_key.encode()):
            raise HTTPException(401, "missing or invalid API key", headers={"WWW-Authenticate": "Bearer"})

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """kimina's ``{"status": "ok"}``, plus how prover processes are confined (``sandbox.mode`` ``off``
        means they are not: see the server log's warning)."""
        return {"status": "ok", "sandbox": sandbox.current().describe()}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> str:
        return service.metrics_text()

    @app.post("/api/check", dependencies=[Depends(authorise)], response_model_exclude_none=True)
    async def check(body: CheckRequest) -> CheckResponse:
        judged = await service.judge(body.backend, [s.code for s in body.snippets], body.timeout)
        backend = body.backend or config.backend
        results = []
        for snippet, j in zip(body.snippets, judged, strict=True):
            error, response = kimina_fields(j.verdict, j.job, backend, j.timeout)
            results.append(
                CheckResult(
                    id=snippet.id,
                    time=round(j.seconds, 6),
                    error=error,
                    response=response,
                    diagnostics={} if body.debug else None,
                    proofrl=_verdict_model(j.verdict, backend),
                )
            )
        return CheckResponse(results=results)

    async def verify(body: VerifyRequest) -> VerifyResponse:
        judged = await service.judge(body.backend, [c.content for c in body.codes], body.timeout)
        backend = body.backend or config.backend
        results = []
        for code, j in zip(body.codes, judged, strict=True):
            error, response = kimina_fields(j.verdict, j.job, backend, j.timeout)
            if response is not None:
                response.time = round(j.seconds, 6)
            results.append(
                VerifyResult(
                    custom_id=code.custom_id, error=error, response=response, proofrl=_verdict_model(j.verdict, backend)
                )
            )
        return VerifyResponse(results=results)

    for path in ("/verify", "/one_pass_verify_batch"):
        app.post(path, dependencies=[Depends(authorise)], response_model_exclude_none=True)(verify)


_PATHS = {"/api/check", "/verify", "/one_pass_verify_batch", "/health", "/metrics"}
