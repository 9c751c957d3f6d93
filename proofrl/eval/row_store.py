"""Finished rows of ``proofrl eval search`` kept on disk, so a killed run resumes where it stopped.

A row can take an hour (the whole standard library in file order, one search per lemma); a run of several rows
may not fit in one sitting. Each row, once it ends, is written to ``OUT/rows/<row>.json`` with the run's key:
the problems (their names and statements, in order), the settings other than which rows run, the prover's
version, and the memory and premises the search rows start from. A rerun with the same ``--out`` and the same
key keeps a finished row as it was (its numbers, wall and CPU seconds, and the load average when it ended)
instead of running it again; any difference in the key runs the row again and replaces the file. Most rows are
whole units: a row killed half-way is run again from its first theorem. The file-order search rows are the
exception, as each module's search starts afresh from what its file loads: :class:`ModuleStore` keeps each
finished module, under the row's key, and a killed row resumes at the modules it had not finished. As a
row's budget is wall seconds, each module also keeps the sitting that searched it: when it began, and the
machine's pace then (:func:`~proofrl.provers.coq.pace.machine_pace`), so a row searched on several machines
says how fast each one was.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = 1


@dataclass
class Row:
    """One row's outcome; ``results`` one record per theorem (``results.jsonl``)."""

    name: str
    results: list[dict[str, Any]]
    wall: float
    cpu: float
    script: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def proved(self) -> int:
        return sum(r["proved"] for r in self.results)

    def summary(self) -> dict[str, Any]:
        n = max(1, len(self.results))
        return {
            "proved": self.proved,
            "theorems": len(self.results),
            "wall_s_per_theorem": round(self.wall / n, 2),
            "cpu_s_per_theorem": round(self.cpu / n, 2),
            "wall_s": round(self.wall, 2),
            "cpu_s": round(self.cpu, 2),
            "proved_names": sorted(r["name"] for r in self.results if r["proved"]),
            **({"script": self.script} if self.script else {}),
            **self.notes,
        }


def _digest(parts: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def key_difference(saved: Any, key: Mapping[str, Any]) -> str:
    """The parts of ``key`` that a kept file's key ``saved`` differs in, for the line that says why it is run
    again: ``memory_pairs 34474 → 34475, memory_digest``, a setting by its name (``settings.seconds 3.0 → 4.0``);
    a value too long to read (a digest) by its name alone."""
    if not isinstance(saved, Mapping):
        return "no key"

    def change(old: Any, new: Any) -> str:
        short = all(isinstance(v, (int, float, str, type(None))) and len(str(v)) <= 24 for v in (old, new))
        return f" {old} → {new}" if short else ""

    parts = []
    for k in sorted(set(saved) | set(key)):
        old, new = saved.get(k), key.get(k)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            inner = sorted(p for p in set(old) | set(new) if old.get(p) != new.get(p))
            parts += [f"{k}.{p}{change(old.get(p), new.get(p))}" for p in inner]
        else:
            parts.append(f"{k}{change(old, new)}")
    return ", ".join(parts)


def _write_whole(path: Path, payload: dict[str, Any]) -> None:
    """``payload`` as JSON at ``path``, written beside it first so a kill mid-write leaves the old file or none."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, default=str), encoding="utf-8")
    tmp.replace(path)


def run_key(
    problems: Sequence[Any],
    settings: Any,
    *,
    memory: Sequence[dict[str, Any]] = (),
    premises: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> dict[str, Any]:
    """What a finished row depends on: the problems (a digest of each one's key, header and statement, in order),
    every setting but ``rows``, the prover's version, and what the search rows start from: the memory's pairs
    (``memory``: transitions, each one's module, theorem, state and tactic) and the premises (``premises``:
    module -> ``(name, statement)``; None, the standard library's, which the prover's version fixes)."""
    from ..provers.coq.prover import coq_version

    problems_digest = _digest(part for p in problems for part in (p.key, p.header, p.formal_statement))
    keys = ("module", "theorem", "state_before", "tactic")
    memory_digest = _digest(str(t.get(k, "")) for t in memory for k in keys)
    premise_parts = (part for m, pairs in sorted((premises or {}).items()) for pair in pairs for part in (m, *pair))
    kept = {k: v for k, v in asdict(settings).items() if k != "rows"}
    key = {
        "problems": len(problems),
        "digest": problems_digest,
        "settings": kept,
        "prover": coq_version(),
        "memory_pairs": len(memory),
        "memory_digest": memory_digest,
        "premises": "the standard library's" if premises is None else _digest(premise_parts),
    }
    return json.loads(json.dumps(key, default=str))


class RowStore:
    """``OUT/rows``: one JSON file per finished row (module docstring)."""

    def __init__(self, out: Path, key: dict[str, Any], say: Callable[[str], None] = print):
        self.folder = Path(out) / "rows"
        self.key = key
        self.say = say

    def _path(self, name: str) -> Path:
        from ..search.run import safe_name

        return self.folder / f"{safe_name(name)}.json"

    def kept(self, name: str) -> Row | None:
        """Row ``name`` as a run with this key finished it, or None (never run, another key, or unreadable)."""
        path = self._path(name)
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("format") != FORMAT:
                self.say(f"{name}: {path} is in format {saved.get('format')}, not {FORMAT}; running the row again")
                return None
            if saved.get("key") != self.key:
                diff = key_difference(saved.get("key"), self.key)
                self.say(f"{name}: {path} was finished under another key ({diff}); running the row again")
                return None
            row = Row(**saved["row"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError) as e:
            self.say(f"{name}: {path} cannot be read ({type(e).__name__}); running the row again")
            return None
        row.notes = {**row.notes, "kept_from": {"finished": saved["finished"], "load_average": saved["load"]}}
        self.say(f"{name}: kept from the run that finished it at {saved['finished']} (remove {path} to rerun it)")
        return row

    def save(self, row: Row) -> None:
        """Write ``row`` (before its records are shared out and trimmed, so a kept row is recorded as a new one)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        payload = {
            "format": FORMAT,
            "key": self.key,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
            "load": [round(x, 2) for x in os.getloadavg()],
            "row": json.loads(json.dumps(asdict(row), default=str)),
        }
        _write_whole(self._path(row.name), payload)

    def row(self, name: str, run: Callable[..., Row], *args: Any) -> Row:
        """The kept row ``name``, else ``run(*args)``'s, saved."""
        got = self.kept(name)
        if got is None:
            got = run(*args)
            self.save(got)
        return got


@dataclass
class KeptModule:
    """One module's part of a file-order row: its records by the lemma's index in the row, the memory's sizes, and
    the seconds its search took."""

    results: dict[int, dict[str, Any]]
    memory: dict[str, int]
    wall: float
    sitting: dict[str, Any] | None = None
    """when the sitting that searched it began, and the machine's pace then; None if it was not recorded"""
    into_sitting: float | None = None
    """seconds from that sitting's start to this module's end (modules run side by side: the sitting's wall is
    the latest of these, not their sum); None if not recorded"""


class ModuleStore:
    """``FOLDER/<module>.json``: each finished module of a file-order search row, with the row's key."""

    def __init__(self, folder: Path, key: dict[str, Any], say: Callable[[str], None] = print):
        self.folder = Path(folder)
        self.key = json.loads(json.dumps(key, default=str))
        self.say = say
        self.taken: list[str] = []
        self.refused = False
        self.sitting: dict[str, Any] | None = None
        self._began = 0.0
        self.ends: dict[str, float] = {}
        """this sitting's modules: seconds from its start to each one's end"""

    def begin(self, pace: Callable[[], dict[str, Any] | None]) -> dict[str, Any]:
        """Start this sitting, before its first module is searched: when, and ``pace()`` (the machine's pace, or
        None where it cannot be measured); every module it saves carries it."""
        self.sitting = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), **(pace() or {"pace_s": None})}
        self._began = time.monotonic()
        return self.sitting

    def _path(self, module: str) -> Path:
        from ..search.run import safe_name

        return self.folder / f"{safe_name(module)}.json"

    def kept(self, module: str) -> KeptModule | None:
        """Module ``module`` as a run with this key finished it, or None (never finished, another key, unreadable)."""
        try:
            saved = json.loads(self._path(module).read_text(encoding="utf-8"))
            if saved.get("format") != FORMAT or saved.get("module") != module:
                return None
            if saved.get("key") != self.key:
                if not self.refused:  # said once: every module kept there was finished under the same key
                    diff = key_difference(saved.get("key"), self.key)
                    self.say(f"{self.folder}: modules finished under another key ({diff}); searching them again")
                self.refused = True
                return None
            results = {int(i): r for i, r in saved["results"].items()}
            got = KeptModule(
                results, saved["memory"], float(saved["wall"]), saved.get("sitting"), saved.get("into_sitting")
            )
        except (OSError, ValueError, TypeError, KeyError, AttributeError):  # never finished, or a torn file
            return None
        self.taken.append(module)
        return got

    def save(self, module: str, done: KeptModule) -> None:
        """Write ``done``, module ``module``'s part, once its last lemma is recorded."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ends[module] = round(time.monotonic() - self._began, 2)
        payload = {
            "format": FORMAT,
            "key": self.key,
            "module": module,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
            "results": {str(i): r for i, r in done.results.items()},
            "memory": done.memory,
            "wall": done.wall,
            "sitting": self.sitting,
            "into_sitting": self.ends[module],
        }
        _write_whole(self._path(module), payload)


def pace_words(sitting: Mapping[str, Any] | None) -> str:
    """A sitting's pace as the bench prints it: ``1.21 s for the fixed Coq job at load 0.93``, not recorded (a
    sitting of a version that did not measure it), or unknown (the job did not run)."""
    if not sitting or "pace_s" not in sitting:
        return "not recorded"
    if sitting["pace_s"] is None:
        return "unknown (the fixed Coq job did not run)"
    return f"{sitting['pace_s']:.2f} s for the fixed Coq job at load {sitting.get('load', '?')}"


def sittings(
    problems: Sequence[Any],
    kept: Mapping[str, KeptModule | None],
    now: Mapping[str, Any] | None,
    ends: Mapping[str, float],
) -> list[dict[str, Any]]:
    """The sittings that searched a file-order row's modules, in the order they began (modules kept without a
    record of theirs first, ``started`` None): each one's start, pace and load, its modules and lemmas, and the
    wall seconds it spent on them (``wall_s``). ``kept``: module -> its kept part, None for those this sitting
    (``now``) searched, whose ends are ``ends`` (:attr:`ModuleStore.ends`).

    A sitting's wall runs from its start to the end of its last module (for an earlier sitting, the last one
    kept: what it did after that was lost with it), so a row taken whole from its kept modules has the wall it
    had. Modules kept without that record give the sum of their own seconds instead, which counts modules searched
    side by side more than once; ``wall_from`` says so."""
    lemmas: dict[str, int] = {}
    for p in problems:
        lemmas[p.module] = lemmas.get(p.module, 0) + 1
    by: dict[str | None, dict[str, Any]] = {}
    spans: dict[str | None, list[float | None]] = {}
    walls: dict[str | None, float] = {}
    for m, got in kept.items():
        sitting = dict(now or {}) if got is None else dict(got.sitting or {})
        started = sitting.get("started")
        entry = by.setdefault(started, {"started": None, **sitting, "modules": 0, "lemmas": 0})
        entry["modules"] += 1
        entry["lemmas"] += lemmas.get(m, 0)
        spans.setdefault(started, []).append(ends.get(m) if got is None else got.into_sitting)
        walls[started] = walls.get(started, 0.0) + (got.wall if got is not None else 0.0)
    for started, entry in by.items():
        known = [e for e in spans[started] if e is not None]
        if len(known) == len(spans[started]):
            entry["wall_s"] = round(max(known), 2)
        else:
            entry["wall_s"] = round(walls[started], 2)
            entry["wall_from"] = "the sum of its modules' own seconds (the sitting's span was not recorded)"
    return sorted(by.values(), key=lambda e: (e["started"] is not None, e["started"] or ""))
