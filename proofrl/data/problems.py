"""Problem sets for training and evaluation: one :class:`Problem` per theorem statement."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..provers.base import Backend, Theorem


@dataclass(frozen=True)
class Problem:
    """A theorem to prove, with what prompts need besides the statement.

    ``formal_statement`` is the declaration without proof (Coq ``Theorem t : P.``; Lean ``theorem t : P := by``);
    ``informal_prefix`` is the natural-language statement when the set has one (DeepSeek-Prover's ``/-- … -/``
    block, kimina's informal problem); ``module`` is where a stdlib theorem came from (used for held-out splits);
    ``proof`` is a known human proof when there is one (for teaching the tiny model, never shown at evaluation).
    """

    name: str
    formal_statement: str
    header: str = ""
    backend: Backend = "coq"
    split: str = ""
    informal_prefix: str = ""
    module: str = ""
    proof: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def theorem(self) -> Theorem:
        return Theorem(self.name, self.formal_statement, self.header, self.backend)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in ("", {}, None)}
