"""Rewarding the Unlikely's claims: pass@N with the unlikeliness reward, the uplift rate over rank, PPO epochs."""

from __future__ import annotations

from .claim import NOT_QUOTED, Claim, ClaimRun, Results

# -- Rewarding the Unlikely: the unlikeliness reward against plain GRPO at large N ----------------------------

UNLIKELY = {"eval_problems": 48, "eval_samples": 32, "rl_steps": 12, "sft_epochs": 12}
"""the whole-proof demo's run (:class:`proofrl.demo.whole_proof.DemoConfig` defaults, the ``demo`` recipe: the
unlikeliness recipe scaled down): 48 held-out theorems, 32 samples each, 12 GRPO steps per arm"""


def unlikeliness_pass_at_n(run: ClaimRun) -> Results:
    """The whole-proof demo (:func:`proofrl.demo.whole_proof.run_demo`): the same split, held-out theorems and
    taught SFT model for every seed (the demo's seed 0), then GRPO plain and with the unlikeliness reward
    (β_rank 0.25) from it, the recipe seeded with ``run.seed``; the value is pass@32 per held-out theorem: 1
    when one of its 32 samples passed the final check (N = 32 samples, so the estimate is exact)."""
    import json

    from ..demo.whole_proof import DemoConfig, run_demo

    small = {"eval_problems": run.size, "sft_epochs": 2, "rl_steps": 1, "eval_samples": 4}
    s = UNLIKELY | (small if run.smoke else {"eval_problems": run.size})
    overrides = [f"seed={run.seed}", f"eval.samples={s['eval_samples']}", f"eval.ks=[1, {s['eval_samples']}]"]
    if run.smoke:
        overrides += [
            "rollout.problems_per_step=2",
            "rollout.group_size=2",
            "rollout.max_tokens=24",
            "eval.max_tokens=24",
        ]
    model = {"hidden": 64, "layers": 1, "heads": 4, "vocab_size": 512} if run.smoke else DemoConfig().model
    cfg = DemoConfig(
        out=run.out,
        seed=0,
        eval_problems=s["eval_problems"],
        sft_epochs=s["sft_epochs"],
        rl_steps=s["rl_steps"],
        workers=run.workers,
        overrides=tuple(overrides),
        model=model,
    )
    run_demo(cfg, console=run.console)
    out: Results = {}
    for arm, label in (("GRPO", "grpo"), ("GRPO + unlikeliness", "grpo-unlikeliness")):
        solved: dict[str, float] = {}
        for line in (run.out / f"samples-{label}.jsonl").read_text().splitlines():
            r = json.loads(line)
            solved[r["name"]] = max(solved.get(r["name"], 0.0), float(r["status"] == "valid"))
        out[arm] = solved
    return out


CLAIMS: list[Claim] = [
    Claim(
        "unlikely-passN",
        "Rewarding the Unlikely",
        "GRPO with the unlikeliness reward raises pass@N at large N over plain GRPO.",
        "Figure 2: GRPO from DeepSeek-Prover-V1.5-SFT improves pass@1..16 but is below the base model at large N; "
        "the unlikeliness reward improves pass@N across N up to 512 on their validation set.",
        "pass@32 per held-out theorem (32 samples, final check in Coq)",
        "GRPO",
        "GRPO + unlikeliness",
        run=unlikeliness_pass_at_n,
        size=48,
        smoke_size=2,
        settings=dict(UNLIKELY),
    ),
    Claim(
        "unlikely-uplift-rank",
        "Rewarding the Unlikely",
        "The uplift rate falls with rank under GRPO and flattens with the unlikeliness reward.",
        NOT_QUOTED,
        "uplift-rate slope over rank per seed",
        "GRPO",
        "GRPO + unlikeliness",
    ),
    Claim(
        "unlikely-ppo-epochs",
        "Rewarding the Unlikely",
        "More PPO epochs per batch raise pass@N.",
        NOT_QUOTED,
        "pass@32 estimate per held-out theorem",
        "1 epoch",
        "2 epochs",
    ),
]
