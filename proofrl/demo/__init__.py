"""``proofrl demo``: the whole system on a CPU, with Coq as the judge, in parts that each run alone.

``proofrl demo`` runs every part in order; ``proofrl demo --part search`` runs one. Each part writes its own
folder ``OUT/<part>/`` (``report.md``, ``summary.json``, plots) and returns its summary; the demo then writes
``OUT/report.md`` (every part's report, one after another) and ``OUT/summary.json``. A finished part's summary
and times are a line of ``OUT/runs.jsonl`` (:class:`proofrl.runner.Runner`): a rerun in the same folder keeps
it, and refuses other settings (seed, the whole-proof part's) in one line.

Parts that work on proof states (search, expert iteration, step-level RL, EVA) share the tactic data and the
tiny tactic model through :func:`proofrl.data.assets.tactic_assets`, built once in ``OUT/tactic-assets/`` by
whichever of them runs first, and reused by the others (so each still runs alone).

A part is one entry of :data:`DEMO_PARTS`: a name, the ``module:function`` that runs it (imported only when
the part runs), and one line saying what it shows. The function takes a :class:`DemoContext`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..registry import load_target
from ..runner import Runner, select
from .whole_proof import demo_config, demo_problems, run_demo

__all__ = ["DEMO_PARTS", "DemoContext", "DemoPart", "demo_config", "demo_problems", "run_demo", "run_parts"]


@dataclass(frozen=True)
class DemoPart:
    name: str
    target: str
    """``module:function`` taking a :class:`DemoContext` and returning the part's summary (a JSON mapping)"""
    what: str

    def load(self) -> Any:
        return load_target(self.target)


DEMO_PARTS: dict[str, DemoPart] = {
    p.name: p
    for p in (
        DemoPart(
            "whole-proof",
            "proofrl.demo.whole_proof:run_part",
            "SFT, then GRPO with and without the unlikeliness reward; pass@{1,8,32} before and after",
        ),
        DemoPart(
            "search",
            "proofrl.demo.search:run_part",
            "best-first search and reap's AND-OR MCTS with the tiny tactic model; proved counts at equal budget",
        ),
        DemoPart(
            "expert-iteration",
            "proofrl.demo.expert_iteration:run_part",
            "a round of search-and-learn (policy + value heads); proved counts before and after",
        ),
        DemoPart(
            "step-level",
            "proofrl.demo.step_level:run_part",
            "LeanListener's online step-level GRPO with softplus(Δgoals) rewards; Prec@8 before and after",
        ),
        DemoPart(
            "eva",
            "proofrl.demo.eva:run_part",
            "the EVA process reward model on prover-labelled proposals; MSE, Pearson r, ranking accuracy",
        ),
    )
}


@dataclass
class DemoContext:
    """What every part gets: its own folder, the demo's root (shared assets live there), the seed, the
    number of Coq processes, the console, and the whole-proof part's settings: ``overrides`` of the ``demo``
    recipe and :func:`~proofrl.demo.whole_proof.run_demo`'s keyword arguments (``sft_epochs``, …)."""

    root: Path
    part: str
    seed: int = 0
    workers: int = 2
    console: Any = None
    whole_proof: dict[str, Any] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        path = self.root / self.part
        path.mkdir(parents=True, exist_ok=True)
        return path


def part_names(parts: list[str] | tuple[str, ...] | None) -> list[str]:
    """The parts to run, in the demo's order; an unknown name is a ``ConfigError`` listing the valid ones."""
    return select(parts, DEMO_PARTS, flag="--part", what="demo part")


def run_parts(
    root: Path,
    parts: list[str] | tuple[str, ...] | None = None,
    *,
    seed: int = 0,
    workers: int = 2,
    whole_proof: dict[str, Any] | None = None,
    console: Any = None,
) -> dict[str, Any]:
    """Run the chosen parts (all by default) in order, each unless ``root/runs.jsonl`` has it already; write
    ``root/report.md`` and ``root/summary.json``."""
    from rich.console import Console
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # each long step draws its own bar; transformers' per save and load are noise
    console = console or Console()
    root = Path(root)
    names = part_names(parts)
    whole_proof = dict(whole_proof or {})
    runner = Runner(
        root, ("part",), log="runs.jsonl", config={"seed": seed, "whole_proof": whole_proof}, console=console
    )
    summaries: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for name in names:
        part = DEMO_PARTS[name]
        console.rule(f"[bold]{name}[/]: {part.what}")
        ctx = DemoContext(root, name, seed, workers, console, dict(whole_proof))

        def run_part(part: DemoPart = part, ctx: DemoContext = ctx) -> dict[str, Any]:
            return {"summary": part.load()(ctx)}

        row = runner.run({"part": name}, run_part, label=name)
        summaries[name], seconds[name] = row["summary"], row["seconds"]
        console.print(f"{name}: {seconds[name]:.0f} s, report {ctx.out / 'report.md'}")
    seconds["total"] = sum(seconds.values())
    summary = {"parts": summaries, "seconds": seconds}
    (root / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (root / "report.md").write_text(_index(root, names, seconds))
    console.print(f"\nreport: {root / 'report.md'}  ({seconds['total']:.0f} s in all)")
    return summary


def _index(root: Path, names: list[str], seconds: dict[str, float]) -> str:
    lines = ["# proofrl demo", "", "| part | what it shows | seconds |", "|---|---|---|"]
    lines += [f"| [{n}]({n}/report.md) | {DEMO_PARTS[n].what} | {seconds[n]:.0f} |" for n in names]
    lines += [f"| total | | {seconds['total']:.0f} |", ""]
    lines += [
        "One run is one seed. Whether each paper's claim holds at this scale, over seeds with intervals and a test:",
        "`proofrl bench` (docs/claims.md in the repository).",
        "",
    ]
    for n in names:
        report = root / n / "report.md"
        if report.is_file():  # each part's report, its headings one level down and its images found from here
            text = re.sub(r"^(#+) ", r"#\1 ", report.read_text(), flags=re.M)
            lines += [re.sub(r"\]\((?!https?:|/)([^)]+)\)", rf"]({n}/\1)", text), ""]
    return "\n".join(lines)
