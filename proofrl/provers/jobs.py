"""The values a snippet's cut and join pass around (:mod:`.snippets`): a problem as the join reads it, the
server's :class:`Job`, a client's :class:`Snippet`. Apart from the functions that build them, so that the
backend object (:mod:`.backend`), which names them in its methods, and the snippet functions, which ask the
backend, do not import each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .base import Position, Theorem


class StatedProblem(Protocol):
    """What the join needs of a problem (:class:`proofrl.problems.Problem` has it)."""

    @property
    def header(self) -> str: ...
    @property
    def formal_statement(self) -> str: ...
    @property
    def informal_prefix(self) -> str: ...
    @property
    def backend(self) -> str: ...


@dataclass(frozen=True)
class Job:
    theorem: Theorem
    proof: str
    proof_at: Position = Position(1, 0)
    """where the proof starts in the snippet (to move message positions back into the snippet)"""


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
