"""LeanListener's table re-measured on held-out Coq stdlib states with the tiny tactic model, side by side:
the SFT model, offline DPO, online DPO and online GRPO (subgoal reward), each trained from the same SFT model.

    python benchmarks/step_level.py --model MODEL_DIR --data DATA_DIR --out runs/bench-step-level --steps 20
    python benchmarks/step_level.py --smoke         # the tiny smoke tactic assets, 2 states, 1 update each: seconds

``--model`` / ``--data`` (train.jsonl, held-out.jsonl) are only read; without them ``--assets ROOT`` holds
``tactic-assets/`` (:func:`proofrl.data.assets.tactic_assets` builds it there when missing). The SFT model is
copied into ``--out`` before anything trains. Columns: Prec@k (valid share of k samples per held-out
state), 0-precision (states with no valid sample), mean tactic length (characters), proved theorems and seconds
per theorem under best-first search at one fixed budget (expansions × width, seconds; a proof counts only after
the fresh ``coqc`` final check). Step counts, batch, learning rate and wall time of every variant are printed and
written to ``summary.json``; the report (table + plot) is ``report.md``. The ``ratio:`` lines are each trained
variant's Prec@k / the SFT model's.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path

import torch
from _bench import SMOKE_ROOT, add_smoke, div, need_coq, ratio, smoke_assets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--assets",
        type=Path,
        default=Path("runs/assets"),
        help="root of tactic-assets/ (built there when missing), unless --model and --data are given",
    )
    ap.add_argument("--model", type=Path, default=None, help="the SFT tactic model directory (read only)")
    ap.add_argument("--data", type=Path, default=None, help="folder with train.jsonl and held-out.jsonl (read only)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-step-level"))
    ap.add_argument("--states", type=int, default=48, help="held-out states scored")
    ap.add_argument("--theorems", type=int, default=20, help="held-out theorems searched")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20, help="updates of each trained variant")
    ap.add_argument("--batch-states", type=int, default=8, help="states per online update (the paper: 16)")
    ap.add_argument("--offline-states", type=int, default=64, help="training states sampled for offline DPO pairs")
    ap.add_argument("--lr", type=float, default=1e-4, help="learning rate of every variant (the paper: 2.25e-6)")
    ap.add_argument("--expansions", type=int, default=8)
    ap.add_argument("--search-seconds", type=float, default=30.0)
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds per tactic")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--variants",
        default="sft,offline-dpo,online-dpo,online-grpo",
        help="also: online-grpo-unchanged0 (a valid step that changes nothing earns 0, not ln 2)",
    )
    add_smoke(ap)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    need_coq()
    if a.smoke:
        a.out, a.states, a.theorems, a.k, a.steps, a.batch_states, a.offline_states = (
            SMOKE_ROOT / "step-level",
            2,
            1,
            2,
            1,
            2,
            4,
        )
        a.expansions, a.search_seconds, a.workers, a.model, a.data = 1, 5.0, 1, None, None

    from rich.console import Console

    from proofrl.data.assets import tactic_assets
    from proofrl.data.tactics import read_transitions
    from proofrl.eval.tactics import (
        held_out_theorems,
        load_points,
        markdown_table,
        proving_rate,
        tactic_metrics,
        write_report,
    )
    from proofrl.policy.model import load_policy
    from proofrl.rollout.tactics import coq_pool, state_points
    from proofrl.train.offline_dpo import human_tactics, offline_pairs, train_offline_dpo
    from proofrl.train.step_grpo import StepLevelTrainer, load_config

    console = Console()
    if a.model and a.data:  # given folders are only read: nothing is built or written there
        model_dir, train_jsonl, held_jsonl = a.model, a.data / "train.jsonl", a.data / "held-out.jsonl"
    else:
        assets = smoke_assets() if a.smoke else tactic_assets(a.assets, seed=a.seed, workers=a.workers, console=console)
        model_dir, train_jsonl, held_jsonl = assets.model_dir, assets.train_transitions, assets.held_out_transitions
    a.out.mkdir(parents=True, exist_ok=True)
    sft = a.out / "sft"
    if not sft.exists():
        shutil.copytree(model_dir, sft)
    held = load_points(held_jsonl, limit=a.states, seed=a.seed)
    theorems = held_out_theorems(held, a.theorems)
    records = read_transitions(train_jsonl)
    train = state_points(records)
    console.print(f"held-out: {len(held)} states, {len(theorems)} theorems; training states: {len(train)}")
    results, runs = [], {}
    variants = [v.strip() for v in a.variants.split(",") if v.strip()]

    with coq_pool(a.workers, a.timeout) as pool:

        def score(label: str, model, tok) -> None:
            t = time.perf_counter()
            m = tactic_metrics(
                model, tok, held, pool, k=a.k, label=label, timeout=a.timeout, workers=a.workers, seed=a.seed
            )
            m.proving = proving_rate(
                model,
                tok,
                theorems,
                a.out / "search" / label,
                pool=pool,
                expansions=a.expansions,
                width=a.k,
                seconds=a.search_seconds,
                tactic_timeout=a.timeout,
                workers=a.workers,
                seed=a.seed,
            )
            results.append(m)
            runs.setdefault(label, {})["eval_s"] = time.perf_counter() - t
            console.print(markdown_table([m]))

        for v in variants:
            model, tok = load_policy(sft, device="cpu")
            t0 = time.perf_counter()
            if v == "sft":
                runs[v] = {"steps": 0}
            elif v == "offline-dpo":
                ref = load_policy(sft, device="cpu")[0].eval().requires_grad_(False)
                pts = random.Random(a.seed).sample(train, min(a.offline_states, len(train)))
                human = human_tactics(records, pts)
                pairs = offline_pairs(
                    model, tok, pts, human, pool, k=a.k, seed=a.seed, timeout=a.timeout, workers=a.workers
                )
                stats = train_offline_dpo(model, ref, tok, pairs, steps=a.steps, batch=16, lr=a.lr, seed=a.seed)
                runs[v] = {"steps": a.steps, "pairs": len(pairs), "batch_pairs": 16, "final_loss": stats[-1].loss}
            elif v in ("online-dpo", "online-grpo", "online-grpo-unchanged0"):
                objective = v.split("-")[1]
                extra = ["algorithm.unchanged_reward=0"] if v.endswith("unchanged0") else []
                cfg = load_config(
                    "leanlistener",
                    [
                        f"steps={a.steps}",
                        f"seed={a.seed}",
                        f"algorithm.objective={objective}",
                        f"optim.lr={a.lr}",
                        f"rollout.problems_per_step={a.batch_states}",
                        f"rollout.group_size={a.k}",
                        f"verify.timeout={a.timeout}",
                        f"verify.workers={a.workers}",
                        f"checkpoint_every={max(a.steps, 1)}",
                        "eval.every=0",
                        f"rollout.sync_every={max(1, min(50, a.steps // 4))}",
                        *extra,
                    ],
                )
                trainer = StepLevelTrainer(cfg, model, tok, train, pool, out=a.out / v)
                hist = trainer.fit(
                    progress=lambda s, m, v=v: (
                        console.print(f"{v} step {s}: valid {m['tactics/valid']:.3f} reward {m['reward/mean']:.3f}")
                        if s % 5 == 0
                        else None
                    )
                )
                runs[v] = {
                    "steps": len(hist),
                    "batch_states": a.batch_states,
                    "group": a.k,
                    "sync_every": cfg.rollout.sync_every,
                    "train_valid_first": hist[0]["tactics/valid"] if hist else None,
                    "train_valid_last": hist[-1]["tactics/valid"] if hist else None,
                }
            else:
                raise SystemExit(f"unknown variant {v!r}")
            runs[v]["train_s"] = time.perf_counter() - t0
            runs[v]["lr"] = a.lr
            score(v, model, tok)

    note = (
        f"Held-out Coq stdlib states: {len(held)}, theorems searched: {len(theorems)} (best-first, {a.expansions} "
        f"expansions of width {a.k}, {a.search_seconds:g} s each, {a.timeout:g} s per tactic). Trained variants: "
        f"{a.steps} updates each at lr {a.lr:g} from the same SFT model; online variants {a.batch_states} states × "
        f"{a.k} tactics per update. Machine: 2 CPU cores shared with other work."
    )
    write_report(results, a.out, title="Step-level RL: LeanListener's table re-measured", note=note)
    summary = json.loads((a.out / "summary.json").read_text())
    (a.out / "summary.json").write_text(
        json.dumps({"metrics": summary, "runs": runs, "args": {k: str(v) for k, v in vars(a).items()}}, indent=2)
    )
    console.print(markdown_table(results))
    console.print(json.dumps(runs, indent=1))
    base = next((m.prec_at_k for m in results if m.label == "sft"), float("nan"))
    for m in results:
        if m.label != "sft":
            ratio(f"{m.label} / sft, Prec@{a.k}", div(m.prec_at_k, base))


if __name__ == "__main__":
    main()
