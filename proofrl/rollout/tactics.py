"""Tactic rollouts: the one place a group of tactics is run at a proof state (LeanListener, arXiv:2503.09730).

* **States** (:class:`StatePoint`): a theorem and the tactic path that reaches the state from the statement
  (the human proof's prefix, or a prefix plus a tactic the policy found), with the state text the policy sees.
  :func:`state_points` reads them from tactic transitions (``proofrl.data.tactics``).
* **Sampling** (:class:`TacticSampler`): k tactics per state from a causal LM, seeded per call.
* **Running a group** (:func:`run_group`): every tactic of one state runs in the one prover session the caller
  leased. The state is reached once by replaying its path; each tactic then starts from it again (Coq: the STM
  moves back). A tactic that loops is stopped by the tactic timeout and fails as ``timeout``; if that (or
  anything) killed the session, the backend starts a fresh one and the next tactic re-reaches the state by
  replaying the path (counted in ``replays``). A step that crashed is retried once that way. Forbidden tactics
  (:meth:`proofrl.provers.backend.Backend.refusal`, what ``step`` itself refuses: ``admit``, commands, ``*_no_check``;
  and bullets) never reach the prover and are never valid. One bad tactic never stops the group, one bad state
  never stops a batch.

Step-level GRPO (:mod:`proofrl.train.step_grpo`) and the tactic metrics (:mod:`proofrl.eval.tactics`) both run
their tactics here.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import ProverError, StatementError
from ..provers import stepping
from ..provers.backend import get_backend
from ..provers.base import FailureKind, ProofState, Prover, StepResult, Theorem

# -------------------------------------------------------------------------------------------------- states


@dataclass(frozen=True)
class StatePoint:
    """A proof state, named by how to reach it: ``theorem`` and the tactic ``path`` from its statement."""

    theorem: Theorem
    path: tuple[str, ...]
    text: str
    """the state as the policy sees it (:func:`proofrl.provers.backend.state_text`)"""
    premises: tuple[str, ...] = ()
    """premises the data names for this state (LeanDojo); empty for Coq"""
    origin: str = "data"
    """``data`` (a human proof's prefix) or ``policy`` (reached by a tactic the policy found)"""

    @property
    def key(self) -> str:
        digest = hashlib.sha256("\n".join((self.theorem.statement, *self.path)).encode()).hexdigest()[:6]
        return f"{self.theorem.name}@{len(self.path)}:{digest}"

    def to_json(self) -> dict[str, Any]:
        th = self.theorem
        return {
            "theorem": [th.name, th.statement, th.header, th.backend],
            "path": list(self.path),
            "text": self.text,
            "premises": list(self.premises),
            "origin": self.origin,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StatePoint:
        return cls(Theorem(*d["theorem"]), tuple(d["path"]), d["text"], tuple(d["premises"]), d["origin"])


def state_points(
    transitions: Sequence[dict[str, Any]], *, include_structural: bool = False, max_state_chars: int | None = 2000
) -> list[StatePoint]:
    """One state per transition (in the data's order), its path = the tactics of the same proof before it.

    A proof's transitions are told apart by (module, theorem, statement); a proof whose step numbers have a gap
    stops at the gap (its later paths would not replay). States whose recorded tactic is a bullet or brace are
    left out unless ``include_structural`` (the tactic model is not taught on them); so are states longer than
    ``max_state_chars`` (what :func:`proofrl.policy.tactic.tactic_pairs` leaves out of teaching)."""
    proofs: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for t in transitions:
        proofs[(t.get("module", ""), t["theorem"], t.get("statement", ""))].append(t)
    out: list[StatePoint] = []
    for steps in proofs.values():
        steps = sorted(steps, key=lambda t: int(t.get("step", 0)))
        path: list[str] = []
        for i, t in enumerate(steps):
            if int(t.get("step", i)) != i:
                break
            skip = (t.get("structural") and not include_structural) or (
                max_state_chars is not None and len(t["state_before"]) > max_state_chars
            )
            if not skip:
                th = Theorem(t["theorem"], t.get("statement", ""), t.get("header", "") or "", t.get("backend", "coq"))
                out.append(StatePoint(th, tuple(path), t["state_before"], tuple(t.get("premises") or ())))
            path.append(t["tactic"])
    return out


# --------------------------------------------------------------------------------------------- one group


@dataclass
class TacticRun:
    """One distinct tactic of a group, as the prover judged it."""

    tactic: str
    valid: bool
    failure: str | None = None
    """a :class:`~proofrl.provers.base.FailureKind` value, or None"""
    message: str = ""
    result: StepResult | None = None
    seconds: float = 0.0


@dataclass
class GroupRun:
    """The tactics of one state, run in one session. ``before`` is None when the state could not be reached
    (``error`` says why); then no tactic ran."""

    point: StatePoint
    before: ProofState | None
    runs: dict[str | None, TacticRun] = field(default_factory=dict)
    """by the tactic as given (None: no whole tactic was sampled)"""
    error: str = ""
    replays: int = 0
    """times a dead session was replaced and the state re-reached by replay"""
    seconds: float = 0.0

    def of(self, tactic: str | None) -> TacticRun:
        return self.runs[tactic]


NO_TACTIC = TacticRun("", False, FailureKind.PARSE_ERROR.value, "no whole tactic (cut by max_tokens, or empty)")


def reach(prover: Prover, point: StatePoint, timeout: float) -> ProofState:
    """Start the theorem and replay the path; :class:`StatementError` / :class:`ProverError` when it cannot."""
    state = prover.start(point.theorem, timeout=timeout)
    for tac in point.path:
        r = prover.step(state, tac, timeout=timeout)
        if not r.ok or r.state is None:
            raise ProverError(f"the path does not replay at {tac!r}: {r.failure}")
        state = r.state
    return state


def _session(prover: Prover) -> Any:
    return getattr(prover, "session_id", None)


def run_group(prover: Prover, point: StatePoint, tactics: Sequence[str | None], *, timeout: float = 10.0) -> GroupRun:
    """Run every distinct tactic of ``tactics`` at ``point`` on ``prover`` (see the module docstring)."""
    t0 = time.monotonic()
    out = GroupRun(point, None)
    try:
        out.before = reach(prover, point, timeout)
    except (ProverError, StatementError) as e:
        out.error = f"state not reached: {type(e).__name__}: {e}"[:500]
        out.seconds = time.monotonic() - t0
        return out
    lang = get_backend(point.theorem.backend)
    for given in tactics:
        if given in out.runs:
            continue
        if given is None or not given.strip():
            out.runs[given] = NO_TACTIC
            continue
        tac = lang.normalize_tactic(given)
        if why := lang.refusal(tac):
            out.runs[given] = TacticRun(tac, False, FailureKind.FORBIDDEN.value, why)
            continue
        session = _session(prover)
        r = stepping.step(prover, out.before, tac, timeout)  # a crash retried once: the backend restarted
        if _session(prover) != session:
            out.replays += 1
        valid = r.ok and r.state is not None
        out.runs[given] = TacticRun(
            tac,
            valid,
            None if valid else (r.failure.kind.value if r.failure else "error"),
            "" if valid else str(r.failure)[:300],
            r,
            r.seconds,
        )
    out.seconds = time.monotonic() - t0
    return out


def run_groups(
    pool: Any, jobs: Sequence[tuple[StatePoint, Sequence[str | None]]], *, timeout: float = 10.0, workers: int = 1
) -> list[GroupRun]:
    """:func:`run_group` for each ``(point, tactics)``, each group on one process leased from ``pool`` for the
    point's header, ``workers`` groups at a time; results in the jobs' order. A header that does not load is
    that group's ``error``, not the batch's."""

    def one(job: tuple[StatePoint, Sequence[str | None]]) -> GroupRun:
        point, tactics = job
        try:
            with pool.lease(point.theorem.header, timeout=max(timeout, 60.0)) as prover:
                return run_group(prover, point, tactics, timeout=timeout)
        except (ProverError, StatementError) as e:
            return GroupRun(point, None, error=f"no prover for the header: {type(e).__name__}: {e}"[:500])

    if workers <= 1 or len(jobs) <= 1:
        return [one(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(one, jobs))


# ------------------------------------------------------------------------------------------------ sampling


class TacticSampler:
    """k raw samples per state from a local HF model (duplicates and cut completions kept: metrics and the
    trainers need every sample), through the tactic prompt of :class:`~proofrl.policy.tactic.HFTacticPolicy`
    (a state too long for the model loses its first characters)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        max_tokens: int = 64,
        batch_size: int = 64,
        seed: int = 0,
    ):
        from ..policy.generation import HFGenerator
        from ..policy.tactic import HFTacticPolicy

        self._prompts = HFTacticPolicy(model, tokenizer, max_tokens=max_tokens)
        self.gen = HFGenerator(model, tokenizer, batch_size=batch_size)
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.calls = 0

    def prompt(self, state_text: str) -> str:
        return self._prompts.prompt(state_text)

    def sample(self, texts: Sequence[str], k: int) -> list[list[Any]]:
        """``k`` :class:`~proofrl.policy.generation.Completion` per state text."""
        from ..policy.generation import SamplingConfig

        self.calls += 1
        params = SamplingConfig(
            n=k, temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed + 1000 * self.calls
        )
        return self.gen.generate([self.prompt(t) for t in texts], params)


def tactic_of(completion: Any) -> str | None:
    """The tactic a completion holds, or None when it holds no whole one (cut by ``max_tokens``, or empty)."""
    from ..policy.tactic import clean_tactic

    if completion.finish_reason == "length":
        return None
    return clean_tactic(completion.text) or None


@contextlib.contextmanager
def coq_pool(workers: int, timeout: float) -> Iterator[Any]:
    from ..provers.factory import make_pool
    from ..provers.pool import PoolConfig

    pool = make_pool("coq", pool=PoolConfig(workers=max(1, workers)), step_timeout=timeout)
    try:
        yield pool
    finally:
        pool.close()
