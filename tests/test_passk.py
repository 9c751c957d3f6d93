"""pass@N by both estimators, against brute-force enumeration."""

import itertools
import math

import pytest
import torch

from proofrl.eval.passk import pass_at_k_chunked, pass_at_k_exact, pass_at_k_from_outcomes, pass_at_k_unbiased


def brute_force(n: int, c: int, k: int) -> float:
    """Fraction of the k-subsets of n attempts (first c correct) that contain a correct attempt."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_unbiased_matches_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k_unbiased(n, c, k).item() == pytest.approx(brute_force(n, c, k), abs=1e-12)


def test_unbiased_by_hand_and_vectorised():
    # n=10, c=3, k=4: 1 - C(7,4)/C(10,4) = 1 - 35/210
    out = pass_at_k_unbiased(torch.tensor([10, 10, 10]), torch.tensor([0, 3, 10]), 4)
    assert out.tolist() == pytest.approx([0.0, 1 - 35 / 210, 1.0])
    assert pass_at_k_unbiased(10, 3, 1).item() == pytest.approx(0.3)


def test_unbiased_is_stable_for_large_n():
    # C(512, 256) overflows float64; the log-space form does not.
    v = pass_at_k_unbiased(512, 1, 256).item()
    assert v == pytest.approx(0.5) and not math.isnan(v)
    assert pass_at_k_unbiased(512, 300, 256).item() == 1.0


def test_unbiased_rejects_too_few_attempts():
    with pytest.raises(ValueError, match="at least 4"):
        pass_at_k_unbiased(3, 1, 4)


def test_chunked_by_hand():
    # 2 problems x 8 attempts, k = 4 -> 2 chunks
    correct = torch.tensor([[0, 0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 0, 0]], dtype=torch.bool)
    r = pass_at_k_chunked(correct, 4)
    assert (r.mean, r.std, r.chunks) == (pytest.approx(0.5), pytest.approx(0.0), 2)
    r = pass_at_k_chunked(correct, 2)
    assert r.chunks == 4
    # chunk pass rates: [0, .5 (p0), .5 (p1), 0] -> mean .25, population std .25
    assert (r.mean, r.std) == (pytest.approx(0.25), pytest.approx(0.25))
    r = pass_at_k_chunked(correct, 8)
    assert (r.mean, r.std, r.chunks) == (1.0, 0.0, 1)


def test_chunked_mean_is_unbiased_estimate_averaged_over_problems_in_expectation():
    # Over every ordering of the attempts, the chunked mean equals the unbiased estimator (exchangeability).
    row = [True, False, False, True, False, False]
    k, total, count = 2, 0.0, 0
    for perm in set(itertools.permutations(row)):
        total += pass_at_k_chunked(torch.tensor([perm]), k).mean
        count += 1
    assert total / count == pytest.approx(pass_at_k_unbiased(6, 2, 2).item())


def test_chunked_requires_multiple():
    with pytest.raises(ValueError, match="multiple"):
        pass_at_k_chunked(torch.zeros(2, 10, dtype=torch.bool), 4)


def test_sampled_estimate_approaches_exact_pass_at_k():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.02, 0.1, 0.5])
    correct = torch.rand(3, 4096, generator=g) < p.unsqueeze(1)
    for k in (1, 8, 32):
        est = pass_at_k_unbiased(4096, correct.sum(-1), k)
        assert torch.allclose(est, pass_at_k_exact(p, k), atol=0.04)
    assert pass_at_k_from_outcomes(correct, 1) == pytest.approx(float(correct.float().mean()))
