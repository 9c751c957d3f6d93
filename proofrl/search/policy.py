"""What search needs from the tactic policy (:mod:`proofrl.policy.tactic`): ``propose(state_text, k)`` returning
:class:`Proposal` ``(tactic, logprob_sum, logprob_mean)``, and optionally a value function ``value(state_text)``
(higher is better, about −(steps to go), reap's convention). Engines and tests accept any object with these
methods (tests use small scripted policies)."""

from __future__ import annotations

from ..errors import PolicyError
from ..policy.tactic import Proposal, TacticPolicy, ValueFn, make_tactic_policy, make_value_fn

__all__ = ["PolicyError", "Proposal", "TacticPolicy", "ValueFn", "policy_from_spec", "value_from_spec"]


def policy_from_spec(spec: str, model: str | None = None, **kw: object) -> TacticPolicy:
    """``hf:DIR``, ``vllm:DIR``, ``openai:URL`` or ``openai-chat:URL`` (with ``model``) -> a tactic policy."""
    return make_tactic_policy(spec, model=model, **kw)


def value_from_spec(spec: str | None) -> ValueFn | None:
    """``None`` -> no value function (the search's ``value`` fallback); ``none``, ``endpoint:URL`` or an
    ``http(s)://`` URL -> :func:`proofrl.policy.tactic.make_value_fn`."""
    return None if spec is None else make_value_fn(spec)
