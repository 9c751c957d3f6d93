"""Composed rewards: R = valid × format, the unlikeliness shaping of a group, and recipe parsing."""

from __future__ import annotations

import pytest
import torch

from proofrl.errors import ConfigError
from proofrl.problems import Problem
from proofrl.provers.base import Status, Verdict
from proofrl.rewards.compose import RewardConfig, UnlikelinessConfig, base_rewards, reward_config_from_dict, shape_group
from proofrl.rewards.format import FormatRules

P = Problem("t", "Theorem t : True.", "")
OK_FORMAT = (
    "<think>\n```tactics\nTheorem t : True.\n```\n```tactics\nProof. exact I. Qed.\n```\n</think>\n"
    "```coq\nTheorem t : True.\nProof. exact I. Qed.\n```"
)
BAD_FORMAT = "Proof. exact I. Qed."
VALID, WRONG = Verdict(Status.VALID), Verdict(Status.ERROR, ("nope",))


def test_base_rewards_without_format() -> None:
    r = base_rewards([OK_FORMAT, BAD_FORMAT, OK_FORMAT], [P] * 3, [VALID, VALID, WRONG], RewardConfig())
    assert r == [1.0, 1.0, 0.0]


def test_base_rewards_with_format_is_a_product() -> None:
    cfg = RewardConfig(format=FormatRules())
    r = base_rewards([OK_FORMAT, BAD_FORMAT, OK_FORMAT, BAD_FORMAT], [P] * 4, [VALID, VALID, WRONG, WRONG], cfg)
    assert r == [1.0, 0.0, 0.0, 0.0]


def test_base_rewards_length_mismatch() -> None:
    with pytest.raises(ValueError, match="lengths differ: 2 completions, 1 problems, 2 verdicts"):
        base_rewards(["a", "b"], [P], [VALID, VALID], RewardConfig())


def test_shape_group_by_hand() -> None:
    # G = 4; mean token log-probs -1, -3, -1, -2 (masks differ in length); paper ranks [1, 3, 0, 2]
    logps = torch.tensor([[-1.0, -1.0, 0.0], [-3.0, -3.0, -3.0], [-2.0, 0.0, 0.0], [-2.0, -2.0, -9.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 0], [1, 1, 0]])  # row 2: mean(-2, 0) = -1
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0])
    shaped = shape_group(rewards, logps, mask, RewardConfig(unlikeliness=UnlikelinessConfig()))
    assert shaped.tolist() == pytest.approx([1 - 0.1875, 1 - 0.0625, 1 - 0.25, 0.0])
    assert shaped.dtype == torch.float32
    # the reduction matters: a long sample at -1 per token vs a one-token sample at -1.5
    lp2, m2 = (
        torch.tensor([[-1.0, -1.0, -1.0, -1.0], [-1.5, 0.0, 0.0, 0.0]]),
        torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]]),
    )
    mean = shape_group(torch.ones(2), lp2, m2, RewardConfig(unlikeliness=UnlikelinessConfig()))
    summed = shape_group(torch.ones(2), lp2, m2, RewardConfig(unlikeliness=UnlikelinessConfig(reduction="sum")))
    assert mean.tolist() == pytest.approx([0.75, 0.875]) and summed.tolist() == pytest.approx([0.875, 0.75])
    official = shape_group(
        rewards, logps, mask, RewardConfig(unlikeliness=UnlikelinessConfig(convention="official", beta_rank=0.5))
    )
    assert official.tolist() == pytest.approx([1 - 0.5 * 2 / 4, 1.0, 1 - 0.5 * 3 / 4, 0.0])


def test_shape_group_off_returns_rewards_and_checks_shapes() -> None:
    r = torch.tensor([1.0, 0.0])
    out = shape_group(r, torch.zeros(2, 3), torch.ones(2, 3), RewardConfig())
    assert torch.equal(out, r)
    with pytest.raises(ValueError, match="expected rewards"):
        shape_group(r, torch.zeros(3, 3), torch.ones(3, 3), RewardConfig())
    with pytest.raises(ValueError, match="expected rewards"):
        shape_group(r, torch.zeros(2, 3), torch.ones(2, 4), RewardConfig())


def test_reward_config_from_recipe_sections() -> None:
    assert reward_config_from_dict(None) == RewardConfig()
    assert reward_config_from_dict({}) == RewardConfig()
    assert reward_config_from_dict({"format": None, "unlikeliness": None}) == RewardConfig()
    kimina = reward_config_from_dict({"format": {}})
    assert kimina.format == FormatRules() and kimina.unlikeliness is None
    assert reward_config_from_dict({"format": True, "unlikeliness": True}) == RewardConfig(
        FormatRules(), UnlikelinessConfig()
    )
    custom = reward_config_from_dict(
        {
            "format": {"min_tactics_match": 0.5, "forbidden_keywords": ["sorry"]},
            "unlikeliness": {"beta_rank": 0.5, "convention": "official"},
        }
    )
    assert custom.format == FormatRules(min_tactics_match=0.5, forbidden_keywords=("sorry",))
    assert custom.unlikeliness == UnlikelinessConfig(beta_rank=0.5, convention="official")


@pytest.mark.parametrize(
    "section, message",
    [
        ({"fromat": {}}, r"unknown keys in reward: \['fromat'\]; known: \['format', 'unlikeliness'\]"),
        ({"format": {"min_tactic_match": 0.5}}, r"unknown keys in reward.format: \['min_tactic_match'\]"),
        ({"unlikeliness": {"beta": 0.2}}, r"unknown keys in reward.unlikeliness: \['beta'\]"),
        (
            {"unlikeliness": {"convention": "mine"}},
            r"reward.unlikeliness.convention must be one of \['paper', 'official'\], got 'mine'",
        ),
        (
            {"unlikeliness": {"reduction": "max"}},
            r"reward.unlikeliness.reduction must be one of \['mean', 'sum'\], got 'max'",
        ),
        ({"unlikeliness": {"beta_rank": 2}}, r"beta_rank must be in \[0, 1\]"),
        ({"format": {"repeat_max_count": 1}}, r"reward.format: repeat_min_tokens must be"),
        ({"format": "kimina"}, r"reward.format: expected a mapping"),
        (["format"], r"reward: expected a mapping, got list"),
    ],
)
def test_reward_config_errors(section, message) -> None:
    with pytest.raises(ConfigError, match=message):
        reward_config_from_dict(section)
