"""Verdict rules for Lean, as pure functions over REPL responses and source text.

A whole proof is ``valid`` only when *all* hold:

1. no forbidden word in the source (``sorry``, ``admit``, ``native_decide`` by default, and any unqualified
   word ending in ``?`` such as ``exact?``), comments and strings ignored; checked before Lean runs;
2. the problem's statement occurs unchanged (whitespace aside) and nothing before it can change its meaning
   (no ``variable``, ``open``, ``instance``, ``notation``, ... ahead of it);
3. no message of severity ``error`` (kernel errors such as ``(kernel) declaration has metavariables`` only
   arrive this way);
4. no ``sorries`` and no sorry warning, in either spelling (``declaration uses `sorry``` now,
   ``declaration uses 'sorry'`` in older Lean);
5. ``#print axioms`` of the theorem lists only allowed axioms (``sorryAx``, ``Lean.ofReduceBool`` from
   ``native_decide``, and any user ``axiom`` reject).

A tactic step counts as a step only with no error, no sorry, and ``proofStatus`` either ``Completed`` (solved)
or ``Incomplete: open goals remain``. ``goals == []`` alone means nothing: Lean also returns it for
``Incomplete: contains sorry``/``contains metavariable(s)`` and ``Error: kernel type check failed``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base import FailureKind, Status
from .header import blank_comments_and_strings
from .models import CommandResponse, ProofStepResponse, ReplError, ReplMessage

SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")
_WORD = re.compile(r"[^\W\d][\w'!?]*(?:\.[^\W\d][\w'!?]*)*")
_AXIOMS = re.compile(r"depends on axioms:\s*\[(.*?)\]", re.S)
_NO_AXIOMS = re.compile(r"does not depend on any axioms")
_DECL_NAME = re.compile(r"^\s*(?:@\[[^\]]*\]\s*)?(?:private\s+|protected\s+)?(theorem|lemma|example)\b\s*([^\s(:{\[⦃]*)")

# Commands that, placed before the statement, can change what the statement means.
MEANING_CHANGERS = frozenset(
    "variable include omit namespace section open export notation infix infixl infixr prefix postfix "
    "macro macro_rules syntax elab elab_rules term_elab command_elab tactic instance default_instance "
    "attribute set_option universe local scoped def abbrev structure class inductive axiom opaque "
    "import".split()
)


@dataclass(frozen=True)
class Judgement:
    status: Status
    reasons: tuple[str, ...] = ()


def forbidden_words(code: str, forbidden: tuple[str, ...] | frozenset[str], search_tactics: bool = True) -> tuple[str, ...]:
    """Forbidden words used in ``code`` outside comments and strings, in order of appearance, no repeats."""
    found: list[str] = []
    for m in _WORD.finditer(blank_comments_and_strings(code)):
        w = m.group()
        if w in forbidden or (search_tactics and w.endswith("?") and "." not in w):
            if w not in found:
                found.append(w)
    return tuple(found)


def declaration_name(statement: str) -> tuple[str, str]:
    """(keyword, name) of the statement's declaration; name is ``""`` for ``example``."""
    m = _DECL_NAME.match(blank_comments_and_strings(statement))
    if not m:
        return "", ""
    return m.group(1), m.group(2) if m.group(1) != "example" else ""


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def find_statement(code: str, statement: str) -> tuple[int, int] | None:
    """The span of ``statement`` in ``code``, whitespace-insensitive, ignoring comments and strings in
    ``code`` (so a statement quoted in a comment does not count). None if it does not occur."""
    want = [t for t, _, _ in _tokens(blank_comments_and_strings(statement))]
    have = _tokens(blank_comments_and_strings(code))
    if not want:
        return None
    for i in range(len(have) - len(want) + 1):
        if have[i][0] == want[0] and [t for t, _, _ in have[i : i + len(want)]] == want:
            return have[i][1], have[i + len(want) - 1][2]
    return None


def meaning_changers(prefix: str) -> tuple[str, ...]:
    """Commands in the code ahead of the statement that could change what it means."""
    words = [m.group() for m in _WORD.finditer(blank_comments_and_strings(prefix))]
    out: list[str] = []
    for w in words:
        if w in MEANING_CHANGERS and w not in out:
            out.append(w)
    return tuple(out)


def parse_axioms(text: str) -> tuple[str, ...] | None:
    """Axioms named by ``#print axioms`` output (``'t' depends on axioms: [propext, sorryAx]`` or
    ``'t' does not depend on any axioms``); None when the text is neither."""
    m = _AXIOMS.search(text)
    if m:
        return tuple(a.strip() for a in m.group(1).split(",") if a.strip())
    if _NO_AXIOMS.search(text):
        return ()
    return None


def _error_reason(m: ReplMessage) -> str:
    if m.data.startswith("(kernel)"):
        return "kernel: " + m.data.split("\n", 1)[0][len("(kernel) "):]
    if m.data.startswith("unsolved goals"):
        return "incomplete"
    return "lean error: " + m.data.split("\n", 1)[0][:120]


def judge_command(resp: CommandResponse | ReplError) -> Judgement:
    """Verdict of an elaborated whole proof, before the axiom check (rules 3 and 4)."""
    if isinstance(resp, ReplError):
        return Judgement(Status.ERROR, ("repl: " + resp.message.split("\n")[-1][:200],))
    reasons: list[str] = []
    for m in resp.errors:
        r = _error_reason(m)
        if r not in reasons:
            reasons.append(r)
    if resp.sorries or any(SORRY_WARNING.search(m.data) for m in resp.messages if m.severity == "warning"):
        reasons.append("sorry")
    if not reasons:
        return Judgement(Status.VALID)
    rejecting = any(r == "incomplete" or r == "sorry" or r.startswith("kernel:") for r in reasons)
    return Judgement(Status.REJECTED if rejecting else Status.ERROR, tuple(reasons))


def judge_axioms(axioms: tuple[str, ...] | None, allowed: frozenset[str]) -> Judgement:
    """Rule 5. ``None`` (no ``#print axioms`` answer we could read) rejects: never valid by default."""
    if axioms is None:
        return Judgement(Status.REJECTED, ("axioms unknown",))
    bad = tuple(f"axiom: {a}" for a in axioms if a not in allowed)
    return Judgement(Status.REJECTED, bad) if bad else Judgement(Status.VALID)


@dataclass(frozen=True)
class StepJudgement:
    """``ok`` and ``solved`` for a good step; otherwise ``kind`` and ``message`` say why it failed."""

    ok: bool
    solved: bool = False
    kind: FailureKind | None = None
    message: str = ""
    message_obj: ReplMessage | None = None


def judge_step(resp: ProofStepResponse | ReplError) -> StepJudgement:
    if isinstance(resp, ReplError):
        msg = resp.message.removeprefix("Lean error:\n")
        return StepJudgement(False, kind=FailureKind.ERROR, message=msg)
    if resp.errors:
        e = resp.errors[0]
        return StepJudgement(False, kind=FailureKind.ERROR, message=e.data, message_obj=e)
    if resp.sorries:
        return StepJudgement(False, kind=FailureKind.FORBIDDEN, message="sorry")
    status = resp.proof_status
    if status == "Completed" and not resp.goals:
        return StepJudgement(True, solved=True)
    if status == "Incomplete: open goals remain" and resp.goals:
        return StepJudgement(True)
    return StepJudgement(False, kind=FailureKind.ERROR, message=status)
