"""One library file replayed through ``coqidetop`` sentence by sentence, in its real context.

The whole file is fed in order (its ``Require``s, sections, section variables, local notations and scopes act
as they do for ``coqc``), and the goals are read before and after every sentence of a proof, so a lemma is
reached where the file states it. What comes out per lemma:

* its transitions ``state_before → tactic → state_after`` (states rendered by
  :func:`proofrl.provers.backend.state_text`, goal counts G(s) by :func:`~proofrl.provers.backend.goal_count`,
  the same text the search shows the policy), each with the ``premises`` the tactic names resolved by
  ``Locate`` to fully qualified constants (``premises_unresolved``: names that are not hypotheses and that
  ``Locate`` does not know, kept as text);
* its whole-proof problem: the statement, the context needed to state it (the file's text before the
  statement: offset ``context_chars``), and the human proof as written;
* or, when it cannot be used, its reason (:data:`FAILURE_KINDS`): the lemma is skipped and the file goes on
  (a proof that fails midway, or whose ``Qed`` Coq refuses, is closed with ``Admitted.`` so later lemmas still
  see the constant).

A sentence is read as Coq reads it (:func:`command_of`): ``Time Admitted.`` ends a proof unfinished, ``Fail Qed.``
ends nothing.

Names the current file defines are reported by Coq under ``Top.`` (and, inside a section, under its name);
they are renamed to the constant the compiled file has: the file's logical module, no section
(``mathcomp.ssreflect.seq.size_cat``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import ProofrlError, ProverTimeout
from ..provers.backend import get_backend, goal_count, state_text
from ..provers.base import ProofState, Theorem
from ..provers.coq.rules import blank_comments

FAILURE_KINDS = ("admitted", "statement", "tactic", "kernel", "timeout", "crash", "vernacular")
"""why a lemma gives no data: closed by ``Admitted``/``Abort`` in the source (or given-up goals at its end); its
statement failed; a tactic Coq rejected (or goals left at the proof's end); its tactics left no goal but Coq
refused the proof's end (the term failed the check at ``Qed``: a guard or universe violation, a ``*_no_check``
tactic); a sentence past its time limit; the prover process died; a failing command before it (counted per
file, not per lemma)"""

_PROOF_END = re.compile(r"(?:Qed|Defined|Admitted|Abort|Save)\b")
_PROOF_OPEN = re.compile(r"Proof\b")
_ABANDONED = re.compile(r"(?:Admitted|Abort)\b")
_CONTROL = re.compile(
    r'(?:Time|Instructions|Fail|Succeed|Redirect\s+"(?:[^"]|"")*"|Timeout\s+\d+)(?![\w\'])|#\[[^\]]*\]'
)
"""a control prefix Coq runs a command under (``Time``, ``Instructions``, ``Redirect "file"``, ``Timeout n``,
``Fail``, ``Succeed``; any nesting) or an attribute (``#[local] Qed.`` is Coq's ``Qed``)"""
_UNDONE = ("Fail", "Succeed")
"""controls that run their command and then drop its effect"""
_STARTER = re.compile(
    r"(?:#\[[^\]]*\]\s*)?(?:(?:Local|Global|Polymorphic|Program)\s+)*"
    r"(?:Lemma|Theorem|Fact|Remark|Corollary|Proposition|Property|Example|Goal)\b"
)
_VERNAC_IN_PROOF = re.compile(
    r"(?:Check|Search|SearchAbout|SearchPattern|Show|Print|About|Locate|Compute|Eval|Set|Unset|Opaque|Transparent|"
    r"Hint|Arguments|Typeclasses|Info|Time|Fail|Undo|Restart|Focus|Unfocus|Unshelve|Guarded)\b"
)
_SECTION = re.compile(r"Section\s+([\w']+)\s*\.")
_MODULE = re.compile(r"(?:#\[[^\]]*\]\s*)?Module\s+(?:Type\s+)?(?:Import\s+|Export\s+)?([\w']+)")
_END = re.compile(r"End\s+([\w']+)\s*\.")
_IDENT = re.compile(r"(?<![\w'.])[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*")
TACTIC_WORDS = frozenset(
    (
        "apply",
        "exact",
        "eapply",
        "eexact",
        "rewrite",
        "erewrite",
        "move",
        "case",
        "elim",
        "have",
        "suff",
        "suffices",
        "wlog",
        "gen",
        "by",
        "first",
        "last",
        "do",
        "try",
        "repeat",
        "intros",
        "intro",
        "split",
        "left",
        "right",
        "exists",
        "eexists",
        "congr",
        "set",
        "pose",
        "unfold",
        "fold",
        "simpl",
        "red",
        "cbn",
        "cbv",
        "compute",
        "destruct",
        "induction",
        "inversion",
        "injection",
        "discriminate",
        "symmetry",
        "transitivity",
        "reflexivity",
        "assumption",
        "auto",
        "eauto",
        "trivial",
        "tauto",
        "intuition",
        "lia",
        "nia",
        "lra",
        "nra",
        "ring",
        "field",
        "omega",
        "constructor",
        "econstructor",
        "specialize",
        "generalize",
        "clear",
        "subst",
        "revert",
        "rename",
        "remember",
        "replace",
        "change",
        "pattern",
        "exfalso",
        "contradiction",
        "exact_no_check",
        "abstract",
        "in",
        "at",
        "as",
        "with",
        "using",
        "of",
        "fun",
        "forall",
        "exists",
        "match",
        "end",
        "let",
        "if",
        "then",
        "else",
        "return",
        "is",
        "eqn",
        "done",
        "solve",
        "idtac",
        "fail",
        "under",
        "over",
        "without",
    )
)
"""tactic and term keywords: never premises, even where a constant of that name exists (``apply`` is also
``Coq.Program.Basics.apply``)"""
_RESOLVED = re.compile(r"^(?:Constant|Inductive|Constructor)\s+(\S+)", re.MULTILINE)


@dataclass
class LemmaResult:
    name: str
    """inside the file: the open modules' names, then the lemma's (``Order.POrderTheory.le_refl``)"""
    statement: str
    context_chars: int
    """the statement's character offset in the file: the text before it is its context"""
    proof: str = ""
    transitions: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None
    """``<kind>: message`` with kind one of :data:`FAILURE_KINDS`; None when it stepped cleanly"""
    seconds: float = 0.0
    top_level: bool = True
    """stated with no section or module open: its context is a file prefix that ``coqc`` compiles on its own
    (an open section would also put its variables among the proof's assumptions)"""

    @property
    def kind(self) -> str | None:
        return self.failure.split(":", 1)[0] if self.failure else None


@dataclass
class FileResult:
    file: str
    module: str
    lemmas: list[LemmaResult] = field(default_factory=list)
    vernacular_failures: list[str] = field(default_factory=list)
    error: str | None = None
    """why the replay stopped before the end of the file (the lemmas after it are not counted)"""
    seconds: float = 0.0


def identifiers(tactic: str) -> list[str]:
    """The names a tactic text mentions, in order, once each (strings and comments left out)."""
    text = re.sub(r'"(?:[^"]|"")*"', " ", tactic)
    text = re.sub(r"\(\*.*?\*\)", " ", text, flags=re.DOTALL)
    seen: dict[str, None] = {}
    for m in _IDENT.finditer(text):
        seen.setdefault(m.group(), None)
    return list(seen)


class Replayer:
    """Replays one file on one fresh :class:`~proofrl.provers.coq.session.CoqSession`; ``timeout`` seconds
    per sentence (past it Coq is interrupted and the lemma skipped as ``timeout``)."""

    def __init__(self, text: str, *, file: str, module: str, timeout: float = 20.0, memory_mb: int | None = 4096):
        self.text, self.file, self.module, self.timeout, self.memory_mb = text, file, module, timeout, memory_mb
        self._located: dict[str, str | None] = {}
        self._sections: list[str] = []  # the sections open at the tip, outermost first
        self._open: list[str] = []  # the sections and modules open at the tip
        self._modules: list[str] = []  # the modules among them: part of a constant's name
        self._coq = get_backend("coq")

    # -- premises -----------------------------------------------------------------------------------------
    def _locate(self, session: Any, name: str, state: int) -> str | None:
        if name in self._located:
            return self._located[name]
        try:
            fb = session.query(f"Locate {name}.", state, timeout=self.timeout)
        except ProofrlError:
            fb = []
        text = "\n".join(f.text for f in fb)
        m = _RESOLVED.search(text)
        full = m.group(1) if m else None
        if full and full.startswith("Top."):
            parts = full[4:].split(".")
            for sec in self._sections:  # a section's name is no part of the constant once it closes
                if len(parts) > 1 and parts[0] == sec:
                    parts = parts[1:]
            full = ".".join([self.module, *parts])
        if full is not None:  # names that do not resolve yet may be defined later in the file
            self._located[name] = full
        return full

    def premises(self, session: Any, tactic: str, hyps: set[str], state: int) -> tuple[list[str], list[str]]:
        """(fully qualified constants, names kept as text): every name of ``tactic`` that is not a hypothesis
        of the state before or after it (intro names) nor a :data:`TACTIC_WORDS` keyword, located at ``state``; tactic
        keywords (``Locate`` calls them Ltac or nothing) that are all lowercase letters are left out of the unresolved
        list."""
        found: list[str] = []
        unresolved: list[str] = []
        for name in identifiers(tactic):
            if name in hyps or name in TACTIC_WORDS:
                continue
            full = self._locate(session, name, state)
            if full is not None:
                if full not in found:
                    found.append(full)
            elif not re.fullmatch(r"[a-z_]+", name):
                unresolved.append(name)
        return found, unresolved

    # -- replay -------------------------------------------------------------------------------------------
    def run(self) -> FileResult:
        from ..provers.coq.sentences import SplitError, split_sentences
        from ..provers.coq.session import CoqFailure, CoqSession

        t0 = time.monotonic()
        out = FileResult(self.file, self.module)
        try:
            sentences = split_sentences(self.text)
        except SplitError as e:
            out.error = f"parse: {e} at character {e.offset}"
            return out
        try:
            session = CoqSession("", memory_mb=self.memory_mb)
        except ProofrlError as e:
            out.error = f"crash: coqidetop would not start: {e}"
            return out
        theorem = Theorem(self.module, "")
        path: list[tuple[str, int]] = [("", session.base)]  # the sentences Coq accepted, each with its state
        lemma: LemmaResult | None = None
        goals: Any = None  # the goals at the tip (None: no proof open)
        skipping = False  # a proof that failed: its sentences up to its end are not run
        skip_statement = False  # a statement that failed: its proof's sentences are not run
        lemma_t0 = 0.0

        def state_of(g: Any) -> ProofState:
            return ProofState(theorem, (), g.foreground, g.background, g.shelved, g.given_up)

        def close(result: str | None) -> None:
            nonlocal lemma
            if lemma is not None:
                lemma.failure = lemma.failure or result
                lemma.seconds = time.monotonic() - lemma_t0
                if lemma.failure:
                    lemma.transitions = []
                out.lemmas.append(lemma)
            lemma = None

        def admit_in_place(end: Any, failure: str) -> None:
            """Coq refused the proof's end: the lemma fails and ``Admitted.`` closes its proof where it stands
            (no later sentence is this proof's end to wait for)."""
            nonlocal goals
            if lemma is not None:
                lemma.failure = lemma.failure or failure
                lemma.proof = self.text[getattr(lemma, "proof_start", end.start) : end.end]
            goals = self._add(session, path, "Admitted.")
            close(None)

        try:
            for s in sentences:
                sent = s.text
                if skip_statement:
                    if _ends_proof(sent):
                        skip_statement = False
                    continue
                if skipping:
                    if not _ends_proof(sent):
                        continue
                    skipping = False
                    sent = "Admitted."  # the constant still exists for the lemmas after it
                cmd, undone = command_of(sent)
                before, in_proof, tip = goals, goals is not None, path[-1][1]
                if in_proof and lemma is not None and not lemma.proof:
                    lemma.proof = self.text[s.start :]  # trimmed at the proof's end below
                    lemma.proof_start = s.start  # type: ignore[attr-defined]
                session.base = tip  # an interrupted sentence goes back here
                try:
                    new = session.add(sent, tip, timeout=self.timeout)
                    now = session.goals(timeout=self.timeout)
                except CoqFailure as e:
                    session = self._recover(session, path)
                    msg = " ".join(e.message.split())[:300]
                    if in_proof and _ends_proof(sent):
                        admit_in_place(s, _refused_end(before, sent, msg))
                    elif in_proof:
                        if lemma is not None:
                            lemma.failure = f"tactic: {sent[:80]}: {msg}"
                        skipping = True
                    elif _opens_proof(cmd):
                        out.lemmas.append(LemmaResult(_lemma_name(cmd), sent, s.start, failure=f"statement: {msg}"))
                        skip_statement = True
                    else:
                        out.vernacular_failures.append(f"{sent[:80]}: {msg}")
                    continue
                except ProverTimeout:
                    if not session.alive:
                        if lemma is not None:
                            lemma.failure = f"crash: killed after a timeout on {sent[:80]}"
                        raise
                    if in_proof and _ends_proof(sent):
                        admit_in_place(s, f"timeout: {sent[:80]}")
                    elif in_proof:
                        if lemma is not None:
                            lemma.failure = f"timeout: {sent[:80]}"
                        skipping = True
                    elif _opens_proof(cmd):
                        out.lemmas.append(LemmaResult(_lemma_name(cmd), sent, s.start, failure="timeout: statement"))
                        skip_statement = True
                    else:
                        out.vernacular_failures.append(f"{sent[:80]}: timeout")
                    continue
                path.append((sent, new))
                if not undone:
                    self._track_blocks(cmd)
                if not in_proof and now is not None:  # a proof opened: a lemma (or a definition by tactics)
                    close(None)
                    lemma_t0 = time.monotonic()
                    lemma = LemmaResult(
                        ".".join([*self._modules, _lemma_name(cmd)]), sent, s.start, top_level=not self._open
                    )
                elif in_proof and now is None:  # the proof closed
                    if lemma is not None:
                        start = getattr(lemma, "proof_start", s.start)
                        lemma.proof = self.text[start : s.end]
                    close(f"admitted: {sent}" if _abandons_proof(sent) else None)
                elif (
                    in_proof
                    and lemma is not None
                    and not lemma.failure
                    and not _PROOF_OPEN.match(cmd)
                    and not _VERNAC_IN_PROOF.match(sent)
                ):
                    hyps = {
                        n
                        for gs in (before, now)
                        if gs is not None
                        for g in gs.foreground
                        for h in g.hypotheses
                        for n in h.names
                    }
                    found, unresolved = self.premises(session, sent, hyps, tip)
                    sb, sa = state_of(before), state_of(now)
                    lemma.transitions.append(
                        {
                            "theorem": f"{self.module}.{lemma.name}",
                            "file": self.file,
                            "module": self.module,
                            "step": len(lemma.transitions),
                            "state_before": state_text(sb),
                            "tactic": sent,
                            "state_after": state_text(sa),
                            "goals_before": goal_count(sb),
                            "goals_after": goal_count(sa),
                            "structural": self._coq.is_structural(sent),
                            "premises": found,
                            "premises_unresolved": unresolved,
                        }
                    )
                goals = now
        except ProofrlError as e:
            out.error = f"crash: {type(e).__name__}: {str(e)[:200]}"
        finally:
            close("crash: the replay stopped" if out.error else "statement: proof not closed at the end of the file")
            session.close()
        out.seconds = time.monotonic() - t0
        return out

    def _track_blocks(self, cmd: str) -> None:
        """Follow the sections and modules a command opens or closes: a lemma's name has its modules, and
        :meth:`_locate` drops its sections."""
        if m := _SECTION.match(cmd):
            self._sections.append(m.group(1))
            self._open.append(m.group(1))
        elif (m := _MODULE.match(cmd)) and ":=" not in cmd:
            self._open.append(m.group(1))
            self._modules.append(m.group(1))
        elif (m := _END.match(cmd)) and self._open and self._open[-1] == m.group(1):
            closed = self._open.pop()
            if self._sections and self._sections[-1] == closed:
                self._sections.pop()
            elif self._modules and self._modules[-1] == closed:
                self._modules.pop()

    # -- recovery -----------------------------------------------------------------------------------------
    def _add(self, session: Any, path: list[tuple[str, int]], sentence: str) -> Any:
        """Run ``sentence`` after the last state of ``path`` and record it there; returns the goals after it."""
        tip = path[-1][1]
        session.base = tip
        new = session.add(sentence, tip, timeout=self.timeout)
        goals = session.goals(timeout=self.timeout)
        path.append((sentence, new))
        return goals

    def _recover(self, session: Any, path: list[tuple[str, int]]) -> Any:
        """Coq back on the last state of ``path`` after a refused sentence; returns the session to go on with.

        A refused sentence leaves Coq on it (``Edit_at`` goes back) or further back: a ``Qed`` whose term fails
        the kernel's check leaves it on the lemma's statement with the proof's states gone (``Edit_at`` to one
        of them is Coq's anomaly ``Stm.Vcs_aux.Expired``), so the sentences accepted after where it stands are
        run again. Where that fails too, a fresh session replays the whole path: slow, but the rest of the file
        is kept."""
        from ..provers.coq.session import CoqFailure

        if session.tip == path[-1][1]:
            return session
        at = next((i for i, (_, state) in enumerate(path) if state == session.tip), None)
        try:
            if at is None:  # Coq stands on the refused sentence itself
                session.edit_at(path[-1][1])
            else:
                self._rerun(session, path, at + 1)
            return session
        except CoqFailure:
            return self._restart(session, path)

    def _rerun(self, session: Any, path: list[tuple[str, int]], start: int) -> None:
        """Run ``path[start:]`` again after ``path[start - 1]``, recording the new states."""
        for i in range(start, len(path)):
            sentence, prev = path[i][0], path[i - 1][1]
            session.base = prev
            state = session.add(sentence, prev, timeout=self.timeout)
            session.goals(timeout=self.timeout)
            path[i] = (sentence, state)

    def _restart(self, session: Any, path: list[tuple[str, int]]) -> Any:
        """A fresh session with every accepted sentence of the file run again: what is left when Coq cannot
        be brought back to the last of them."""
        from ..provers.coq.session import CoqSession

        session.close()
        fresh = CoqSession("", memory_mb=self.memory_mb)
        path[0] = ("", fresh.base)
        try:
            self._rerun(fresh, path, 1)
        except ProofrlError:
            fresh.close()
            raise
        return fresh


def command_of(sentence: str) -> tuple[str, bool]:
    """The command a sentence runs, read as Coq reads it: comments blanked, then every control prefix and
    attribute in front stripped, however nested (``Time Timeout 5 (* c *) Admitted.`` is ``Admitted.``); and
    whether one of them is ``Fail`` or ``Succeed``, which run the command and then drop what it did, so that
    ``Fail Qed.`` closes nothing. A first word alone would take ``Time Admitted.`` for a command named ``Time``."""
    text, undone = blank_comments(sentence).strip(), False
    while m := _CONTROL.match(text):
        undone = undone or m.group().startswith(_UNDONE)
        text = text[m.end() :].lstrip()
    return text, undone


def _ends_proof(sentence: str) -> bool:
    """The sentence ends the open proof when it runs (``Time Qed.`` does, ``Fail Qed.`` does not)."""
    cmd, undone = command_of(sentence)
    return bool(_PROOF_END.match(cmd)) and not undone


def _abandons_proof(sentence: str) -> bool:
    """The sentence ends the proof unfinished (``Admitted``, ``Abort``, under any control prefix)."""
    cmd, undone = command_of(sentence)
    return bool(_ABANDONED.match(cmd)) and not undone


def _refused_end(goals: Any, sentence: str, message: str) -> str:
    """Why a lemma fails when Coq refuses its proof's end: ``admitted`` when the tactics gave goals up, ``tactic``
    when they left goals, else ``kernel``: they closed every goal but the term they built failed the check at
    the end (the kernel's guard or type check), so their transitions would teach steps to a proof that is not
    one."""
    if goals is not None and goals.given_up:
        kind = "admitted"
    elif goals is not None and (goals.foreground or goals.background or goals.shelved):
        kind = "tactic"
    else:
        kind = "kernel"
    return f"{kind}: {sentence[:80]}: {message}"


def _opens_proof(sentence: str) -> bool:
    """A sentence that would open a proof if it elaborated: a lemma keyword, or a definition with a type and
    no body (``Definition x : T.``)."""
    if _STARTER.match(sentence):
        return True
    m = re.match(r"(?:#\[[^\]]*\]\s*)?(?:(?:Local|Global|Program)\s+)*(?:Definition|Fixpoint|Instance)\b", sentence)
    return bool(m) and ":=" not in sentence


def _lemma_name(sentence: str) -> str:
    m = re.match(r"(?:#\[[^\]]*\]\s*)?(?:(?:Local|Global|Polymorphic|Program)\s+)*\w+\s+([\w'.]+)", sentence)
    return m.group(1) if m and not sentence.startswith("Goal") else "Unnamed_thm"
