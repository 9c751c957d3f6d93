"""Time the full rank-bias toy experiment: every variant × 5 seeds × 200 GRPO steps.

    python benchmarks/toy_experiment.py [--out runs/bench-toy] [--threads 1] [--seeds 5] [--steps 200]
    python benchmarks/toy_experiment.py --smoke      # 1 seed x 4 steps: seconds

Prints the wall time (training, evaluation, records, plots and report) and the time per GRPO step split into
sampling (policy forward + drawing the group), reward (environment, skip rule, unlikeliness reward,
advantages) and update (K PPO epochs), per batched step of all seeds and per seed. Target: < 60 s on 2 cores
(the ``ratio:`` line is wall time / 60 s).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from _bench import SMOKE_ROOT, add_smoke, ratio

from proofrl.toy.experiment import ToyConfig
from proofrl.toy.run import run_experiment


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/bench-toy"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.seeds, args.steps, args.out = 1, 4, SMOKE_ROOT / "toy"
    cfg = ToyConfig(seeds=args.seeds, steps=args.steps)
    (args.out / "runs.jsonl").unlink(missing_ok=True)  # a benchmark times every variant: nothing kept from before
    run = run_experiment(cfg, None, args.out, threads=args.threads, show_progress=False)
    t = run.timings
    n = t.steps  # batched steps (variants × steps), each covering every seed
    print(f"cpus visible: {os.cpu_count()}, torch threads: {args.threads}")
    print(f"wall time: {run.wall_s:.2f} s for {n // cfg.steps} variants × {cfg.seeds} seeds × {cfg.steps} steps")
    print(
        f"  training {t.sampling + t.reward + t.update:.2f} s, evaluation {t.eval:.2f} s, "
        f"rest (records, plots, report) {run.wall_s - t.sampling - t.reward - t.update - t.eval:.2f} s"
    )
    print("per GRPO step (all seeds batched) | per seed-step:")
    for name in ("sampling", "reward", "update"):
        v = getattr(t, name)
        print(f"  {name:8s} {1e3 * v / n:7.3f} ms | {1e3 * v / (n * cfg.seeds):7.3f} ms")
    total = t.sampling + t.reward + t.update
    print(f"  {'total':8s} {1e3 * total / n:7.3f} ms | {1e3 * total / (n * cfg.seeds):7.3f} ms")
    ratio("wall time / 60 s target", run.wall_s / 60)


if __name__ == "__main__":
    main()
