"""Tactic-level metrics (LeanListener, arXiv:2503.09730 §4), over the tactic rollouts of :mod:`proofrl.rollout.tactics`.

* **Metrics** (:func:`tactic_metrics`): k tactics sampled per state (temperature 1), then

  - **Prec@k**: valid samples / k, averaged over states (a sample cut by ``max_tokens`` or empty is invalid;
    duplicates count as often as they were drawn);
  - **0-precision**: the share of states where none of the k samples is valid;
  - **mean tactic length**: characters of the sampled tactics (where DPO's length bias shows);

  and :func:`proving_rate`: proved share and time per theorem under best-first search at a fixed budget
  (:func:`proofrl.search.run.search_many`, each proof accepted only by the fresh final check).

``proofrl eval tactics --model DIR --states FILE -k 8`` (:func:`cli_eval_tactics`) writes ``report.md``,
``summary.json``, ``states.jsonl`` and ``prec.png``.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..provers.base import Theorem
from ..rollout.tactics import GroupRun, StatePoint, TacticSampler, coq_pool, run_groups, state_points, tactic_of

# ------------------------------------------------------------------------------------------------- metrics


@dataclass
class StateScore:
    key: str
    theorem: str
    k: int
    valid: int
    """valid samples among the k"""
    tactics: list[str]
    failures: dict[str, int]
    error: str = ""


@dataclass
class ProvingResult:
    theorems: int
    proved: int
    seconds_mean: float
    """mean wall-clock seconds per theorem (all theorems)"""
    seconds_proved_mean: float
    budget: dict[str, Any]

    @property
    def rate(self) -> float:
        return self.proved / max(self.theorems, 1)


@dataclass
class TacticMetrics:
    label: str
    k: int
    states: int
    """states scored (those reached; unreached ones are listed in ``errors``)"""
    prec_at_k: float
    zero_precision: float
    mean_length: float
    """mean characters of the sampled whole tactics"""
    failures: dict[str, int]
    seconds: float
    errors: int = 0
    proving: ProvingResult | None = None
    per_state: list[StateScore] = field(default_factory=list, repr=False)

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("per_state", "proving")}
        if self.proving is not None:
            d["proving"] = asdict(self.proving) | {"rate": self.proving.rate}
        return d


def score_states(groups: Sequence[GroupRun], samples: Sequence[Sequence[str | None]], k: int) -> list[StateScore]:
    """Per state: how many of its k samples the prover accepted (every drawn copy counts), failure kinds."""
    out = []
    for g, tactics in zip(groups, samples, strict=True):
        if g.before is None:
            out.append(StateScore(g.point.key, g.point.theorem.name, k, 0, [t or "" for t in tactics], {}, g.error))
            continue
        runs = [g.of(t) for t in tactics]
        fails = Counter(str(r.failure) for r in runs if not r.valid)
        out.append(
            StateScore(
                g.point.key,
                g.point.theorem.name,
                k,
                sum(r.valid for r in runs),
                [t or "" for t in tactics],
                dict(fails),
            )
        )
    return out


def summarize(label: str, scores: Sequence[StateScore], k: int, seconds: float = 0.0) -> TacticMetrics:
    """Prec@k, 0-precision, mean length and failure counts over the states that were reached."""
    ok = [s for s in scores if not s.error]
    lengths = [len(t) for s in ok for t in s.tactics if t]
    fails: Counter[str] = Counter()
    for s in ok:
        fails.update(s.failures)
    n = max(len(ok), 1)
    return TacticMetrics(
        label,
        k,
        len(ok),
        sum(s.valid / s.k for s in ok) / n,
        sum(s.valid == 0 for s in ok) / n,
        sum(lengths) / max(len(lengths), 1),
        dict(fails),
        seconds,
        len(scores) - len(ok),
        None,
        list(scores),
    )


def tactic_metrics(
    model: Any,
    tokenizer: Any,
    points: Sequence[StatePoint],
    pool: Any,
    *,
    k: int = 8,
    label: str = "model",
    chunk: int = 16,
    timeout: float = 10.0,
    workers: int = 1,
    max_tokens: int = 64,
    seed: int = 0,
    progress: Any = None,
) -> TacticMetrics:
    """Sample ``k`` tactics at each state and run them (see the module docstring). ``progress(n)`` is called
    after each chunk of states."""
    t0 = time.perf_counter()
    sampler = TacticSampler(model, tokenizer, max_tokens=max_tokens, seed=seed)
    scores: list[StateScore] = []
    for s in range(0, len(points), chunk):
        part = list(points[s : s + chunk])
        drawn = [[tactic_of(c) for c in g] for g in sampler.sample([p.text for p in part], k)]
        groups = run_groups(pool, list(zip(part, drawn, strict=True)), timeout=timeout, workers=workers)
        scores += score_states(groups, drawn, k)
        if progress is not None:
            progress(len(part))
    return summarize(label, scores, k, time.perf_counter() - t0)


def proving_rate(
    model: Any,
    tokenizer: Any,
    theorems: Sequence[Theorem],
    out_dir: Path,
    *,
    pool: Any = None,
    expansions: int = 8,
    width: int = 8,
    seconds: float = 60.0,
    tactic_timeout: float = 10.0,
    workers: int = 1,
    seed: int = 0,
) -> ProvingResult:
    """Best-first search (ReProver's cumulative log-prob priority) over ``theorems`` at a fixed budget:
    ``expansions`` nodes of ``width`` tactics each, at most ``seconds`` per theorem. Proved = the fresh
    final check accepted the proof the search found."""
    from ..policy.tactic import HFTacticPolicy
    from ..search.run import search_many

    budget = {
        "max_steps": expansions,
        "width": width,
        "seconds": seconds,
        "tactic_timeout": tactic_timeout,
    }
    policy = HFTacticPolicy(model, tokenizer, max_tokens=64, seed=seed)
    results = search_many(
        list(theorems), policy, "best-first", budget, out_dir, workers=workers, pool=pool, progress=False
    )
    proved = [r for r in results if r.status == "proved"]
    mean = lambda xs: sum(xs) / max(len(xs), 1)  # noqa: E731
    return ProvingResult(
        len(results), len(proved), mean([r.seconds for r in results]), mean([r.seconds for r in proved]), budget
    )


def held_out_theorems(points: Sequence[StatePoint], limit: int | None = None) -> list[Theorem]:
    """The distinct theorems of some states (in order), for the proving rate."""
    seen: dict[tuple[str, str, str], Theorem] = {}
    for p in points:
        seen.setdefault((p.theorem.name, p.theorem.statement, p.theorem.header), p.theorem)
    out = list(seen.values())
    return out if limit is None else out[:limit]


# -------------------------------------------------------------------------------------------------- report


def markdown_table(results: Sequence[TacticMetrics]) -> str:
    k = results[0].k if results else 8
    lines = [
        f"| model | states | Prec@{k} | 0-precision | mean tactic length (chars) | proved | s / theorem |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in results:
        p = m.proving
        proved = f"{p.proved}/{p.theorems} ({100 * p.rate:.1f} %)" if p else "–"
        secs = f"{p.seconds_mean:.2f}" if p else "–"
        lines.append(
            f"| {m.label} | {m.states} | {100 * m.prec_at_k:.1f} % | {100 * m.zero_precision:.1f} % | "
            f"{m.mean_length:.1f} | {proved} | {secs} |"
        )
    return "\n".join(lines)


def plot_metrics(results: Sequence[TacticMetrics], path: Path) -> None:
    """Bars: Prec@k and 0-precision (%) for each model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [m.label for m in results]
    xs = range(len(results))
    fig, ax = plt.subplots(figsize=(max(4.5, 1.4 * len(results) + 2), 3.6))
    w = 0.38
    ax.bar([x - w / 2 for x in xs], [100 * m.prec_at_k for m in results], w, label=f"Prec@{results[0].k}")
    ax.bar([x + w / 2 for x in xs], [100 * m.zero_precision for m in results], w, label="0-precision")
    ax.set_xticks(list(xs), labels, rotation=15)
    ax.set_ylabel("%")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(results: Sequence[TacticMetrics], out: Path, *, title: str = "Tactic metrics", note: str = "") -> Path:
    """``report.md`` (table + plot), ``summary.json`` and ``states.jsonl`` (per state, per model) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    plot_metrics(results, out / "prec.png")
    with open(out / "states.jsonl", "w") as f:
        for m in results:
            for s in m.per_state:
                f.write(json.dumps({"model": m.label, **asdict(s)}) + "\n")
    (out / "summary.json").write_text(json.dumps({m.label: m.to_json() for m in results}, indent=2))
    text = [f"# {title}", "", note, "", markdown_table(results), "", "![Prec@k and 0-precision](prec.png)", ""]
    (out / "report.md").write_text("\n".join(text))
    return out / "report.md"


# ----------------------------------------------------------------------------------------------------- CLI


def load_points(path: Path, *, limit: int | None = None, seed: int = 0) -> list[StatePoint]:
    """States of a transitions JSONL file, a random ``limit`` of them (fixed by ``seed``) in file order."""
    from ..data.tactics import read_transitions

    try:
        records = read_transitions(path)
    except (OSError, ValueError, KeyError) as e:
        raise ConfigError(f"--states {path}: not a tactic transitions JSONL file ({type(e).__name__}: {e})") from None
    try:
        points = state_points(records)
    except (KeyError, TypeError) as e:
        raise ConfigError(
            f"--states {path}: a record lacks {e} (want theorem, statement, header, step, state_before, tactic)"
        ) from None
    if not points:
        raise ConfigError(f"--states {path}: no states (every record structural, too long, or none)")
    if limit is not None and limit < len(points):
        keep = sorted(random.Random(seed).sample(range(len(points)), limit))
        points = [points[i] for i in keep]
    return points


def cli_eval_tactics(
    model_dir: Path,
    states: Path,
    k: int = 8,
    out: Path = Path("runs/eval-tactics"),
    *,
    limit: int | None = 200,
    theorems: int = 0,
    expansions: int = 8,
    search_seconds: float = 60.0,
    timeout: float = 10.0,
    workers: int = 2,
    seed: int = 0,
    console: Any = None,
) -> TacticMetrics:
    """What ``proofrl eval tactics`` runs: metrics of one model on the states of one file, and a report."""
    from rich.console import Console

    from ..policy.model import load_policy
    from ..progress import progress_bar

    console = console or Console()
    if k < 1:
        raise ConfigError(f"-k must be >= 1, got {k}")
    points = load_points(states, limit=limit, seed=seed)
    m, tok = load_policy(model_dir, device="cpu")
    with coq_pool(workers, timeout) as pool, progress_bar(console=console) as bar:
        task = bar.add_task(f"Prec@{k} on {len(points)} states", total=len(points))
        res = tactic_metrics(
            m,
            tok,
            points,
            pool,
            k=k,
            label=model_dir.name,
            timeout=timeout,
            workers=workers,
            seed=seed,
            progress=lambda n: bar.update(task, advance=n),
        )
        if theorems:
            bar.add_task(f"best-first search on {theorems} theorems", total=None)
            res.proving = proving_rate(
                m,
                tok,
                held_out_theorems(points, theorems),
                out / "search",
                pool=pool,
                expansions=expansions,
                width=k,
                seconds=search_seconds,
                tactic_timeout=timeout,
                workers=workers,
                seed=seed,
            )
    note = (
        f"`{model_dir.name}` on {res.states} states of `{states.name}` ({res.errors} not reached), {k} samples "
        f"each at temperature 1."
        + (
            f" Proving: best-first search, {expansions} expansions of width {k}, {search_seconds:g} s per theorem."
            if theorems
            else ""
        )
    )
    write_report([res], out, note=note)
    console.print(markdown_table([res]))
    console.print(f"report: {out / 'report.md'}")
    return res
