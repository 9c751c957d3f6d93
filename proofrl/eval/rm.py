"""Evaluating process reward models: the EVA paper's Table 4 (``proofrl eval rm``).

Metrics on held-out judged proposals (records of :func:`proofrl.train.eva.read_records`):

* **MSE per dimension**: mean (prediction − target)² of each score (logic, align, clarity).
* **Pearson r**: between the predicted and the target *combined* score (the weighted mean of the dimensions,
  :func:`~proofrl.rewards.eva.combined_score`), over all records.
* **Ranking accuracy**: over pairs of proposals at the same tactic state whose target combined scores differ
  by at least ``margin`` (0.5), the share the model orders the same way; a tie counts one half (a textual
  integer score ties often: the quantisation EVA removes).

Models (:func:`table4`), each scored with greedy decoding:

* ``zero-shot``: the base model untrained; its text rarely holds the JSON, so its score is E[R] read at a
  probe ``"<dim>_score":`` (:class:`~proofrl.rewards.eva.EvaScorer`), flagged;
* ``sft-text``: the SFT-only generative RM (α = 0), the score parsed from its text (3.0, the middle, where a
  dimension cannot be parsed; counted);
* ``value-head``: :class:`~proofrl.train.eva.RegressionHeadRM`, MSE-trained linear head;
* ``eva``: L_SFT + α·L_EVA, E[R] from the anchor logits. ``sft-eR`` (the SFT-only model's E[R]) and
  ``eva-text`` (EVA's parsed text) are reported beside them, to separate the loss from the read-out.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..rewards.eva import DIMENSIONS, combined_score

MIDDLE = 3.0
"""the prediction for a dimension whose text score cannot be parsed"""


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's r; NaN when either side is constant (r is undefined there, not 0)."""
    n = len(x)
    if n < 2:
        return float("nan")
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def ranking_pairs(records: Sequence[Any], weights: Mapping[str, float] | None = None, margin: float = 0.5) -> list[tuple[int, int]]:
    """(good, flawed) index pairs at the same state whose target combined scores differ by ≥ ``margin``."""
    by_state: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        by_state[r.state].append(i)
    pairs = []
    for idx in by_state.values():
        for a in idx:
            for b in idx:
                if combined_score(records[a].scores, weights) - combined_score(records[b].scores, weights) >= margin:
                    pairs.append((a, b))
    return pairs


def metrics(preds: Sequence[Mapping[str, float]], records: Sequence[Any], *, dims: Sequence[str] = DIMENSIONS,
            weights: Mapping[str, float] | None = None, margin: float = 0.5) -> dict[str, Any]:
    """MSE per dimension, Pearson r of the combined score, ranking accuracy (see the module docstring)."""
    mse = {d: sum((p[d] - r.scores[d]) ** 2 for p, r in zip(preds, records)) / max(len(records), 1) for d in dims}
    pc = [combined_score({d: p[d] for d in dims}, weights) for p in preds]
    tc = [combined_score({d: r.scores[d] for d in dims}, weights) for r in records]
    pairs = ranking_pairs(records, weights, margin)
    won = sum(1.0 if pc[a] > pc[b] else 0.5 if pc[a] == pc[b] else 0.0 for a, b in pairs)
    return {"mse": {d: round(v, 4) for d, v in mse.items()}, "pearson": pearson(pc, tc),
            "ranking_acc": won / len(pairs) if pairs else float("nan"), "pairs": len(pairs), "n": len(records)}


def _fill(scores: Mapping[str, float], dims: Sequence[str]) -> dict[str, float]:
    return {d: float(scores.get(d, MIDDLE)) for d in dims}


def evaluate_generative(scorer: Any, records: Sequence[Any], *, margin: float = 0.5) -> dict[str, Any]:
    """A generative RM scored both ways: ``eva`` (E[R] from the anchor logits) and ``text`` (the parsed
    integers), with the flags of its outputs counted."""
    from ..train.eva import prompt_of

    dims = scorer.dims
    prompts = [prompt_of(r, scorer.max_state_chars) for r in records]
    outputs = scorer.generate(prompts)
    expected = scorer.read_expected(prompts, outputs)
    from ..rewards.eva import parse_scores

    parsed = [parse_scores(o, dims) for o in outputs]
    flags: Counter = Counter()
    for p, (_, f) in zip(parsed, expected):
        for x in {*(fl.split(":")[0] for fl in p.flags), *(fl.split(":")[0] for fl in f)}:
            flags[x] += 1
    out = {"eva": metrics([e for e, _ in expected], records, dims=dims, weights=scorer.weights, margin=margin),
           "text": metrics([_fill(p.scores, dims) for p in parsed], records, dims=dims, weights=scorer.weights, margin=margin),
           "flags": dict(flags), "examples": outputs[:3]}  # fmt: skip
    return out


@dataclass(frozen=True)
class Table4Settings:
    alpha: float = 0.5
    tau: float = 1.0
    lr: float = 2e-5
    batch: int = 8
    epochs: int = 3
    lora: bool = True
    seed: int = 0
    max_new_tokens: int = 96
    max_state_chars: int = 600
    device: str | None = None


def table4(base: str | Path, train: Sequence[Any], held_out: Sequence[Any], settings: Table4Settings = Table4Settings(),
           *, console: Any = None, out: Path | None = None) -> dict[str, Any]:
    """Train the SFT-only generative RM, the value-head RM and EVA from ``base`` on ``train``; score them and
    the untrained base on ``held_out``. Returns ``{"rows": {name: metrics}, "flags", "seconds", "index"}``;
    with ``out``, the EVA model is saved in ``out/eva-model``."""
    import torch

    from ..rewards.eva import EvaScorer
    from ..train.eva import (EvaLoraConfig, RegressionHeadRM, build_examples, load_base, train_eva,
                             train_value_head)  # fmt: skip

    torch.manual_seed(settings.seed)
    lora = EvaLoraConfig(enabled=settings.lora)
    rows: dict[str, Any] = {}
    flags: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    kw = dict(max_new_tokens=settings.max_new_tokens, max_state_chars=settings.max_state_chars, tau=settings.tau)

    def log(msg: str) -> None:
        if console is not None:
            console.print(msg)

    t = time.perf_counter()
    m, tok = load_base(base, lora=None, device=settings.device)
    r = evaluate_generative(EvaScorer(m, tok, **kw), held_out)
    rows["zero-shot"], flags["zero-shot"] = r["eva"], r["flags"]
    seconds["zero-shot"] = time.perf_counter() - t
    index = None
    for name, alpha in (("sft", 0.0), ("eva", settings.alpha)):
        t = time.perf_counter()
        m, tok = load_base(base, lora=lora, device=settings.device)
        ex, rep = build_examples(train, tok, max_state_chars=settings.max_state_chars)
        index = rep.to_json()
        train_eva(m, tok, ex, alpha=alpha, tau=settings.tau, lr=settings.lr, batch=settings.batch,
                  epochs=settings.epochs, seed=settings.seed, console=console)  # fmt: skip
        r = evaluate_generative(EvaScorer(m, tok, **kw), held_out)
        if name == "sft":
            rows["sft-text"], rows["sft-eR"] = r["text"], r["eva"]
        else:
            rows["eva"], rows["eva-text"] = r["eva"], r["text"]
            if out is not None:
                m.save_pretrained(out / "eva-model")
                tok.save_pretrained(out / "eva-model")
        flags[name] = r["flags"]
        seconds[name] = time.perf_counter() - t
        log(f"{name}: trained and scored in {seconds[name]:.0f} s; flags {r['flags']}")
    t = time.perf_counter()
    m, tok = load_base(base, lora=lora, device=settings.device)
    vh = RegressionHeadRM(m, tok, max_state_chars=settings.max_state_chars)
    train_value_head(vh, train, lr=settings.lr, batch=settings.batch, epochs=settings.epochs, seed=settings.seed)
    rows["value-head"] = metrics(vh.predict(held_out), held_out)
    seconds["value-head"] = time.perf_counter() - t
    order = ["zero-shot", "sft-text", "sft-eR", "value-head", "eva-text", "eva"]
    return {"rows": {k: rows[k] for k in order}, "flags": flags, "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "index": index, "train": len(train), "held_out": len(held_out)}


ROW_NAMES = {"zero-shot": "Zero-shot base (E[R] at a probe)", "sft-text": "SFT-only generative RM (text score)",
             "sft-eR": "SFT-only RM, E[R] read-out", "value-head": "Value-head RM (linear head, MSE)",
             "eva-text": "EVA model, text score", "eva": "EVA (E[R] over anchors)"}  # fmt: skip


def _f(x: float, nd: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def markdown_table(rows: Mapping[str, Mapping[str, Any]], dims: Sequence[str] = DIMENSIONS) -> str:
    head = "| model | " + " | ".join(f"{d} MSE ↓" for d in dims) + " | Pearson r ↑ | ranking acc ↑ |"
    lines = [head, "|---" * (3 + len(dims)) + "|"]
    for name, m in rows.items():
        lines.append(f"| {ROW_NAMES.get(name, name)} | " + " | ".join(_f(m["mse"][d]) for d in dims)
                     + f" | {_f(m['pearson'])} | {_f(m['ranking_acc'])} |")
    return "\n".join(lines)


def plot_table(rows: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """Pearson r and ranking accuracy per model, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, key, title in zip(axes, ("pearson", "ranking_acc"), ("Pearson r (combined score)", "ranking accuracy")):
        vals = [0.0 if math.isnan(rows[n][key]) else rows[n][key] for n in names]
        ax.bar(range(len(names)), vals, color=["#999" if n != "eva" else "#c44" for n in names])
        for i, n in enumerate(names):
            if math.isnan(rows[n][key]):  # undefined (a constant prediction has no correlation), not zero
                ax.annotate("n/a", (i, 0.0), ha="center", va="bottom")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
        ax.set_title(title)
        ax.axhline(0.5 if key == "ranking_acc" else 0.0, color="k", lw=0.6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def cli_eval_rm(data: Path, *, model: Path | None = None, train: Path | None = None, base: Path | None = None,
                out: Path = Path("runs/eval-rm"), epochs: int = 3, lr: float = 2e-5, batch: int = 8, alpha: float = 0.5,
                max_new_tokens: int = 96, seed: int = 0) -> dict[str, Any]:
    """``proofrl eval rm``: score one trained generative RM (``--model``) on ``data``, or, with ``--train``
    and ``--base``, the whole Table 4. Writes ``out/report.md``, ``out/summary.json``, ``out/table4.png``."""
    from rich.console import Console

    from ..errors import ConfigError
    from ..rewards.eva import EvaScorer
    from ..train.eva import read_records

    console = Console()
    held, skipped = read_records(data)
    if not held:
        raise ConfigError(f"{data}: no usable EVA record (skipped: {dict(skipped)})")
    out.mkdir(parents=True, exist_ok=True)
    if train is not None or base is not None:
        if train is None or base is None:
            raise ConfigError("Table 4 needs both --train (JSONL) and --base (a model directory)")
        tr, _ = read_records(train)
        if not tr:
            raise ConfigError(f"{train}: no usable EVA record")
        res = table4(base, tr, held, Table4Settings(alpha=alpha, lr=lr, batch=batch, epochs=epochs, seed=seed,
                                                    max_new_tokens=max_new_tokens), console=console, out=out)  # fmt: skip
        rows = res["rows"]
    else:
        if model is None:
            raise ConfigError("give --model DIR (a trained EVA model), or --train and --base for Table 4")
        if not model.is_dir():
            raise ConfigError(f"--model {model}: no model directory there")
        r = evaluate_generative(EvaScorer.from_dir(model, max_new_tokens=max_new_tokens), held)
        rows = {"eva": r["eva"], "eva-text": r["text"]}
        res = {"rows": rows, "flags": r["flags"], "examples": r["examples"]}
    table = markdown_table(rows)
    plot_table(rows, out / "table4.png")
    (out / "summary.json").write_text(json.dumps({**res, "skipped": dict(skipped)}, indent=2, default=str))
    (out / "report.md").write_text(f"# proofrl eval rm\n\n{len(held)} held-out records from `{data.name}`; greedy "
                                   f"decoding.\n\n{table}\n\n![Table 4](table4.png)\n")  # fmt: skip
    console.print(table)
    console.print(f"report: {out / 'report.md'}")
    return res
