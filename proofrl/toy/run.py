"""Run the whole toy experiment: every variant, with a progress bar, JSONL records as it goes, then the report."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from proofrl.progress import progress_bar
from proofrl.toy.experiment import Timings, ToyConfig, config_record, get_variants, run_variant
from proofrl.toy.report import write_report


@dataclass(frozen=True)
class ToyRun:
    """Where the outputs went and how long it took."""

    results: Path
    report: Path
    wall_s: float
    timings: Timings


def run_experiment(
    cfg: ToyConfig, variants: list[str] | None, out: Path, *, threads: int = 1, show_progress: bool = True
) -> ToyRun:
    """Train every variant × seed, write ``results.jsonl``, the plots and ``report.md`` under ``out``.

    One torch thread by default: the tensors are small, and extra threads mostly add contention.
    """
    torch.set_num_threads(threads)
    chosen = get_variants(variants)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    total = Timings()
    records = [config_record(cfg, chosen)]
    t0 = time.perf_counter()
    with (
        results.open("w", encoding="utf-8") as sink,
        progress_bar(disable=not show_progress) as progress,
    ):
        sink.write(json.dumps(records[0]) + "\n")
        task = progress.add_task("toy", total=len(chosen) * cfg.steps)
        for v in chosen:
            progress.update(task, description=f"{v.name} ({cfg.seeds} seeds)")
            res = run_variant(v, cfg, sink=sink, on_step=lambda: progress.advance(task))
            sink.flush()
            records += res.records
            total.add(res.timings)
    wall = time.perf_counter() - t0
    report = write_report(records, out, wall_s=wall)
    return ToyRun(results=results, report=report, wall_s=wall, timings=total)
