"""Wire models, field for field those of kimina-lean-server, so ``kimina-client`` and code written against it
work unchanged.

Requests reject unknown fields (422): a misspelt ``timout`` silently falling back to the default is the kind
of bug that costs a training run. Responses are dumped with ``exclude_none``: a result carries exactly one
of ``error`` and ``response``, as kimina's ``ReplResponse`` validator demands.

The one addition is ``proofrl`` on each result: our typed verdict (status, reasons, messages, axioms).
kimina's models ignore fields they do not know, so its clients still parse the results.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Infotree = Literal["full", "tactics", "original", "substantive"]
BackendName = Literal["coq", "lean"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Snippet(_Request):
    id: str
    code: str


class CheckRequest(_Request):
    """``POST /api/check``."""

    snippets: list[Snippet]
    timeout: int = Field(30, ge=0)
    debug: bool = False
    reuse: bool = True
    infotree: Infotree | None = None
    backend: BackendName | None = None
    """proofrl only: which backend judges this request (default: the server's)"""

    @model_validator(mode="after")
    def _non_empty_unique(self) -> CheckRequest:
        if not self.snippets:
            raise ValueError("`snippets` must be non empty")
        if len({s.id for s in self.snippets}) != len(self.snippets):
            raise ValueError("`snippets` must have unique ids")
        return self


class Code(_Request):
    custom_id: str | int
    proof: str | None = None
    code: str | None = None

    @property
    def content(self) -> str | None:
        return self.proof if self.proof is not None else self.code


class VerifyRequest(_Request):
    """``POST /verify`` (kimina's older API)."""

    codes: list[Code]
    timeout: int = Field(300, ge=0)
    infotree_type: Infotree | None = None
    disable_cache: bool = False
    backend: BackendName | None = None


class Pos(BaseModel):
    line: int
    column: int


class ReplMessage(BaseModel):
    """A message in the Lean REPL's shape (positions: 1-based line, 0-based column, in the snippet)."""

    severity: Literal["trace", "info", "warning", "error"]
    pos: Pos
    endPos: Pos | None = None
    data: str


class CommandResponse(BaseModel):
    env: int | None = None
    messages: list[ReplMessage] | None = None
    sorries: list[dict[str, Any]] | None = None
    time: float | None = None
    """set on ``/verify`` results only (kimina's ``ExtendedCommandResponse``)"""


class ProofrlVerdict(BaseModel):
    """Our own judgement, the authority where it and the kimina-style fields could disagree."""

    status: Literal["valid", "rejected", "error", "timeout", "crash"]
    reasons: list[str] = []
    messages: list[dict[str, Any]] = []
    axioms: list[str] = []
    seconds: float = 0.0
    prover: str = ""
    backend: BackendName


class CheckResult(BaseModel):
    id: str
    time: float = 0.0
    error: str | None = None
    response: CommandResponse | None = None
    diagnostics: dict[str, Any] | None = None
    proofrl: ProofrlVerdict


class CheckResponse(BaseModel):
    results: list[CheckResult]


class VerifyResult(BaseModel):
    custom_id: str | int
    error: str | None = None
    response: CommandResponse | None = None
    proofrl: ProofrlVerdict


class VerifyResponse(BaseModel):
    results: list[VerifyResult]
