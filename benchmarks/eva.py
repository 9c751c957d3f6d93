"""EVA measured with the tiny tactic model on prover-labelled proposals (numbers for docs/eva.md).

1. **Table 4 again**: zero-shot base, SFT-only generative RM (text score), value-head RM, EVA (E[R]) — MSE per
   dimension, Pearson r of the combined score, ranking accuracy at the same state — on the held-out modules'
   proposals, all models trained from the same base on the training modules' proposals.
2. **In the loop**: proved counts of held-out theorems at equal search budget — best-first with the policy's
   log-prob priority against best-first with EVA's priority (:class:`~proofrl.rewards.eva.EvaPriorityPolicy`),
   and MCTS with the −(open goals) leaf value against EVA's value (:class:`~proofrl.rewards.eva.EvaValue`).

Run (on a shared machine: nice, 2 torch threads)::

    nice -n 10 python benchmarks/eva.py --assets DIR --out runs/bench-eva [--train-theorems 24 --held-theorems 12]
    python benchmarks/eva.py --smoke       # the tiny smoke tactic assets, 2 + 1 theorems, one epoch: seconds

``--assets`` holds ``tactic-assets/`` (built by :func:`proofrl.data.assets.tactic_assets` when missing).
Prints both tables side by side and writes ``OUT/summary.json`` and ``OUT/table4.png``. The ``ratio:`` lines are
EVA / value-head ranking accuracy and proved counts with EVA / without it, per engine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _bench import SMOKE_ROOT, add_smoke, div, need_coq, ratio, smoke_assets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--assets", type=Path, help="root of tactic-assets/ (built there when missing); required unless --smoke"
    )
    ap.add_argument("--out", type=Path, default=Path("runs/bench-eva"))
    ap.add_argument("--train-theorems", type=int, default=24)
    ap.add_argument("--held-theorems", type=int, default=12)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--no-lora", action="store_true", help="full fine-tuning instead of LoRA r=16, alpha=32")
    ap.add_argument("--max-state-chars", type=int, default=300)
    ap.add_argument("--search-theorems", type=int, default=12)
    ap.add_argument("--expansions", type=int, default=4, help="best-first: expansions per theorem")
    ap.add_argument("--width", type=int, default=4)
    ap.add_argument("--mcts-steps", type=int, default=6)
    ap.add_argument("--skip-table", action="store_true")
    ap.add_argument("--skip-search", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    add_smoke(ap)
    a = ap.parse_args()
    need_coq()
    if a.smoke:
        a.out, a.train_theorems, a.held_theorems, a.epochs, a.batch = SMOKE_ROOT / "eva", 2, 1, 1, 4
        a.search_theorems, a.expansions, a.width, a.mcts_steps, a.threads = 1, 1, 2, 1, 1
    elif not a.assets:
        ap.error("--assets is required (or --smoke)")

    import torch
    from rich.console import Console

    from proofrl.bench.eva_table4 import table4
    from proofrl.data.assets import built_settings, tactic_assets
    from proofrl.data.eva_labels import label_splits
    from proofrl.eval.rm import markdown_table, plot_table
    from proofrl.policy.tactic import make_tactic_policy
    from proofrl.train.eva import load_config, read_records

    torch.set_num_threads(a.threads)
    console = Console()
    a.out.mkdir(parents=True, exist_ok=True)
    assets = (
        smoke_assets()
        if a.smoke
        else tactic_assets(a.assets, seed=a.seed, console=console, settings=built_settings(a.assets))
    )
    summary: dict = {"args": {k: str(v) for k, v in vars(a).items()}}
    labels = a.out / "labels"
    if not (labels / "held-out.jsonl").is_file():
        policy = make_tactic_policy(assets.policy_spec, device="cpu", seed=a.seed, max_tokens=64)
        label_splits(
            labels,
            {
                "train": (assets.train_transitions, a.train_theorems),
                "held-out": (assets.held_out_transitions, a.held_theorems),
            },
            policy=policy,
            seed=a.seed,
            console=console,
        )
    summary["labels"] = json.loads((labels / "summary.json").read_text())
    train, _ = read_records(labels / "train.jsonl")
    held, _ = read_records(labels / "held-out.jsonl")
    console.print(f"labelled proposals: {len(train)} train, {len(held)} held-out")

    if not a.skip_table:
        t = time.perf_counter()
        res = table4(
            assets.model_dir,
            train,
            held,
            load_config(
                "eva",
                [
                    f"algorithm.alpha={a.alpha}",
                    f"optim.lr={a.lr}",
                    f"optim.batch={a.batch}",
                    f"optim.epochs={a.epochs}",
                    f"seed={a.seed}",
                    f"data.max_state_chars={a.max_state_chars}",
                    *(["model.lora=null"] if a.no_lora else []),
                ],
            ),
            console=console,
            out=a.out,
        )
        res["wall_s"] = round(time.perf_counter() - t, 1)
        summary["table4"] = res
        plot_table(res["rows"], a.out / "table4.png")
        console.print(markdown_table(res["rows"]))
        console.print(f"flags: {res['flags']}\nseconds: {res['seconds']}")
    if not a.skip_search:
        summary["search"] = search_bench(a, assets, console)
    (a.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    console.print(f"summary: {a.out / 'summary.json'}")
    rows = summary.get("table4", {}).get("rows", {})
    if "eva" in rows and "value-head" in rows:
        ratio("EVA / value-head ranking accuracy", div(rows["eva"]["ranking_acc"], rows["value-head"]["ranking_acc"]))
    proved = {k: v["proved"] for k, v in summary.get("search", {}).items()}
    if proved:
        ratio(
            "best-first proved, EVA / log-prob priority",
            div(proved["best-first, EVA priority"], proved["best-first, log-prob priority"]),
        )
        ratio(
            "MCTS proved, EVA value / -(open goals)",
            div(proved["MCTS, EVA value"], proved["MCTS, value -(open goals)"]),
        )


def search_bench(a: argparse.Namespace, assets, console) -> dict:
    """Proved counts at equal budget: log-prob vs EVA priority (best-first), goals vs EVA value (MCTS)."""
    from proofrl.policy.tactic import make_tactic_policy
    from proofrl.rewards.eva import EvaPriorityPolicy, EvaScorer, EvaValue
    from proofrl.search.config import load_search_config
    from proofrl.search.run import search_many

    model = a.out / "eva-model"
    if not model.is_dir():
        console.print("[red]no trained EVA model (run without --skip-table first)[/]")
        return {}
    problems = assets.held_out_problems[: a.search_theorems]
    scorer = EvaScorer.from_dir(model, device="cpu", max_state_chars=a.max_state_chars, max_new_tokens=96)

    def policy():  # a fresh policy per run: same seeds, same samples
        return make_tactic_policy(assets.policy_spec, device="cpu", seed=a.seed, max_tokens=64)

    bf = load_search_config("reprover", width=a.width, max_steps=a.expansions, seconds=600.0, tactic_timeout=5.0)
    mc = load_search_config("reap", width=a.width, max_steps=a.mcts_steps, tactic_timeout=5.0)
    runs = {
        "best-first, log-prob priority": (bf, lambda: policy(), None),
        "best-first, EVA priority": (bf, lambda: EvaPriorityPolicy(policy(), scorer), None),
        "MCTS, value -(open goals)": (mc.with_overrides(value="goals"), lambda: policy(), None),
        "MCTS, EVA value": (mc, lambda: policy(), lambda: EvaValue(scorer, policy(), k=a.width)),
    }
    out = {}
    for i, (name, (cfg, pol, val)) in enumerate(runs.items()):
        t = time.perf_counter()
        res = search_many(
            problems,
            pol(),
            config=cfg,
            out_dir=a.out / f"search-{i}",
            workers=1,
            progress=True,
            value_fn=val() if val else None,
        )
        out[name] = {
            "proved": sum(r.status == "proved" for r in res),
            "of": len(res),
            "expansions": sum(r.expansions for r in res),
            "seconds": round(time.perf_counter() - t, 1),
        }
    console.print("| search | proved | of | expansions | seconds |\n|---|---|---|---|---|")
    for name, r in out.items():
        console.print(f"| {name} | {r['proved']} | {r['of']} | {r['expansions']} | {r['seconds']} |")
    return out


if __name__ == "__main__":
    main()
