"""The run folder every training loop writes: ``config.yaml``, ``metrics.jsonl`` (one line per step, keyed by the
loop's own step name: ``step`` or ``round``), the trackers of the recipe's ``logger:`` list, and atomic
checkpoints (:mod:`.checkpoints`), so that a killed run resumes from its newest complete checkpoint and logs
each step once."""

from __future__ import annotations

import json
from pathlib import Path


def truncate_log(path: Path, key: str, step: int) -> None:
    """Drop the lines of a JSONL log whose ``key`` (the loop's step name) is past ``step``, the checkpoint a run
    resumes from: a run killed after logging a step but before checkpointing it logs that step again."""
    if not path.exists():
        return
    keep = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line).get(key, 0) <= step]
    path.write_text("".join(line + "\n" for line in keep))
