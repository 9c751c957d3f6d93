"""``proofrl demo``: the whole-proof RL pipeline end to end on a CPU, with Coq as the judge.

1. Read short human proofs from the Coq standard library installed on the machine and split the theorems
   by module into training and held-out sets (no module on both sides).
2. Build a tiny Llama-architecture model and a byte-level BPE tokenizer from the training text.
3. Teach it (supervised fine-tuning) to complete ``Proof.`` with the human proofs of the training theorems.
4. Evaluate pass@{1, 8, 32} on held-out theorems.
5. Run GRPO from that model twice — plain, and with the unlikeliness reward — on the training theorems
   (the ``demo`` recipe: the unlikeliness recipe scaled down), and evaluate each again.
6. Write ``report.md`` with the tables, pass@k and reward plots, the uplift rate of each run over the
   starting model, and ``summary.json``.

Whatever the numbers are, they are reported as measured.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError
from ..eval.evaluate import EvalResult, evaluate, figure, markdown_table, plot_pass_at_k, plot_uplift, uplift_between
from ..eval.uplift import UpliftRate
from ..policy.pace import torch_build
from ..policy.prompts import PromptFormat, get_format
from ..policy.sft import supervised_finetune
from ..problems import Problem
from ..progress import progress_bar
from ..schema import apply_overrides, validate
from ..train.config import GRPOConfig, load_recipe

SETTINGS = ["out=runs/demo", "data.eval_limit=48"]
"""what the demo adds to the ``demo`` recipe (the recipe's ``data.max_proof_chars`` 60: teach and train on theorems
whose human proof is at most this long): its folder, and 48 held-out theorems evaluated before and after RL"""

MAX_STATEMENT_CHARS = 240
"""teach, train and evaluate on theorems whose statement is at most this long"""
HELD_OUT_FRACTION = 0.2
"""the share of modules held out (:func:`proofrl.data.splits.split_by_module`)"""
SFT_EPOCHS = 12
SFT_LR = 1e-3
SFT_BATCH = 32
"""supervised teaching of the tiny model on the training theorems' human proofs"""
MODEL = {"hidden": 128, "layers": 2, "heads": 4, "vocab_size": 1024}
"""the tiny model's shape (:func:`proofrl.policy.tiny.build_tiny_model`)"""

VARIANTS = {"grpo": "null", "grpo-unlikeliness": "{beta_rank: 0.25, convention: paper, reduction: mean}"}
"""GRPO run name → its ``reward.unlikeliness`` (plain; β_rank 0.25 as in the paper)"""


def demo_config(overrides: Sequence[str] = ()) -> GRPOConfig:
    """The demo's run: the ``demo`` recipe with :data:`SETTINGS`, then ``overrides`` (``steps=``, ``seed=``,
    ``verify.workers=``, ``data.eval_limit=``, …); one ConfigError line on a mistake."""
    return load_recipe("demo", [*SETTINGS, *overrides])


def demo_problems(
    cfg: GRPOConfig,
    *,
    seed: int | None = None,
    held_out_fraction: float = HELD_OUT_FRACTION,
    max_statement_chars: int = MAX_STATEMENT_CHARS,
) -> tuple[list[Problem], list[Problem]]:
    """Training and held-out theorems with short human proofs (``cfg.data.max_proof_chars``), split by module
    with ``seed`` (None: ``cfg.seed``); ``cfg.data.eval_limit`` held-out ones drawn with that seed."""
    from ..data.splits import coq_stdlib_problems, split_by_module

    seed = cfg.seed if seed is None else seed
    probs = [
        p
        for p in coq_stdlib_problems(max_proof_chars=cfg.data.max_proof_chars)
        if len(p.formal_statement) <= max_statement_chars and "Proof using" not in p.proof
    ]
    train, held = split_by_module(probs, held_out_fraction=held_out_fraction, seed=seed)
    if cfg.data.eval_limit is not None and cfg.data.eval_limit > len(held):
        raise ConfigError(f"data.eval_limit={cfg.data.eval_limit}: the held-out side holds {len(held)} theorems")
    g = torch.Generator().manual_seed(seed)
    pick = torch.randperm(len(held), generator=g)[: cfg.data.eval_limit].tolist()
    return train, [held[i] for i in sorted(pick)]


def environment() -> dict[str, Any]:
    """What the demo's numbers depend on besides its settings: the torch build, the CPU kernels it chose
    (``ATEN_CPU_CAPABILITY`` can lower them) and the torch threads in effect; another of any can round the
    model's floats differently, and the GRPO runs, which feed their own samples back, then drift apart
    (docs/training.md, "What reproduces")."""
    return torch_build()


def _plot_rewards(runs: dict[str, list[dict[str, float]]], path: Path) -> Path:
    with figure(path, "GRPO step", "valid samples on training theorems (%)") as ax:
        for label, rows in runs.items():
            ax.plot([r["step"] for r in rows], [100 * r.get("valid/turn1", 0.0) for r in rows], marker=".", label=label)
    return path


def run_demo(
    cfg: GRPOConfig,
    *,
    seed: int | None = None,
    sft_epochs: int = SFT_EPOCHS,
    sft_lr: float = SFT_LR,
    sft_batch: int = SFT_BATCH,
    model: dict[str, int] | None = None,
    sft_model: Path | None = None,
    variants: Sequence[str] = tuple(VARIANTS),
    console: Any = None,
) -> dict[str, Any]:
    """Run the demo (``cfg``: :func:`demo_config`, the GRPO runs' settings, in ``cfg.out``); returns the summary
    written to ``out/summary.json``.

    ``seed`` (None: ``cfg.seed``) draws the split, the held-out theorems, the tiny model (``model``: its shape,
    None: :data:`MODEL`), its supervised teaching (``sft_epochs``, ``sft_lr``, ``sft_batch``) and the evaluation's
    samples; ``sft_model``, an SFT model taught before with these settings (an earlier run's ``sft-model``), is
    loaded instead of teaching again, so that several runs (the bench's seeds, its PPO-epochs arm) start from the
    same one; ``variants`` are the GRPO runs from the SFT model, names in :data:`VARIANTS`.

    Every judgement goes through one verifier built from the recipe's ``verify`` section (``make_verifier``, as
    ``proofrl train`` does): its backend, ``verify.workers`` processes and its one timeout (the demo recipe's 10 s,
    or ``verify.timeout=…``); it owns its pool and is closed when the demo ends, whatever happens."""
    from ..train.whole_proof import make_verifier, set_threads

    unknown = sorted(set(variants) - VARIANTS.keys())
    if unknown:
        raise ValueError(f"unknown GRPO variant(s) {', '.join(unknown)}: the variants are {', '.join(VARIANTS)}")
    teach: dict[str, Any] = {
        "seed": cfg.seed if seed is None else seed,
        "epochs": sft_epochs,
        "lr": sft_lr,
        "batch": sft_batch,
        "model": dict(MODEL if model is None else model),
        "sft_model": sft_model,
    }
    set_threads(cfg)  # the recipe's ``threads`` (``proofrl demo --threads``), for the teaching and both runs
    verifier = make_verifier(cfg)
    try:
        return _run_demo(cfg, teach, tuple(variants), verifier, console)
    finally:
        verifier.close()


def _run_demo(
    cfg: GRPOConfig, teach: dict[str, Any], variants: tuple[str, ...], verifier: Any, console: Any
) -> dict[str, Any]:
    from rich.console import Console
    from transformers.utils import logging as hf_logging

    from ..policy.generation import HFGenerator

    hf_logging.disable_progress_bar()  # our own bars say what is happening
    console = console or Console()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    seed = teach["seed"]
    torch.manual_seed(seed)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    fmt: PromptFormat = get_format(cfg.rollout.prompt_format)

    def progress() -> Any:
        return progress_bar(console=console, transient=True)

    # 1-3. data, the tiny model, supervised fine-tuning on the human proofs
    t = time.perf_counter()
    train, held = demo_problems(cfg, seed=seed)
    console.print(
        f"[bold]data[/]: {len(train)} training theorems, {len(held)} held-out theorems "
        f"(short stdlib proofs, split by module)"
    )
    model, tok, sft_dir, losses = _teach(teach, fmt, train, out, console, progress, timings, started=t)

    ev = cfg.eval
    results: dict[str, EvalResult] = {}
    uplifts: dict[str, UpliftRate] = {}
    runs: dict[str, list[dict[str, float]]] = {}

    def run_eval(label: str, m: Any) -> EvalResult:
        gen = HFGenerator(m, tok, batch_size=64)
        with progress() as bar:
            task = bar.add_task(f"pass@k on held-out: {label}", total=len(held))
            res = evaluate(
                gen,
                held,
                fmt,
                verifier,
                n=ev.samples,
                ks=ev.ks,
                temperature=ev.temperature,
                top_p=ev.top_p,
                max_tokens=ev.max_tokens,
                seed=seed + 7,
                tokenizer=tok,
                label=label,
                samples_path=out / f"samples-{label}.jsonl",
                on_chunk=lambda k: bar.update(task, advance=k),
            )
        console.print(
            f"  {label}: "
            + ", ".join(f"pass@{k} {100 * v['unbiased']:.1f}%" for k, v in res.table().items())
            + f"  ({res.seconds:.0f} s)"
        )
        return res

    # 4. before RL
    t = time.perf_counter()
    results["SFT (before RL)"] = before = run_eval("sft", model)
    timings["eval_before_s"] = time.perf_counter() - t

    # 5. GRPO, plain and with the unlikeliness reward, each from the SFT model
    for name in variants:
        t = time.perf_counter()
        policy, runs[name] = _grpo_arm(cfg, name, VARIANTS[name], sft_dir, tok, verifier, train, out, console, progress)
        timings[f"rl_{name}_s"] = time.perf_counter() - t
        t = time.perf_counter()
        results[f"after {name}"] = run_eval(name, policy)
        uplifts[name] = uplift_between(model, policy, tok, before.groups)
        timings[f"eval_{name}_s"] = time.perf_counter() - t

    timings["total_s"] = time.perf_counter() - t_start
    plots = {
        "pass_at_k": plot_pass_at_k(results, out / "pass_at_k.png", "held-out Coq stdlib theorems"),
        "rewards": _plot_rewards(runs, out / "train_valid.png"),
        "uplift": plot_uplift(uplifts, out / "uplift.png"),
    }
    summary = {
        "config": {
            "recipe": "demo",
            "run": cfg.to_dict(),
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in teach.items()},
            "held_out_fraction": HELD_OUT_FRACTION,
            "max_statement_chars": MAX_STATEMENT_CHARS,
            "variants": list(variants),
        },
        "problems": {"train": len(train), "held_out_evaluated": len(held)},
        "sft_loss": losses,
        "eval": {label: r.to_json() for label, r in results.items()},
        "uplift": {k: u.to_json() for k, u in uplifts.items()},
        "timings": timings,
        "verify": {"backend": cfg.verify.backend, "workers": cfg.verify.workers, "timeout": verifier.timeout},
        "environment": environment(),
        "plots": {k: str(p.name) for k, p in plots.items()},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "report.md").write_text(_report(summary, results, uplifts))
    console.print()
    console.print(markdown_table(results))
    console.print(f"\nreport: {out / 'report.md'}  ({timings['total_s']:.0f} s in all)")
    return summary


def _teach(
    teach: dict[str, Any],
    fmt: PromptFormat,
    train: list[Any],
    out: Path,
    console: Any,
    progress: Any,
    timings: dict[str, float],
    *,
    started: float,
) -> tuple[Any, Any, Path, list[float]]:
    """The tiny model built on the training proofs' text, then supervised fine-tuning on them (``teach``: ``seed``,
    ``epochs``, ``lr``, ``batch``, ``model`` shape, ``sft_model``, as :func:`run_demo` takes them); the SFT model
    is saved in ``out/sft-model``. Returns the model, its tokenizer, that folder and the losses (none when
    ``teach["sft_model"]`` was loaded instead)."""
    from ..policy.model import load_policy
    from ..policy.tiny import build_tiny_model

    if teach.get("sft_model") is not None:
        model, tok = load_policy(teach["sft_model"], device="cpu")
        timings["data_and_model_s"] = time.perf_counter() - started
        console.print(f"[bold]SFT[/]: the model taught before, loaded from {teach['sft_model']}")
        return model, tok, Path(teach["sft_model"]), []

    corpus = [fmt.prompt(p) + fmt.completion(p, p.proof) for p in train]
    model_dir = build_tiny_model(out / "tiny-model", corpus, seed=teach["seed"], **teach["model"])
    model, tok = load_policy(model_dir, device="cpu")
    timings["data_and_model_s"] = time.perf_counter() - started

    t = time.perf_counter()
    pairs = [(fmt.prompt(p, tok), fmt.completion(p, p.proof)) for p in train]
    with progress() as bar:
        task = bar.add_task("teaching the tiny model (SFT)", total=teach["epochs"])
        losses = supervised_finetune(
            model,
            tok,
            pairs,
            epochs=teach["epochs"],
            lr=teach["lr"],
            batch=teach["batch"],
            seed=teach["seed"],
            on_epoch=lambda _epoch, _loss: bar.update(task, advance=1),
        )
    sft_dir = out / "sft-model"
    model.save_pretrained(sft_dir)
    tok.save_pretrained(sft_dir)
    timings["sft_s"] = time.perf_counter() - t
    console.print(
        f"[bold]SFT[/]: {teach['epochs']} epochs on {len(pairs)} proofs, loss {losses[0]:.2f} → {losses[-1]:.2f}"
    )
    return model, tok, sft_dir, losses


def _grpo_arm(
    cfg: GRPOConfig,
    name: str,
    unlikely: str,
    sft_dir: Path,
    tok: Any,
    verifier: Any,
    train: list[Any],
    out: Path,
    console: Any,
    progress: Any,
) -> tuple[Any, list[dict[str, float]]]:
    """One GRPO run (``cfg``) from the SFT model (``reward.unlikeliness`` = ``unlikely``) in ``out/name``; the
    trained policy and its metrics rows."""
    from ..policy.generation import HFGenerator
    from ..policy.model import load_policy
    from ..train.whole_proof import Trainer

    policy, _ = load_policy(sft_dir, device="cpu")
    rcfg = validate(
        GRPOConfig, apply_overrides(cfg.to_dict(), [f"out={out / name}", f"reward.unlikeliness={unlikely}"])
    )
    gen = HFGenerator(policy, tok, batch_size=64)
    trainer = Trainer(rcfg, policy, tok, gen, verifier, train)
    with progress() as bar:
        task = bar.add_task(f"GRPO: {name}", total=rcfg.steps)
        bar.update(task, completed=trainer.resume())
        trainer.fit(progress=lambda s, m: bar.update(task, completed=s))
    rows = [json.loads(line) for line in (Path(rcfg.out) / "metrics.jsonl").read_text().splitlines()]
    console.print(
        f"[bold]{name}[/]: {rcfg.steps} steps; valid on training theorems in the last steps: "
        + ", ".join(f"{100 * r.get('valid/turn1', 0):.0f}%" for r in rows[-3:])
    )
    return policy, rows


def _report(summary: dict[str, Any], results: dict[str, EvalResult], uplifts: dict[str, UpliftRate]) -> str:
    t = summary["timings"]
    lines = [
        "# proofrl demo",
        "",
        f"Tiny model, Coq {summary['problems']['train']} training theorems, "
        f"{summary['problems']['held_out_evaluated']} held-out theorems (other modules), "
        f"{next(iter(results.values())).n} samples per theorem.",
        "",
        "## pass@k on held-out theorems",
        "",
        "Unbiased estimator, in %; in brackets the chunked estimate (mean ± std over chunks).",
        "",
        markdown_table(results),
        "",
        "![pass@k](pass_at_k.png)",
        "",
        "## Training",
        "",
        f"SFT loss by epoch: {', '.join(f'{x:.2f}' for x in summary['sft_loss']) or 'none (taught before, loaded)'}.",
        "",
        "![valid samples during GRPO](train_valid.png)",
        "",
        "## Uplift rate over the SFT model",
        "",
        "Fraction of correct samples (drawn from the SFT model on held-out theorems) whose log-probability rose,"
        " by their rank under the SFT model (0 = most likely).",
        "",
        "![uplift](uplift.png)",
        "",
    ]
    for name, u in uplifts.items():
        rates = [f"{r:.2f}" if r == r else "–" for r in u.rates]
        lines.append(f"- {name}: {' '.join(rates)} (correct samples per rank: {' '.join(map(str, u.counts))})")
    lines += ["", "## Time", "", *(f"- {k}: {v:.0f} s" for k, v in t.items()), ""]
    return "\n".join(lines)


def run_part(ctx: Any) -> dict[str, Any]:
    """The ``whole-proof`` part of ``proofrl demo`` (:mod:`proofrl.demo`): :func:`run_demo` into ``ctx.out``, with
    ``ctx.whole_proof`` (``overrides`` of the recipe, and :func:`run_demo`'s keyword arguments)."""
    kw = dict(ctx.whole_proof)
    overrides = [f"seed={ctx.seed}", f"verify.workers={ctx.workers}", *kw.pop("overrides", ()), f"out={ctx.out}"]
    return run_demo(demo_config(overrides), seed=ctx.seed, console=ctx.console, **kw)
