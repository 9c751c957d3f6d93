"""``proofrl demo --part eva``: the EVA process reward model on prover-labelled proposals, briefly trained.

Coq labels four kinds of proposal at states of the shared tactic data (:mod:`proofrl.data.eva_labels`: the
human step, another theorem's step, a ghost lemma, a broken step; scores from what Coq says); the reward
model starts from the tiny tactic model and learns L_SFT + α·L_EVA with LoRA on the training modules'
proposals; the held-out modules' proposals are scored with greedy decoding, before (zero-shot, E[R] at a
probe) and after (E[R] over the anchors, and the parsed text score beside it). Writes ``report.md``,
``summary.json``, ``table.png``, the labels and the model.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..data.assets import tactic_assets

SETTINGS = [
    "data.limit=8",
    "data.eval_limit=5",
    "data.states_per_theorem=2",
    "search.max_steps=1",
    "optim.epochs=3",
    "optim.lr=2.0e-3",
    "algorithm.alpha=0.5",
    "optim.batch=8",
    "data.max_state_chars=300",
    "eval.max_tokens=80",
]
"""overrides of the ``eva`` recipe that :func:`run_part` uses (a test may add smaller ones): ``data.limit``
training and ``data.eval_limit`` held-out theorems labelled, one best-first expansion deciding "the proof then
closes" for an accepted step, lr above the paper's 2e-5 (a 0.5 M-parameter model taught for a few dozen steps)"""


def part_config(seed: int) -> Any:
    """The part's :class:`~proofrl.train.config.EvaConfig`: the ``eva`` recipe with :data:`SETTINGS`."""
    from ..train.eva import load_config

    return load_config("eva", [f"seed={seed}", *SETTINGS])


def run_part(ctx: Any) -> dict[str, Any]:
    import torch
    from rich.console import Console

    from ..data.eva_labels import STEP_TIMEOUT, label_splits
    from ..eval.rm import evaluate_generative, markdown_table, plot_table
    from ..policy.tactic import make_tactic_policy
    from ..rewards.eva import EvaScorer
    from ..train.eva import build_examples, load_base, read_records, train_eva

    cfg = part_config(ctx.seed)
    console = ctx.console or Console()
    t0 = time.perf_counter()
    torch.manual_seed(ctx.seed)
    assets = tactic_assets(ctx.root, seed=ctx.seed, workers=ctx.workers, console=console)
    out = ctx.out
    policy = make_tactic_policy(assets.policy_spec, device="cpu", seed=ctx.seed, max_tokens=64)
    paths, lab = label_splits(
        out / "labels",
        {
            "train": (assets.train_transitions, cfg.data.limit),
            "held-out": (assets.held_out_transitions, cfg.data.eval_limit),
        },
        policy=policy,
        states_per_theorem=cfg.data.states_per_theorem,
        search=cfg.search,
        step_timeout=cfg.search.tactic_timeout if cfg.search is not None else STEP_TIMEOUT,
        seed=cfg.seed,
        workers=ctx.workers,
        console=console,
    )
    train, _ = read_records(paths["train"])
    held, _ = read_records(paths["held-out"])
    label_s = time.perf_counter() - t0
    console.print(f"labelled {len(train)} train and {len(held)} held-out proposals with Coq ({label_s:.0f} s)")

    kw: dict[str, Any] = dict(max_new_tokens=cfg.eval.max_tokens, max_state_chars=cfg.data.max_state_chars)
    m, tok = load_base(assets.model_dir, lora=None, device="cpu")
    before = evaluate_generative(EvaScorer(m, tok, **kw), held)
    m, tok = load_base(assets.model_dir, lora=cfg.model.lora, device="cpu")
    ex, rep = build_examples(train, tok, max_state_chars=cfg.data.max_state_chars)
    t = time.perf_counter()
    hist = train_eva(
        m,
        tok,
        ex,
        alpha=cfg.algorithm.alpha,
        lr=cfg.optim.lr,
        batch=cfg.optim.batch,
        epochs=cfg.optim.epochs,
        seed=ctx.seed,
        console=console,
        on_epoch=lambda e, h: console.print(f"epoch {e + 1}: LM {h['lm']:.3f}, EVA MSE {h['eva_mse']:.3f}"),
    )
    train_s = time.perf_counter() - t
    after = evaluate_generative(EvaScorer(m, tok, **kw), held)
    m.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    rows = {"zero-shot": before["eva"], "eva-text": after["text"], "eva": after["eva"]}
    plot_table(rows, out / "table.png")
    summary = {
        "settings": {"recipe": "eva", "overrides": list(SETTINGS), "config": cfg.to_dict()},
        "labels": lab,
        "index": rep.to_json(),
        "history": hist,
        "rows": rows,
        "flags": {"zero-shot": before["flags"], "eva": after["flags"]},
        "examples": after["examples"],
        "seconds": {
            "labels": round(label_s, 1),
            "training": round(train_s, 1),
            "total": round(time.perf_counter() - t0, 1),
        },
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (out / "report.md").write_text(report(summary, rows, markdown_table(rows)))
    m_ = after["eva"]
    console.print(
        f"EVA on {len(held)} held-out proposals: Pearson r {m_['pearson']:.3f}, ranking accuracy "
        f"{m_['ranking_acc']:.3f}"
    )
    return {k: summary[k] for k in ("rows", "index", "seconds")}


def report(summary: dict[str, Any], rows: dict[str, Any], table: str) -> str:
    s, lab = summary["settings"]["config"], summary["labels"]
    answers = {k: v["by_answer"] for k, v in lab.items()}
    ex = summary["examples"][0] if summary["examples"] else ""
    return "\n".join(
        [
            "# EVA: a process reward model read from its own score logits",
            "",
            f"Coq labelled {lab['train']['records']} proposals at states of {lab['train']['theorems']} training "
            f"theorems and {lab['held-out']['records']} at {lab['held-out']['theorems']} held-out ones (four kinds "
            "per state: the human step, another theorem's step, a lemma that does not exist, a syntax-broken step). "
            f"What Coq answered: {answers}.",
            "",
            f"The reward model starts from the tiny tactic model and is trained {s['optim']['epochs']} epochs with "
            f"L_SFT + {s['algorithm']['alpha']}·L_EVA, LoRA r=16, alpha=32 on every projection, "
            f"lr {s['optim']['lr']:g} ({summary['seconds']['training']} s). Exact score positions: {summary['index']}.",
            "",
            "Held-out proposals, greedy decoding (Pearson r on the combined score; ranking accuracy over pairs at the "
            "same state, a tie counting one half):",
            "",
            table,
            "",
            "![metrics](table.png)",
            "",
            f"Output flags: {summary['flags']}. A generated output, for a look: `{' '.join(ex.split())[:300]}`",
            "",
            f"Part time: {summary['seconds']['total']} s (labelling {summary['seconds']['labels']} s).",
            "",
        ]
    )
