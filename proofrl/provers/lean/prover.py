"""The Lean backend of :class:`~proofrl.provers.base.Prover`, over one REPL process per header.

* The header (imports, options, opens) runs once when the prover starts and becomes ``env 0``; every body
  is sent with ``"env": 0`` (an empty header sends bodies with no ``env``, i.e. a fresh prelude each time).
* ``check`` screens the text before Lean runs (forbidden words, header options, text Lean could read
  otherwise, commands that run code or extend the syntax anywhere, the statement unchanged with only
  helpers before it), elaborates it, then asks ``#print axioms`` in the environment the proof produced and
  judges the one answer about the statement's declaration. The rules are in :mod:`.rules`.
* ``start``/``step`` use tactic mode: ``start`` elaborates ``statement sorry`` and takes the sorry's proof
  state; ``step`` sends ``{"tactic", "proofState"}`` (a tactic the rules refuse is a ``forbidden`` failure).
  On a REPL before v4.19 (no ``proofStatus``) a step that leaves no goals is confirmed by elaborating its
  whole path as one command in the same process, the kernel included; refused, the step fails (``kernel``)
  and says why.
* ``focus_goal i`` (a search's AND node) is no Lean tactic: it makes a view of goal i with the others behind
  it (:mod:`.goals`), and every step from that view checks the goals behind it came back unchanged.
* ``final_check`` replays tactics as one command in a *fresh* process (tactic mode has had false positives,
  repl#44, and a long-lived process carries state).

Positions in verdict messages are the user's: lines of the proof text (or, for a whole file, of that file;
its import lines are blanked rather than removed so nothing moves).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ...errors import ProverCrashed, ProverTimeout, StatementError
from ..base import (
    Backend,
    FailureKind,
    Message,
    Position,
    ProofState,
    Prover,
    Status,
    StepFailure,
    StepResult,
    Theorem,
    Verdict,
)
from .config import LeanConfig
from .goals import Focus, focus_index
from .header import normalise_header, split_header
from .models import CommandResponse, ProofStepResponse, ReplError, ReplMessage, parse_goal
from .rules import (
    UNCONFIRMED,
    declaration_name,
    declares,
    find_statement,
    forbidden_words,
    header_problems,
    judge_audit,
    judge_axioms,
    judge_command,
    judge_step,
    meaning_changers,
    prefix_problems,
    unsupported,
    untrusted_constructs,
)
from .session import LeanSession

INDENT = "  "
EXAMPLE_NAME = "proofrl_example_"  # ``example`` has no name to ask ``#print axioms`` about; we give it one


@dataclass(frozen=True)
class Assembled:
    """The code to elaborate, the declaration to audit, and how body lines map back to the user's text."""

    code: str
    name: str
    line_shift: int = 0  # user line = body line - line_shift
    column_shift: int = 0  # user column = body column - column_shift (on shifted lines)
    renamed: tuple[int, int, int] | None = None  # (body line, column, extra chars) where ``example`` was named


def assemble(theorem: Theorem, proof: str, header: str, config: LeanConfig) -> Assembled | Verdict:
    """Build the body for ``theorem`` and ``proof``, or the verdict that rejects it before Lean runs.

    ``proof`` is either the text after the statement (tactics, or a term), which is indented under it, or a
    whole file that contains the statement itself (what many provers emit); see :mod:`.rules` for what the
    whole-file form must satisfy.
    """

    def rejected(reason: str) -> Verdict:
        return Verdict(Status.REJECTED, (reason,), prover="lean")

    bad = forbidden_words(proof, config.forbidden_tactics, config.forbid_search_tactics)
    if bad:
        return Verdict(Status.REJECTED, tuple(f"forbidden: {w}" for w in bad), prover="lean")
    if why := header_problems(header, config.allowed_options):
        return rejected(why[0])
    if odd := unsupported(proof):
        return rejected(f"unsupported: {odd[0]}")
    statement = theorem.statement.rstrip()
    keyword, name = declaration_name(statement)
    if not keyword:
        return Verdict(Status.ERROR, ("statement is not a theorem, lemma or example",), prover="lean")
    if not declares(proof):
        if why := untrusted_constructs(proof, config.allowed_options):
            return rejected(why[0])
        text = proof.strip()
        if "\n" not in text:  # one line: ``statement proof`` on the statement's last line
            last = statement.rsplit("\n", 1)[-1]
            return _named(Assembled(f"{statement} {text}", name, statement.count("\n"), len(last) + 1), keyword, 0)
        body = "\n".join(INDENT + line if line.strip() else line for line in proof.strip("\n").split("\n"))
        code = f"{statement}\n{body}"
        shift = statement.count("\n") + 1
        return _named(Assembled(code, name, shift, len(INDENT)), keyword, 0)

    split = split_header(proof)
    allowed = set(split_header(normalise_header(header, collapse_mathlib=config.collapse_mathlib_imports)).header_lines)
    theirs = split_header(
        normalise_header("\n".join(split.header_lines), collapse_mathlib=config.collapse_mathlib_imports)
    )
    extra = [line for line in theirs.header_lines if line not in allowed]
    if extra:
        return rejected(f"header changed: {extra[0]}")
    code = "\n" * split.line_count + split.body  # blank the header lines so positions stay the user's
    span = find_statement(code, statement)
    if span is None:
        return rejected("statement changed")
    before = meaning_changers(code[: span[0]]) or prefix_problems(code, span[0])
    if before:
        return rejected(f"statement changed: `{before[0]}` before it")
    if why := untrusted_constructs(code, config.allowed_options, skip=span):
        return rejected(why[0])
    return _named(Assembled(code, name), keyword, span[0])


def _named(a: Assembled, keyword: str, at: int) -> Assembled:
    """Give an ``example`` a name so its axioms can be printed (the keyword starts at ``at``)."""
    if keyword != "example":
        return a
    i = a.code.index("example", at)
    new = "theorem " + EXAMPLE_NAME
    code = a.code[:i] + new + a.code[i + len("example") :]
    line = a.code.count("\n", 0, i) + 1
    col = i - (a.code.rfind("\n", 0, i) + 1)
    return Assembled(code, EXAMPLE_NAME, a.line_shift, a.column_shift, (line, col, len(new) - len("example")))


def to_message(
    m: ReplMessage, line_shift: int = 0, column_shift: int = 0, renamed: tuple[int, int, int] | None = None
) -> Message:
    """A REPL message in the user's coordinates; positions outside the user's text (or 0:0) are dropped."""

    def pos(p):
        if p is None or p.line - line_shift < 1:
            return None
        col = p.column
        if renamed and p.line == renamed[0] and col > renamed[1]:
            col = max(col - renamed[2], renamed[1])
        col = col - column_shift if line_shift else col
        return Position(p.line - line_shift, max(col, 0))

    sev = "info" if m.severity == "trace" else m.severity
    return Message(sev, m.data, pos(m.pos), pos(m.end_pos))


class LeanProver:
    """One REPL process loaded with one header; restarts itself after a timeout or crash."""

    backend: Backend = "lean"

    def __init__(self, config: LeanConfig, header: str = ""):
        self.config = config
        self.header = normalise_header(header, collapse_mathlib=config.collapse_mathlib_imports)
        self._uses = 0
        self._session: LeanSession | None = None
        self._env: int | None = None
        self._next_goal: dict[tuple[int, int, int], tuple[int, tuple[str, ...]]] = {}
        """(session, AND state, i) -> (REPL state, its tactic history) where goals 1 … i−1 of that AND state
        were proved in order, so goal i is the main goal (:mod:`.goals`)"""
        self._start()

    # -- process ----------------------------------------------------------------------------------------
    def _start(self) -> LeanSession:
        session = LeanSession(self.config)
        env = None
        if self.header:
            try:
                resp = session.command(self.header, timeout=self.config.header_timeout)
            except BaseException:
                session.kill()
                raise
            if isinstance(resp, ReplError) or resp.errors:
                session.close()
                msgs = (
                    (Message("error", resp.message),)
                    if isinstance(resp, ReplError)
                    else tuple(to_message(m) for m in resp.errors)
                )
                raise StatementError("Lean header failed to load", messages=msgs)
            env = resp.env
        self._session, self._env = session, env
        return session

    def _live(self) -> LeanSession:
        if self._session is None or not self._session.alive:
            return self._start()
        return self._session

    @property
    def session_id(self) -> int | None:
        return self._session.session_id if self._session is not None else None

    @property
    def pid(self) -> int | None:
        return self._session.pid if self._session is not None else None

    @property
    def alive(self) -> bool:
        return self._session is not None and self._session.alive

    @property
    def uses(self) -> int:
        return self._uses

    def rss_bytes(self) -> int:
        return self._session.rss_bytes() if self._session is not None else 0

    def kill(self) -> None:
        if self._session is not None:
            self._session.kill()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()

    # -- whole proofs -----------------------------------------------------------------------------------
    def check(self, theorem: Theorem, proof: str, *, timeout: float | None = None) -> Verdict:
        t0 = time.monotonic()
        timeout = self.config.timeout if timeout is None else timeout
        self._uses += 1
        plan = assemble(theorem, proof, self.header, self.config)
        if isinstance(plan, Verdict):
            return plan
        session = self._live()
        try:
            resp = session.command(plan.code, env=self._env, timeout=timeout)
            judged = judge_command(resp)
            msgs = (
                ()
                if isinstance(resp, ReplError)
                else tuple(to_message(m, plan.line_shift, plan.column_shift, plan.renamed) for m in resp.messages)
            )
            if isinstance(resp, ReplError):
                msgs = (Message("error", resp.message),)
            if judged.status is not Status.VALID:
                return Verdict(judged.status, judged.reasons, msgs, seconds=time.monotonic() - t0, prover="lean")
            assert isinstance(resp, CommandResponse)
            left = max(timeout - (time.monotonic() - t0), 1.0)
            audit = session.command(f"#print axioms {plan.name}", env=resp.env, timeout=left)
        except ProverTimeout as e:
            return Verdict(
                Status.TIMEOUT, (f"timeout: {e.seconds:.1f}s",), seconds=time.monotonic() - t0, prover="lean"
            )
        if isinstance(audit, CommandResponse) and audit.errors:
            return Verdict(
                Status.REJECTED, ("theorem not declared",), msgs, seconds=time.monotonic() - t0, prover="lean"
            )
        if isinstance(audit, CommandResponse):
            judged, axioms = judge_audit(audit.messages, plan.name, self.config.allowed_axioms)
        else:
            judged, axioms = judge_axioms(None, self.config.allowed_axioms), ()
        return Verdict(judged.status, judged.reasons, msgs, axioms, time.monotonic() - t0, "lean")

    def final_check(
        self, theorem: Theorem, tactics: list[str] | tuple[str, ...], *, timeout: float | None = None
    ) -> Verdict:
        """Replay ``tactics`` as one proof in a fresh process (retried once if that process crashes)."""
        proof = "\n".join(tactics)
        last: ProverCrashed | None = None
        for _ in range(2):
            try:
                fresh = LeanProver(self.config, self.header)
            except StatementError as e:
                return Verdict(Status.ERROR, ("header failed to load",), tuple(e.messages), prover="lean")
            except ProverCrashed as e:
                last = e
                continue
            try:
                return fresh.check(theorem, proof, timeout=timeout)
            except ProverCrashed as e:
                last = e
            finally:
                fresh.close()
        return Verdict(
            Status.CRASH, ("crash: prover died twice",), (Message("error", str(last)[-2000:]),), prover="lean"
        )

    # -- tactic mode --------------------------------------------------------------------------------------
    def start(self, theorem: Theorem, *, timeout: float | None = None) -> ProofState:
        """Elaborate ``statement sorry`` and open the sorry's goal. Raises :class:`StatementError` if the
        statement does not elaborate to exactly one goal."""
        self._uses += 1
        timeout = self.config.timeout if timeout is None else timeout
        session = self._live()
        code = f"{theorem.statement.rstrip()} sorry"  # one line added, so body positions are the statement's
        resp = session.command(code, env=self._env, timeout=timeout)
        if isinstance(resp, ReplError):
            raise StatementError(
                f"cannot open {theorem.name}: {resp.message}", messages=(Message("error", resp.message),)
            )
        if resp.errors or len(resp.sorries) != 1 or resp.sorries[0].proof_state is None:
            raise StatementError(
                f"{theorem.name} does not elaborate to one goal",
                messages=tuple(to_message(m) for m in resp.messages),
            )
        s = resp.sorries[0]
        return ProofState(theorem, (), (parse_goal(s.goal),), handle=s.proof_state, session=session.session_id)

    def step(self, state: ProofState, tactic: str, *, timeout: float | None = None) -> StepResult:
        t0 = time.monotonic()
        timeout = self.config.timeout if timeout is None else timeout
        self._uses += 1
        cfg = self.config
        bad = [f"forbidden: {w}" for w in forbidden_words(tactic, cfg.forbidden_tactics, cfg.forbid_search_tactics)]
        bad += [f"unsupported: {p}" for p in unsupported(tactic)] + list(
            untrusted_constructs(tactic, cfg.allowed_options)
        )
        if bad:
            return StepResult(tactic, failure=StepFailure(FailureKind.FORBIDDEN, bad[0]))
        try:
            if state.session != self.session_id or not self.alive:
                state = self._reach(state, timeout)
            assert self._session is not None
            if (i := focus_index(tactic)) is not None:
                return self._focus(state, tactic, i, t0)
            focus = state.handle if isinstance(state.handle, Focus) else None
            if focus is not None and focus.proof_state is None:
                front = self._bring_to_front(focus, timeout)
                if isinstance(front, StepFailure):
                    return StepResult(tactic, failure=front, seconds=time.monotonic() - t0)
                focus = front
            handle = focus.proof_state if focus is not None else state.handle
            assert handle is not None  # a focus brought to the front has its own proof state
            resp = self._session.tactic(handle, tactic, timeout=timeout)
        except ProverTimeout as e:
            return StepResult(tactic, failure=StepFailure(FailureKind.TIMEOUT, str(e)), seconds=time.monotonic() - t0)
        except ProverCrashed as e:
            return StepResult(
                tactic, failure=StepFailure(FailureKind.CRASH, str(e)[-2000:]), seconds=time.monotonic() - t0
            )
        j = judge_step(resp)
        if j.ok and j.unconfirmed:
            left = max(timeout - (time.monotonic() - t0), 1.0)
            history = focus.history if focus is not None else state.tactics
            if why := self._confirm_closed(state.theorem, (*history, tactic), left):
                return StepResult(tactic, failure=StepFailure(FailureKind.KERNEL, why), seconds=time.monotonic() - t0)
        if not j.ok:
            m = j.message_obj
            start = to_message(m).start if m is not None else None
            end = to_message(m).end if m is not None else None
            return StepResult(
                tactic,
                failure=StepFailure(j.kind, j.message, start, end),  # type: ignore[arg-type]
                seconds=time.monotonic() - t0,
            )
        assert isinstance(resp, ProofStepResponse)  # judge_step finds every REPL error not ok
        if focus is not None:
            return self._focused_step(state, tactic, focus, resp.goals, resp.proof_state, t0)
        goals = tuple(parse_goal(g) for g in resp.goals)
        new = ProofState(
            state.theorem, (*state.tactics, tactic), goals, handle=resp.proof_state, session=self.session_id
        )
        return StepResult(tactic, state=new, seconds=time.monotonic() - t0)

    # -- focused goals (a search's AND nodes, see :mod:`.goals`) ------------------------------------------
    def _focus(self, state: ProofState, tactic: str, i: int, t0: float) -> StepResult:
        """The view of goal ``i`` of ``state``: no request to Lean (goal 1 is already the main goal; another is
        brought to the front when it is first stepped)."""
        outer = state.handle.rest if isinstance(state.handle, Focus) else ()
        history = state.handle.history if isinstance(state.handle, Focus) else state.tactics
        source = state.handle.proof_state if isinstance(state.handle, Focus) else state.handle
        texts = tuple(str(g) for g in state.goals)
        if source is None or not 1 <= i <= len(texts) or len(texts) < 2:
            return StepResult(
                tactic, failure=StepFailure(FailureKind.ERROR, f"no goal {i} to focus among {len(texts)}")
            )
        rest = texts[1:] + outer if i == 1 else ()
        view = Focus(source if i == 1 else None, rest, source, i, texts, outer, history)
        new = ProofState(
            state.theorem,
            (*state.tactics, tactic),
            (state.goals[i - 1],),
            background=len(texts) - 1 + len(outer),
            handle=view,
            session=self.session_id,
        )
        return StepResult(tactic, state=new, seconds=time.monotonic() - t0)

    def _bring_to_front(self, f: Focus, timeout: float) -> Focus | StepFailure:
        """Reach a REPL state whose main goal is ``f``'s: the one where the goals before it were proved in order,
        else ``rotate_left`` on the AND node's state (whose answer must be the same goals, rotated)."""
        assert self._session is not None
        if (found := self._next_goal.get((self.session_id or 0, f.source, f.index))) is not None:
            return replace(f, proof_state=found[0], rest=f.siblings[f.index :] + f.outer, history=found[1])
        rotate = f"rotate_left {f.index - 1}"
        resp = self._session.tactic(f.source, rotate, timeout=timeout)
        j = judge_step(resp)
        goals = tuple(str(parse_goal(g)) for g in resp.goals) if j.ok else ()  # type: ignore[union-attr]
        want = f.siblings[f.index - 1 :] + f.outer + f.siblings[: f.index - 1]
        if not j.ok or goals != want:
            return StepFailure(
                FailureKind.ERROR, f"`{rotate}` did not bring goal {f.index} to the front: {j.message or goals}"
            )
        return replace(f, proof_state=resp.proof_state, rest=goals[1:], history=(*f.history, rotate))  # type: ignore[union-attr]

    def _focused_step(
        self, state: ProofState, tactic: str, f: Focus, answer: tuple[str, ...], proof_state: int, t0: float
    ) -> StepResult:
        """The step's goals are ours followed by the goals behind ours, unchanged; anything else touched them."""
        goals = tuple(parse_goal(g) for g in answer)
        texts = tuple(str(g) for g in goals)
        ours = len(texts) - len(f.rest)
        if ours < 0 or texts[ours:] != f.rest:
            return StepResult(
                tactic,
                failure=StepFailure(FailureKind.ERROR, "the tactic changed goals outside the focused one"),
                seconds=time.monotonic() - t0,
            )
        view = replace(f, proof_state=proof_state, history=(*f.history, tactic))
        if ours == 0 and f.index < len(f.siblings) and f.in_order(f.rest):
            self._next_goal[(self.session_id or 0, f.source, f.index + 1)] = (proof_state, view.history)
        new = ProofState(
            state.theorem,
            (*state.tactics, tactic),
            goals[:ours],
            background=len(f.rest),
            handle=view,
            session=self.session_id,
        )
        return StepResult(tactic, state=new, seconds=time.monotonic() - t0)

    def _confirm_closed(self, theorem: Theorem, path: tuple[str, ...], timeout: float) -> str | None:
        """Why ``path`` (the tactics Lean ran, in order), which left no goals on a REPL that cannot say more
        (:data:`~.rules.UNCONFIRMED`), is no finished proof; None when Lean elaborates it as one command with
        no error and no sorry (the kernel checks the declaration; a metavariable left is an error)."""
        plan = assemble(theorem, "\n".join(path), self.header, self.config)
        if isinstance(plan, Verdict):
            return f"{'; '.join(plan.reasons)} ({UNCONFIRMED})"
        assert self._session is not None
        try:
            resp = self._session.command(plan.code, env=self._env, timeout=timeout)
        except ProverTimeout as e:
            return f"confirming it as one command timed out after {e.seconds:.1f}s ({UNCONFIRMED})"
        except ProverCrashed as e:
            return f"confirming it as one command crashed the REPL: {str(e)[-300:]} ({UNCONFIRMED})"
        judged = judge_command(resp)
        if judged.status is Status.VALID:
            return None
        return f"the path as one command: {'; '.join(judged.reasons)} ({UNCONFIRMED})"

    def _reach(self, state: ProofState, timeout: float) -> ProofState:
        """Re-reach ``state`` in this process by replaying its tactic path (its handle belongs elsewhere)."""
        here = self.start(state.theorem, timeout=timeout)
        for t in state.tactics:
            r = self.step(here, t, timeout=timeout)
            if r.state is None:
                raise ProverCrashed(f"could not replay {t!r} to re-reach a state: {r.failure}")
            here = r.state
        return here


# -- pool glue -------------------------------------------------------------------------------------------
def lean_factory(config: LeanConfig) -> Callable[[str], Prover]:
    """``factory(header)`` for :class:`~proofrl.provers.pool.ProverPool`."""
    return lambda header: LeanProver(config, header)


class WarmSpares:
    """Wrap a factory so a replacement is already loaded when the pool needs one.

    Each call hands out a spare started earlier for that header (or starts one now) and starts the next spare
    in the background, so a timeout or recycle in a batch costs a swap, not a Mathlib import. Costs one extra
    process per header in use.
    """

    def __init__(self, factory: Callable[[str], Prover], spares: int = 1):
        self.factory = factory
        self.spares = spares
        self._ready: dict[str, list[Prover]] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def __call__(self, header: str) -> Prover:
        with self._lock:
            pool = self._ready.get(header, [])
            prover = pool.pop(0) if pool else None
        if prover is None or not prover.alive:
            prover = self.factory(header)
        self._refill(header)
        return prover

    def _refill(self, header: str) -> None:
        def warm() -> None:
            with contextlib.suppress(Exception):
                p = self.factory(header)
                with self._lock:
                    if self._closed or len(self._ready.setdefault(header, [])) >= self.spares:
                        p.close()
                    else:
                        self._ready[header].append(p)

        t = threading.Thread(target=warm, daemon=True, name="lean-prewarm")
        self._threads.append(t)
        t.start()

    def wait(self, timeout: float | None = None) -> None:
        """Block until background warm-ups finish (tests, shutdown)."""
        for t in list(self._threads):
            t.join(timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spares = [p for ps in self._ready.values() for p in ps]
            self._ready.clear()
        for p in spares:
            p.close()
