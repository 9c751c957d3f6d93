"""Rewards: functions from samples (and their verdicts) to scalars. One module per reward.

* :mod:`.verifier` — R(x, y) ∈ {0, 1} from a prover pool or a verification server (:class:`Verifier`);
* :mod:`.format` — kimina-prover-rl's format reward (:func:`check_format`, :class:`FormatRules`);
* :mod:`.unlikeliness` — the rank penalty of "Rewarding the Unlikely";
* :mod:`.compose` — the recipe's combination (:class:`RewardConfig`, :func:`base_rewards`, :func:`shape_group`).
"""

from .compose import RewardConfig, UnlikelinessConfig, base_rewards, reward_config_from_dict, shape_group
from .format import FormatError, FormatRules, check_format, format_reward
from .verifier import ServerUnavailable, Verifier, verifier_reward

__all__ = [
    "FormatError",
    "FormatRules",
    "RewardConfig",
    "ServerUnavailable",
    "UnlikelinessConfig",
    "Verifier",
    "base_rewards",
    "check_format",
    "format_reward",
    "reward_config_from_dict",
    "shape_group",
    "verifier_reward",
]
