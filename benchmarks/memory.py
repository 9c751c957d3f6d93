"""The proof memory's cost: RAM and time per pair at scale, and its share of a search's wall time.

    python -m proofrl.data.tactics --out runs/tactics
    python benchmarks/memory.py --data runs/tactics --theorems 30 --expansions 16 -k 8
    python benchmarks/memory.py --data runs/tactics --theorems 30 --extra auto   # knn + the automation menu
    python benchmarks/memory.py --smoke   # 2,000 synthetic pairs, the smoke tactic assets, 2 theorems: seconds

Part 1 (no prover): ``--pairs`` synthetic states (default 100,000; hypotheses and a goal over a vocabulary of
5,000 names, lengths like the standard library's states) go into a :class:`~proofrl.policy.memory.ProofMemory`;
reported: the resident memory it adds (RSS before and after, the BM25 index built), per 100,000 pairs; the time to
add them, to build the whole index, to answer a query (median of 50), and for one proof's 6 steps added online
then the next query: above ``EXACT_BELOW`` pairs the small index of recent pairs, below it a whole rebuild (both
are measured: the default memory, and one whose ``exact_below`` is past ``--pairs``).

Part 2 (Coq): a memory of ``DATA/train.jsonl`` searches ``--theorems`` held-out standard-library theorems with
best-first search and the k-NN policy (plus ``--extra`` sources), offline and online (every proof found goes into
the memory at once). Reported per mode: proved, wall seconds, and the memory's own time (retrieval, including the
rebuilds queries trigger, plus additions) as a share of the search's wall time (goal: at most 10 %).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from _bench import SMOKE_ROOT, add_smoke, div, need_coq, ratio, smoke_assets


def synthetic_states(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (state, tactic) pairs shaped like stepped stdlib states: 0-4 hypotheses and a goal of 3-25 terms."""
    rng = random.Random(seed)
    names = [
        f"{rng.choice('abcdefghklmnpqrstuvwxyz')}{rng.choice(['', 'x', '_le', 'Nat.', 'l'])}{i}" for i in range(5000)
    ]
    ops = ["+", "*", "=", "<=", "->", "/\\", "\\/", "<>", "::", "++"]

    def term(k: int) -> str:
        return " ".join(rng.choice(names) if j % 2 == 0 else rng.choice(ops) for j in range(2 * k - 1))

    out = []
    for _ in range(n):
        hyps = [f"H{j} : {term(rng.randint(1, 6))}" for j in range(rng.randint(0, 4))]
        state = "\n".join([*hyps, f"⊢ forall {rng.choice(names)} : nat, {term(rng.randint(3, 12))}"])
        out.append((state, f"{rng.choice(['apply', 'rewrite', 'intros', 'destruct'])} {rng.choice(names)}."))
    return out


def scale(n: int, seed: int = 0) -> dict[str, float]:
    """RAM and times of a memory of ``n`` synthetic pairs (part 1)."""
    import psutil

    from proofrl.policy.memory import ProofMemory

    pairs = synthetic_states(n, seed)
    queries = [s for s, _ in synthetic_states(50, seed + 1)]
    proof = synthetic_states(6, seed + 2)
    ProofMemory(cap=None).add("⊢ warm", "idtac.")  # the library's imports are not the memory's RAM
    ProofMemory(cap=None).neighbours("⊢ warm", 1)
    gc.collect()
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    t0 = time.perf_counter()
    mem = ProofMemory(cap=None)
    mem.add_many(pairs, theorem="synthetic", online=False)
    add_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mem.neighbours(queries[0], 8)
    build_s = time.perf_counter() - t0
    gc.collect()
    rss = proc.memory_info().rss - rss0
    times = []
    for q in queries:
        t0 = time.perf_counter()
        mem.neighbours(q, 8)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    mem.add_many(proof, theorem="found", online=True)
    mem.neighbours(queries[1], 8)
    update_s = time.perf_counter() - t0
    mem.exact_below = n + 100  # the same memory, every change rebuilding the whole index
    t0 = time.perf_counter()
    mem.add_many(synthetic_states(6, seed + 3), theorem="found", online=True)
    mem.neighbours(queries[2], 8)
    exact_s = time.perf_counter() - t0
    del mem
    return {
        "pairs": n,
        "rss_mib": rss / 2**20,
        "rss_mib_per_100k": rss / 2**20 * 100_000 / n,
        "mean_state_chars": statistics.fmean(len(s) for s, _ in pairs),
        "add_s": add_s,
        "index_build_s": build_s,
        "query_ms_median": 1000 * statistics.median(times),
        "one_proof_online_then_query_s": update_s,
        "one_proof_online_then_query_exact_s": exact_s,
    }


def searches(args: argparse.Namespace, train: Path, problems: list) -> dict[str, dict[str, Any]]:
    """Part 2: the k-NN policy offline and online on ``problems``."""
    from proofrl.policy.memory import ProofMemory
    from proofrl.policy.tactic import make_tactic_policy
    from proofrl.search.config import load_search_config
    from proofrl.search.run import search_many

    t0 = time.perf_counter()
    built = ProofMemory.from_transitions([train])
    folder = built.save(args.out / "memory")
    print(f"memory: {len(built)} pairs from {train}, built and saved in {time.perf_counter() - t0:.1f} s", flush=True)
    cfg = load_search_config(
        "reprover", max_steps=args.expansions, seconds=args.seconds, width=args.k, tactic_timeout=args.tactic_timeout
    )
    out: dict[str, dict[str, Any]] = {}
    for mode in ("offline", "online"):
        spec = f"knn{'-online' if mode == 'online' else ''}:{folder}" + (f"+{args.extra}" if args.extra else "")
        policy = make_tactic_policy(spec)
        knn = next(s for s in getattr(policy, "sources", [policy]) if hasattr(s, "memory"))
        t0 = time.monotonic()
        results = search_many(problems, policy, out_dir=args.out / mode, workers=args.workers, config=cfg)
        wall = time.monotonic() - t0
        st = knn.memory.stats
        memory_s = st.query_seconds + st.add_seconds
        out[mode] = {
            "spec": spec,
            "theorems": len(results),
            "proved": sum(r.status == "proved" for r in results),
            "wall_s": round(wall, 2),
            "memory_s": round(memory_s, 3),
            "memory_share": round(div(memory_s, wall), 4),
            "queries": st.queries,
            "rebuilds": st.rebuilds,
            "rebuild_s": round(st.rebuild_seconds, 3),
            "pairs_after": len(knn.memory),
            "proved_by_knn_steps_only": sum(
                r.status == "proved" and set(r.line()["proof_sources"]) == {"knn"} for r in results
            ),
        }
        print(mode, json.dumps(out[mode]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, help="a python -m proofrl.data.tactics --out folder (train.jsonl)")
    ap.add_argument("--pairs", type=int, default=100_000, help="synthetic pairs of part 1")
    ap.add_argument("--theorems", type=int, default=30, help="held-out stdlib theorems of part 2")
    ap.add_argument("--max-proof-chars", type=int, default=None, help="held-out theorems whose proof is this short")
    ap.add_argument("--expansions", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=None, help="wall budget per theorem (default: none)")
    ap.add_argument("-k", type=int, default=8, help="tactics per expansion (and neighbours retrieved)")
    ap.add_argument("--tactic-timeout", type=float, default=5.0)
    ap.add_argument("--extra", default="", help="sources mixed in after the memory, e.g. auto or hf:DIR")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("runs/memory-bench"))
    ap.add_argument("--skip-search", action="store_true", help="part 1 only")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.pairs, args.expansions, args.k, args.out = 2000, 4, 4, SMOKE_ROOT / "memory"
    sizes = scale(args.pairs)
    print("scale", json.dumps({k: round(v, 4) for k, v in sizes.items()}), flush=True)
    modes: dict[str, dict[str, Any]] = {}
    if not args.skip_search:
        need_coq()
        if args.smoke:
            assets = smoke_assets()
            train, problems = assets.train_transitions, assets.held_out_problems[:2]
        else:
            if not args.data:
                ap.error("--data is required for the search part (or --skip-search, or --smoke)")
            from proofrl.data.splits import problem_set

            train = args.data / "train.jsonl"
            problems = problem_set("coq-stdlib:held-out", max_proof_chars=args.max_proof_chars, limit=args.theorems)
        modes = searches(args, train, problems)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps({"scale": sizes, "search": modes}, indent=2))
    ratio("memory RAM MiB per 100k pairs", sizes["rss_mib_per_100k"])
    for mode in modes:
        ratio(f"memory time / search wall ({mode})", modes[mode]["memory_share"])


if __name__ == "__main__":
    main()
