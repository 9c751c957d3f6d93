"""The unlikeliness reward against values worked out by hand."""

import pytest
import torch

from proofrl.rewards.unlikeliness import likelihood_ranks, sequence_logprob, unlikeliness_reward


def test_ranks_most_likely_is_zero_and_ties_break_by_position():
    lp = torch.tensor([[-1.0, -3.0, -1.0, -2.0]])
    # sorted most likely first: idx2 (-1, later index wins the tie), idx0 (-1), idx3 (-2), idx1 (-3)
    assert likelihood_ranks(lp).tolist() == [[1, 3, 0, 2]]


def test_paper_formula_by_hand_with_ties_and_wrong_samples():
    # G = 4, beta = 0.25: penalty = 0.25 (4 - rank) / 4 -> rank 0: .25, 1: .1875, 2: .125, 3: .0625
    rewards = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    lp = torch.tensor([[-1.0, -3.0, -1.0, -2.0]])  # ranks [1, 3, 0, 2]
    r = unlikeliness_reward(rewards, lp)
    assert r.flatten().tolist() == pytest.approx([1 - 0.1875, 1 - 0.0625, 1 - 0.25, 0.0])


def test_official_convention_shifts_every_penalty_by_beta_over_g():
    rewards = torch.ones(1, 4)
    lp = torch.tensor([[-1.0, -3.0, -1.0, -2.0]])  # ascending ranks [2, 0, 3, 1] -> penalty .25 * a / 4
    r = unlikeliness_reward(rewards, lp, convention="official")
    assert r.flatten().tolist() == pytest.approx([1 - 0.125, 1.0, 1 - 0.1875, 1 - 0.0625])
    diff = unlikeliness_reward(rewards, lp, convention="official") - unlikeliness_reward(rewards, lp)
    assert torch.allclose(diff, torch.full((1, 4), 0.25 / 4))


def test_groups_along_leading_dims_are_independent_and_beta_is_used():
    rewards = torch.tensor([[[1.0, 1.0]], [[1.0, 0.0]]])  # (2, 1, 2)
    lp = torch.tensor([[[-2.0, -1.0]], [[-2.0, -1.0]]])
    r = unlikeliness_reward(rewards, lp, beta_rank=0.5)  # G=2: rank 0 -> .5, rank 1 -> .25
    assert r.shape == (2, 1, 2) and r.flatten().tolist() == pytest.approx([0.75, 0.5, 0.75, 0.0])


def test_sequence_logprob_mean_and_sum():
    tok = torch.tensor([[-1.0, -2.0, -9.0], [-4.0, -9.0, -9.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert sequence_logprob(tok, mask).tolist() == [-1.5, -4.0]
    assert sequence_logprob(tok, mask, "sum").tolist() == [-3.0, -4.0]
    with pytest.raises(ValueError, match="valid choices"):
        sequence_logprob(tok, mask, "max")


def test_mean_and_sum_can_rank_differently():
    # a long likely-per-token answer vs a short one: the reduction decides who gets the larger penalty
    tok = torch.tensor([[-1.0, -1.0, -1.0], [-2.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    by_mean = likelihood_ranks(sequence_logprob(tok, mask).unsqueeze(0))
    by_sum = likelihood_ranks(sequence_logprob(tok, mask, "sum").unsqueeze(0))
    assert by_mean.tolist() == [[0, 1]] and by_sum.tolist() == [[1, 0]]
