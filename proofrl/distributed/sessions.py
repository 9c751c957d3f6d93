"""Proof states on a Ray actor, for search and step-level RL: the states stay in the actor's process, callers
hold integer ids.

A :class:`~proofrl.provers.base.ProofState` pickles, but its ``handle`` (a Coq state id, a Lean proof state)
means something only inside the prover process that made it. So the actor keeps every state it hands out;
a caller gets the id and a copy without the handle (goals, counts, tactic path: what a policy or a reward
reads), and sends the id back to step from it. Steps lease a process from the actor's own pool for the
state's header; a state made on another of its processes is re-reached by replaying its tactics, as the
provers do for any foreign state.

    sessions = session_actor(workers=2)
    sid, state = ray.get(sessions.start.remote(theorem))
    nid, result = ray.get(sessions.step.remote(sid, "intros n."))   # nid is None when the tactic failed
    verdict = ray.get(sessions.final_check.remote(nid))             # fresh-process check of the tactic path
    sessions.drop.remote([sid, nid])
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Iterable
from typing import Any

from ..provers.base import ProofState, StepResult, Theorem, Verdict
from ..provers.factory import make_pool
from ..provers.pool import PoolConfig
from . import NAMESPACE, connect


def _portable(state: ProofState) -> ProofState:
    """What leaves the actor: the state without its process-local handle."""
    return dataclasses.replace(state, handle=None, session=None)


class ProofSessions:
    """The actor's body. ``workers`` prover processes (the actor runs that many calls at once); ``options`` go to
    the backend's config (Coq: ``step_timeout``, ``memory_mb``, ...)."""

    def __init__(self, backend: str = "coq", workers: int = 1, **options: Any):
        self.pool = make_pool(backend, pool=PoolConfig(workers=workers), **options)
        self._states: dict[int, ProofState] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _keep(self, state: ProofState) -> int:
        with self._lock:
            sid = next(self._ids)
            self._states[sid] = state
        return sid

    def _state(self, state_id: int) -> ProofState:
        with self._lock:
            state = self._states.get(state_id)
        if state is None:
            raise KeyError(f"unknown proof state id {state_id}: dropped, or made by another session actor")
        return state

    def start(self, theorem: Theorem, timeout: float | None = None) -> tuple[int, ProofState]:
        """The theorem's initial state (StatementError if the statement does not elaborate)."""
        with self.pool.lease(theorem.header, timeout=timeout) as prover:
            state = prover.start(theorem, timeout=timeout)
        return self._keep(state), _portable(state)

    def step(self, state_id: int, tactic: str, timeout: float | None = None) -> tuple[int | None, StepResult]:
        """Run ``tactic`` on a held state: the new state's id and the result (id None when the tactic failed; the
        old state stays usable)."""
        state = self._state(state_id)
        with self.pool.lease(state.theorem.header) as prover:
            result = prover.step(state, tactic, timeout=timeout)
        if result.state is None:
            return None, result
        return self._keep(result.state), dataclasses.replace(result, state=_portable(result.state))

    def final_check(self, state_id: int, timeout: float | None = None) -> Verdict:
        """The trusted check of the state's tactic path (Coq: a fresh ``coqc``): only this says ``valid``."""
        state = self._state(state_id)
        with self.pool.lease(state.theorem.header) as prover:
            return prover.final_check(state.theorem, state.tactics, timeout=timeout)

    def drop(self, state_ids: Iterable[int]) -> int:
        """Forget states (their ids stop working); returns how many are still held."""
        with self._lock:
            for i in state_ids:
                self._states.pop(i, None)
            return len(self._states)

    def held(self) -> int:
        with self._lock:
            return len(self._states)

    def prover_pids(self) -> list[int]:
        return self.pool.pids()


def session_actor(name: str | None = None, *, backend: str = "coq", workers: int = 1, **options: Any) -> Any:
    """A proof-state session actor (a threaded actor running ``workers`` calls at once, one CPU per process).
    With ``name``, get-or-create by that name in the ``proofrl`` namespace, so several processes share it."""
    ray = connect()
    cls = ray.remote(ProofSessions).options(
        num_cpus=workers,
        max_concurrency=workers,
        **({"name": name, "namespace": NAMESPACE, "get_if_exists": True} if name else {}),
    )
    return cls.remote(backend, workers, **options)
