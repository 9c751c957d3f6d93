"""Search-and-learn on the Coq standard library with the tiny tactic model: held-out theorems proved at a fixed
search budget after each round, policy+value against policy-only, from the same starting checkpoint.

    python benchmarks/expert_iteration.py --assets ROOT --out OUT [--rounds 3] [--set key=value ...]
    python benchmarks/expert_iteration.py --smoke   # the tiny smoke tactic assets, one round of tiny searches: seconds

``ROOT`` holds (or gets) the shared ``tactic-assets/`` (``proofrl.data.assets.tactic_assets``): its tiny tactic
model is the starting checkpoint of both arms and its held-out theorems (100) are the evaluation set. They are
copied once into ``OUT/start/`` (model, problem lists, training transitions), so both arms start from the same
files even if the shared folder is rebuilt meanwhile. The two
arms run side by side as two processes (``--parallel``, the default; one Coq process and one torch thread each)
in ``OUT/policy+value`` and ``OUT/policy-only``; a rerun resumes them. Prints one table with both arms per
round and writes ``OUT/results.json`` and ``OUT/proved_by_round.png``. The ``ratio:`` line is policy+value /
policy-only held-out theorems proved after the last round.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _bench import SMOKE_ROOT, add_smoke, div, need_coq, ratio, smoke_assets

SMOKE = [
    "search.width=2",
    "search.max_steps=2",
    "search.max_nodes=8",
    "search.seconds=5",
    "rollout.problems_per_step=2",
    "rollout.passes=1",
    "optim.epochs=1",
    "replay.max_samples=32",
    "eval.limit=2",
]
"""``--smoke``: recipe overrides for one round in seconds"""

ARMS = {"policy+value": ["model.value_head=true"], "policy-only": ["model.value_head=false"]}


def snapshot(assets: Path, out: Path) -> Path:
    """Copy the starting model, the problem lists and the training transitions into ``out/start`` (once)."""
    import shutil

    from proofrl.data.assets import built_settings, tactic_assets
    from proofrl.problems import save_problems

    start = out / "start"
    if (start / "done").exists():
        return start
    a = tactic_assets(assets, settings=built_settings(assets))
    shutil.rmtree(start, ignore_errors=True)
    shutil.copytree(a.model_dir, start / "model")
    shutil.copy(a.train_transitions, start / "train-transitions.jsonl")
    save_problems(a.train_problems, start / "train.jsonl")
    save_problems(a.held_out_problems, start / "held-out.jsonl")
    (start / "done").write_text("")
    return start


def run_arm(arm: str, start: Path, out: Path, rounds: int, extra: list[str]) -> dict:
    import torch

    torch.set_num_threads(1)
    from proofrl.train.expert_iteration import ExpertIteration, load_config

    cfg = load_config(
        "reap",
        [
            f"out={out / arm}",
            f"model.path={start / 'model'}",
            f"data.train={start / 'train.jsonl'}",
            f"data.eval={start / 'held-out.jsonl'}",
            f"data.transitions={start / 'train-transitions.jsonl'}",
            f"steps={rounds}",
            "verify.workers=1",
            "progress=false",
            *ARMS[arm],
            *extra,
        ],
    )
    return ExpertIteration(cfg).run()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--assets", type=Path, help="root of tactic-assets/; required unless --smoke")
    ap.add_argument("--out", type=Path, help="required unless --smoke")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--set", dest="extra", action="append", default=[], help="recipe override key=value (both arms)")
    ap.add_argument("--arm", choices=list(ARMS), help="run one arm in this process (what --parallel launches)")
    ap.add_argument("--sequential", action="store_true", help="run the arms one after the other in this process")
    add_smoke(ap)
    a = ap.parse_args()
    need_coq()
    if a.smoke:
        smoke_assets()
        a.assets, a.out, a.rounds, a.extra = SMOKE_ROOT, SMOKE_ROOT / "expert-iteration", 1, [*SMOKE, *a.extra]
    elif not (a.assets and a.out):
        ap.error("--assets and --out are required (or --smoke)")
    start = snapshot(a.assets, a.out)
    if a.arm:
        run_arm(a.arm, start, a.out, a.rounds, a.extra)
        return
    t0 = time.perf_counter()
    if a.sequential:
        for arm in ARMS:
            run_arm(arm, start, a.out, a.rounds, a.extra)
    else:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--arm",
                    arm,
                    "--assets",
                    str(a.assets),
                    "--out",
                    str(a.out),
                    "--rounds",
                    str(a.rounds),
                    *(arg for x in a.extra for arg in ("--set", x)),
                ]
            )
            for arm in ARMS
        ]
        if any(p.wait() for p in procs):
            sys.exit("an arm failed; rerun to resume it")
    seconds = time.perf_counter() - t0
    report(a.out, seconds)


def report(out: Path, seconds: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = {arm: json.loads((out / arm / "summary.json").read_text()) for arm in ARMS}
    rounds = sorted({int(r) for s in res.values() for r in s["proved_by_round"]})
    n = next((r["eval/theorems"] for s in res.values() for r in s["rounds"] if "eval/theorems" in r), 0)
    print(f"held-out theorems proved (of {n}) at a fixed search budget, by round; {seconds:.0f} s wall")
    print(f"{'round':>5} | " + " | ".join(f"{arm:>13}" for arm in ARMS) + " | solved in rollout (value / policy)")
    for r in rounds:
        row = [res[arm]["proved_by_round"].get(str(r), "-") for arm in ARMS]
        solved = [
            next((x.get("rollout/solved", "-") for x in res[arm]["rounds"] if x["round"] == r), "-") for arm in ARMS
        ]
        print(f"{r:>5} | " + " | ".join(f"{v:>13}" for v in row) + f" | {solved[0]} / {solved[1]}")
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for arm in ARMS:
        pts = sorted((int(k), v) for k, v in res[arm]["proved_by_round"].items())
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=arm)
    ax.set_xlabel("round (0 = starting checkpoint)")
    ax.set_ylabel(f"held-out proved (of {n})")
    ax.set_xticks(rounds)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "proved_by_round.png", dpi=120)
    (out / "results.json").write_text(json.dumps({"seconds": seconds, "theorems": n, "arms": res}, indent=2))
    last = [res[arm]["proved_by_round"].get(str(rounds[-1])) if rounds else None for arm in ARMS]
    ratio("policy+value / policy-only held-out proved, last round", div(last[0] or 0, last[1] or 0))


if __name__ == "__main__":
    main()
