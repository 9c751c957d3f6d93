"""Paired statistics for a claim's arms: means with 95 % intervals, the paired difference, a permutation test,
and a verdict with the size that would tell.

Every arm of a claim is measured on the same theorems under the same seeds, so an arm's results form a matrix
``x[s, t]`` (seed ``s``, theorem ``t``: a 0/1 proved flag, a pass@N estimate, a Prec@8 …). Comparing arm B with
arm A uses the paired differences ``d[s, t] = b[s, t] − a[s, t]``:

- intervals come from a two-level bootstrap: seeds are resampled, then theorems, with the *same* indices for
  both arms, so the pairing survives resampling (the variance of the difference is not that of two independent
  means);
- the p-value is a sign-flip permutation test on the per-theorem mean differences ``d̄_t`` (the theorem is the
  exchangeable unit: under "no effect" the label of the arm is arbitrary within a theorem), two-sided;
- the size that would tell is the number of theorems at which a two-sided 5 % test has 80 % power for the
  observed effect, at the same number of seeds. The differences are read as ``d[s, t] = μ + a_s + b_t + e[s, t]``
  (a seed's part, a theorem's part, the rest; their variances σ²_s, σ²_t, σ²_e estimated from the two-way
  mean squares), so the mean over ``S`` seeds and ``n`` theorems varies by ``σ²_s/S + σ²_t/n + σ²_e/(S·n)``, the
  spread the two-level bootstrap resamples (σ²_s counted only where the seeds' F-test gives p < 0.25, else pooled
  into σ²_e). The size is the ``n`` at which that variance falls to ``(|mean d| / (z₀.₉₇₅ + z₀.₈))²``. With one
  seed, or seeds that add no spread of their own, this is ``n = ((z₀.₉₇₅ + z₀.₈) · sd(d̄_t) / |mean d|)²``. Where
  the seeds' own spread σ²_s/S alone exceeds that bound (a model trained per seed that lands differently each
  time), no number of theorems tells, and the size is given in seeds instead: the ``S`` at which the variance
  falls to the bound with the theorems there are.

A non-inferiority claim ("B does not lower the metric by more than a margin δ") is the claim
``direction·(B − A) > −δ``: the same rule, with the differences shifted by δ (``d + δ``) for the test, the
interval's side and the size that would tell; δ = 0 is the ordinary claim. Such a claim can only hold where
the baseline's interval lies above δ: where the baseline is within δ of 0, an arm that proved nothing at all
would pass the same bound, so the comparison cannot tell "not worse" from "useless".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

Z_975 = 1.959963984540054
Z_80 = 0.8416212335729143
Verdict = Literal["holds", "does not hold", "cannot tell at this size"]


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class Comparison:
    """Arm B against arm A, where the claim says B > A (``direction=+1``) or B < A (``direction=-1``)."""

    a: Interval
    b: Interval
    difference: Interval
    """B − A, paired"""
    p_value: float
    verdict: Verdict
    theorems: int
    seeds: int
    theorems_needed: int | None
    """theorems at which this effect would be detected at these seeds (80 % power, 5 % two-sided); None when no
    effect was seen, or when the seeds' own spread is too large for any number of theorems"""
    margin: float = 0.0
    """δ of a non-inferiority claim (``direction·(B − A) > −δ``); the p-value and the size that would tell are
    then about ``d + direction·δ``"""
    seeds_needed: int | None = None
    """where no number of theorems would tell at these seeds: the seeds at which this effect would be detected
    with these theorems (None when more seeds alone would not either, or when theorems would)"""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _matrix(x: Any) -> np.ndarray:
    m = np.asarray(x, dtype=float)
    if m.ndim == 1:
        m = m[None, :]
    if m.ndim != 2 or m.size == 0:
        raise ValueError(f"an arm's results must be a non-empty seeds × theorems matrix, got shape {m.shape}")
    if not np.isfinite(m).all():
        raise ValueError("an arm's results contain NaN or infinity")
    return m


def _bootstrap_means(mats: list[np.ndarray], rounds: int, rng: np.random.Generator) -> np.ndarray:
    """``rounds × len(mats)`` means, each round resampling seeds then theorems with shared indices."""
    seeds, theorems = mats[0].shape
    out = np.empty((rounds, len(mats)))
    for r in range(rounds):
        si = rng.integers(0, seeds, size=seeds)
        ti = rng.integers(0, theorems, size=theorems)
        for k, m in enumerate(mats):
            out[r, k] = m[np.ix_(si, ti)].mean()
    return out


def _interval(point: float, samples: np.ndarray) -> Interval:
    low, high = np.quantile(samples, [0.025, 0.975])
    return Interval(float(point), float(low), float(high))


def permutation_p_value(per_theorem_diff: np.ndarray, rounds: int, rng: np.random.Generator) -> float:
    """Two-sided sign-flip test of ``mean(d̄_t) = 0``; exact when there are at most 16 theorems with a
    non-zero difference, else ``rounds`` random flips (with the observed assignment counted, so p > 0)."""
    d = per_theorem_diff[per_theorem_diff != 0]
    if d.size == 0:
        return 1.0
    observed = abs(d.mean())
    if d.size <= 16:
        signs = ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        stats = np.abs((signs * d).mean(axis=1))
        return float((stats >= observed - 1e-12).mean())
    signs = rng.choice([-1.0, 1.0], size=(rounds, d.size))
    stats = np.abs((signs * d).mean(axis=1))
    return float((1 + (stats >= observed - 1e-12).sum()) / (rounds + 1))


def theorems_needed(per_theorem_diff: np.ndarray) -> int | None:
    """Theorems at which a two-sided 5 % test has 80 % power for the observed mean difference (one seed)."""
    return sizes_needed(per_theorem_diff[None, :])[0]


POOL_ALPHA = 0.25
"""the seeds' part is counted only where an F-test rejects "no seed part" at this level, else pooled into the
rest (Bancroft's sometimes-pool rule, whose usual level this is): from a few seeds, a part estimated from noise
alone would otherwise decide the size"""


def variance_components(diff: np.ndarray) -> tuple[float, float, float]:
    """σ²_s, σ²_t, σ²_e of ``d[s, t] = μ + a_s + b_t + e[s, t]`` from the two-way mean squares (a negative
    estimate is 0; σ²_s is 0 unless the seeds' F-test gives p < :data:`POOL_ALPHA`). With one seed σ²_s is 0
    and σ²_t + σ²_e is the theorems' variance; with one theorem σ²_t is 0 and σ²_s + σ²_e the seeds'."""
    from scipy.stats import f

    seeds, theorems = diff.shape
    by_seed, by_theorem = diff.mean(axis=1), diff.mean(axis=0)
    if seeds == 1 or theorems == 1:
        spread = float(np.var(diff, ddof=1)) if diff.size > 1 else 0.0
        return (0.0, spread, 0.0) if seeds == 1 else (spread, 0.0, 0.0)
    df_s, df_e = seeds - 1, (seeds - 1) * (theorems - 1)
    resid = diff - by_seed[:, None] - by_theorem[None, :] + diff.mean()
    ms_e = float((resid**2).sum()) / df_e
    ms_s = theorems * float(np.var(by_seed, ddof=1))
    ms_t = seeds * float(np.var(by_theorem, ddof=1))
    seed_part = ms_s > ms_e and (ms_e == 0.0 or float(f.sf(ms_s / ms_e, df_s, df_e)) < POOL_ALPHA)
    if not seed_part:
        ms_e = (df_s * ms_s + df_e * ms_e) / (df_s + df_e)
    return (ms_s - ms_e) / theorems if seed_part else 0.0, max(0.0, (ms_t - ms_e) / seeds), ms_e


def sizes_needed(diff: np.ndarray) -> tuple[int | None, int | None]:
    """(theorems at these seeds, seeds at these theorems) at which a two-sided 5 % test has 80 % power for the
    mean of ``diff`` (seeds × theorems): theorems where more theorems can tell, else seeds where more seeds can,
    else neither (and (None, None) when no effect was seen)."""
    effect = abs(float(diff.mean()))
    if effect == 0.0:
        return None, None
    seeds, theorems = diff.shape
    var_s, var_t, var_e = variance_components(diff)
    bound = (effect / (Z_975 + Z_80)) ** 2
    if var_s / seeds < bound:
        spread = var_t + var_e / seeds
        return (max(2, math.ceil(spread / (bound - var_s / seeds))) if spread > 0 else theorems), None
    if var_t / theorems < bound:
        return None, max(seeds + 1, math.ceil((var_s + var_e / theorems) / (bound - var_t / theorems)))
    return None, None


def compare(
    a: Any, b: Any, *, direction: int = 1, margin: float = 0.0, rounds: int = 2000, seed: int = 0
) -> Comparison:
    """Arm ``b`` against arm ``a`` (``seeds × theorems`` each, same order); the claim is
    ``direction·(B − A) > −margin`` (``margin`` 0: B better than A; ``margin`` δ > 0: B not worse than A by δ or
    more, a non-inferiority claim).

    ``holds`` when the 95 % interval of ``direction·(B − A) + margin`` lies above 0 and the permutation test of
    ``B − A = −direction·margin`` agrees (p < 0.05); ``does not hold`` when the interval lies below 0 with
    p < 0.05; else ``cannot tell at this size``, with :attr:`Comparison.theorems_needed`. A non-inferiority claim
    (higher is better) holds only when A's interval also lies above δ (:func:`baseline_within_margin`).
    """
    if direction not in (1, -1):
        raise ValueError("direction must be +1 (B > A) or -1 (B < A)")
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0, got {margin}")
    ma, mb = _matrix(a), _matrix(b)
    if ma.shape != mb.shape:
        raise ValueError(f"paired arms need the same seeds × theorems, got {ma.shape} and {mb.shape}")
    rng = np.random.default_rng(seed)
    diff = mb - ma
    boot = _bootstrap_means([ma, mb, diff], rounds, rng)
    ia, ib, idiff = (_interval(float(m.mean()), boot[:, k]) for k, m in enumerate((ma, mb, diff)))
    shifted = diff.mean(axis=0) + direction * margin  # 0 where B − A sits exactly on the claim's bound
    p = permutation_p_value(shifted, rounds, rng)
    signed_low, signed_high = sorted((direction * idiff.low + margin, direction * idiff.high + margin))
    if signed_low > 0 and p < 0.05 and not baseline_within_margin(ia, direction, margin):
        verdict: Verdict = "holds"
    elif signed_high < 0 and p < 0.05:
        verdict = "does not hold"
    else:
        verdict = "cannot tell at this size"
    n_theorems, n_seeds = sizes_needed(diff + direction * margin)
    return Comparison(ia, ib, idiff, p, verdict, ma.shape[1], ma.shape[0], n_theorems, margin, n_seeds)


def baseline_within_margin(a: Interval, direction: int, margin: float) -> bool:
    """For a non-inferiority claim where higher is better: the baseline's 95 % interval reaches down to the
    margin δ, so an arm scoring 0 everywhere would be "not worse by δ" too and the claim cannot hold."""
    return margin > 0 and direction > 0 and a.low <= margin


def mean_interval(x: Any, *, rounds: int = 2000, seed: int = 0) -> Interval:
    """One arm's mean with its 95 % two-level bootstrap interval."""
    m = _matrix(x)
    boot = _bootstrap_means([m], rounds, np.random.default_rng(seed))
    return _interval(float(m.mean()), boot[:, 0])
