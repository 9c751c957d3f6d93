"""proofrl as a plug-in to verl 0.9.1 (the ``distributed`` extra): nothing in verl is patched, each piece goes
through one of verl's own extension points.

* :mod:`.reward` — ``compute_score`` for verl's reward loop (``reward.custom_reward_function``): judges the
  completion with proofrl's :class:`~proofrl.verification.Verifier` (a local pool, a running ``proofrl serve``,
  or the Ray verification actor) and composes the recipe's reward (:mod:`proofrl.rewards.combine`).
* :mod:`.agent_loop` — kimina's error-correction turn as a registered agent loop (``proofrl_error_correction``).
* :mod:`.unlikeliness` — the unlikeliness rank penalty applied to verl's rewards right before its advantage
  computation, with π_old's log-probs (a registered V1 trainer).
* :mod:`.launch` — ``proofrl train --engine verl``: a proofrl recipe → verl's Hydra overrides, and the launch.
"""

from __future__ import annotations

from ..errors import ConfigError

INSTALL = 'pip install -e ".[distributed]"'


def require_verl() -> None:
    """One line naming the install command when verl (or a module it imports undeclared) is missing."""
    try:
        import verl  # noqa: F401
        from verl.experimental.agent_loop import agent_loop  # noqa: F401  (needs cachetools)
    except ImportError as e:
        raise ConfigError(f"verl is not installed here ({e.name or e}): {INSTALL}") from None
