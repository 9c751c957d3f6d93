"""Lean snippets: the text is handed over whole (the Lean backend accepts a whole file as the proof and checks
that it contains the statement unchanged), so the statement is taken as the first declaration up to its
``:=``; and the join a client sends."""

from __future__ import annotations

import re

from ..base import Status, Theorem, Verdict
from ..snippets import Job, Snippet, StatedProblem, header_lines
from .header import blank_comments_and_strings, split_header

_DECL = re.compile(r"(?m)^\s*((?:@\[[^\]]*\]\s*)?(?:private\s+|protected\s+)?(theorem|lemma|example))\b")
_DECL_WORDS = {"theorem", "lemma", "example"}


def lean_job(code: str) -> Job | Verdict:
    split = split_header(code)
    blanked = blank_comments_and_strings(code)
    m = _DECL.search(blanked, sum(len(x) + 1 for x in code.split("\n")[: split.line_count]))
    if not m:
        return Verdict(Status.ERROR, ("no theorem, lemma or example in the snippet",), prover="lean")
    end = blanked.find(":=", m.end())
    if end < 0:
        return Verdict(Status.ERROR, ("the declaration has no `:=`",), prover="lean")
    statement = code[m.start(1) : end + 2]  # with its attribute and modifier: they are part of the statement
    name = (code[m.end(2) : end].split()[:1] or [""])[0] if m.group(2) != "example" else ""
    header = "\n".join(split.header_lines)
    return Job(Theorem(name=name, statement=statement, header=header, backend="lean"), code)


def lean_snippet(problem: StatedProblem, proof: str) -> Snippet:
    """A proof that contains its own declaration is a whole file (the problem's header is put before it unless
    it has ``import`` lines); otherwise it is the statement's body: after the statement on its last line when
    it is one line, else on the following lines, each non-blank one indented by two spaces (as the Lean prover
    does)."""
    head = header_lines(problem)
    if _DECL_WORDS & set(proof.split()):
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
