"""Snippets: one whole source text (header, statement, proof), the unit a kimina-style server judges.

Both directions live here, so a client and the server cut a text the same way: :func:`make_job` splits a
snippet into a :class:`Job` (the server's side), :func:`snippet_for` joins a problem and a proof into one
(a client's side) and :meth:`Snippet.to_proof` moves positions back into the proof's coordinates.


A kimina snippet is the whole file: header, statement and proof. Coq text is cut at sentence boundaries
(:func:`~proofrl.provers.coq.sentences.split_sentences`): the first ``Theorem``/``Lemma``/... sentence is the
statement, what precedes it the header, the rest the proof. Lean text is handed over whole: the Lean backend
accepts a whole file as the proof and checks that it contains the statement unchanged, so the statement is
taken as the first declaration up to its ``:=``.

Through the server the header is untrusted too: it comes from the client, not from a problem set, and a header
can change what an unchanged statement means (``Notation "'False'" := True.``, a coercion, an axiom named like
an allowed one, a module named like a library) or how the judge runs (``Unset Guard Checking``). So a Coq
snippet header may hold only what loads libraries, opens scopes and sets harmless options, read by Coq's
grammar (:func:`~proofrl.provers.coq.header.header_refusal`, an allowlist); any other sentence makes the
snippet ``rejected`` with its reason before Coq runs. The proof itself may hold only tactics
(:mod:`proofrl.provers.coq.rules`). The sandbox is the wall behind both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .base import Message, Position, Status, Theorem, Verdict

if TYPE_CHECKING:
    from ..problems import Problem

_COQ_STATEMENT = re.compile(r"(Theorem|Lemma|Fact|Remark|Corollary|Proposition|Example)\s+([A-Za-z_][\w']*)")
_LEAN_DECL = re.compile(r"(?m)^\s*((?:@\[[^\]]*\]\s*)?(?:private\s+|protected\s+)?(theorem|lemma|example))\b")


@dataclass(frozen=True)
class Job:
    theorem: Theorem
    proof: str
    proof_at: Position = Position(1, 0)
    """where the proof starts in the snippet (to move message positions back into the snippet)"""


def header_refusal(sentence: str) -> str | None:
    """``None`` if a snippet header may hold the sentence, else the reason (see
    :func:`proofrl.provers.coq.header.header_refusal`)."""
    from .coq.header import header_refusal as refusal

    return refusal(sentence)


def coq_job(code: str) -> Job | Verdict:
    from .coq.sentences import SplitError, normalise, split_sentences

    try:
        sentences = split_sentences(code)
    except SplitError as e:
        return Verdict(Status.ERROR, (f"syntax: {e}",), (Message("error", str(e), _position(code, e.offset)),), prover="coq")
    at = next((i for i, s in enumerate(sentences) if _COQ_STATEMENT.match(s.text)), None)
    if at is None:
        return Verdict(Status.ERROR, ("no Theorem or Lemma in the snippet",), prover="coq")
    for s in sentences[:at]:
        if why := header_refusal(s.text):
            text = (f"{why} (a snippet header may only load libraries, open or close scopes and set harmless options; send "
                    "definitions and notations as part of a library problem)")
            return Verdict(Status.REJECTED, (why,), (Message("error", text, _position(code, s.start)),), prover="coq")
    stmt = sentences[at]
    m = _COQ_STATEMENT.match(stmt.text)
    header = "\n".join(normalise(s.text) for s in sentences[:at])  # one process serves headers that differ in comments or blanks
    theorem = Theorem(name=m.group(2), statement=stmt.text, header=header, backend="coq")
    return Job(theorem, code[stmt.end :], _position(code, stmt.end))


def lean_job(code: str) -> Job | Verdict:
    from .lean.header import blank_comments_and_strings, split_header

    split = split_header(code)
    blanked = blank_comments_and_strings(code)
    m = _LEAN_DECL.search(blanked, sum(len(x) + 1 for x in code.split("\n")[: split.line_count]))
    if not m:
        return Verdict(Status.ERROR, ("no theorem, lemma or example in the snippet",), prover="lean")
    end = blanked.find(":=", m.end())
    if end < 0:
        return Verdict(Status.ERROR, ("the declaration has no `:=`",), prover="lean")
    statement = code[m.start(1) : end + 2]  # with its attribute and modifier: they are part of the statement
    name = (code[m.end(2) : end].split()[:1] or [""])[0] if m.group(2) != "example" else ""
    header = "\n".join(split.header_lines)
    return Job(Theorem(name=name, statement=statement, header=header, backend="lean"), code)


def make_job(code: str, backend: str) -> Job | Verdict:
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as e:
        return Verdict(Status.ERROR, ("not UTF-8",), (Message("error", f"the code holds a character that is not UTF-8 (a lone surrogate?) at character {e.start}", _position(code, e.start)),), prover=backend)
    return coq_job(code) if backend == "coq" else lean_job(code)


def _position(text: str, offset: int) -> Position:
    before = text[:offset]
    return Position(before.count("\n") + 1, offset - (before.rfind("\n") + 1))


# -- snippets and positions -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Snippet:
    """The whole source text sent to a server for one proof, and where the proof sits in it.

    Proof line ``l`` is snippet line ``l + line_offset``; its columns are shifted by ``first_column`` on the
    proof's first line and by ``indent`` on the others (Lean bodies are indented under the statement).
    """

    code: str
    line_offset: int
    first_column: int = 0
    indent: int = 0

    def to_proof(self, p: Position | None) -> Position | None:
        """A snippet position in the proof's coordinates; None when it falls before the proof."""
        if p is None or p.line - self.line_offset < 1:
            return None
        line = p.line - self.line_offset
        return Position(line, max(0, p.column - (self.first_column if line == 1 else self.indent)))


def snippet_for(problem: "Problem", proof: str) -> Snippet:
    """Header, statement and proof as one file, the way the server's snippet splitter reads it back.

    Coq: header, the statement sentence, then the proof on the next line. Lean: a proof that contains its
    own declaration is a whole file (the problem's header is put before it unless it has ``import`` lines);
    otherwise it is the statement's body: after the statement on its last line when it is one line, else on
    the following lines, each non-blank one indented by two spaces (as the Lean prover does).
    """
    header = problem.header.rstrip("\n")
    head = header + "\n" if header.strip() else ""
    if problem.backend == "coq":
        prefix = head + problem.formal_statement.rstrip() + "\n"
        return Snippet(prefix + proof, prefix.count("\n"))
    if _LEAN_DECL_WORDS & set(proof.split()):
        if any(line.startswith("import ") for line in proof.splitlines()):
            return Snippet(proof, 0)
        return Snippet(head + proof, head.count("\n"))
    statement = problem.formal_statement.rstrip()
    if "\n" not in proof:
        prefix = head + statement + " "
        return Snippet(prefix + proof, prefix.count("\n"), len(statement.rsplit("\n", 1)[-1]) + 1)
    body = "\n".join("  " + line if line.strip() else line for line in proof.split("\n"))
    prefix = head + statement + "\n"
    return Snippet(prefix + body, prefix.count("\n"), 2, 2)


_LEAN_DECL_WORDS = {"theorem", "lemma", "example"}


def into_snippet(p: Position | None, at: Position) -> Position | None:
    if p is None:
        return None
    return Position(at.line, at.column + p.column) if p.line == 1 else Position(at.line + p.line - 1, p.column)
