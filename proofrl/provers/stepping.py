"""One tactic at one state, the way every caller above the provers runs it (the search engine, and the tactic
evaluation's group of tactics at one state): a prover error that escapes the backend (an unreadable reply, a
restart that fails) is a ``crash`` step, not an exception, and a crash is retried once on the restarted
process, which re-reaches the state by replaying its tactic path."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import ProverError, StatementError
from .base import FailureKind, ProofState, Prover, StepFailure, StepResult

Seconds = float | Callable[[], float]
"""a time limit, or a function giving it at each call (a search's limit shrinks with its budget)"""


def step_once(prover: Prover, state: ProofState, tactic: str, timeout: Seconds) -> StepResult:
    """``prover.step``; a :class:`ProverError` / :class:`StatementError` escaping the backend is a ``crash``."""
    t0 = time.monotonic()
    try:
        return prover.step(state, tactic, timeout=timeout() if callable(timeout) else timeout)
    except (ProverError, StatementError) as e:
        return StepResult(
            tactic,
            failure=StepFailure(FailureKind.CRASH, f"{type(e).__name__}: {e}"[:2000]),
            seconds=time.monotonic() - t0,
        )


def step(
    prover: Prover,
    state: ProofState,
    tactic: str,
    timeout: Seconds,
    *,
    on_crash: Callable[[StepFailure], None] | None = None,
) -> StepResult:
    """:func:`step_once`, a crash retried once (``on_crash`` sees the first crash before the retry)."""
    r = step_once(prover, state, tactic, timeout)
    if r.failure is not None and r.failure.kind is FailureKind.CRASH:
        if on_crash is not None:
            on_crash(r.failure)
        r = step_once(prover, state, tactic, timeout)
    return r
