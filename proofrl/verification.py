"""Verification: judge ``(problem, proof)`` pairs, through a local prover pool or a verification server.

:class:`Verifier` is the one client every caller uses (the trainer's rewards, ``proofrl eval``, the demo): either
a :class:`~proofrl.provers.pool.ProverPool` (``pool.check_many``, header-affine), or a running server over HTTP:
``proofrl serve`` or a kimina-lean-server (``POST /api/check``). It owns what it builds (the pool it starts,
its HTTP client, its thread) and has one timeout, seconds per proof, used for the pool it builds and for every
call. It returns one :class:`Verdict` per item, in input order:

* a proof of ``None`` (the completion had no extractable proof) is ``rejected`` with reason ``no proof``,
  without calling a prover; a problem of another backend is an ``error`` verdict; one bad item never sinks
  the batch;
* message positions are the proof's own (1-based line, 0-based column in the proof text given here), on both
  paths, so :mod:`proofrl.policy.correction` can quote the failing line;
* a server that cannot be reached, or keeps answering 429/5xx after ``retries`` tries, raises
  :class:`ServerUnavailable`: a broken verifier is not a wrong proof, and a reward of 0 would be a lie.

Through a server, proofrl's own ``proofrl`` verdict field is read when present (status, reasons, axioms);
a plain kimina result is mapped as kimina-client's ``analyze()`` does: an error containing "timed out" →
``timeout``, any other error → ``crash``, a REPL ``message`` or an error-severity message → ``error``,
``sorries`` or a "declaration uses sorry" warning → ``rejected``, else ``valid``. That mapping is weaker
than proofrl's verdict (no axiom audit), which is why the proofrl field wins when both are there.

:meth:`Verifier.submit` runs :meth:`Verifier.verify` on a background thread and returns a future, so the
trainer can verify one chunk while it generates the next.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal

import httpx

from .errors import ProverError
from .problems import Problem
from .provers.backend import get_backend
from .provers.base import Message, Position, Status, Verdict
from .provers.pool import PoolConfig, ProverPool
from .provers.snippets import Job, Snippet, into_snippet, make_job, snippet_for

Item = tuple[Problem, "str | None"]
NO_PROOF = "no proof"
DEFAULT_TIMEOUT = 60.0
"""seconds per proof when neither a timeout nor a pool is given"""


class ServerUnavailable(ProverError):
    """The verification server could not be reached or kept refusing work (``url``, ``status`` attached)."""

    def __init__(self, message: str, *, url: str, status: int | None = None):
        super().__init__(message)
        self.url = url
        self.status = status


class Verifier:
    """R(x, y) for batches of ``(problem, proof)``; see the module docstring.

    ``Verifier()`` starts its own pool of ``workers`` processes for ``backend`` and closes it in :meth:`close`;
    ``Verifier(server_url=...)`` posts to a server (``api_key`` as ``Authorization: Bearer``);
    ``Verifier(pool)`` borrows a pool the caller keeps owning. ``timeout`` is seconds per proof; left out, it
    is a borrowed pool's own (never silently another), else :data:`DEFAULT_TIMEOUT`.
    """

    def __init__(
        self,
        pool: ProverPool | None = None,
        *,
        server_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        backend: str = "coq",
        workers: int = 2,
        batch_size: int = 32,
        retries: int = 3,
        prefer_proofrl: bool = True,
    ):
        if pool is not None and server_url:
            raise ValueError("give a pool or a server_url, not both")
        if timeout is None:
            timeout = pool.config.timeout if pool is not None else DEFAULT_TIMEOUT
        if timeout <= 0 or batch_size < 1 or retries < 0 or workers < 1:
            raise ValueError(
                f"need timeout > 0, workers >= 1, batch_size >= 1, retries >= 0; "
                f"got {timeout}, {workers}, {batch_size}, {retries}"
            )
        self.backend = backend
        self.timeout = timeout
        self.batch_size = batch_size
        self.retries = retries
        self.prefer_proofrl = prefer_proofrl
        self.server_url = server_url.rstrip("/") if server_url else None
        self._owns_pool = pool is None and not server_url
        if self._owns_pool:
            from .provers.factory import make_pool

            pool = make_pool(backend, pool=PoolConfig(workers=workers, timeout=timeout))
        self.pool = pool
        self._client: httpx.Client | None = None
        if self.server_url:
            headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
            self._client = httpx.Client(base_url=self.server_url, headers=headers, timeout=httpx.Timeout(30.0))
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verifier")

    # -- public API ---------------------------------------------------------------------------------------
    def verify(self, items: Sequence[Item]) -> list[Verdict]:
        """One verdict per item, in input order (see the module docstring for what each case gives)."""
        out: list[Verdict | None] = [None] * len(items)
        todo: list[int] = []
        for i, (problem, proof) in enumerate(items):
            if (v := answer_unchecked(problem, proof, self.backend)) is not None:
                out[i] = v
            else:
                todo.append(i)
        if todo:
            judged = (
                self._via_server([items[i] for i in todo]) if self._client else self._via_pool([items[i] for i in todo])
            )
            for i, v in zip(todo, judged, strict=True):
                out[i] = v
        return out  # type: ignore[return-value]

    def submit(self, items: Sequence[Item]) -> Future[list[Verdict]]:
        """:meth:`verify` on the verifier's own thread; batches run one after another, in submission order."""
        return self._executor.submit(self.verify, list(items))

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self._client is not None:
            self._client.close()
        if self._owns_pool and self.pool is not None:
            self.pool.close()

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- through a pool -----------------------------------------------------------------------------------
    def _via_pool(self, items: Sequence[Item]) -> list[Verdict]:
        assert self.pool is not None
        return self.pool.check_many([(p.theorem, proof) for p, proof in items], timeout=self.timeout)  # type: ignore[misc]

    # -- through a server ---------------------------------------------------------------------------------
    def _via_server(self, items: Sequence[Item]) -> list[Verdict]:
        out: list[Verdict | None] = [None] * len(items)
        # A server judges the first declaration of the text it is sent. A proof that brings its own (a whole
        # Lean file) could put another theorem first: such an item is judged here, never sent.
        snippets: dict[int, Snippet] = {}
        jobs: dict[int, Job | Verdict] = {}  # each snippet cut once, as the server will cut it
        for i, (problem, proof) in enumerate(items):
            s = snippet_for(problem, proof)  # type: ignore[arg-type]
            job = make_job(s.code, problem.backend)
            if why := statement_mismatch(problem, s, job):
                out[i] = Verdict(Status.REJECTED, (why,), prover=self.backend)
            else:
                snippets[i], jobs[i] = s, job
        order = list(snippets)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            body = {
                "snippets": [{"id": str(i), "code": snippets[i].code} for i in batch],
                "timeout": math.ceil(self.timeout),
                "backend": self.backend,  # proofrl picks its pool by it; kimina's models ignore unknown fields
            }
            results = self._post(body, len(batch))
            by_id = {r.get("id"): r for r in results if isinstance(r, Mapping)}
            for i in batch:
                r = by_id.get(str(i))
                if r is None:
                    out[i] = Verdict(
                        Status.ERROR, ("the server returned no result for this item",), prover=self.backend
                    )
                    continue
                try:
                    out[i] = verdict_from_result(
                        r, snippets[i], self.backend, prefer_proofrl=self.prefer_proofrl, job=jobs[i]
                    )
                except (KeyError, TypeError, ValueError) as e:  # one malformed result is that item's error
                    out[i] = Verdict(
                        Status.ERROR, (f"unreadable server result: {type(e).__name__}: {e}",), prover=self.backend
                    )
        return out  # type: ignore[return-value]

    def _post(self, body: dict[str, Any], n: int) -> list[Any]:
        assert self._client is not None
        # every item may take the full timeout; the server runs them in parallel, so this bound is loose
        read = self.timeout * n + 60.0
        why, status, wait = "", None, 0.0
        for attempt in range(self.retries + 1):
            time.sleep(wait)
            wait = min(30.0, 2.0**attempt)  # 1, 2, 4, ... s before the next try, unless the server says
            try:
                r = self._client.post("/api/check", json=body, timeout=httpx.Timeout(read, connect=10.0))
            except httpx.TransportError as e:
                why, status = f"{type(e).__name__}: {e}", None
                continue
            if r.status_code == 429 or r.status_code >= 500:
                why, status = f"HTTP {r.status_code}: {r.text[:300]}", r.status_code
                if r.headers.get("retry-after", "").isdigit():
                    wait = min(30.0, float(r.headers["retry-after"]))
                continue
            if r.status_code != 200:  # 401, 413, 422: retrying the same request cannot help
                raise ServerUnavailable(
                    f"{self.server_url}/api/check refused the request: HTTP {r.status_code}: {r.text[:500]}",
                    url=self.server_url or "",
                    status=r.status_code,
                )
            try:
                results = r.json()["results"]
            except (ValueError, KeyError, TypeError) as e:
                raise ServerUnavailable(
                    f"{self.server_url}/api/check answered something that is not a check response: {r.text[:300]!r}",
                    url=self.server_url or "",
                    status=200,
                ) from e
            if not isinstance(results, list):
                raise ServerUnavailable("`results` is not a list", url=self.server_url or "", status=200)
            return results
        raise ServerUnavailable(
            f"{self.server_url}/api/check failed {self.retries + 1} times; last: {why}",
            url=self.server_url or "",
            status=status,
        )


def answer_unchecked(problem: Problem, proof: object, backend: str) -> Verdict | None:
    """The verdict of an item that never reaches a prover (no proof, not text, another backend), else None;
    shared by :class:`Verifier` and the Ray verification actor's callers."""
    if proof is None:
        return Verdict(Status.REJECTED, (NO_PROOF,))
    if not isinstance(proof, str):
        return Verdict(Status.ERROR, (f"proof is {type(proof).__name__}, not text",))
    if problem.backend != backend:
        return Verdict(
            Status.ERROR,
            (f"backend mismatch: problem {problem.key} is {problem.backend}, this verifier checks {backend}",),
        )
    return None


def statement_mismatch(problem: Problem, snippet: Snippet, job: Job | Verdict | None = None) -> str | None:
    """``None`` when the server, cutting ``snippet`` as :func:`~proofrl.provers.snippets.make_job` does (``job``:
    that cut, when the caller has it), would judge the problem's own statement; else why not."""
    job = make_job(snippet.code, problem.backend) if job is None else job
    if isinstance(job, Verdict):
        return None  # the server answers with the same error verdict; nothing is judged valid
    got, want = job.theorem.statement.split(), problem.formal_statement.split()
    if get_backend(problem.backend).same_statement(got, want):
        return None
    return f"statement changed: the text's first declaration is `{' '.join(got)[:120]}`, not the problem's statement"


def verdict_from_result(
    result: Mapping[str, Any],
    snippet: Snippet,
    backend: str,
    *,
    prefer_proofrl: bool = True,
    job: Job | Verdict | None = None,
) -> Verdict:
    """One ``/api/check`` result as a :class:`Verdict` with positions in the proof's coordinates (``job``: the
    snippet as the server cut it, when the caller has it)."""
    seconds = float(result.get("time") or 0.0)
    ours = result.get("proofrl") if prefer_proofrl else None
    if isinstance(ours, Mapping):
        v = Verdict.from_json(ours)
        # proofrl reports positions in the proof text *its* splitter cut out of the snippet
        job = make_job(snippet.code, backend) if job is None else job
        at = job.proof_at if not isinstance(job, Verdict) else Position(1, 0)
        moved = tuple(
            Message(
                m.severity,
                m.text,
                snippet.to_proof(into_snippet(m.start, at)),
                snippet.to_proof(into_snippet(m.end, at)),
            )
            for m in v.messages
        )
        return Verdict(v.status, v.reasons, moved, v.axioms, v.seconds, v.prover)
    return _from_kimina(result, snippet, backend, seconds)


def _from_kimina(result: Mapping[str, Any], snippet: Snippet, backend: str, seconds: float) -> Verdict:
    prover = f"{backend} (via kimina-style server)"
    error = result.get("error")
    if error:
        status = Status.TIMEOUT if "timed out" in error else Status.CRASH
        return Verdict(status, (str(error)[:300],), seconds=seconds, prover=prover)
    response = result.get("response")
    if not isinstance(response, Mapping):
        raise ValueError("neither `error` nor `response` in the result")
    if "message" in response and "messages" not in response and "env" not in response:
        return Verdict(Status.ERROR, (f"repl error: {str(response['message'])[:300]}",), seconds=seconds, prover=prover)
    messages = tuple(_message(m, snippet) for m in response.get("messages") or ())
    errors = [m for m in messages if m.severity == "error"]
    if errors:
        first = " ".join(errors[0].text.split())[:200]
        return Verdict(Status.ERROR, (first,), messages, seconds=seconds, prover=prover)
    sorry_warning = any(
        m.severity == "warning" and ("declaration uses 'sorry'" in m.text or "declaration uses `sorry`" in m.text)
        for m in messages
    )
    if response.get("sorries") or sorry_warning:
        return Verdict(Status.REJECTED, ("sorry",), messages, seconds=seconds, prover=prover)
    return Verdict(Status.VALID, (), messages, seconds=seconds, prover=prover)


# Lean's message severities as a Message's (a trace is shown as info; one we do not know counts as an error)
_SEVERITY: dict[str, Literal["error", "warning", "info"]] = {
    "error": "error",
    "warning": "warning",
    "info": "info",
    "trace": "info",
}


def _message(m: Mapping[str, Any], snippet: Snippet) -> Message:
    def pos(p: Any) -> Position | None:
        if not isinstance(p, Mapping):
            return None
        return snippet.to_proof(Position(int(p["line"]), int(p["column"])))

    severity = _SEVERITY.get(m.get("severity", "error"), "error")
    return Message(severity, str(m.get("data", "")), pos(m.get("pos")), pos(m.get("endPos")))
