"""Snippets: one whole source text (header, statement, proof), the unit a kimina-style server judges.

Both directions go through here, so a client and the server cut a text the same way: :func:`make_job` splits a
snippet into a :class:`Job` (the server's side), :func:`snippet_for` joins a problem and a proof into one
(a client's side) and :meth:`Snippet.to_proof` moves positions back into the proof's coordinates. How a text
is cut and joined is the backend's (:meth:`~proofrl.provers.backend.Backend.cut` / ``join``:
``provers/coq/snippet.py``, ``provers/lean/snippet.py``).


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

from .backend import get_backend
from .base import Message, Position, Status, Verdict
from .jobs import Job, Snippet, StatedProblem

__all__ = ["Job", "Snippet", "StatedProblem", "header_lines", "into_snippet", "make_job", "position_at", "snippet_for"]


def make_job(code: str, backend: str) -> Job | Verdict:
    """The server's cut of a whole source text (the backend's :meth:`~proofrl.provers.backend.Backend.cut`),
    or the verdict refusing it."""
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as e:
        return Verdict(
            Status.ERROR,
            ("not UTF-8",),
            (
                Message(
                    "error",
                    f"the code holds a character that is not UTF-8 (a lone surrogate?) at character {e.start}",
                    position_at(code, e.start),
                ),
            ),
            prover=backend,
        )
    return get_backend(backend).cut(code)


def position_at(text: str, offset: int) -> Position:
    """The line (1-based) and column of character ``offset`` of ``text``."""
    before = text[:offset]
    return Position(before.count("\n") + 1, offset - (before.rfind("\n") + 1))


def snippet_for(problem: StatedProblem, proof: str) -> Snippet:
    """Header, statement and proof as one file, the way the server's snippet splitter reads it back (the
    backend's :meth:`~proofrl.provers.backend.Backend.join`)."""
    return get_backend(problem.backend).join(problem, proof)


def header_lines(problem: StatedProblem) -> str:
    """The problem's header as the first lines of a snippet (empty when it has none)."""
    header = problem.header.rstrip("\n")
    return header + "\n" if header.strip() else ""


def into_snippet(p: Position | None, at: Position) -> Position | None:
    if p is None:
        return None
    return Position(at.line, at.column + p.column) if p.line == 1 else Position(at.line + p.line - 1, p.column)
