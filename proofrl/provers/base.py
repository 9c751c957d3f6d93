"""The prover interface and the values that cross it.

Every backend (Coq over ``coqidetop``, Lean over the REPL) implements :class:`Prover`:

* ``check(theorem, proof) -> Verdict`` judges a whole proof;
* ``start(theorem) -> ProofState`` opens the statement for tactic-by-tactic work;
* ``step(state, tactic) -> StepResult`` runs one tactic; a state with no goals left comes back only when the
  prover would accept the proof it completes (Coq: ``Qed`` passes, so no guard condition or type check
  deferred to the kernel is skipped), else the step fails as ``kernel``;
* ``final_check(theorem, tactics) -> Verdict`` replays tactics in a *fresh* process (the trusted judge).

A :class:`Verdict` is ``valid`` only when every check passes (closed with the kernel, nothing admitted,
axioms within the allowlist, statement unchanged); "no goals left" alone never is. A wrong proof is a
*result*; a broken prover is an *exception* (see :mod:`proofrl.errors`).
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Backend = Literal["coq", "lean"]

PLACEMENT = re.compile(r"\(\*\s*proofrl:\s*stated before\s+([A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)+)\s*\*\)")
"""A header comment that says where a library theorem stands (``(* proofrl: stated before Coq.Lists.List.t *)``):
the judge keeps its proof to what precedes it there (:mod:`proofrl.provers.coq.placement`)."""


def loaded_header(header: str) -> str:
    """What a prover process loads for ``header``: the header without its placement comment, which says where
    one problem stands and loads nothing. Processes are shared by this text, so the theorems of one file
    share one process however many places they stand in."""
    return PLACEMENT.sub("", header)


class Status(enum.StrEnum):
    """How a whole-proof check ended."""

    VALID = "valid"  # every check passed
    REJECTED = "rejected"  # the prover ran fine and said no (reasons say why)
    ERROR = "error"  # the input could not be processed (bad syntax, unknown identifier, ...)
    TIMEOUT = "timeout"  # the time limit fired; the process was replaced
    CRASH = "crash"  # the prover process died, twice (retried once on a fresh process)


class FailureKind(enum.StrEnum):
    """Why a single tactic step failed."""

    PARSE_ERROR = "parse_error"  # not exactly one well-formed sentence
    FORBIDDEN = "forbidden"  # a command or tactic the rules forbid (admit, Axiom, sorry, ...)
    ERROR = "error"  # the prover rejected the tactic (message and location attached)
    KERNEL = "kernel"  # the tactic left no goals, but the prover refuses the proof it completed (Coq: ``Qed``
    # fails, e.g. a recursive call the guard condition forbids; Lean: the REPL's ``Error: kernel type check
    # failed``, or the path elaborated as one command is refused); the state is not solved
    TIMEOUT = "timeout"
    CRASH = "crash"


@dataclass(frozen=True)
class Position:
    """A place in the user's text: 1-based line, 0-based column, both in characters (not bytes)."""

    line: int
    column: int


@dataclass(frozen=True)
class Message:
    """A message of the prover, positioned in the text the user gave (the proof, or the tactic)."""

    severity: Literal["error", "warning", "info"]
    text: str
    start: Position | None = None
    end: Position | None = None

    def __str__(self) -> str:
        where = f"{self.start.line}:{self.start.column}: " if self.start else ""
        return f"{where}{self.severity}: {self.text}"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Message:
        pos = lambda p: Position(**p) if p else None  # noqa: E731
        return cls(d["severity"], d["text"], pos(d.get("start")), pos(d.get("end")))


@dataclass(frozen=True)
class Theorem:
    """A statement to prove.

    ``header`` holds what must be loaded first (Coq ``Require``/``Open Scope``; Lean ``import``/``open``);
    ``statement`` is the declaration without its proof, e.g. ``Theorem t : forall n, n + 0 = n.`` (Coq)
    or ``theorem t (n : Nat) : n + 0 = n := by`` (Lean).
    """

    name: str
    statement: str
    header: str = ""
    backend: Backend = "coq"

    @classmethod
    def from_json(cls, d: dict[str, Any], backend: Backend = "coq") -> Theorem:
        """Read a miniF2F-style record (``name``, ``header``, ``formal_statement``)."""
        return cls(
            name=d["name"],
            statement=d.get("formal_statement", d.get("statement", "")),
            header=d.get("header", "") or "",
            backend=d.get("backend", backend),
        )


@dataclass(frozen=True)
class Verdict:
    """The judgement on a whole proof. ``reasons`` are short machine-readable phrases such as
    ``admitted``, ``axiom: oops``, ``unsafe: guard checking``, ``statement changed``, ``incomplete``,
    ``forbidden: admit``; ``messages`` carry the prover's own words."""

    status: Status
    reasons: tuple[str, ...] = ()
    messages: tuple[Message, ...] = ()
    axioms: tuple[str, ...] = ()
    seconds: float = 0.0
    prover: str = ""

    @property
    def valid(self) -> bool:
        return self.status is Status.VALID

    def __str__(self) -> str:
        why = f" ({'; '.join(self.reasons)})" if self.reasons else ""
        return f"{self.status.value}{why}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Verdict:
        return cls(
            status=Status(d["status"]),
            reasons=tuple(d.get("reasons", ())),
            messages=tuple(Message.from_json(m) for m in d.get("messages", ())),
            axioms=tuple(d.get("axioms", ())),
            seconds=float(d.get("seconds", 0.0)),
            prover=d.get("prover", ""),
        )


@dataclass(frozen=True)
class Hypothesis:
    """``names : type`` (several names when the prover groups them, ``n m : Nat``); ``value`` for lets."""

    names: tuple[str, ...]
    type: str
    value: str | None = None

    def __str__(self) -> str:
        body = f" := {self.value}" if self.value is not None else ""
        return f"{', '.join(self.names)} : {self.type}{body}"


@dataclass(frozen=True)
class Goal:
    """One goal: hypotheses, the conclusion, and for Lean the case name (``case succ``)."""

    hypotheses: tuple[Hypothesis, ...]
    conclusion: str
    name: str | None = None

    def __str__(self) -> str:
        lines = [f"case {self.name}"] if self.name else []
        lines += [str(h) for h in self.hypotheses]
        lines.append(f"⊢ {self.conclusion}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ProofState:
    """A point in a proof. ``tactics`` is the path from :meth:`Prover.start`, which lets any process of
    the same backend re-reach the state by replay; ``handle`` is the owning session's fast way back
    (a Coq state id, a Lean ``proofState``) and is only trusted while ``session`` matches.

    Counts follow Coq's four goal lists; Lean reports only foreground goals (the others stay 0).
    """

    theorem: Theorem
    tactics: tuple[str, ...]
    goals: tuple[Goal, ...]
    background: int = 0
    shelved: int = 0
    given_up: int = 0
    handle: Any = field(default=None, compare=False)
    session: int | None = field(default=None, compare=False)

    @property
    def foreground(self) -> int:
        return len(self.goals)

    @property
    def goal_count(self) -> int:
        """G(s), the one goal count (:func:`proofrl.provers.backend.goal_count`): every goal still owed, in every
        list (foreground + unfocused + shelved + given up). LeanListener's step reward, the transitions, EVA's
        labels and the search's ``−(open goals)`` leaf value use it."""
        return self.foreground + self.background + self.shelved + self.given_up

    @property
    def solved(self) -> bool:
        """No goal in any list. Necessary for a valid proof, never sufficient (see ``final_check``)."""
        return not (self.goals or self.background or self.shelved or self.given_up)

    @property
    def fingerprint(self) -> str:
        """Equal for states that are the same to the prover, whatever path led there (duplicate merging)."""
        text = "\n\n".join(str(g) for g in self.goals)
        text += f"\n#{self.background}/{self.shelved}/{self.given_up}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __str__(self) -> str:
        if self.solved:
            return "no goals"
        return "\n\n".join(str(g) for g in self.goals) or (
            f"(no focused goal; {self.background} background, {self.shelved} shelved, {self.given_up} given up)"
        )


@dataclass(frozen=True)
class StepFailure:
    kind: FailureKind
    message: str = ""
    start: Position | None = None  # inside the tactic text
    end: Position | None = None

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}" if self.message else self.kind.value


@dataclass(frozen=True)
class StepResult:
    """Either the new state or the reason the tactic failed (the old state stays usable)."""

    tactic: str
    state: ProofState | None = None
    failure: StepFailure | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.failure is None


@runtime_checkable
class Prover(Protocol):
    """One proof-assistant session (one process) for one header.

    Implementations kill their process group on timeout and come back usable (restarted) for the next call.
    """

    backend: Backend
    header: str

    def check(self, theorem: Theorem, proof: str, *, timeout: float | None = None) -> Verdict: ...

    def start(self, theorem: Theorem, *, timeout: float | None = None) -> ProofState: ...

    def step(self, state: ProofState, tactic: str, *, timeout: float | None = None) -> StepResult: ...

    def final_check(
        self, theorem: Theorem, tactics: list[str] | tuple[str, ...], *, timeout: float | None = None
    ) -> Verdict: ...

    @property
    def alive(self) -> bool: ...

    @property
    def uses(self) -> int: ...

    @property
    def pid(self) -> int | None:
        """The prover process's id (None before it starts); tests and the server's metrics use it."""
        ...

    def rss_bytes(self) -> int: ...

    def kill(self) -> None: ...

    def close(self) -> None: ...
