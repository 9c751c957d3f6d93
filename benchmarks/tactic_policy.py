"""How good and how fast a tactic policy is on held-out states, judged by Coq.

    python -m proofrl.data.tactics --out runs/tactics
    python benchmarks/tactic_policy.py --data runs/tactics --policy hf:runs/tactic-model --states 100 -k 8
    python benchmarks/tactic_policy.py --smoke      # the tiny smoke tactic assets, 2 states, k = 2: seconds

For ``--states`` non-structural transitions of ``held-out.jsonl`` (a seeded draw), the policy proposes ``k``
tactics for ``state_before``. Each state is re-reached in Coq by replaying the theorem's human tactics
before it, then every proposal is stepped from it. Reported:

* ``exact@1`` / ``exact@k``: the human tactic (whitespace-normalised) is the first / among the proposals;
* ``prec@k``: the share of proposals Coq accepts (LeanListener's Prec@k, our reading: accepted / proposed);
* ``zero_prec``: the share of states where Coq accepts none;
* ``closes``: the share of states where some proposal leaves no goals at all;
* proposals per state (after merging duplicates), seconds per ``propose`` call, and seconds per Coq step.

The ``ratio:`` lines are ``prec@k`` and ``exact@k``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch
from _bench import add_smoke, need_coq, ratio, smoke_assets


def norm(t: str) -> str:
    return " ".join(t.split())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--data",
        type=Path,
        help="directory with held-out.jsonl (python -m proofrl.data.tactics); required unless --smoke",
    )
    ap.add_argument("--policy", help="hf:DIR, vllm:DIR, openai:URL, openai-chat:URL; required unless --smoke")
    ap.add_argument("--model", default=None, help="served model name (openai policies)")
    ap.add_argument("--states", type=int, default=100)
    ap.add_argument("-k", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", default="held-out")
    ap.add_argument("--out", type=Path, default=None, help="write the summary JSON here")
    add_smoke(ap)
    args = ap.parse_args()
    torch.set_num_threads(1)
    need_coq()
    if args.smoke:
        assets = smoke_assets()
        args.data, args.policy, args.states, args.k = assets.held_out_transitions.parent, assets.policy_spec, 2, 2
    elif not (args.data and args.policy):
        ap.error("--data and --policy are required (or --smoke)")

    from proofrl.data.tactics import read_transitions
    from proofrl.policy.tactic import make_tactic_policy
    from proofrl.problems import Problem
    from proofrl.provers.backend import state_text
    from proofrl.provers.factory import make_pool
    from proofrl.provers.pool import PoolConfig

    rows = read_transitions(args.data / f"{args.split}.jsonl")
    by_theorem: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        by_theorem[(r["module"], r["theorem"])].append(r)
    candidates = [r for r in rows if not r["structural"]]
    picked = random.Random(args.seed).sample(candidates, min(args.states, len(candidates)))
    policy = make_tactic_policy(args.policy, model=args.model, seed=args.seed)

    stats = defaultdict(list)
    pool = make_pool("coq", pool=PoolConfig(workers=1))
    try:
        for r in picked:
            t = time.perf_counter()
            props = policy.propose(r["state_before"], args.k)
            stats["propose_s"].append(time.perf_counter() - t)
            stats["proposals"].append(len(props))
            human = norm(r["tactic"])
            stats["exact@1"].append(bool(props) and norm(props[0].tactic) == human)
            stats["exact@k"].append(any(norm(p.tactic) == human for p in props))
            problem = Problem(r["theorem"], r["statement"], r["header"])
            prefix = [x["tactic"] for x in by_theorem[(r["module"], r["theorem"])] if x["step"] < r["step"]]
            with pool.lease(problem.header) as prover:
                state = prover.start(problem.theorem)
                for tac in prefix:
                    state = prover.step(state, tac).state
                assert state_text(state) == r["state_before"], (r["theorem"], r["step"])
                ok, closes = 0, False
                for p in props:
                    t = time.perf_counter()
                    res = prover.step(state, p.tactic)
                    stats["step_s"].append(time.perf_counter() - t)
                    if res.ok:
                        ok += 1
                        closes |= res.state.solved
                stats["prec"].append(ok / len(props) if props else 0.0)
                stats["zero"].append(ok == 0)
                stats["closes"].append(closes)
    finally:
        pool.close()
    mean = lambda xs: statistics.fmean(xs) if xs else float("nan")  # noqa: E731
    summary = {
        "policy": args.policy,
        "states": len(picked),
        "k": args.k,
        "exact@1": mean(stats["exact@1"]),
        f"exact@{args.k}": mean(stats["exact@k"]),
        f"prec@{args.k}": mean(stats["prec"]),
        "zero_prec": mean(stats["zero"]),
        "closes": mean(stats["closes"]),
        "proposals_per_state": mean(stats["proposals"]),
        "propose_s": statistics.median(stats["propose_s"]),
        "coq_step_s": statistics.median(stats["step_s"]) if stats["step_s"] else None,
    }
    print(json.dumps(summary, indent=2))
    ratio(f"prec@{args.k} (accepted / proposed)", summary[f"prec@{args.k}"])
    ratio(f"exact@{args.k}", summary[f"exact@{args.k}"])
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
