"""Evaluating process reward models: the EVA paper's Table 4 (``proofrl eval rm``).

Metrics on held-out judged proposals (records of :func:`read_records`, the EVA data format: one JSON line per
judged proposal, ``state``, ``proposal``, ``critique``, ``scores``):

* **MSE per dimension**: mean (prediction − target)² of each score (logic, align, clarity).
* **Pearson r**: between the predicted and the target *combined* score (the weighted mean of the dimensions,
  :func:`~proofrl.rewards.eva.combined_score`), over all records.
* **Ranking accuracy**: over pairs of proposals at the same tactic state whose target combined scores differ
  by at least ``margin`` (0.5), the share the model orders the same way; a tie counts one half (a textual
  integer score ties often: the quantisation EVA removes).

Models of Table 4 (trained by :func:`proofrl.bench.eva_table4.table4`; this module only scores), each with greedy
decoding:

* ``zero-shot``: the base model untrained; its text rarely holds the JSON, so its score is E[R] read at a
  probe ``"<dim>_score":`` (:class:`~proofrl.rewards.eva.EvaScorer`), flagged;
* ``sft-text``: the SFT-only generative RM (α = 0), the score parsed from its text (3.0, the middle, where a
  dimension cannot be parsed; counted);
* ``value-head``: :class:`~proofrl.bench.eva_table4.RegressionHeadRM`, MSE-trained linear head;
* ``eva``: L_SFT + α·L_EVA, E[R] from the anchor logits. ``sft-eR`` (the SFT-only model's E[R]) and
  ``eva-text`` (EVA's parsed text) are reported beside them, to separate the loss from the read-out.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..rewards.eva import DIMENSIONS, INSTRUCTION, combined_score, rm_prompt, score_key

MIDDLE = 3.0
"""the prediction for a dimension whose text score cannot be parsed"""


# -- the data format ------------------------------------------------------------------------------------------


@dataclass
class Record:
    state: str
    proposal: str
    critique: str
    scores: dict[str, float]
    instruction: str = INSTRUCTION
    extra: dict[str, Any] = field(default_factory=dict)


def parse_record(obj: Any, dims: Sequence[str] = DIMENSIONS) -> Record:
    """One JSON line → :class:`Record`; ``ValueError`` naming the field to fix."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    for k in ("state", "proposal", "critique"):
        if not isinstance(obj.get(k), str):
            raise ValueError(f"field {k!r} missing or not text")
    raw = obj.get("scores", obj)
    if not isinstance(raw, dict):
        raise ValueError("field 'scores' is not an object")
    scores = {}
    for d in dims:
        v = raw.get(d, raw.get(score_key(d)))
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"score {d!r} missing or not a number")
        if not 1.0 <= v <= 5.0:
            raise ValueError(f"score {d!r} = {v} outside 1.0-5.0")
        scores[d] = float(v)
    extra = {k: v for k, v in obj.items() if k not in ("state", "proposal", "critique", "scores", "instruction")}
    return Record(obj["state"], obj["proposal"], obj["critique"], scores, obj.get("instruction") or INSTRUCTION, extra)


def read_records(path: str | Path, dims: Sequence[str] = DIMENSIONS) -> tuple[list[Record], Counter]:
    """Records of a JSONL file and the reasons lines were skipped (``line N: why`` counted by why)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no EVA data file at {path}")
    out: list[Record] = []
    skipped: Counter[str] = Counter()
    for line in p.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(parse_record(json.loads(line), dims))
        except ValueError as e:  # json.JSONDecodeError is one
            skipped[str(e).split(":")[0] if isinstance(e, json.JSONDecodeError) else str(e)] += 1
    return out, skipped


def prompt_of(r: Record, max_state_chars: int = 600) -> str:
    return rm_prompt(r.state, r.proposal, r.instruction, max_state_chars)


# -- metrics --------------------------------------------------------------------------------------------------


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's r; NaN when either side is constant (r is undefined there, not 0)."""
    n = len(x)
    if n < 2:
        return float("nan")
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def ranking_pairs(
    records: Sequence[Any], weights: Mapping[str, float] | None = None, margin: float = 0.5
) -> list[tuple[int, int]]:
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


def metrics(
    preds: Sequence[Mapping[str, float]],
    records: Sequence[Any],
    *,
    dims: Sequence[str] = DIMENSIONS,
    weights: Mapping[str, float] | None = None,
    margin: float = 0.5,
) -> dict[str, Any]:
    """MSE per dimension, Pearson r of the combined score, ranking accuracy (see the module docstring)."""
    mse = {
        d: sum((p[d] - r.scores[d]) ** 2 for p, r in zip(preds, records, strict=True)) / max(len(records), 1)
        for d in dims
    }
    pc = [combined_score({d: p[d] for d in dims}, weights) for p in preds]
    tc = [combined_score({d: r.scores[d] for d in dims}, weights) for r in records]
    pairs = ranking_pairs(records, weights, margin)
    won = sum(1.0 if pc[a] > pc[b] else 0.5 if pc[a] == pc[b] else 0.0 for a, b in pairs)
    return {
        "mse": {d: round(v, 4) for d, v in mse.items()},
        "pearson": pearson(pc, tc),
        "ranking_acc": won / len(pairs) if pairs else float("nan"),
        "pairs": len(pairs),
        "n": len(records),
    }


def _fill(scores: Mapping[str, float], dims: Sequence[str]) -> dict[str, float]:
    return {d: float(scores.get(d, MIDDLE)) for d in dims}


def evaluate_generative(scorer: Any, records: Sequence[Any], *, margin: float = 0.5) -> dict[str, Any]:
    """A generative RM scored both ways: ``eva`` (E[R] from the anchor logits) and ``text`` (the parsed
    integers), with the flags of its outputs counted."""
    dims = scorer.dims
    prompts = [prompt_of(r, scorer.max_state_chars) for r in records]
    outputs = scorer.generate(prompts)
    expected = scorer.read_expected(prompts, outputs)
    from ..rewards.eva import parse_scores

    parsed = [parse_scores(o, dims) for o in outputs]
    flags: Counter = Counter()
    for p, (_, f) in zip(parsed, expected, strict=True):
        for x in {*(fl.split(":")[0] for fl in p.flags), *(fl.split(":")[0] for fl in f)}:
            flags[x] += 1
    out = {
        "eva": metrics([e for e, _ in expected], records, dims=dims, weights=scorer.weights, margin=margin),
        "text": metrics(
            [_fill(p.scores, dims) for p in parsed], records, dims=dims, weights=scorer.weights, margin=margin
        ),
        "flags": dict(flags),
        "examples": outputs[:3],
    }
    return out


ROW_NAMES = {
    "zero-shot": "Zero-shot base (E[R] at a probe)",
    "sft-text": "SFT-only generative RM (text score)",
    "sft-eR": "SFT-only RM, E[R] read-out",
    "value-head": "Value-head RM (linear head, MSE)",
    "eva-text": "EVA model, text score",
    "eva": "EVA (E[R] over anchors)",
}


def _f(x: float, nd: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def markdown_table(rows: Mapping[str, Mapping[str, Any]], dims: Sequence[str] = DIMENSIONS) -> str:
    head = "| model | " + " | ".join(f"{d} MSE ↓" for d in dims) + " | Pearson r ↑ | ranking acc ↑ |"
    lines = [head, "|---" * (3 + len(dims)) + "|"]
    for name, m in rows.items():
        lines.append(
            f"| {ROW_NAMES.get(name, name)} | "
            + " | ".join(_f(m["mse"][d]) for d in dims)
            + f" | {_f(m['pearson'])} | {_f(m['ranking_acc'])} |"
        )
    return "\n".join(lines)


def plot_table(rows: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """Pearson r and ranking accuracy per model, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, key, title in zip(
        axes, ("pearson", "ranking_acc"), ("Pearson r (combined score)", "ranking accuracy"), strict=True
    ):
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


def write_report(res: Mapping[str, Any], held: int, data: Path, out: Path, skipped: Mapping[str, int]) -> str:
    """``out/report.md``, ``out/summary.json`` and ``out/table4.png`` for the rows of ``res``; the table's text."""
    rows = res["rows"]
    table = markdown_table(rows)
    plot_table(rows, out / "table4.png")
    (out / "summary.json").write_text(json.dumps({**res, "skipped": dict(skipped)}, indent=2, default=str))
    (out / "report.md").write_text(
        f"# proofrl eval rm\n\n{held} held-out records from `{data.name}`; greedy "
        f"decoding.\n\n{table}\n\n![Table 4](table4.png)\n"
    )
    return table


def held_out_records(data: Path) -> tuple[list[Record], Counter]:
    held, skipped = read_records(data)
    if not held:
        raise ConfigError(f"{data}: no usable EVA record (skipped: {dict(skipped)})")
    return held, skipped


def cli_eval_rm(
    data: Path, *, model: Path, out: Path = Path("runs/eval-rm"), max_new_tokens: int = 96
) -> dict[str, Any]:
    """``proofrl eval rm --model DIR``: score one trained generative RM on ``data``. Writes ``out/report.md``,
    ``out/summary.json``, ``out/table4.png``. (Table 4, which trains its models:
    :func:`proofrl.bench.eva_table4.cli_table4`.)"""
    from rich.console import Console

    from ..rewards.eva import EvaScorer

    console = Console()
    held, skipped = held_out_records(data)
    if not model.is_dir():
        raise ConfigError(f"--model {model}: no model directory there")
    out.mkdir(parents=True, exist_ok=True)
    r = evaluate_generative(EvaScorer.from_dir(model, max_new_tokens=max_new_tokens), held)
    res = {"rows": {"eva": r["eva"], "eva-text": r["text"]}, "flags": r["flags"], "examples": r["examples"]}
    console.print(write_report(res, len(held), data, out, skipped))
    console.print(f"report: {out / 'report.md'}")
    return res
