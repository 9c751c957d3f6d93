"""The Coq backend of the prover interface, over one ``coqidetop`` session (``final_check`` uses ``coqc``).

``check`` runs: statement (ours) -> tactic sentences (each under ``Timeout``) -> no goal in any of the four
lists -> ``Qed`` (the kernel re-checks) -> ``Print Assumptions`` within the allowlist. Only then ``valid``.

``step`` works on a linear STM document: moving back to a state discards every later one, so a state is
named by its tactic path and re-reached by replaying from the longest live prefix (never an ``Anomaly``
from an expired state id). A step is refused before Coq runs it by the walls of :mod:`.rules` and for a
tactic whose term Coq does not type-check (:func:`unchecked_reason`); a step that leaves no goals stands only
if the whole judge accepts the proof it completes (``Qed``, then the same audit as ``check``), and one that
closes a goal while others remain only if the guard condition holds on the term as it stands (``Guarded.``,
other goals given their abstractions first); else it fails as ``kernel``.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...errors import OutputTooLarge, ProverCrashed, ProverTimeout, StatementError
from ..base import (
    Backend,
    FailureKind,
    Message,
    Position,
    ProofState,
    Status,
    StepFailure,
    StepResult,
    Theorem,
    Verdict,
    loaded_header,
)
from ..process import run_once
from . import xml
from .blocks import open_blocks
from .placement import (
    DEPENDENCY_DEPTH,
    PlacementUnreadable,
    candidates,
    dependency_names,
    later_fields,
    placement,
    reach_reasons,
)
from .plan import Plan, plan_proof, self_citation, theorem_name
from .rules import (
    DEFAULT_AXIOM_ALLOWLIST,
    FORBIDDEN_TACTICS,
    PRINTING_RESET,
    REFERENCE_NAME,
    Outgoing,
    assumption_reasons,
    forbidden_reason,
    identity_reason,
    outgoing,
    parse_assumptions,
    printed_names,
    strip_comments_and_strings,
    type_mismatch,
)
from .sentences import Sentence, SplitError, position, split_sentences
from .session import MAX_REPLY_BYTES, CoqFailure, CoqSession, ProofStatus, coq_library

GRACE = 2.0  # seconds past Coq's own Timeout before the process-level deadline fires
_session_ids = iter(range(1, 1 << 62))


@dataclass
class CoqConfig:
    timeout: float = 30.0
    """default seconds for a whole proof; a tactic step gets ``step_timeout``"""
    step_timeout: float = 10.0
    memory_mb: int = 4096
    """RLIMIT_AS of each coqidetop/coqc process"""
    axiom_allowlist: tuple[str, ...] = DEFAULT_AXIOM_ALLOWLIST
    forbidden_tactics: tuple[str, ...] = FORBIDDEN_TACTICS
    max_proof_chars: int = 256 * 1024
    """longer proofs are refused unread (a 1 MB proof would take minutes of Add calls)"""


def coq_version() -> str:
    try:
        out = subprocess.run(["coqc", "--print-version"], capture_output=True, text=True, timeout=30).stdout
        return "coq " + out.split()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "coq (unknown version)"


class CoqProver:
    backend: Backend = "coq"

    def __init__(self, header: str = "", config: CoqConfig | None = None, *, header_timeout: float | None = None):
        """``header_timeout``: seconds the header may take to load (ProverTimeout and the process killed
        past it); None: the session's default."""
        self.header = header
        self.config = config or CoqConfig()
        self.version = coq_version()
        self._session: CoqSession | None = None
        self._uses = 0
        self._live: list[tuple[str, int]] = []  # the live path: (statement, sid), then (tactic, sid)...
        self._live_theorem: Theorem | None = None
        self._live_proof = ""  # the name Coq gives the proof being stepped
        self._live_plan: Plan | None = None  # the stepped statement's plan: the judge's questions at the end
        self.session_id = 0
        self._allowed: dict[str, str] | None = None  # the allowlisted axioms' printed names (this session)
        self._ensure(header_timeout)

    # -- process management -----------------------------------------------------------------------------
    def _ensure(self, header_timeout: float | None = None) -> CoqSession:
        if self._session is None or not self._session.alive:
            self._session = CoqSession(self.header, memory_mb=self.config.memory_mb, header_timeout=header_timeout)
            self.session_id = next(_session_ids)
            self._live, self._live_theorem = [], None
            self._allowed = None
        return self._session

    @property
    def alive(self) -> bool:
        return self._session is not None and self._session.alive

    @property
    def uses(self) -> int:
        return self._uses

    @property
    def pid(self) -> int | None:
        return self._session.process.pid if self._session else None

    def rss_bytes(self) -> int:
        return self._session.process.rss_bytes() if self._session else 0

    def kill(self) -> None:
        if self._session:
            self._session.process.kill()

    def close(self) -> None:
        self.kill()

    # -- whole proofs -------------------------------------------------------------------------------------
    def check(self, theorem: Theorem, proof: str, *, timeout: float | None = None) -> Verdict:
        timeout = self.config.timeout if timeout is None else timeout
        t0 = time.monotonic()
        self._uses += 1
        plan = plan_proof(
            theorem, proof, max_chars=self.config.max_proof_chars, forbidden_tactics=self.config.forbidden_tactics
        )
        if isinstance(plan, Verdict):
            return self._done(plan, t0)
        s = self._ensure()
        self._live, self._live_theorem = [], None
        try:
            deep = lambda: coqc_check(  # noqa: E731
                theorem, proof, self.config, timeout=max(1.0, t0 + timeout - time.monotonic()), version=self.version
            )
            return self._done(self._check(s, plan, t0 + timeout, theorem.header, deep), t0)
        except ProverTimeout:
            return self._done(Verdict(Status.TIMEOUT, (f"timeout after {timeout:g}s",)), t0)
        except ProverCrashed as e:
            # Out of memory under RLIMIT_AS is the proof's doing, not bad luck: retrying would repeat it.
            if "out of memory" in e.stderr.lower():
                return self._done(
                    Verdict(Status.REJECTED, ("out of memory",), (Message("error", e.stderr.strip()[-500:]),)), t0
                )
            raise
        finally:
            if s.alive:
                try:
                    s.edit_at(s.base)
                except (CoqFailure, ProverTimeout, ProverCrashed):
                    s.close()

    def _done(self, v: Verdict, t0: float) -> Verdict:
        return Verdict(v.status, v.reasons, v.messages, v.axioms, time.monotonic() - t0, self.version)

    def _check(self, s: CoqSession, plan: Plan, deadline: float, header: str, deep: Callable[[], Verdict]) -> Verdict:
        left = lambda: max(0.1, deadline - time.monotonic()) + GRACE  # noqa: E731
        s.edit_at(s.base)
        try:
            sid = s.add(plan.statement, s.base)
            s.run(timeout=max(1.0, deadline - time.monotonic()))
            opened = s.proof_status(timeout=left())
        except CoqFailure as e:
            if plan.restated:  # the proof's own restatement is not a statement of Coq's
                return Verdict(Status.REJECTED, ("statement changed",), (Message("error", e.message),))
            return Verdict(Status.ERROR, ("statement does not elaborate",), (Message("error", e.message),))
        owner: dict[int, tuple[Sentence, Outgoing]] = {}  # state id -> (sentence, what Coq received)
        for i, sent in enumerate(plan.tactics):
            out = plan.outgoing(i, deadline - time.monotonic())
            try:
                sid = s.add(out.text, sid)
            except CoqFailure as e:
                return self._failed(e, plan, sent, out)
            owner[sid] = (sent, out)
        try:
            s.run(timeout=left())
        except CoqFailure as e:
            at, got = owner.get(e.state_id, (None, None)) if e.state_id is not None else (None, None)
            return self._failed(e, plan, at, got)
        goals = s.goals()
        if goals is not None and (goals.foreground or goals.background or goals.shelved or goals.given_up):
            reasons = ["admitted"] if goals.given_up else []
            left_ = (
                f"{len(goals.foreground)} focused, {goals.background} unfocused, {goals.shelved} shelved, "
                f"{goals.given_up} given up"
            )
            msgs = tuple(Message("info", str(g)) for g in goals.foreground[:3])
            return Verdict(Status.REJECTED, (*reasons, f"incomplete: {left_}"), msgs)
        if why := _status_change(opened, s.proof_status(timeout=left()), proof_open=True):
            return Verdict(Status.REJECTED, (why,))
        try:
            s.add("Qed.", sid)
            s.run(timeout=left())
        except CoqFailure as e:
            reason = "admitted" if "given up" in e.message else "kernel rejected the proof"
            return Verdict(Status.REJECTED, (reason,), (Message("error", e.message),))
        if s.goals() is not None or (why := _status_change(opened, s.proof_status(timeout=left()), proof_open=False)):
            return Verdict(Status.REJECTED, (why or "a proof is still open after Qed",))
        return self._audit(s, plan, s.tip, left, header, deep)

    def _audit(
        self,
        s: CoqSession,
        plan: Plan,
        after_qed: int,
        left: Callable[[], float],
        header: str,
        deep: Callable[[], Verdict],
    ) -> Verdict:
        """Everything the judge asks once ``Qed`` has passed at state ``after_qed`` (the walls 3 and 4 of
        :mod:`.rules`): the kernel type of the constant against the statement elaborated again, which constant
        the lemma's name denotes (:func:`~.rules.identity_reason`), and its assumptions by origin. Shared by
        :meth:`check` and by a step that ends a proof, so a step is paid only for what ``check`` accepts.

        coqidetop prints a dependency list with every type whole; a long honest list can pass the reply cap
        (the process is then gone). The placement wall is then decided by ``deep``, the fresh-``coqc`` check
        of the same proof, whose list is printed with its types elided."""
        blocks = open_blocks(self.header)
        if blocks is None:
            return Verdict(Status.ERROR, (_UNREAD_BLOCKS,))
        try:
            for line in PRINTING_RESET:  # what the header set must not blind what is read below
                after_qed = s.add(line, after_qed)
            ref = s.add(plan.reference, after_qed)
            ref = s.add("Admitted.", ref)
            ref = s.add("Set Printing All.", ref)
            s.run(timeout=left())
            checked = _notices(s.query(f"Check @{plan.name}.", ref, timeout=left()))
            reference = _notices(s.query(f"Check @{REFERENCE_NAME}.", ref, timeout=left()))
            # sections closed (their variables become binders), modules still open: which constant is ours
            inner = s.add("Unset Printing All.", ref)
            for line in [*blocks.closing_sections, *PRINTING_RESET]:
                inner = s.add(line, inner)
            s.run(timeout=left())
            about = _notices(s.query(f"About {plan.name}.", inner, timeout=left()))
            about_ref = _notices(s.query(f"About {REFERENCE_NAME}.", inner, timeout=left()))
            asked, about_asked, closed = plan.name, None, inner
            if not blocks.hidden_after_end:  # read once the modules are closed too, as coqc_check does
                for line in [*blocks.closing_modules, *PRINTING_RESET]:
                    closed = s.add(line, closed)
                s.run(timeout=left())
                asked = blocks.qualified(plan.name)
                try:
                    about_asked = _notices(s.query(f"About {asked}.", closed, timeout=left()))
                except CoqFailure:  # no object of that name at all once the modules are closed
                    about_asked = ""
        except CoqFailure as e:
            return Verdict(Status.ERROR, ("statement check failed",), (Message("error", e.message),))
        if why := identity_reason(plan.name, about, about_ref, about_asked):
            return Verdict(Status.ERROR, (why,))
        try:
            assumptions = _notices(s.query(f"Print Assumptions {asked}.", closed, timeout=left()))
            located = {
                a: _notices(s.query(f"Locate {a}.", closed, timeout=left())) for a in self.config.axiom_allowlist
            }
        except CoqFailure as e:
            return Verdict(Status.ERROR, ("assumptions unreadable",), (Message("error", e.message),))
        v = judge_after_qed(plan.name, assumptions, located, checked, reference, restated=plan.restated)
        if v.status is not Status.VALID or not _placed(header):
            return v
        try:
            printed = _notices(s.query(f"Print All Dependencies {asked}.", closed, timeout=left()))
        except OutputTooLarge:
            return deep()
        except CoqFailure as e:
            return Verdict(Status.ERROR, ("dependencies unreadable",), (Message("error", e.message),))
        try:
            names = dependency_names(printed)
            wall = self._reach(s, header, names, closed, left())
        except (CoqFailure, ValueError) as e:
            why = e.message if isinstance(e, CoqFailure) else str(e)
            return Verdict(Status.ERROR, ("dependencies unreadable",), (Message("error", why),))
        return v if wall is None else Verdict(*wall, axioms=v.axioms)

    def _reach(
        self, s: CoqSession, header: str, names: list[str], here: int, timeout: float
    ) -> tuple[Status, tuple[str, ...]] | None:
        """The placement wall of the problem's ``header`` (:mod:`.placement`) at state ``here``: the status and
        reasons against ``names`` (what a constant depends on, or a partial term's names), or None when the
        header places nothing or nothing they name comes at or after the theorem."""
        later = _later_fields(header, lambda cmds: [_asked(s, c, here, timeout) for c in cmds])
        if isinstance(later, str):
            return Status.ERROR, (later,)
        if later is None:
            return None
        located = "\n".join(_asked(s, f"Locate {p}.", here, timeout) for p in candidates(names, later))
        reasons = reach_reasons(names, located, later, placement(header) or "")
        return (Status.REJECTED, tuple(reasons)) if reasons else None

    def _failed(self, e: CoqFailure, plan: Plan, sent: Sentence | None, out: Outgoing | None) -> Verdict:
        pos = end = None
        if sent is not None and out is not None:
            # Coq's offsets are bytes into what it received: our prefix and parentheses around the sentence
            lo, hi = e.loc if e.loc else (0, len(out.text.encode()))
            lo_c = out.source_offset_of_byte(lo)
            hi_c = max(lo_c, out.source_offset_of_byte(hi))
            pos, end = position(plan.source, sent.start + lo_c), position(plan.source, sent.start + hi_c)
        msg = (Message("error", e.message, pos, end),)
        if e.message.startswith("Timeout!") or "Timeout!" in e.message[:40]:
            return Verdict(Status.TIMEOUT, ("timeout",), msg)
        if "Out of memory" in e.message or "Stack overflow" in e.message:
            return Verdict(Status.REJECTED, (e.message.strip(".").lower(),), msg)
        return Verdict(Status.ERROR, (_first_line(e.message),), msg)

    # -- tactic by tactic ---------------------------------------------------------------------------------
    def start(self, theorem: Theorem, *, timeout: float | None = None) -> ProofState:
        s = self._ensure()
        plan = plan_proof(
            theorem, "", max_chars=self.config.max_proof_chars, forbidden_tactics=self.config.forbidden_tactics
        )
        if isinstance(plan, Verdict):
            raise StatementError(f"bad statement: {', '.join(plan.reasons)}")
        s.edit_at(s.base)
        try:
            sid = s.add(plan.statement, s.base)
            goals = s.goals(timeout=timeout or self.config.step_timeout)
        except CoqFailure as e:
            s.edit_at(s.base)
            raise StatementError(
                f"statement does not elaborate: {e.message}", messages=(Message("error", e.message),)
            ) from e
        self._live, self._live_theorem, self._live_proof, self._live_plan = (
            [(plan.statement, sid)],
            theorem,
            plan.name.rsplit(".", 1)[-1],
            plan,
        )
        return self._state(theorem, (), goals, sid)

    def _state(self, theorem: Theorem, tactics: tuple[str, ...], goals: xml.Goals | None, sid: int) -> ProofState:
        if goals is None:
            return ProofState(theorem, tactics, (), handle=sid, session=self.session_id)
        return ProofState(
            theorem, tactics, goals.foreground, goals.background, goals.shelved, goals.given_up, sid, self.session_id
        )

    def step(self, state: ProofState, tactic: str, *, timeout: float | None = None) -> StepResult:
        timeout = self.config.step_timeout if timeout is None else timeout
        t0 = time.monotonic()

        def fail(kind: FailureKind, msg: str = "", p: Position | None = None, e: Position | None = None) -> StepResult:
            return StepResult(tactic, failure=StepFailure(kind, msg, p, e), seconds=time.monotonic() - t0)

        try:
            (sent,) = split_sentences(tactic)
        except SplitError as e:
            return fail(FailureKind.PARSE_ERROR, str(e))
        except ValueError:
            return fail(FailureKind.PARSE_ERROR, "a step must be exactly one sentence")
        if re.match(r"(Proof|Qed|Defined)\b", sent.text):
            return fail(FailureKind.FORBIDDEN, "forbidden: proof commands are managed by the prover")
        if why := (
            forbidden_reason(sent.text, self.config.forbidden_tactics)
            or unchecked_reason(sent.text)
            or self_citation(sent.text, theorem_name(state.theorem))
        ):
            return fail(FailureKind.FORBIDDEN, why)
        try:
            s = self._ensure()
            sid = self._goto(state)
            out = outgoing(sent.text, timeout)
            try:
                new = s.add(out.text, sid)
                goals = s.goals(timeout=timeout + GRACE)
            except CoqFailure as e:
                s.edit_at(sid)
                p = q = None
                if e.loc:
                    p = position(sent.text, out.source_offset_of_byte(e.loc[0]))
                    q = position(sent.text, out.source_offset_of_byte(e.loc[1]))
                kind = FailureKind.TIMEOUT if "Timeout!" in e.message else FailureKind.ERROR
                return fail(kind, e.message, p, q)
            st = s.proof_status(timeout=timeout + GRACE)
            if st.open_proofs != (self._live_proof,):  # wall 3 while stepping: Coq still edits our proof only
                s.edit_at(sid)
                return fail(
                    FailureKind.FORBIDDEN,
                    f"forbidden: the step changed which proofs are open ({', '.join(st.open_proofs) or 'none'})",
                )
            after = self._state(state.theorem, (*state.tactics, sent.text), goals, new)
            if after.solved and (why := self._kernel_refuses(s, new, sid, after.tactics, timeout + GRACE)):
                return fail(FailureKind.KERNEL, why)
            if (
                not after.solved
                and after.goal_count < state.goal_count
                and (why := self._closing_refused(s, new, sid, timeout + GRACE))
            ):
                return fail(FailureKind.KERNEL, why)
            if self._live:  # empty when the judge's questions cost the live path (replayed when next needed)
                self._live.append((sent.text, new))
            return StepResult(tactic, after, seconds=time.monotonic() - t0)
        except ProverTimeout:
            return fail(FailureKind.TIMEOUT, f"no answer within {timeout:g}s; process restarted")
        except ProverCrashed as e:
            return fail(FailureKind.CRASH, str(e))
        except OutputTooLarge as e:  # the step printed without end (the process is gone): its doing
            self._live = []
            return fail(FailureKind.ERROR, f"rejected: {e}")

    def _kernel_refuses(
        self, s: CoqSession, new: int, before: int, tactics: tuple[str, ...], timeout: float
    ) -> str | None:
        """The whole judge on the proof the step at ``new`` completed, then back to ``new``; None when it
        accepts.

        Coq checks the guard condition of every ``fix``/``cofix`` in the proof term, and the types a tactic
        left to the kernel (``lra``'s ``vm_cast_no_check``), only at ``Qed``: ``fix IH 1. apply IH.`` leaves no
        goals on any statement. And ``Qed`` alone accepts a proof by ``apply NNPP.`` under ``Classical``, by a
        header ``Axiom`` or an ``Admitted`` lemma: the assumptions are the judge's, read after ``Qed`` exactly
        as :meth:`check` reads them (:meth:`_audit`). A refused end sends Coq back to a state at or before
        ``before``."""
        deadline = time.monotonic() + timeout
        left = lambda: max(0.1, deadline - time.monotonic())  # noqa: E731
        why: str | None = None
        try:
            qed = s.add("Qed.", new)
            s.run(timeout=left())
            # set by start(), which every stepped state comes from
            assert self._live_plan is not None and self._live_theorem is not None
            theorem = self._live_theorem
            deep = lambda: self.final_check(theorem, tactics, timeout=left())  # noqa: E731
            verdict = self._audit(s, self._live_plan, qed, left, theorem.header, deep)
            if not verdict.valid:
                why = "the judge refuses the completed proof: " + ", ".join(verdict.reasons)
        except CoqFailure as e:
            why = _first_line(e.message)
        if not s.alive:  # the judge's fresh check stood in for a reply too long to read
            self._live = []
            return why
        try:
            s.edit_at(new if why is None else before)
        except CoqFailure:  # Coq went back further than the step: the live path is replayed when next needed
            s.edit_at(s.base)
            self._live = []
        return why

    def _closing_refused(self, s: CoqSession, new: int, before: int, timeout: float) -> str | None:
        """Why a step that closed a goal while others remain may not stand, else None: the partial term it
        leaves uses an assumption the judge would refuse (:meth:`_term_axioms`), or a recursive call in it is
        unguarded (``Guarded.``). Asked on scratch states after ``new``, discarded either way; a refused step
        sends Coq back to ``before``.

        Only such a step can earn a closing reward without ``Qed`` ever being asked, so it is paid only if the
        term it completed could stand in a proof the judge accepts, whatever the other goals hold.
        ``Guarded.`` on an honest partial proof fails for one reason only: a ``fix`` whose body is still a
        goal, not yet a function ("Not enough abstractions"; a recursive call whose argument is still an evar
        passes). A scratch ``repeat intro`` on every remaining goal gives each such body its abstractions, so
        a failure left is an illegal call already in the term, which no later step can remove: made by this
        step, by an earlier one that opened a goal (the call laundered through it), or hidden so far behind
        another goal's unfinished ``fix``. The axioms are read on the whole term for the same reason."""
        try:
            shown = new
            for line in (*PRINTING_RESET, "Set Printing All."):
                shown = s.add(line, shown)
            s.run(timeout=timeout)
            term = _notices(s.query("Show Proof.", shown, timeout=timeout))
            broken = self._term_axioms(s, term, shown, timeout)
            header = self._live_theorem.header if self._live_theorem else self.header
            wall = None if broken else self._reach(s, header, _term_names(term), shown, timeout)
            if wall:
                broken = ", ".join(wall[1])
            if broken is None:
                scratch = s.add(outgoing("all: repeat intro.", timeout).text, shown)
                s.run(timeout=timeout)
                s.query("Guarded.", scratch, timeout=timeout)
        except CoqFailure as e:
            broken = _first_line(e.message)
        s.edit_at(new if broken is None else before)
        return broken

    def _term_axioms(self, s: CoqSession, term: str, here: int, timeout: float) -> str | None:
        """The judge's reasons against the assumptions of a partial proof term (``Show Proof`` under ``Set
        Printing All``: no notation hides a constant), joined; None when there are none.

        ``Print Assumptions`` needs a constant, and a partial proof is none, so each global name in the term is
        asked on its own and the answers are judged together, by origin, as after ``Qed``. A name is asked at
        the statement's state first, where only the header's objects exist (their answers are kept per header
        text, for every session loaded with it: nothing a step does changes them), then at ``here`` (constants
        made during the proof, such as ``abstract``'s); a name neither knows is a bound variable of the term."""
        base = self._live[0][1]
        if self._allowed is None:
            located = {a: _notices(s.query(f"Locate {a}.", base, timeout=timeout)) for a in self.config.axiom_allowlist}
            self._allowed = printed_names(located)
        allowed = self._allowed
        reasons: list[str] = []
        for name in _term_names(term):
            key = (self.header, name)
            if key not in _HEADER_ASSUMPTIONS:
                if len(_HEADER_ASSUMPTIONS) >= _HEADER_ASSUMPTIONS_CAP:
                    _HEADER_ASSUMPTIONS.clear()
                try:
                    _HEADER_ASSUMPTIONS[key] = _notices(s.query(f"Print Assumptions {name}.", base, timeout=timeout))
                except CoqFailure:
                    _HEADER_ASSUMPTIONS[key] = None  # not the header's: bound in the term, or made by the proof
            known = _HEADER_ASSUMPTIONS[key]
            if known is None:
                try:
                    known = _notices(s.query(f"Print Assumptions {name}.", here, timeout=timeout))
                except CoqFailure:
                    continue
            reasons += assumption_reasons(parse_assumptions(known), "", allowed, open_section=True)
        return ", ".join(dict.fromkeys(reasons)) or None

    def _goto(self, state: ProofState) -> int:
        """Make ``state`` the tip: Edit_at the longest live prefix of its path, replay the rest."""
        s = self._ensure()
        if self._live_theorem != state.theorem or not self._live:
            self.start(state.theorem)
        k = 0
        live = [t for t, _ in self._live[1:]]
        while k < len(live) and k < len(state.tactics) and live[k] == state.tactics[k]:
            k += 1
        sid = self._live[k][1]
        if k + 1 < len(self._live) or s.tip != sid:
            s.edit_at(sid)
            del self._live[k + 1 :]
        for tac in state.tactics[k:]:
            try:
                sid = s.add(outgoing(tac, self.config.step_timeout).text, sid)
                s.goals(timeout=self.config.step_timeout + GRACE)
            except CoqFailure as e:
                raise ProverCrashed(f"replay of a recorded tactic failed: {e.message}") from e
            self._live.append((tac, sid))
        return sid

    # -- the trusted judge --------------------------------------------------------------------------------
    def final_check(
        self, theorem: Theorem, tactics: list[str] | tuple[str, ...], *, timeout: float | None = None
    ) -> Verdict:
        """Replay in a fresh ``coqc`` (no session state), then ``Print Assumptions``."""
        return coqc_check(theorem, "\n".join(tactics), self.config, timeout=timeout, version=self.version)


def _term_names(term: str) -> list[str]:
    """The global names a printed proof term may hold (bound variables too: a name Coq knows is asked)."""
    return [n for n in dict.fromkeys(_TERM_NAME.findall(term)) if n not in _TERM_KEYWORDS]


def _asked(s: CoqSession, command: str, at: int, timeout: float) -> str:
    """A query's output, or its error message: ``Locate`` and ``Print Module`` of what is not there."""
    try:
        return _notices(s.query(command, at, timeout=timeout))
    except CoqFailure as e:
        return e.message


_LATER: dict[str, frozenset[str] | str | None] = {}
"""header -> the full paths its placement puts out of reach (:func:`~.placement.later_fields`), the reason it
cannot be read, or None for a header that places nothing; shared by sessions and final checks"""


def _placed(header: str) -> bool:
    """Whether ``header`` places its problem (an unreadable placement counts: the wall then refuses)."""
    try:
        return placement(header) is not None
    except ValueError:
        return True


_MODULES: dict[tuple[str, str], str] = {}
"""(loaded header, ``Print Module M.``) -> its output: the theorems of one file all read the same module"""


def _later_fields(header: str, ask: Callable[[list[str]], list[str]]) -> frozenset[str] | str | None:
    if header not in _LATER:
        if len(_LATER) >= 10_000:
            _LATER.clear()
            _MODULES.clear()
        loads = loaded_header(header)

        def remembered(commands: list[str]) -> list[str]:
            new = [c for c in commands if (loads, c) not in _MODULES]
            _MODULES.update({(loads, c): out for c, out in zip(new, ask(new) if new else [], strict=True)})
            return [_MODULES[loads, c] for c in commands]

        try:
            path = placement(header)
            _LATER[header] = None if path is None else later_fields(path, remembered)
        except (ValueError, PlacementUnreadable) as e:
            _LATER[header] = f"placement unreadable: {e}"
    return _LATER[header]


_HEADER_ASSUMPTIONS: dict[tuple[str, str], str | None] = {}
"""(header, name) -> ``Print Assumptions name`` where only the header is loaded (None: no such object there);
shared by every session of one header, emptied when it reaches :data:`_HEADER_ASSUMPTIONS_CAP` entries"""
_HEADER_ASSUMPTIONS_CAP = 100_000
_UNCHECKED = re.compile(r"\b\w*_no_check\b")
_TERM_NAME = re.compile(r"(?<![\w'.?])@?([A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*)")
"""a name in a printed term (``@Coq.Init.Logic.conj``, ``n``); an evar's (``?Goal``) is not one"""
_TERM_KEYWORDS = frozenset(
    {"fun", "forall", "let", "in", "match", "with", "end", "return", "as", "fix", "cofix", "struct", "if"}
    | {"then", "else", "Type", "Prop", "Set", "SProp"}
)


def unchecked_reason(sentence: str) -> str | None:
    """``forbidden: NAME`` for a tactic whose term Coq does not type-check when it runs (in Coq 8.16, Ltac1 and
    Ltac2: ``exact_no_check``, ``vm_cast_no_check``, ``native_cast_no_check``, ``change_no_check``; the
    ``*_no_check`` family by name, in code outside comments and strings), else None. ``Qed`` would catch a
    wrong term too, but a step's reward must not depend on a check deferred past it."""
    if m := _UNCHECKED.search(strip_comments_and_strings(sentence)):
        return f"forbidden: {m.group()}"
    return None


def _first_line(message: str) -> str:
    """A one-line reason from a Coq error: the context block of ``In environment`` is skipped."""
    lines = [ln for ln in message.strip().splitlines() if ln.strip()] or ["error"]
    if lines[0] == "In environment":
        lines = lines[1:]
        while len(lines) > 1 and re.match(r"^[\w', ]+ :", lines[0]):
            lines = lines[1:]
    return " ".join(" ".join(lines).split())[:200]


def _notices(feedback: list[xml.Feedback]) -> str:
    return "\n".join(f.text for f in feedback if f.level in ("notice", "info") and not f.text.startswith("Fetching"))


def _status_change(opened: ProofStatus, now: ProofStatus, *, proof_open: bool) -> str | None:
    """Wall 3, from Coq's own ``Status``: the module/section path is the statement's, and the only open proof
    is the statement's (``proof_open``) or none is left."""
    if now.path != opened.path:
        return f"forbidden: the proof changed the open sections or modules ({'.'.join(now.path)})"
    want = opened.open_proofs if proof_open else ()
    if now.open_proofs != want or (proof_open and now.proof != opened.proof):
        return f"forbidden: the proof changed which proofs are open ({', '.join(now.open_proofs) or 'none'})"
    return None


def judge_after_qed(
    name: str, assumptions: str, located: dict[str, str], checked: str, reference: str, *, restated: bool = False
) -> Verdict:
    """The verdict after a successful ``Qed``: the kernel type of ``name`` is the statement's (``checked`` and
    ``reference`` are ``Check @...`` under ``Set Printing All``), and every assumption is allowed by origin
    (``located``: ``Locate FQN`` output per allowlisted name). ``restated``: the proof stated the theorem
    itself, and a type that differs is a ``statement changed`` of its own."""
    a = parse_assumptions(assumptions)
    if why := type_mismatch(checked, reference):
        why = "statement changed" if restated and why.startswith("statement changed") else why
        return Verdict(
            Status.REJECTED,
            (why,),
            (Message("error", f"proved: {' '.join(checked.split())}; stated: {' '.join(reference.split())}"),),
            axioms=a.axioms,
        )
    reasons = assumption_reasons(a, name, printed_names(located))
    return Verdict(Status.REJECTED if reasons else Status.VALID, tuple(reasons), axioms=a.axioms)


_MARK = "proofrl_output_marker_"
_UNREAD_BLOCKS = "header: cannot tell which sections and modules it leaves open"


def coqc_check(
    theorem: Theorem, proof: str, config: CoqConfig, *, timeout: float | None = None, version: str = ""
) -> Verdict:
    """Whole file through a fresh ``coqc``: header + statement + ``Proof.`` tactics ``Qed.``, then the same
    checks as a session (the kernel type of the constant against the statement's, then, after ``End`` of each
    section and module the header left open, assumptions by origin: :mod:`.blocks`).
    Outputs are told apart by ``Locate`` of marker names, which print ``No object of basename <marker>``;
    the printing options are reset before them (:data:`~proofrl.provers.coq.rules.PRINTING_RESET`). A failure
    gets the status ``check`` gives the same failure: the line ``coqc`` names says which part failed. Its output
    is capped as a session's reply is (a flood is ``rejected``, ``output too large``)."""
    t0 = time.monotonic()
    timeout = config.timeout if timeout is None else timeout
    plan = plan_proof(theorem, proof, max_chars=config.max_proof_chars, forbidden_tactics=config.forbidden_tactics)
    if isinstance(plan, Verdict):
        return Verdict(plan.status, plan.reasons, plan.messages, seconds=time.monotonic() - t0, prover=version)
    body = [plan.outgoing(i).text for i in range(len(plan.tactics))]
    if not (plan.tactics and re.match(r"Proof\b", plan.tactics[0].text)):
        body.insert(0, "Proof.")
    allow = config.axiom_allowlist
    blocks = open_blocks(theorem.header)
    if blocks is None:
        return Verdict(Status.ERROR, (_UNREAD_BLOCKS,), seconds=time.monotonic() - t0, prover=version)
    # Each output the verdict reads follows a marker whose name holds a fresh nonce: the proof cannot print
    # one, so what it prints stays in the part before the first marker. The types are compared where the
    # statement was elaborated (inside its sections), the constant's identity and assumptions read once the
    # sections are closed, and, for modules that keep their lemmas' names, once the modules are closed too.
    marks = _Markers()
    asked = plan.name if blocks.hidden_after_end else blocks.qualified(plan.name)
    try:
        later = _later_fields(theorem.header, lambda cmds: _coqc_ask(theorem.header, cmds, config, timeout))
    except ProverTimeout as e:
        seconds = time.monotonic() - t0
        return Verdict(Status.TIMEOUT, (f"timeout after {e.seconds:g}s",), seconds=seconds, prover=version)
    if isinstance(later, str):
        return Verdict(Status.ERROR, (later,), seconds=time.monotonic() - t0, prover=version)
    assumptions = [marks.ask("assumptions", f"Print Assumptions {asked}.")]
    assumptions += [marks.ask(f"locate:{a}", f"Locate {a}.") for a in allow]
    if later is not None:  # all of them: which the proof may print is known only once it has run
        assumptions.append(marks.ask("later", "\n".join(f"Locate {p}." for p in sorted(later))))
        assumptions.append(f"Set Printing Depth {DEPENDENCY_DEPTH}.")
        assumptions.append(marks.ask("dependencies", f"Print All Dependencies {asked}."))
        assumptions.append("Unset Printing Depth.")
    inside = [
        *PRINTING_RESET,
        plan.reference,
        "Admitted.",
        "Set Printing All.",
        marks.ask("checked", f"Check @{plan.name}."),
        marks.ask("reference", f"Check @{REFERENCE_NAME}."),
        "Unset Printing All.",
    ]
    inner = [
        *PRINTING_RESET,
        marks.ask("about", f"About {plan.name}."),
        marks.ask("about_ref", f"About {REFERENCE_NAME}."),
    ]
    after: list[str] = []
    if blocks.hidden_after_end:
        inner += assumptions
    else:
        after = [*PRINTING_RESET, marks.ask("about_asked", f"About {asked}."), *assumptions]
    parts = [
        ("header", theorem.header),
        ("statement", plan.statement),
        ("proof", "\n".join(body)),
        ("qed", "Qed."),
        ("checks", "\n".join(inside)),
        ("close", "\n".join(blocks.closing_sections)),
        ("checks", "\n".join(inner)),
        ("close", "\n".join(blocks.closing_modules)),
        ("checks", "\n".join(after)),
    ]
    parts = [(kind, text) for kind, text in parts if text]
    text = "\n".join(t for _, t in parts) + "\n"
    with tempfile.TemporaryDirectory(prefix="proofrl-coqc-") as d:
        path = Path(d) / "Check.v"
        path.write_text(text, encoding="utf-8")
        res = run_once(
            ["coqc", "-q", path.name],
            timeout=timeout,
            memory_mb=config.memory_mb,
            cwd=d,
            readable=coq_library(),
            max_output=MAX_REPLY_BYTES,
        )
    seconds = time.monotonic() - t0
    if res.too_large:
        return Verdict(
            Status.REJECTED,
            ("output too large",),
            (Message("error", f"rejected: coqc printed more than {MAX_REPLY_BYTES >> 20} MiB"),),
            seconds=seconds,
            prover=version,
        )
    if res.timed_out:
        return Verdict(Status.TIMEOUT, (f"timeout after {timeout:g}s",), seconds=seconds, prover=version)
    if res.returncode != 0:
        status, reason, err = _coqc_failure(
            res.stderr.strip() or res.stdout.strip(), res.returncode, parts, plan.restated
        )
        return Verdict(status, (reason,), (Message("error", err[-2000:]),), seconds=seconds, prover=version)
    out = marks.read(res.stdout)
    if out is None:
        return Verdict(
            Status.ERROR,
            ("final check output unreadable",),
            (Message("error", res.stdout[-2000:]),),
            seconds=seconds,
            prover=version,
        )
    # what the proof itself printed (CoqHammer names the ATP that found the proof and its reconstruction)
    printed = (Message("info", out[""].strip()[-2000:]),) if out[""].strip() else ()
    if why := identity_reason(plan.name, out["about"], out["about_ref"], out.get("about_asked")):
        return Verdict(Status.ERROR, (why,), printed, seconds=seconds, prover=version)
    located = {a: out[f"locate:{a}"] for a in allow}
    v = judge_after_qed(
        plan.name, out["assumptions"], located, out["checked"], out["reference"], restated=plan.restated
    )
    if v.status is Status.VALID and later is not None:
        place = placement(theorem.header) or ""
        try:
            reasons = reach_reasons(dependency_names(out["dependencies"]), out["later"], later, place)
        except ValueError as e:
            v, reasons = Verdict(Status.ERROR, ("dependencies unreadable",), (Message("error", str(e)),)), []
        if reasons:
            v = Verdict(Status.REJECTED, tuple(reasons), axioms=v.axioms)
    return Verdict(v.status, v.reasons, v.messages + printed, v.axioms, seconds, version)


def _coqc_ask(header: str, commands: list[str], config: CoqConfig, timeout: float) -> list[str]:
    """Outputs of ``commands`` run by a fresh ``coqc`` after ``header``, one per command (a failing command
    ends the run: its output, and every later one's, is the error). For reading the header's libraries."""
    marks = _Markers()
    text = "\n".join([header, *PRINTING_RESET, *(marks.ask(str(i), c) for i, c in enumerate(commands))]) + "\n"
    with tempfile.TemporaryDirectory(prefix="proofrl-coqc-") as d:
        (Path(d) / "Ask.v").write_text(text, encoding="utf-8")
        res = run_once(
            ["coqc", "-q", "Ask.v"],
            timeout=timeout,
            memory_mb=config.memory_mb,
            cwd=d,
            readable=coq_library(),
            max_output=MAX_REPLY_BYTES,
        )
    if res.timed_out:
        raise ProverTimeout(timeout, "coqc reading the header's libraries")
    found = re.split(rf"No object of basename {re.escape(marks.prefix)}(\d+)\n?", res.stdout)
    out = dict(zip((int(k) for k in found[1::2]), found[2::2], strict=True))
    error = (res.stderr or res.stdout).strip()[-500:] or f"coqc exit {res.returncode}"
    ran = lambda i: i + 1 in out and (res.returncode == 0 or i + 2 in out)  # noqa: E731  (a failure ends the run)
    return [out[i + 1] if ran(i) else error for i in range(len(commands))]


class _Markers:
    """Outputs of one ``coqc`` run told apart: before each command whose output the verdict reads, ``Locate``
    of a name nobody can have defined, made of :data:`_MARK`, a nonce drawn for this run, and a number; Coq
    answers ``No object of basename <name>``. The nonce is never shown to the proof, so nothing it prints can
    pass for a marker."""

    def __init__(self) -> None:
        self.prefix = f"{_MARK}{secrets.token_hex(8)}_"
        self.keys: list[str] = []

    def ask(self, key: str, command: str) -> str:
        """The lines that print the marker for ``key``, then run ``command``."""
        self.keys.append(key)
        return f"Locate {self.prefix}{len(self.keys)}.\n{command}"

    def read(self, stdout: str) -> dict[str, str] | None:
        """``{key: output}`` with ``""`` for what came before the first marker; None unless each marker was
        printed exactly once."""
        found = re.split(rf"No object of basename {re.escape(self.prefix)}(\d+)\n?", stdout)
        numbers = [int(k) for k in found[1::2]]
        if sorted(numbers) != list(range(1, len(self.keys) + 1)):
            return None
        return {"": found[0], **{self.keys[k - 1]: text for k, text in zip(numbers, found[2::2], strict=True)}}


def _coqc_failure(
    err: str, returncode: int | None, parts: list[tuple[str, str]], restated: bool
) -> tuple[Status, str, str]:
    """``(status, reason, message)`` for a failed ``coqc`` run, as :meth:`CoqProver.check` judges the same
    failure in a session: the part of the file holding the line ``coqc`` names decides (``parts`` in file
    order, each ``(kind, text)``, joined by newlines)."""
    at = err.find("Error:")
    named = re.findall(r'File "[^"]*", line (\d+)', err[: at if at >= 0 else len(err)])  # warnings name lines too
    where, line = "", int(named[-1]) if named else 0
    first = 1
    for kind, text in parts:
        last = first + text.count("\n")
        if first <= line <= last:
            where = kind
            break
        first = last + 1
    message = err.split("Error:", 1)[-1] if "Error:" in err else ""
    if where == "qed":  # goals left (check() counts them before Qed) or the kernel's own check
        if "given up" in message:
            return Status.REJECTED, "admitted", err
        left = "incomplete" in message or "shelved" in message
        return Status.REJECTED, "incomplete" if left else "kernel rejected the proof", err
    if where == "statement":
        return (
            (Status.REJECTED, "statement changed", err)
            if restated
            else (Status.ERROR, "statement does not elaborate", err)
        )
    if where == "checks":
        return Status.ERROR, "statement check failed", err
    if "Out of memory" in message or "Stack overflow" in message:
        return Status.REJECTED, _first_line(message).strip(".").lower(), err
    if not where and ("given up" in err or "incomplete" in err or "pending" in err):  # no line named
        return Status.REJECTED, "admitted" if "given up" in err else "incomplete", err
    return Status.ERROR, _first_line(message) if message else f"coqc exit {returncode}", err
