"""Uplift rate per rank, and the diversity metrics, by hand."""

import math

import pytest
import torch

from proofrl.eval.diversity import empirical_entropy, entropy, unique_count, unique_counts
from proofrl.eval.uplift import uplift_rate


def test_uplift_rate_by_hand():
    # two problems, G = 3. Problem 0 sorted by init log-prob: idx1 (rank 0), idx0 (rank 1), idx2 (rank 2).
    init = torch.tensor([[-2.0, -1.0, -3.0], [-1.0, -2.0, -3.0]])
    new = torch.tensor([[-1.5, -0.5, -4.0], [-0.5, -2.5, -3.0]])  # up: p0 [T, T, F]; p1 [T, F, F (equal)]
    correct = torch.tensor([[1, 1, 1], [1, 1, 0]])
    u = uplift_rate(init, new, correct)
    # rank 0: p0 idx1 up, p1 idx0 up -> 1.0; rank 1: p0 idx0 up, p1 idx1 down -> .5; rank 2: only p0 idx2, down -> 0
    assert u.rates == pytest.approx((1.0, 0.5, 0.0))
    assert u.counts == (2, 2, 1)


def test_uplift_rate_ignores_wrong_samples_and_reports_nan():
    init = torch.tensor([[-1.0, -2.0]])
    u = uplift_rate(init, init + 1, torch.tensor([[0, 1]]))
    assert math.isnan(u.rates[0]) and u.rates[1] == 1.0 and u.counts == (0, 1)


def test_uplift_ties_break_by_position():
    init = torch.tensor([[-1.0, -1.0]])
    u = uplift_rate(init, torch.tensor([[0.0, -5.0]]), torch.tensor([[1, 1]]))
    assert u.rates == (1.0, 0.0)  # idx0 is rank 0


def test_unique_counts_and_entropy():
    s = torch.tensor([[3, 3, 3, 3], [1, 2, 1, 2], [0, 1, 2, 3]])
    assert unique_counts(s).tolist() == [1, 2, 4]
    assert unique_count(["a", "b", "a"]) == 2
    assert entropy(torch.tensor([0.5, 0.5, 0.0])).item() == pytest.approx(math.log(2))
    assert entropy(torch.tensor([1.0, 0.0])).item() == 0.0
    assert empirical_entropy([1, 2, 1, 2]) == pytest.approx(math.log(2))
