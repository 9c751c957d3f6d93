"""Run the whole toy experiment: every variant through :class:`proofrl.runner.Runner` (a progress bar, one line
per finished variant in ``runs.jsonl``, resume), then ``results.jsonl`` and the report."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from proofrl.runner import Runner
from proofrl.toy.experiment import Timings, ToyConfig, Variant, config_record, get_variants, run_variant
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
    """Train every variant × seed (a variant already in ``out/runs.jsonl`` is kept; other settings there are
    refused), write ``results.jsonl`` (the config, then every record), the plots and ``report.md`` under ``out``.

    One torch thread by default: the tensors are small, and extra threads mostly add contention.
    """
    torch.set_num_threads(threads)
    chosen = get_variants(variants)
    runner = Runner(out, ("variant",), log="runs.jsonl", config=cfg.to_json())
    total = Timings()
    records = [config_record(cfg, chosen)]
    t0 = time.perf_counter()
    with runner.progress(len(chosen) * cfg.steps, show=show_progress):
        for v in chosen:

            def train(v: Variant = v) -> dict[str, Any]:
                res = run_variant(v, cfg, on_step=runner.advance)
                return {"records": res.records, "timings": asdict(res.timings)}

            row = runner.run({"variant": v.name}, train, label=f"{v.name} ({cfg.seeds} seeds)", steps=cfg.steps)
            records += row["records"]
            total.add(Timings(**row["timings"]))
    wall = time.perf_counter() - t0
    results = out / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = write_report(records, out, wall_s=wall)
    return ToyRun(results=results, report=report, wall_s=wall, timings=total)
