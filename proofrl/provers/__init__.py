"""One interface over proof assistants (see :mod:`proofrl.provers.base`)."""

from .base import (
    FailureKind,
    Goal,
    Hypothesis,
    Message,
    Position,
    ProofState,
    Prover,
    Status,
    StepFailure,
    StepResult,
    Theorem,
    Verdict,
)
from .pool import PoolConfig, ProverPool

__all__ = [
    "FailureKind",
    "Goal",
    "Hypothesis",
    "Message",
    "PoolConfig",
    "Position",
    "ProofState",
    "Prover",
    "ProverPool",
    "Status",
    "StepFailure",
    "StepResult",
    "Theorem",
    "Verdict",
]
