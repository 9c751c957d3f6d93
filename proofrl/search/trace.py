"""Wall-clock trace of a search, reap's ``WallClock`` log made JSONL: one record per span
``{theorem, name, start_ns, stop_ns, seconds, extra}``.

Span names: ``policy`` (tactic proposals), ``value``, ``tactic`` (one prover step), ``final_check`` (the
fresh-process replay), ``select`` and ``backup`` (the engine's own bookkeeping), ``search`` (a whole theorem),
``memory`` (a found proof's steps put into an online proof memory, after its search).
:func:`summarize` says where the time went and the share spent outside the prover and the model.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

PROVER_SPANS = ("tactic", "final_check")
MODEL_SPANS = ("policy", "value")


class Tracer:
    """Collects spans in memory and, when given a file, appends them as JSONL (thread-safe)."""

    def __init__(self, path: str | Path | None = None, *, theorem: str = "", sink: Tracer | None = None):
        self.theorem = theorem
        self.events: list[dict[str, Any]] = []
        self._sink = sink
        self._lock = threading.Lock()
        self._file: TextIO | None = open(path, "a", encoding="utf-8") if path is not None else None  # noqa: SIM115

    def child(self, theorem: str) -> Tracer:
        """A tracer for one theorem that also forwards its spans here (one file for many searches)."""
        return Tracer(theorem=theorem, sink=self)

    @contextlib.contextmanager
    def span(self, name: str, **extra: Any) -> Iterator[dict[str, Any]]:
        """Time the ``with`` body; ``extra`` (and what the body adds to the yielded dict) is recorded."""
        start = time.monotonic_ns()
        try:
            yield extra
        finally:
            stop = time.monotonic_ns()
            self.record(
                {
                    "theorem": self.theorem,
                    "name": name,
                    "start_ns": start,
                    "stop_ns": stop,
                    "seconds": (stop - start) / 1e9,
                    "extra": extra,
                }
            )

    def record(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)
            if self._file is not None:
                self._file.write(json.dumps(event, default=str) + "\n")
                self._file.flush()
        if self._sink is not None:
            self._sink.record(event)

    def summary(self) -> dict[str, Any]:
        return summarize(self.events)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def summarize(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``{by_name: {name: {count, seconds}}, search_seconds, prover_seconds, model_seconds,
    outside_seconds, outside_share}``; "outside" is search time spent neither in the prover nor the model."""
    by: dict[str, dict[str, float]] = {}
    for e in events:
        d = by.setdefault(e["name"], {"count": 0, "seconds": 0.0})
        d["count"] += 1
        d["seconds"] += e["seconds"]
    total = by.get("search", {}).get("seconds", 0.0)
    prover = sum(by.get(n, {}).get("seconds", 0.0) for n in PROVER_SPANS)
    model = sum(by.get(n, {}).get("seconds", 0.0) for n in MODEL_SPANS)
    outside = max(0.0, total - prover - model)
    return {
        "by_name": by,
        "search_seconds": total,
        "prover_seconds": prover,
        "model_seconds": model,
        "outside_seconds": outside,
        "outside_share": outside / total if total > 0 else 0.0,
    }


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
