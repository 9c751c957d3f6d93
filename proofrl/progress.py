"""The progress bar of proofrl's long work (rich's ``Progress``), with one set of columns.

A label (or each task's description), the bar, done/total, an optional detail (a task field such as the running
count of failures), the time spent and, where the work is even enough to predict, the time left.
"""

from __future__ import annotations

from typing import Any


def progress_bar(label: str | None = None, *, detail: str | None = None, remaining: bool = False, **kw: Any) -> Any:
    """A ``rich.progress.Progress``: ``label`` (None: each task's description), bar, M/N, the ``detail`` template
    (e.g. ``"{task.fields[info]}"``; tasks then carry that field), elapsed, and the time left when
    ``remaining``. ``kw`` goes to ``Progress`` (``console``, ``disable``, ``transient``)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns: list[Any] = [
        TextColumn(label if label is not None else "{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
    ]
    if detail is not None:
        columns.append(TextColumn(detail))
    columns.append(TimeElapsedColumn())
    if remaining:
        columns.append(TimeRemainingColumn())
    return Progress(*columns, **kw)
