"""Coq snippets: a whole source text cut at sentence boundaries (the first ``Theorem``/``Lemma``/... sentence is
the statement, what precedes it the header, the rest the proof), the header read by Coq's grammar
(:func:`~proofrl.provers.coq.header.header_refusal`, an allowlist); and the join a client sends."""

from __future__ import annotations

import re

from ..base import Message, Status, Theorem, Verdict
from ..snippets import Job, Snippet, StatedProblem, header_lines, position_at
from .header import header_refusal
from .sentences import SplitError, normalise, split_sentences

_STATEMENT = re.compile(r"(Theorem|Lemma|Fact|Remark|Corollary|Proposition|Example)\s+([A-Za-z_][\w']*)")


def coq_job(code: str) -> Job | Verdict:
    try:
        sentences = split_sentences(code)
    except SplitError as e:
        return Verdict(
            Status.ERROR, (f"syntax: {e}",), (Message("error", str(e), position_at(code, e.offset)),), prover="coq"
        )
    at = next((i for i, s in enumerate(sentences) if _STATEMENT.match(s.text)), None)
    if at is None:
        return Verdict(Status.ERROR, ("no Theorem or Lemma in the snippet",), prover="coq")
    for s in sentences[:at]:
        if why := header_refusal(s.text):
            text = (
                f"{why} (a snippet header may only load libraries, open or close scopes and set harmless options; send "
                "definitions and notations as part of a library problem)"
            )
            return Verdict(Status.REJECTED, (why,), (Message("error", text, position_at(code, s.start)),), prover="coq")
    stmt = sentences[at]
    m = _STATEMENT.match(stmt.text)
    assert m is not None  # ``at`` is the first sentence it matches
    header = "\n".join(
        normalise(s.text) for s in sentences[:at]
    )  # one process serves headers that differ in comments or blanks
    theorem = Theorem(name=m.group(2), statement=stmt.text, header=header, backend="coq")
    return Job(theorem, code[stmt.end :], position_at(code, stmt.end))


def coq_snippet(problem: StatedProblem, proof: str) -> Snippet:
    """Header, the statement sentence, then the proof on the next line."""
    prefix = header_lines(problem) + problem.formal_statement.rstrip() + "\n"
    return Snippet(prefix + proof, prefix.count("\n"))
