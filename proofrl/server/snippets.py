"""From a verdict back to kimina's response shape (the snippet itself is cut by :mod:`proofrl.provers.snippets`)."""

from __future__ import annotations

from ..provers.base import Position, Status, Verdict
from ..provers.snippets import Job
from .schemas import CommandResponse, Pos, ReplMessage


def _shift(p: Position | None, at: Position) -> Pos:
    if p is None:
        return Pos(line=at.line, column=at.column)
    if p.line == 1:
        return Pos(line=at.line, column=at.column + p.column)
    return Pos(line=at.line + p.line - 1, column=p.column)


def timeout_error(backend: str, seconds: float) -> str:
    """kimina-client's ``analyze`` files any error containing "timed out" under ``timeout_error``."""
    return f"{backend} command timed out in {seconds:g} seconds"


def kimina_fields(
    verdict: Verdict, job: Job | None, backend: str, timeout: float
) -> tuple[str | None, CommandResponse | None]:
    """``(error, response)`` for a verdict, exactly one of them set.

    The mapping keeps kimina-client's own ``analyze()`` in step with our verdict: ``valid`` only for a
    valid verdict; every other judged verdict carries at least one error-severity message (a rejection
    such as ``admitted`` gets a synthetic ``proofrl: ...`` message, since Coq may say nothing about it),
    so kimina reads it as ``lean_error``; timeouts and crashes are ``error`` strings (``timeout_error``,
    ``server_error``).
    """
    if verdict.status is Status.TIMEOUT:
        return timeout_error(backend, timeout), None
    if verdict.status is Status.CRASH:
        return f"prover crashed: {'; '.join(verdict.reasons) or 'unknown'}", None
    at = job.proof_at if job else Position(1, 0)
    messages = [
        ReplMessage(
            severity=m.severity, pos=_shift(m.start, at), endPos=_shift(m.end, at) if m.end else None, data=m.text
        )
        for m in verdict.messages
    ]
    if verdict.status is not Status.VALID and not any(m.severity == "error" for m in messages):
        text = f"proofrl: {verdict.status.value}: {'; '.join(verdict.reasons) or 'not accepted'}"
        messages.append(ReplMessage(severity="error", pos=Pos(line=at.line, column=at.column), data=text))
    return None, CommandResponse(env=0, messages=messages or None)
