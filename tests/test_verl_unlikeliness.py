"""The unlikeliness hook on verl's advantage step: π_old's log-probs rerank each group's correct samples (proofrl's
one formula), uninformative groups pass untouched, and verl's own GRPO advantage follows the shaped rewards."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("verl", reason='verl is not installed (the distributed extra: pip install -e ".[distributed]")')

from proofrl.rewards.compose import RewardConfig, UnlikelinessConfig
from proofrl.rewards.unlikeliness import unlikeliness_reward
from proofrl.verl.unlikeliness import shape_scores


def _batch():
    """Two groups of 4 (rows of length 5, right-padded): group a mixed (3 correct), group b all correct."""
    lengths = [5, 3, 4, 2, 5, 5, 4, 3]
    mask = torch.zeros(8, 5)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    correct = torch.tensor([1.0, 1, 0, 1, 1, 1, 1, 1])
    scores = torch.zeros(8, 5)
    scores[torch.arange(8), torch.tensor(lengths) - 1] = correct  # verl puts R on the last response token
    mean_logp = torch.tensor([-0.5, -0.1, -0.3, -0.9, -0.2, -0.4, -0.6, -0.8])
    logps = mean_logp[:, None] * mask
    uid = np.array(["a"] * 4 + ["b"] * 4, dtype=object)
    return scores, logps, mask, uid, correct, mean_logp


def test_rank_penalty_uses_old_log_probs_and_skips_uninformative_groups() -> None:
    scores, logps, mask, uid, correct, mean_logp = _batch()
    cfg = RewardConfig(unlikeliness=UnlikelinessConfig(beta_rank=0.25))
    shaped = shape_scores(scores, logps, mask, uid, cfg)
    expected_a = unlikeliness_reward(correct[:4], mean_logp[:4], beta_rank=0.25)
    assert shaped[:4].sum(-1).tolist() == pytest.approx(expected_a.tolist())
    # group a by likelihood: row 1 (-0.1) most likely → largest penalty; row 3 (-0.9) least likely → smallest
    assert shaped[1].sum() == pytest.approx(1 - 0.25) and shaped[3].sum() == pytest.approx(1 - 0.25 / 4)
    assert shaped[2].sum() == 0.0
    assert torch.equal(shaped[4:], scores[4:])  # all correct: dropped by the paper before shaping, left alone here
    assert torch.equal(shaped * (1 - mask), torch.zeros_like(shaped))  # nothing lands on padding


def test_verl_grpo_advantages_follow_the_shaped_rewards() -> None:
    from verl import DataProto
    from verl.trainer.ppo.core_algos import AdvantageEstimator
    from verl.trainer.ppo.ray_trainer import compute_advantage

    scores, logps, mask, uid, _, _ = _batch()
    cfg = RewardConfig(unlikeliness=UnlikelinessConfig(beta_rank=0.25))

    def advantages(token_scores):
        data = DataProto.from_dict(
            tensors={"token_level_rewards": token_scores, "response_mask": mask}, non_tensors={"uid": uid}
        )
        return compute_advantage(data, AdvantageEstimator.GRPO, norm_adv_by_std_in_grpo=False).batch["advantages"][:, 0]

    plain, shaped = advantages(scores), advantages(shape_scores(scores, logps, mask, uid, cfg))
    # plain GRPO gives the three correct samples of group a the same advantage; shaped, the unlikely one gains most
    assert plain[0] == plain[1] == plain[3]
    assert shaped[3] > shaped[0] > shaped[1] > shaped[2]
    assert shaped[4:].abs().sum() == 0.0


def test_the_trainer_is_registered_with_verl() -> None:
    pytest.importorskip("transfer_queue", reason="TransferQueue (verl's V1 trainer) is not installed")
    from verl.trainer.ppo.v1 import PPOTrainerSync, get_trainer_cls

    from proofrl.verl.unlikeliness import NAME, UnlikelinessTrainer

    assert get_trainer_cls(NAME) is UnlikelinessTrainer and issubclass(UnlikelinessTrainer, PPOTrainerSync)
    assert "_compute_advantage" in UnlikelinessTrainer.__dict__
