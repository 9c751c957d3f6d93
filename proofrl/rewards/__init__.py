"""Rewards: functions from samples (and their verdicts) to scalars, combined in one place.

* :mod:`.combine` — the one place a sample's reward is computed: registered sample terms (``verifier``,
  ``format``) multiplied, then registered group shapers (``unlikeliness``), :class:`RewardFn`;
* :mod:`.format` — kimina-prover-rl's format reward (:func:`check_format`, :class:`FormatRules`);
* :mod:`.unlikeliness` — the rank penalty of "Rewarding the Unlikely";
* :mod:`.compose` — the recipe's ``reward:`` section (:class:`RewardConfig`) and the trainer's two calls.

The verdicts come from :class:`proofrl.verification.Verifier` (a prover pool or a server).
"""

from .combine import GROUP_SHAPERS, SAMPLE_TERMS, RewardFn, Sample
from .compose import RewardConfig, UnlikelinessConfig, base_rewards, reward_config_from_dict, shape_group
from .format import FormatError, FormatRules, check_format, format_reward

__all__ = [
    "GROUP_SHAPERS",
    "SAMPLE_TERMS",
    "FormatError",
    "FormatRules",
    "RewardConfig",
    "RewardFn",
    "Sample",
    "UnlikelinessConfig",
    "base_rewards",
    "check_format",
    "format_reward",
    "reward_config_from_dict",
    "shape_group",
]
