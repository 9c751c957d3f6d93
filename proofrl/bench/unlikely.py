"""Rewarding the Unlikely's claims: pass@N with the unlikeliness reward, the uplift rate over rank, PPO epochs.

All three read one whole-proof demo run per seed (:func:`shared_demo`, kept in ``OUT/unlikely-shared``): the SFT
model taught once (the demo's seed 0, the same for every seed), then GRPO plain and with the unlikeliness reward
from it, the ``demo`` recipe seeded with the bench seed. The PPO-epochs claim adds one run, plain GRPO with one
PPO epoch instead of the recipe's two, from the same SFT model.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from .claim import Claim, ClaimRun, Results

UNLIKELY = {"eval_problems": 48, "eval_samples": 32, "rl_steps": 12, "sft_epochs": 12}
"""the whole-proof demo's run (:func:`proofrl.demo.whole_proof.demo_config`, the ``demo`` recipe: the
unlikeliness recipe scaled down, 2 PPO epochs, β_KL 0.1): 48 held-out theorems, 32 samples each, 12 GRPO steps
per arm"""

SMOKE = {"eval_problems": 2, "eval_samples": 4, "rl_steps": 1, "sft_epochs": 2}

UPLIFT = {"train_theorems": 160, "group_size": 16, "seed": 11}
"""the uplift groups: G = 16 samples of the SFT model π_0 (the recipe's rollout temperature and length) on a fixed
draw of 160 training theorems, the same samples for every seed"""

HELD_OUT_CLAIM_SETTINGS = {k: v for k, v in UNLIKELY.items() if k != "eval_problems"}
"""what the pass@N and PPO-epochs claims report beside their size: the run's settings less the held-out count, which
is their size (a plan may set another)"""

ARMS = (("GRPO", "grpo"), ("GRPO + unlikeliness", "grpo-unlikeliness"))
"""claim arm → the demo's GRPO run of that name"""


def _sizes(smoke: bool) -> dict[str, int]:
    return SMOKE if smoke else UNLIKELY


def _held_out(run: ClaimRun, size: int | None) -> int:
    """Held-out theorems the shared demo run evaluates: ``size`` (the pass@N claims' own, which a plan may set
    above the demo's 48), else the demo's."""
    return _sizes(run.smoke)["eval_problems"] if size is None else size


def _demo_config(
    run: ClaimRun, out: Path, *, sft_model: Path | None, epochs: int | None = None, held_out: int | None = None
) -> tuple[Any, dict[str, Any]]:
    """The demo's run for this bench run (:func:`proofrl.demo.whole_proof.demo_config`, seeded with the bench seed)
    and :func:`~proofrl.demo.whole_proof.run_demo`'s keyword arguments (the split, held-out draw and SFT model:
    the demo's seed 0); ``epochs`` overrides the recipe's PPO epochs (then plain GRPO only); ``held_out``: the
    theorems evaluated (:func:`_held_out`)."""
    from ..demo.whole_proof import MODEL, demo_config

    s = _sizes(run.smoke)
    overrides = [
        f"out={out}",
        f"steps={s['rl_steps']}",
        f"data.eval_limit={_held_out(run, held_out)}",
        f"verify.workers={run.workers}",
        f"seed={run.seed}",
        f"eval.samples={s['eval_samples']}",
        f"eval.ks=[1, {s['eval_samples']}]",
    ]
    if run.smoke:
        overrides += [
            "rollout.problems_per_step=2",
            "rollout.group_size=2",
            "rollout.max_tokens=24",
            "eval.max_tokens=24",
        ]
    if epochs is not None:
        overrides.append(f"ppo.epochs={epochs}")
    model = {"hidden": 64, "layers": 1, "heads": 4, "vocab_size": 512} if run.smoke else MODEL
    return demo_config(overrides), {
        "seed": 0,
        "sft_epochs": s["sft_epochs"],
        "model": model,
        "sft_model": sft_model,
        "variants": ("grpo",) if epochs is not None else ("grpo", "grpo-unlikeliness"),
    }


def _shared(run: ClaimRun, held_out: int | None = None) -> tuple[Path, str]:
    """``OUT/unlikely-shared`` and this seed's tag in it (``-eval-N`` where the run evaluates another number of
    held-out theorems than the demo's)."""
    n = _held_out(run, held_out)
    other = f"-eval-{n}" if n != _sizes(run.smoke)["eval_problems"] else ""
    return run.shared_dir("unlikely"), f"seed-{run.seed}{other}{run.smoke_suffix}"


def _sft_model(run: ClaimRun) -> Path:
    shared, _ = _shared(run)
    return shared / f"sft-model{run.smoke_suffix}"


def shared_demo(run: ClaimRun, held_out: int | None = None) -> Path:
    """This seed's whole-proof demo run (its folder), run once for all three claims (once per ``held_out`` size,
    :func:`_held_out`). The first seed to run teaches the SFT model (the demo's seed 0) and keeps it in
    ``unlikely-shared``; later seeds load it instead of teaching the same model again."""
    from ..demo.whole_proof import run_demo

    shared, tag = _shared(run, held_out)
    work = shared / tag
    if (work / "summary.json").is_file():  # written last: the run finished
        return work
    sft = _sft_model(run)
    cfg, kw = _demo_config(run, work, sft_model=sft if sft.is_dir() else None, held_out=held_out)
    run_demo(cfg, console=run.console, **kw)
    if not sft.is_dir():
        tmp = sft.with_name(sft.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(work / "sft-model", tmp)
        tmp.rename(sft)
    return work


def pass_at_n(samples_jsonl: Path) -> dict[str, float]:
    """Per theorem of an evaluation's samples file: 1 when one of its N samples passed the final check (pass@N
    with N = the samples drawn, so the estimate is exact)."""
    solved: dict[str, float] = {}
    for line in samples_jsonl.read_text().splitlines():
        r = json.loads(line)
        solved[r["name"]] = max(solved.get(r["name"], 0.0), float(r["status"] == "valid"))
    return solved


def unlikeliness_pass_at_n(run: ClaimRun) -> Results:
    """pass@32 per held-out theorem after GRPO plain and with the unlikeliness reward (β_rank 0.25) of the
    shared demo run (:func:`shared_demo`): the claim's size in held-out theorems (the demo's 48 by default), the
    same for every seed."""
    work = shared_demo(run, run.size)
    return {arm: pass_at_n(work / f"samples-{label}.jsonl") for arm, label in ARMS}


# -- the uplift rate over rank, per theorem -------------------------------------------------------------------


def rank_slope(init_logps: Any, new_logps: Any, correct: Any) -> float | None:
    """How the uplift falls with rank on one theorem's group of G samples from π_0: the least-squares slope of
    1{log π_new(y) > log π_0(y)} (:func:`proofrl.eval.uplift.uplift_rate` on this one group) over the rank of
    the group's correct samples under π_0 (the paper's "rank among positive samples"), scaled to [0, 1] (0: the
    most likely correct sample, 1: the least likely). Rank bias (the uplift falls with rank) is a negative slope,
    a flat uplift 0. ``None`` when fewer than two samples are correct. ``init_logps, new_logps, correct: (G,)``."""
    import torch

    from ..eval.uplift import uplift_rate

    init, new = torch.as_tensor(init_logps, dtype=torch.float64), torch.as_tensor(new_logps, dtype=torch.float64)
    ok = torch.as_tensor(correct).bool()
    u = uplift_rate(init[None], new[None], ok[None])
    up = [r for r, c in zip(u.rates, u.counts, strict=True) if c]  # the correct samples, most likely first
    m = len(up)
    if m < 2:
        return None
    x = [j / (m - 1) for j in range(m)]
    mx, mu = sum(x) / m, sum(up) / m
    return sum((a - mx) * (b - mu) for a, b in zip(x, up, strict=True)) / sum((a - mx) ** 2 for a in x)


def distinct_correct(group: Any) -> int:
    """Distinct correct samples (by their tokens) in a judged group: a theorem counts when it has two, since
    copies of one sample share its log-probs and its uplift, and say nothing about rank."""
    return len({tuple(c.token_ids) for c, ok in zip(group.completions, group.correct, strict=True) if ok})


_GROUPS: dict[tuple[str, int, int, int], Any] = {}
"""the uplift groups by (SFT weights' digest, theorems, G, sampling seed): every seed samples the same SFT model
with the same seed, so a bench process draws and judges them once"""


def _digest(folder: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for f in sorted(folder.glob("*.safetensors")):
        h.update(f.read_bytes())
    return h.hexdigest()


def uplift_groups(run: ClaimRun, theorems: int) -> tuple[Any, Any, list[Any]]:
    """The SFT model, its tokenizer and G samples of it per training theorem (a seeded draw of ``theorems`` of the
    demo's training theorems), each judged by Coq."""
    import torch

    from ..demo.whole_proof import demo_problems
    from ..eval.evaluate import evaluate
    from ..policy.generation import HFGenerator
    from ..policy.model import load_policy
    from ..policy.prompts import get_format
    from ..train.whole_proof import make_verifier

    sft = _sft_model(run)
    model, tok = load_policy(sft, device="cpu")
    g = UPLIFT["group_size"] if not run.smoke else 4
    key = (_digest(sft), theorems, g, UPLIFT["seed"])
    if key not in _GROUPS:
        recipe, kw = _demo_config(run, run.out, sft_model=sft)
        train, _ = demo_problems(recipe, seed=kw["seed"])
        pick = torch.randperm(len(train), generator=torch.Generator().manual_seed(UPLIFT["seed"]))[:theorems]
        problems = [train[i] for i in sorted(pick.tolist())]
        verifier = make_verifier(recipe)
        try:
            r = recipe.rollout
            res = evaluate(
                HFGenerator(model, tok, batch_size=64),
                problems,
                get_format(r.prompt_format),
                verifier,
                n=g,
                ks=(1,),
                temperature=r.temperature,
                top_p=r.top_p,
                max_tokens=r.max_tokens,
                seed=UPLIFT["seed"],
                tokenizer=tok,
                label="uplift groups",
            )
        finally:
            verifier.close()
        _GROUPS[key] = res.groups
    return model, tok, _GROUPS[key]


def uplift_over_rank(run: ClaimRun) -> Results:
    """Per training theorem with at least two distinct correct samples among its G samples from the SFT model
    π_0: :func:`rank_slope` of the model after GRPO and after GRPO with the unlikeliness reward (the shared demo
    run's last checkpoints) over π_0. The same samples, hence the same theorems, for every seed and arm."""
    import torch

    from ..eval.evaluate import sequence_logps
    from ..policy.model import load_policy
    from ..train.checkpoints import latest

    work = shared_demo(run)
    cached = work / f"uplift-rank-{run.size}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    model, tok, groups = uplift_groups(run, run.size)
    init = sequence_logps(model, tok, groups)
    correct = torch.tensor([grp.correct for grp in groups], dtype=torch.bool)
    out: Results = {}
    for arm, label in ARMS:
        ckpt = latest(work / label / "checkpoints", "step_")
        if ckpt is None:
            raise RuntimeError(f"{work / label}: the GRPO run left no checkpoint")
        trained, _ = load_policy(ckpt, device="cpu")
        new = sequence_logps(trained, tok, groups)
        slopes = {
            grp.item.problem.name: rank_slope(init[i], new[i], correct[i])
            for i, grp in enumerate(groups)
            if distinct_correct(grp) >= 2
        }
        out[arm] = {name: s for name, s in slopes.items() if s is not None and math.isfinite(s)}
    cached.write_text(json.dumps(out))
    return out


# -- PPO epochs: 1 against the recipe's 2, plain GRPO -----------------------------------------------------------


def ppo_epochs(run: ClaimRun) -> Results:
    """pass@32 per held-out theorem after plain GRPO with 1 PPO epoch (``ppo.epochs=1``, run here from
    the shared SFT model) and with the recipe's 2 (the shared demo run's plain GRPO arm: the same SFT model,
    seed and settings but K)."""
    from ..demo.whole_proof import run_demo

    work = shared_demo(run, run.size)
    one = work.with_name(work.name + "-ppo-epochs-1")
    if not (one / "summary.json").is_file():
        cfg, kw = _demo_config(run, one, sft_model=_sft_model(run), epochs=1, held_out=run.size)
        run_demo(cfg, console=run.console, **kw)
    return {"1 epoch": pass_at_n(one / "samples-grpo.jsonl"), "2 epochs": pass_at_n(work / "samples-grpo.jsonl")}


PAPER_PPO_EPOCHS = (
    "Table 2 (one pass over D_train, 9600 problems × 32 samples): static SFT 7707 solved, GRPO-Default (K = 1, "
    "β_KL 0.02) 7860, GRPO-Epochs-2 (K = 2, β_KL 0.10) 8008, GRPO-Epochs-3 8006; Figure 5: more PPO epochs raise "
    "pass@N on D_val (a plot); App. B.1: the policy update takes ≈ 70 s per batch at K = 1, ≈ 140 s at K = 2. "
    "Their K = 1 baseline also has the lower β_KL; here only K differs (β_KL 0.1 in both)."
)

PAPER_UPLIFT = (
    "§3.5, Figure 4 (training samples of the first 800 problems, final GRPO model against π_0): the uplift rate "
    "u_j rises with probability: GRPO 'almost never' uplifts the lowest-ranked correct samples; §5.2, Figure 6: "
    "GRPO-Unlikeliness-2 (β_rank 0.25, K = 2) reverses the pattern; App. A.4 (toy): the reward makes the rates "
    "'notably more uniform'. The paper gives u_j as plots only, no numbers."
)

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
        size=UNLIKELY["eval_problems"],
        smoke_size=SMOKE["eval_problems"],
        settings=dict(HELD_OUT_CLAIM_SETTINGS),
    ),
    Claim(
        "unlikely-uplift-rank",
        "Rewarding the Unlikely",
        "The uplift rate falls with rank under GRPO and flattens with the unlikeliness reward.",
        PAPER_UPLIFT,
        "slope of the uplift 1{π_new > π_0} over the rank (0 → 1) of a training theorem's correct samples among its "
        "16 from the SFT model π_0 (negative: rank bias); theorems with ≥ 2 distinct correct samples",
        "GRPO",
        "GRPO + unlikeliness",
        run=uplift_over_rank,
        size=UPLIFT["train_theorems"],
        smoke_size=2,
        settings=dict(UNLIKELY) | {"uplift_" + k: v for k, v in UPLIFT.items() if k != "train_theorems"},
    ),
    Claim(
        "unlikely-ppo-epochs",
        "Rewarding the Unlikely",
        "More PPO epochs per batch raise pass@N.",
        PAPER_PPO_EPOCHS,
        "pass@32 per held-out theorem (32 samples, final check in Coq) after plain GRPO",
        "1 epoch",
        "2 epochs",
        run=ppo_epochs,
        size=UNLIKELY["eval_problems"],
        smoke_size=SMOKE["eval_problems"],
        settings=HELD_OUT_CLAIM_SETTINGS | {"ppo_epochs": [1, 2]},
    ),
]
