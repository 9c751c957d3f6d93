"""Turn untrusted proof text into a checked plan: the statement we add ourselves, then tactic sentences.

Rejections that need no prover happen here (bad bytes, unbalanced comments, any sentence not known to be a
tactic, ``Admitted``, a restated statement under another name), so they cost microseconds. A restatement
whose text differs from the problem's in more than comments, blanks and the keyword is elaborated in its
place, and the kernel-type comparison after the proof decides whether it is the same statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base import Message, Status, Theorem, Verdict
from .rules import (
    Outgoing,
    blank_comments,
    forbidden_reason,
    outgoing,
    proof_end,
    reference_statement,
    strip_comments_and_strings,
)
from .sentences import COQ_BLANKS, Sentence, SplitError, position, split_sentences

_DECL = re.compile(
    r"^\s*(?:Local\s+|Global\s+)?(?:Theorem|Lemma|Fact|Remark|Corollary|Proposition|Example)\s+([\w'.]+)"
)


@dataclass(frozen=True)
class Plan:
    statement: str
    name: str
    tactics: tuple[Sentence, ...]  # offsets into ``source``; the first may be ``Proof``
    source: str
    name_span: tuple[int, int]
    """where the theorem's name stands in ``statement``"""
    reference: str = ""
    """the problem's statement under :data:`~proofrl.provers.coq.rules.REFERENCE_NAME`: elaborated again after
    the proof, its kernel type must be the proved constant's"""
    restated: bool = False
    """``statement`` is the proof's own restatement (it differs from the problem's in its text: spacing, a
    comment, ``Lemma`` for ``Theorem``); the kernel-type comparison alone says whether it means the same"""

    def outgoing(self, i: int, timeout: float | None = None) -> Outgoing:
        """Tactic ``i`` as Coq receives it (see :func:`~proofrl.provers.coq.rules.outgoing`)."""
        return outgoing(self.tactics[i].text, timeout, first=i == 0)


def theorem_name(theorem: Theorem) -> str:
    m = _DECL.match(theorem.statement)
    return m.group(1) if m else theorem.name


def _norm(s: str) -> str:
    """A statement sentence with comments and blanks normalised and its keyword made ``Theorem``."""
    return re.sub(
        r"^((?:Local |Global )?)(?:Theorem|Lemma|Fact|Remark|Corollary|Proposition|Example)\b",
        r"\1Theorem",
        " ".join(re.split(f"[{re.escape(COQ_BLANKS)}]+", blank_comments(s).strip(COQ_BLANKS))),
    )


def plan_proof(theorem: Theorem, proof: str, *, max_chars: int, forbidden_tactics: tuple[str, ...]) -> Plan | Verdict:
    """A :class:`Plan`, or the :class:`Verdict` that rejects the text without running Coq."""

    def no(status: Status, reason: str, message: str = "", offset: int | None = None) -> Verdict:
        pos = position(proof, offset) if offset is not None else None
        return Verdict(status, (reason,), (Message("error", message or reason, pos),) if message or pos else ())

    for part, text in (("header", theorem.header), ("statement", theorem.statement)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            message = f"the {part} holds a character that is not UTF-8 (a lone surrogate?) at character {e.start}"
            return Verdict(Status.ERROR, (f"{part} is not UTF-8",), (Message("error", message),))
    try:
        proof.encode("utf-8")
    except UnicodeEncodeError as e:
        return no(
            Status.ERROR, "not UTF-8", f"the proof holds bytes that are not UTF-8 at character {e.start}", e.start
        )
    if "\x00" in proof:
        return no(Status.ERROR, "NUL byte in proof", offset=proof.index("\x00"))
    if len(proof) > max_chars:
        return no(Status.ERROR, "proof too long", f"{len(proof)} characters > limit {max_chars}")
    try:
        (stmt,) = split_sentences(theorem.statement)
    except (SplitError, ValueError):
        return Verdict(Status.ERROR, ("statement is not one sentence",))
    decl = _DECL.match(stmt.text)
    if decl is None:  # the kernel-type check elaborates the statement again under another name: it needs one
        return Verdict(
            Status.ERROR, ("statement is not a Theorem, Lemma, Fact, Remark, Corollary, Proposition or Example",)
        )
    try:
        sentences = split_sentences(proof)
    except SplitError as e:
        return no(Status.ERROR, f"parse_error: {e}", str(e), e.offset)

    statement, name_span, restated = stmt.text, decl.span(1), False
    if sentences and (again := _DECL.match(sentences[0].text)):  # the model restated the theorem
        if _norm(sentences[0].text) != _norm(stmt.text):
            # Another text may still be the same statement (``n+0`` for ``n + 0``): it is what Coq elaborates
            # then, and wall 3 compares its kernel type with the problem's. Same name, no universe binders.
            if again.group(1) != decl.group(1) or sentences[0].text[again.end() :].lstrip().startswith("@"):
                return no(
                    Status.REJECTED,
                    "statement changed",
                    "the proof restates the theorem differently",
                    sentences[0].start,
                )
            statement, name_span, restated = sentences[0].text, again.span(1), True
        sentences = sentences[1:]
    end = proof_end(sentences[-1].text) if sentences else None
    if end in ("Qed", "Defined"):
        sentences = sentences[:-1]
    elif end == "Admitted":
        return no(Status.REJECTED, "admitted", "the proof ends with Admitted", sentences[-1].start)
    for i, s in enumerate(sentences):
        if why := forbidden_reason(s.text, forbidden_tactics, first=i == 0):
            return no(Status.REJECTED, why, f"{why} (only tactics may appear in a proof)", s.start)
        if why := self_citation(s.text, decl.group(1)):
            return no(Status.REJECTED, why, f"{why}: a proof cannot rest on its own theorem", s.start)
    return Plan(
        statement,
        decl.group(1),
        tuple(sentences),
        proof,
        name_span,
        reference_statement(stmt.text, decl.span(1)),
        restated,
    )


_IDENT = re.compile(r"[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*")


def self_citation(sentence: str, name: str) -> str | None:
    """``forbidden: cites NAME`` when a tactic names the theorem being proved, bare or qualified (``apply t.``,
    ``rewrite M.t.``; comments and strings aside), else None. While its proof runs the constant does not exist
    yet, so such a name can only reach a namesake the header made visible: the theorem itself when a problem is
    stated after its own module is loaded. A namesake reached without being named (a hint database) is kept out
    by the problem sets, which state a library lemma with only what precedes it in its file."""
    short = name.rsplit(".", 1)[-1]
    for ident in _IDENT.findall(strip_comments_and_strings(sentence)):
        if ident.rsplit(".", 1)[-1] == short:
            return f"forbidden: cites {short}"
    return None
