"""What search needs from a tactic policy: ``propose(state_text, k)`` and, optionally, ``value(state_text)``.

The tactic policy itself (prompt format, HF / vLLM / OpenAI-compatible backends) lives in
:mod:`proofrl.policy.tactic`; this module only states the interface search relies on, so the engines and
their tests run with any object that has these methods (tests use small scripted policies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import ConfigError, ProofrlError

try:  # the policy package's own type, when it exists (same fields)
    from ..policy.tactic import Proposal  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - until proofrl.policy.tactic lands

    @dataclass(frozen=True)
    class Proposal:  # type: ignore[no-redef]
        """One proposed tactic with the sum and the mean of its tokens' log-probabilities."""

        tactic: str
        logprob_sum: float
        logprob_mean: float


@runtime_checkable
class TacticPolicy(Protocol):
    def propose(self, state_text: str, k: int) -> list[Proposal]:
        """Up to ``k`` distinct tactics for the goals printed in ``state_text``."""
        ...


@runtime_checkable
class ValueModel(Protocol):
    def value(self, state_text: str) -> float:
        """The state's value, higher is better, in reap's convention (about minus the steps still needed;
        0 for no goals)."""
        ...


class PolicyError(ProofrlError):
    """The policy (model or endpoint) failed during a search: the search stops and says so."""


def policy_from_spec(spec: str, model: str | None = None) -> TacticPolicy:
    """``hf:DIR``, ``vllm:DIR`` or ``openai:URL`` (with ``model``) -> a tactic policy, built by
    :mod:`proofrl.policy.tactic`."""
    try:
        from ..policy import tactic
    except ImportError as e:  # pragma: no cover
        raise ConfigError(f"no tactic policy backend available for {spec!r}: {e}") from e
    for name in ("load_tactic_policy", "tactic_policy_from_spec", "from_spec", "load"):
        if callable(fn := getattr(tactic, name, None)):
            return fn(spec, model=model) if model is not None else fn(spec)
    raise ConfigError(f"proofrl.policy.tactic has no loader for policy spec {spec!r}")
