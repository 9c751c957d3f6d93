"""The claim statistics: paired intervals, the sign-flip test, verdicts and the size that would tell."""

import numpy as np
import pytest

from proofrl.bench.stats import compare, mean_interval, permutation_p_value, theorems_needed


def test_a_clear_paired_gain_holds():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, size=(3, 200)).astype(float)
    b = np.maximum(a, rng.random((3, 200)) < 0.3)  # B proves all A proves and more
    c = compare(a, b)
    assert c.verdict == "holds"
    assert c.difference.low > 0 and c.p_value < 0.01
    assert c.a.low <= c.a.mean <= c.a.high


def test_the_opposite_effect_does_not_hold_and_direction_flips_it():
    a = np.ones((2, 100))
    b = np.zeros((2, 100))
    b[:, :10] = 1
    assert compare(a, b).verdict == "does not hold"
    assert compare(a, b, direction=-1).verdict == "holds"


def test_no_effect_cannot_tell_and_names_no_size():
    a = np.tile([0.0, 1.0], (2, 20))
    c = compare(a, a.copy())
    assert c.verdict == "cannot tell at this size"
    assert c.p_value == 1.0 and c.theorems_needed is None


def test_pairing_narrows_the_interval_against_independent_arms():
    # B = A + a small constant gain on noisy theorems: unpaired the noise hides it, paired it is plain
    rng = np.random.default_rng(0)
    a = rng.normal(0, 1, size=(1, 60))
    b = a + 0.2
    c = compare(a, b)
    assert c.verdict == "holds"
    assert c.difference.high - c.difference.low < 0.05


def test_exact_sign_flip_p_value():
    # 5 theorems, all differences +1: only the all-plus and all-minus assignments are as extreme: 2/32
    p = permutation_p_value(np.ones(5), 1000, np.random.default_rng(0))
    assert p == pytest.approx(2 / 32)


def test_size_that_would_tell_grows_as_the_effect_shrinks():
    rng = np.random.default_rng(3)
    noise = rng.normal(0, 1, 50)
    big, small = theorems_needed(noise + 1.0), theorems_needed(noise + 0.1)
    assert big is not None and small is not None and small > big * 10


def test_bad_shapes_are_one_clear_error():
    with pytest.raises(ValueError, match="same seeds"):
        compare(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="NaN"):
        mean_interval([[0.0, float("nan")]])


def test_a_spread_between_seeds_asks_for_seeds_not_theorems():
    # each seed trains its own model: the difference is +0.10 on some seeds and -0.02 on others, whatever the
    # theorem; more theorems cannot average that away, more seeds can
    rng = np.random.default_rng(5)
    seed_part = np.array([0.10, -0.02, 0.12, -0.03, 0.06])
    a = rng.uniform(0.4, 0.6, (5, 100))
    b = a + seed_part[:, None] + rng.normal(0, 0.01, (5, 100))
    c = compare(a, b)
    assert c.verdict == "cannot tell at this size" and c.difference.low < 0 < c.difference.high
    assert c.theorems_needed is None and c.seeds_needed is not None and c.seeds_needed > 5
    # the theorems' spread alone would have asked for a handful of theorems
    assert theorems_needed((b - a).mean(axis=0)) < 10


def test_seeds_that_repeat_one_measurement_size_by_theorems_as_one_seed_does():
    rng = np.random.default_rng(6)
    per_theorem = rng.normal(0.05, 0.3, 60)
    a = np.zeros((4, 60))
    c = compare(a, a + per_theorem)
    assert c.seeds_needed is None and c.theorems_needed == theorems_needed(per_theorem)


def test_the_report_says_when_seeds_would_tell_and_theorems_would_not():
    from proofrl.bench.claims import get_claims
    from proofrl.bench.run import size_line

    claim = get_claims(["eva-ranking"])[0]
    rng = np.random.default_rng(5)
    a = rng.uniform(0.4, 0.6, (5, 100))
    c = compare(a, a + np.array([0.10, -0.02, 0.12, -0.03, 0.06])[:, None])
    line = size_line(claim, c)
    assert f"about {c.seeds_needed} seeds of these 100 {claim.unit} would" in line and "alone would not" in line


def test_a_difference_on_a_non_inferiority_bound_names_no_size():
    from proofrl.bench.claims import get_claims
    from proofrl.bench.run import size_line

    claim = get_claims(["kimina-format-reward"])[0]
    a = np.full((3, 40), 0.5)
    c = compare(a, a - 0.25, margin=0.25)  # B − A + δ = 0 on every theorem (exact in binary, unlike 0.05)
    assert (c.theorems_needed, c.seeds_needed) == (None, None)
    assert size_line(claim, c) == "The difference sits exactly on the claim's bound: no size follows from it."
