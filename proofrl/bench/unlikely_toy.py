"""Rewarding the Unlikely's two claims in its own toy environment (Appendix A), measured with :mod:`proofrl.toy`.

One toy run per seed serves both (kept in ``OUT/unlikely-toy-shared``): the environment and the MLP policy π_0 drawn
from the bench seed, then 200 GRPO steps of plain GRPO (``grpo-default``: β_rank 0, K = 1) and, from the same π_0,
of GRPO with the unlikeliness reward (``grpo-unlikeliness-1``: β_rank 0.25, K = 1, so the reward is the only
difference). The unit is a held-out state (the bench's size: states per seed, drawn once per seed); its value is
pass@32 at the hard threshold τ = 5, computed exactly from the policy's probabilities, 1 − (1 − p)^32 with p the
mass π puts on the actions correct at τ = 5 (the estimator's expectation, without its sampling noise). Training
uses τ = 1, as in the appendix. Every other setting is :class:`proofrl.toy.experiment.ToyConfig`'s default, the
``proofrl toy`` run of docs/toy.md.
"""

from __future__ import annotations

import json

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


def toy_pass_at_32(run: ClaimRun) -> Results:
    """pass@32 at τ = 5 per held-out state of π_0 and of each variant's trained policy, one run for both claims."""
    from ..toy.experiment import VARIANTS, ToyConfig, exact_pass_at_k, run_variant

    shared = run.shared_dir("unlikely-toy")
    cached = shared / f"{run.seed_key}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    steps = SMOKE_STEPS if run.smoke else STEPS
    cfg = ToyConfig(seeds=1, steps=steps, eval_states=run.size, eval_every=steps, seed=run.seed)

    def per_state(values: list[float]) -> dict[str, float]:
        return {f"state-{i:04d}": float(v) for i, v in enumerate(values)}

    out: Results = {}
    for arm, variant in ARMS:
        trained = run_variant(VARIANTS[variant], cfg).trained
        assert trained is not None  # run_variant always leaves its policies
        if INITIAL not in out:
            out[INITIAL] = per_state(
                exact_pass_at_k(trained.initial, trained.env, trained.eval_states, EVAL_TAU, N)[0].tolist()
            )
        out[arm] = per_state(exact_pass_at_k(trained.policy, trained.env, trained.eval_states, EVAL_TAU, N)[0].tolist())
    shared.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(out))
    return out


SOURCE_A3 = (
    "App. A.3: trained with GRPO for 200 steps at τ = 1.0, pass@N at τ = 1.0 rises for every N, but at τ = 4.0 and "
    "τ = 5.0 'pass@32 deteriorates over training' (plots only, no numbers)."
)

SOURCE_A4 = (
    "App. A.4: the unlikeliness reward makes the uplift rates 'notably more uniform' and 'significantly improves "
    "pass@32 performance in the difficult setting τ = 5.0, contrasting sharply with default GRPO, whose pass@32 "
    "performance declines to near chance levels'; it also raises the policy's entropy (plots only, no numbers)."
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
]
