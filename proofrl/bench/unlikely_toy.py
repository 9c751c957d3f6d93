"""Rewarding the Unlikely's claims in its own toy environment (Appendix A), measured with :mod:`proofrl.toy`.

One toy run per seed serves all three (kept in ``OUT/unlikely-toy-shared``): the environment and the MLP policy π_0
drawn from the bench seed, then 200 GRPO steps of plain GRPO (``grpo-default``: β_rank 0, K = 1) and, from the same
π_0, of GRPO with the unlikeliness reward (``grpo-unlikeliness-1``: β_rank 0.25, K = 1, so the reward is the only
difference). The unit is a held-out state (the bench's size: states per seed, drawn once per seed). Training uses
τ = 1, as in the appendix. Every other setting is :class:`proofrl.toy.experiment.ToyConfig`'s default, the
``proofrl toy`` run of docs/toy.md.

* The two pass@N claims: a state's value is pass@32 at the hard threshold τ = 5, computed exactly from the
  policy's probabilities, 1 − (1 − p)^32 with p the mass π puts on the actions correct at τ = 5 (the estimator's
  expectation, without its sampling noise).
* The uplift claim: a state's value is the slope of the uplift 1{π_new > π_0} over the rank of its correct actions
  among G = 32 drawn once from π_0 (§3.5; the LM claim's :func:`proofrl.bench.unlikely.rank_slope`), on the states
  with at least two distinct correct actions.
"""

from __future__ import annotations

import json
import math

from .claim import Claim, ClaimRun, Results

STEPS = 200
"""GRPO steps (App. A: 200)"""

SMOKE_STEPS = 4

EVAL_TAU, N = 5.0, 32
"""pass@32 at τ = 5, the appendix's hard setting"""

SIZE = 256
"""held-out states per seed: ``proofrl toy``'s own evaluation states"""

ARMS = (("GRPO", "grpo-default"), ("GRPO + unlikeliness", "grpo-unlikeliness-1"))
"""claim arm → the toy variant trained for it"""

INITIAL = "initial policy"


def _toy_run(run: ClaimRun) -> dict[str, Results]:
    """This seed's toy run, once for all three claims: ``pass@32`` (π_0 and each variant's trained policy) and
    ``uplift slope`` (each variant), per held-out state."""
    import torch

    from ..toy.experiment import VARIANTS, ToyConfig, exact_pass_at_k, run_variant
    from .unlikely import rank_slope

    shared = run.shared_dir("unlikely-toy")
    cached = shared / f"{run.seed_key}-toy.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    steps = SMOKE_STEPS if run.smoke else STEPS
    cfg = ToyConfig(seeds=1, steps=steps, eval_states=run.size, eval_every=steps, seed=run.seed)

    def per_state(values: list[float]) -> dict[str, float]:
        return {f"state-{i:04d}": float(v) for i, v in enumerate(values)}

    passes: Results = {}
    slopes: Results = {}
    for arm, variant in ARMS:
        t = run_variant(VARIANTS[variant], cfg).trained
        assert t is not None  # run_variant always leaves its policies
        if INITIAL not in passes:
            passes[INITIAL] = per_state(exact_pass_at_k(t.initial, t.env, t.eval_states, EVAL_TAU, N)[0].tolist())
        passes[arm] = per_state(exact_pass_at_k(t.policy, t.env, t.eval_states, EVAL_TAU, N)[0].tolist())
        g = t.uplift_groups
        with torch.no_grad():
            new = t.policy(t.eval_states).gather(-1, g.actions)[0]  # (E, G)
        slopes[arm] = {}
        for i in range(g.actions.shape[1]):
            ok = g.correct[0, i]
            if len(set(g.actions[0, i][ok].tolist())) < 2:  # copies of one action say nothing about rank
                continue
            slope = rank_slope(g.init_logps[0, i], new[i], ok)
            if slope is not None and math.isfinite(slope):
                slopes[arm][f"state-{i:04d}"] = slope
    out = {"pass@32": passes, "uplift slope": slopes}
    shared.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(cached.name + ".tmp")  # a run killed while writing leaves no half-written cache
    tmp.write_text(json.dumps(out))
    tmp.replace(cached)
    return out


def toy_pass_at_32(run: ClaimRun) -> Results:
    """pass@32 at τ = 5 per held-out state of π_0 and of each variant's trained policy."""
    return _toy_run(run)["pass@32"]


def toy_uplift_slope(run: ClaimRun) -> Results:
    """Per held-out state with at least two distinct correct actions (at the training τ) among its G = 32 drawn
    from π_0: :func:`proofrl.bench.unlikely.rank_slope` of each variant's trained policy, the LM claim's metric."""
    return _toy_run(run)["uplift slope"]


SOURCE_A3 = (
    "App. A.3: trained with GRPO for 200 steps at τ = 1.0, pass@N at τ = 1.0 rises for every N, but at τ = 4.0 and "
    "τ = 5.0 'pass@32 deteriorates over training' (plots only, no numbers)."
)

SOURCE_A4 = (
    "App. A.4: the unlikeliness reward makes the uplift rates 'notably more uniform' and 'significantly improves "
    "pass@32 performance in the difficult setting τ = 5.0, contrasting sharply with default GRPO, whose pass@32 "
    "performance declines to near chance levels'; it also raises the policy's entropy (plots only, no numbers)."
)

SOURCE_UPLIFT = (
    "§3.5, Figure 4: under GRPO the uplift rate u_j rises with a correct sample's probability, the rarest correct "
    "samples 'almost never' uplifted (rank bias); App. A.3 finds the same in the toy; A.4: the unlikeliness reward "
    "'effectively neutralizes the rank bias, making the uplift rates notably more uniform' (plots only, no numbers)."
)

METRIC = "pass@32 at τ = 5 per held-out state, exact from the policy's probabilities (training at τ = 1)"

SETTINGS = {
    "steps": STEPS,
    "eval_tau": EVAL_TAU,
    "n": N,
    "variants": dict(ARMS),
    "other settings": "ToyConfig's defaults (docs/toy.md)",
}

CLAIMS: list[Claim] = [
    Claim(
        "unlikely-toy-grpo-pass32",
        "Rewarding the Unlikely",
        "In the toy, plain GRPO lowers pass@32 at the hard threshold τ = 5 over training.",
        SOURCE_A3,
        METRIC,
        INITIAL,
        "GRPO",
        direction=-1,
        run=toy_pass_at_32,
        size=SIZE,
        smoke_size=2,
        unit="states",
        settings=SETTINGS,
    ),
    Claim(
        "unlikely-toy-unlikeliness-pass32",
        "Rewarding the Unlikely",
        "In the toy, GRPO with the unlikeliness reward raises pass@32 at τ = 5 over plain GRPO.",
        SOURCE_A4,
        METRIC,
        "GRPO",
        "GRPO + unlikeliness",
        run=toy_pass_at_32,
        size=SIZE,
        smoke_size=2,
        unit="states",
        settings=SETTINGS,
    ),
    Claim(
        "unlikely-toy-uplift-rank",
        "Rewarding the Unlikely",
        "In the toy, the uplift rate falls with rank under GRPO and flattens with the unlikeliness reward.",
        SOURCE_UPLIFT,
        "slope of the uplift 1{π_new > π_0} over the rank (0 → 1) of a held-out state's correct actions (at τ = 1) "
        "among its 32 drawn from π_0 (negative: rank bias); states with ≥ 2 distinct correct actions",
        "GRPO",
        "GRPO + unlikeliness",
        run=toy_uplift_slope,
        size=SIZE,
        smoke_size=2,
        unit="states",
        settings=SETTINGS | {"uplift_group": 32},
    ),
]
