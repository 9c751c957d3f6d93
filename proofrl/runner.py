"""The one runner of ``proofrl demo``, ``proofrl bench`` and ``proofrl toy``: parts chosen by name, one output
folder, one JSONL line per finished part, resume, and the progress bar.

A *part* is what they run and record as a unit: a demo part, a bench claim at one seed and size, a toy variant.
Its line in ``OUT/<log>`` holds the fields that name it (the runner's ``key``), what it returned, ``seconds``,
``cpu_seconds`` (:func:`cpu_seconds`) and the load average before and after. A part whose key is already there
is not run again; a line cut by a kill is ignored. With ``config``, the log's first line ``{"config": …}``
records the settings the folder was run with, and a rerun with other settings is refused in one line naming
the first that differs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .progress import progress_bar

Row = dict[str, Any]


def select(names: Iterable[str] | None, known: Iterable[str], *, flag: str, what: str) -> list[str]:
    """The chosen names in ``known``'s order (all of them when ``names`` is empty); an unknown one is a
    one-line :class:`ConfigError` listing the valid ones."""
    known, chosen = list(known), list(names or ())
    if not chosen:
        return known
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise ConfigError(f"{flag} {unknown[0]!r} is not a {what}; valid: {', '.join(known)}")
    return [n for n in known if n in chosen]


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the Coq processes a pool has closed): on a
    shared machine, where wall time depends on everyone else's load, what the work itself cost."""
    import resource

    return sum(
        getattr(resource.getrusage(who), f)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for f in ("ru_utime", "ru_stime")
    )


def read_rows(path: Path) -> list[Row]:
    """The JSON lines of ``path`` (none when it is missing); a line cut by a kill is ignored."""
    rows = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        out |= _flat(v, f"{prefix}{k}.") if isinstance(v, Mapping) else {f"{prefix}{k}": v}
    return out


def _is_config(row: Row) -> bool:
    return list(row) == ["config"]


class Runner:
    """The parts of one run in ``out``, recorded in ``out/log`` as each finishes (see the module's text)."""

    def __init__(
        self,
        out: Path,
        key: Sequence[str],
        *,
        log: str = "runs.jsonl",
        config: Mapping[str, Any] | None = None,
        console: Any = None,
    ):
        self.out = Path(out)
        self.path = self.out / log
        self.key = tuple(key)
        self.console = console
        rows = read_rows(self.path)
        recorded = next((r["config"] for r in rows if _is_config(r)), None)
        self.rows = [r for r in rows if not _is_config(r)]
        config = json.loads(json.dumps(config, default=str)) if config is not None else None
        if config is not None and recorded is not None and recorded != config:
            old, new = _flat(recorded), _flat(config)
            k = next(k for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k))
            if k not in new:  # another version of proofrl wrote it: no rerun of this one can match
                raise ConfigError(
                    f"{self.out} was run with {k}={old[k]!r}, a setting this version of proofrl does not have: "
                    "choose another --out"
                )
            if k not in old:
                raise ConfigError(
                    f"{self.out} was run without {k}, a setting this version of proofrl has: choose another --out"
                )
            raise ConfigError(
                f"{self.out} was run with {k}={old[k]!r}, not {new[k]!r}: rerun it with its settings "
                "to resume, or choose another --out"
            )
        self.out.mkdir(parents=True, exist_ok=True)
        if self.path.is_file() and self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n"):
            self._append_line("")  # a line cut by a kill stays a line of its own, ignored
        if config is not None and recorded is None:
            self._append_line(json.dumps({"config": config}))
        self._bar: Any = None
        self._task: Any = None

    def _append_line(self, line: str) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def recorded(self, key: Mapping[str, Any]) -> Row | None:
        """The last line recorded for ``key`` (its fields named by the runner's ``key``), or None."""
        found = [r for r in self.rows if all(r.get(k) == key[k] for k in self.key)]
        return found[-1] if found else None

    def run(self, key: Mapping[str, Any], part: Callable[[], Mapping[str, Any]], *, label: str, steps: int = 0) -> Row:
        """``part()``'s fields with ``key`` and the times, appended to the log; or, when ``key`` is already
        recorded, that line, and the part does not run. ``steps``: what a kept part advances the bar by."""
        if self._bar is not None:
            self._bar.update(self._task, description=label)
        row = self.recorded(key)
        if row is not None:
            self.say(f"{label}: kept from an earlier run")
            self.advance(steps)
            return row
        t, cpu, load = time.perf_counter(), cpu_seconds(), os.getloadavg()[0]
        fields = part()
        row = {
            **{k: key[k] for k in self.key},
            **fields,
            "seconds": round(time.perf_counter() - t, 1),
            "cpu_seconds": round(cpu_seconds() - cpu, 1),
            "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2),
        }
        self._append_line(json.dumps(row, default=str))
        self.rows.append(row)
        return row

    def say(self, text: str) -> None:
        """Print a line (above the bar while one is drawn)."""
        console = self._bar.console if self._bar is not None else self.console
        if console is None:
            from rich.console import Console

            console = self.console = Console()
        console.print(text, markup=False)

    @contextmanager
    def progress(self, total: int, *, show: bool = True) -> Iterator[Runner]:
        """One bar (:func:`proofrl.progress.progress_bar`) over ``total`` steps while the parts run; a part moves
        it with :meth:`advance`. Only for parts that draw no bar of their own (rich shows one at a time)."""
        with progress_bar(console=self.console, disable=not show) as bar:
            self._bar, self._task = bar, bar.add_task("", total=total)
            try:
                yield self
            finally:
                self._bar = self._task = None

    def advance(self, steps: int = 1) -> None:
        """Move the bar, if one is drawn, by ``steps``."""
        if self._bar is not None and steps:
            self._bar.advance(self._task, steps)
