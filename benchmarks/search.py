"""Best-first vs AND-OR MCTS on held-out standard-library theorems, and where the time goes.

    python -m proofrl.data.tactics --out runs/tactics --max-proof-chars 200
    python benchmarks/search.py --policy hf:runs/tactic-model --theorems 100 --budget expansions --expansions 16 -k 8
    python benchmarks/search.py --policy hf:runs/tactic-model --theorems 100 --budget seconds --seconds 10 -k 8
    python benchmarks/search.py --smoke     # the tiny smoke tactic assets, 2 theorems, 2 expansions of 2: seconds

Both engines get the same budget per theorem: the same number of expansions (policy calls, ``max_steps``: best-first
expansions, MCTS steps, each MCTS step expanding one leaf) or the same wall time (and no
other limit). Reported per engine: theorems proved (every one passed the fresh ``coqc`` check), unsound,
the share of search time outside the prover and the model, tactic steps per second per prover process,
and coqidetop's own time per tactic (the time between sending each XML call of a step and reading its
reply), beside the whole step as the search sees it. The ``ratio:`` lines are MCTS / best-first theorems proved
and, per engine, coqidetop's time per step / the whole step.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import torch
from _bench import SMOKE_ROOT, add_smoke, div, need_coq, ratio, smoke_assets


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", help="hf:DIR, vllm:DIR, openai:URL, openai-chat:URL (required unless --smoke)")
    ap.add_argument("--model", default=None)
    ap.add_argument("--theorems", type=int, default=100)
    ap.add_argument(
        "--max-proof-chars", type=int, default=200, help="held-out theorems whose human proof is at most this long"
    )
    ap.add_argument("--budget", choices=["expansions", "seconds"], default="expansions")
    ap.add_argument("--expansions", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("-k", type=int, default=8, help="tactics per expansion, both engines")
    ap.add_argument("--tactic-timeout", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("runs/search-bench"))
    add_smoke(ap)
    args = ap.parse_args()
    torch.set_num_threads(1)
    need_coq()
    if args.smoke:
        assets = smoke_assets()
        args.policy, args.expansions, args.k, args.out = assets.policy_spec, 2, 2, SMOKE_ROOT / "search"
    elif not args.policy:
        ap.error("--policy is required (or --smoke)")

    from proofrl.data.splits import problem_set
    from proofrl.policy.tactic import make_tactic_policy
    from proofrl.provers.coq.session import CoqSession
    from proofrl.search.config import load_search_config
    from proofrl.search.run import search_many
    from proofrl.search.trace import read_trace, summarize

    # coqidetop's own time: wall time inside CoqSession.call (write the request, wait, read the reply), per thread
    local = threading.local()
    original = CoqSession.call

    def timed_call(self, request, timeout):
        t0 = time.perf_counter()
        try:
            return original(self, request, timeout)
        finally:
            local.coq = getattr(local, "coq", 0.0) + time.perf_counter() - t0

    CoqSession.call = timed_call  # type: ignore[method-assign]
    from proofrl.provers.coq import prover as coq_prover

    step = coq_prover.CoqProver.step
    coq_in_steps = {"coq": 0.0, "steps": 0, "wall": 0.0}
    lock = threading.Lock()

    def timed_step(self, state, tactic, *, timeout=None):
        local.coq = 0.0
        t0 = time.perf_counter()
        r = step(self, state, tactic, timeout=timeout)
        with lock:
            coq_in_steps["coq"] += local.coq
            coq_in_steps["wall"] += time.perf_counter() - t0
            coq_in_steps["steps"] += 1
        return r

    coq_prover.CoqProver.step = timed_step  # type: ignore[method-assign]

    if args.smoke:
        problems = assets.held_out_problems[:2]
    else:
        problems = problem_set("coq-stdlib:held-out", max_proof_chars=args.max_proof_chars, limit=args.theorems)
    policy = make_tactic_policy(args.policy, model=args.model)
    report = {"theorems": len(problems), "budget": args.budget, "k": args.k, "engines": {}}
    for engine, recipe in (("best-first", "reprover"), ("mcts", "reap")):
        by_expansions = args.budget == "expansions"
        cfg = load_search_config(
            recipe,
            max_steps=args.expansions if by_expansions else None,
            seconds=None if by_expansions else args.seconds,
            max_nodes=10**6,
            width=args.k,
            tactic_timeout=args.tactic_timeout,
        )
        for key in coq_in_steps:
            coq_in_steps[key] = 0
        out = args.out / engine
        t0 = time.monotonic()
        results = search_many(problems, policy, out_dir=out, workers=args.workers, config=cfg)
        wall = time.monotonic() - t0
        tm = summarize(read_trace(out / "trace.jsonl"))
        by = {s: sum(r.status == s for r in results) for s in ("proved", "failed", "unsound", "error")}
        tactic = tm["by_name"].get("tactic", {"count": 0, "seconds": 0.0})
        n = max(1, coq_in_steps["steps"])
        report["engines"][engine] = {
            **by,
            "wall_seconds": round(wall, 1),
            "expansions": sum(r.expansions for r in results),
            "outside_share": round(tm["outside_share"], 4),
            "seconds": {k: round(v["seconds"], 2) for k, v in tm["by_name"].items()},
            "tactic_steps_per_second_per_process": round(tactic["count"] / max(tactic["seconds"], 1e-9), 1),
            "ms_per_step": round(1000 * coq_in_steps["wall"] / n, 2),
            "coqidetop_ms_per_step": round(1000 * coq_in_steps["coq"] / n, 2),
        }
        print(engine, json.dumps(report["engines"][engine]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    e = report["engines"]
    ratio("mcts/best-first theorems proved", div(e["mcts"]["proved"], e["best-first"]["proved"]))
    for engine in e:
        ratio(
            f"{engine}: coqidetop time / whole step", div(e[engine]["coqidetop_ms_per_step"], e[engine]["ms_per_step"])
        )


if __name__ == "__main__":
    main()
