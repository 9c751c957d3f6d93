"""``proofrl check``: judge a JSONL file of proofs with a pool of prover processes.

Input records follow miniF2F's shape (``name``, ``header``, ``formal_statement``, ``proof``); a record may
carry ``expected`` (a status) and ``expected_reason`` (a substring of one reason), and then the summary says
whether each verdict matched. Verdicts are written as JSONL in input order, each as soon as every earlier one
is known, so an interrupted run keeps what it had.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.table import Table

from .progress import progress_bar
from .provers.base import Backend, Theorem, Verdict
from .provers.factory import make_pool
from .provers.pool import PoolConfig

BUNDLED_SAMPLE = "coq_sample.jsonl"


def bundled_sample() -> list[dict]:
    text = resources.files("proofrl.data").joinpath("bundled", BUNDLED_SAMPLE).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def matches(record: dict, verdict: Verdict) -> bool | None:
    """``None`` when the record states no expectation."""
    if "expected" not in record:
        return None
    if verdict.status.value != record["expected"]:
        return False
    want = record.get("expected_reason") or ""
    return not want or any(want in r for r in verdict.reasons) or any(want in m.text for m in verdict.messages)


@dataclass
class CheckSummary:
    total: int
    by_status: Counter
    expected_ok: int
    expected_bad: list[str]
    seconds: float


def check_records(
    records: list[dict],
    *,
    backend: Backend = "coq",
    workers: int = 2,
    timeout: float = 30.0,
    out: IO[str] | None = None,
    console: Console | None = None,
) -> tuple[list[Verdict], CheckSummary]:
    import time

    console = console or Console(stderr=True)
    jobs = [(Theorem.from_json(r, backend), r.get("proof", "")) for r in records]
    results: list[Verdict | None] = [None] * len(jobs)
    written = 0
    lock = threading.Lock()
    t0 = time.monotonic()
    with (
        progress_bar("checking", console=console, transient=False) as bar,
        make_pool(backend, pool=PoolConfig(workers=workers, timeout=timeout)) as pool,
    ):
        task = bar.add_task("check", total=len(jobs))

        def done(i: int, v: Verdict) -> None:
            nonlocal written
            with lock:
                results[i] = v
                bar.advance(task)
                while out is not None and written < len(results) and results[written] is not None:
                    rec = records[written]
                    row = {"name": rec.get("name"), **results[written].to_json()}  # type: ignore[union-attr]
                    if (m := matches(rec, results[written])) is not None:  # type: ignore[arg-type]
                        row["as_expected"] = m
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    out.flush()
                    written += 1

        verdicts = pool.check_many(jobs, timeout=timeout, on_done=done)
    bad = [
        r.get("name", str(i)) for i, (r, v) in enumerate(zip(records, verdicts, strict=True)) if matches(r, v) is False
    ]
    ok = sum(matches(r, v) is True for r, v in zip(records, verdicts, strict=True))
    return verdicts, CheckSummary(
        len(verdicts), Counter(v.status.value for v in verdicts), ok, bad, time.monotonic() - t0
    )


def summary_table(records: Iterable[dict], verdicts: list[Verdict], summary: CheckSummary) -> Table:
    t = Table(title=f"{summary.total} proofs in {summary.seconds:.1f}s")
    t.add_column("name")
    t.add_column("verdict")
    t.add_column("reasons")
    t.add_column("expected")
    for r, v in zip(records, verdicts, strict=True):
        m = matches(r, v)
        mark = "" if m is None else ("[green]yes[/]" if m else f"[red]no, wanted {r['expected']}[/]")
        colour = {"valid": "green", "rejected": "yellow", "error": "red", "timeout": "magenta", "crash": "red"}[
            v.status.value
        ]
        t.add_row(r.get("name", ""), f"[{colour}]{v.status.value}[/]", "; ".join(v.reasons)[:80], mark)
    return t
