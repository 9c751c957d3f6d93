"""Read a search run (what :func:`proofrl.search.run.search_many` writes) into one JSON-able dict for the page.

Every file is read defensively: a line or a tree that does not parse is reported in ``problems`` and the
rest of the run is still shown; fields the viewer does not know are kept and shown as they are. Only files
inside the run folder are read (see :func:`_confine`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..search.trace import summarize


def find_runs(root: str | Path) -> list[Path]:
    """``root`` itself when it is a search run (``results.jsonl`` and ``trees/``), else every search run below
    it (``proofrl demo``'s output holds one per engine), in path order."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder (give the --out folder of `proofrl search` or of `proofrl demo`)")
    if _is_run(root):
        return [root]
    runs = sorted(p.parent for p in root.rglob("results.jsonl") if _is_run(p.parent))
    if not runs:
        raise ConfigError(
            f"{root} holds no search run (a folder with results.jsonl and trees/, as `proofrl search` writes)"
        )
    return runs


def _is_run(folder: Path) -> bool:
    return (folder / "results.jsonl").is_file() and (folder / "trees").is_dir()


def load_run(folder: str | Path) -> dict[str, Any]:
    """``{title, summary, time, theorems: [{name, status, proof, reason, ..., tree, time}], problems}``.

    ``tree`` is the file's ``{root, nodes, edges, dropped, solution, search}`` (None when missing); ``time`` is
    :func:`proofrl.search.trace.summarize` of that theorem's spans in ``trace.jsonl``."""
    folder = Path(folder)
    problems: list[str] = []
    spans: dict[str, list[dict[str, Any]]] = {}
    for i, event in enumerate(_jsonl(folder, "trace.jsonl", problems)):
        ok = isinstance(event, dict) and isinstance(event.get("name"), str)
        if ok and isinstance(event.get("seconds"), float | int):
            spans.setdefault(str(event.get("theorem", "")), []).append(event)
        else:
            problems.append(f"trace.jsonl: span {i + 1} has no name or seconds")
    theorems = []
    for line in _jsonl(folder, "results.jsonl", problems):
        if not isinstance(line, dict):
            problems.append("results.jsonl: a line that is not an object")
            continue
        name = str(line.get("name", "?"))
        tree = None
        if isinstance(line.get("tree"), str):
            tree = _json(folder, line["tree"], problems)
            if tree is not None and not isinstance(tree, dict):
                problems.append(f"{line['tree']}: not an object")
                tree = None
        theorems.append(line | {"name": name, "tree": tree, "time": summarize(spans.get(name, []))})
    summary = _json(folder, "summary.json", problems) if (folder / "summary.json").exists() else None
    return {
        "title": folder.resolve().name,
        "folder": str(folder),
        "summary": summary if isinstance(summary, dict) else None,
        "theorems": theorems,
        "problems": problems,
    }


def _confine(folder: Path, name: str, problems: list[str]) -> Path | None:
    """``folder / name`` with every link followed, or None (and a problem) when that lies outside the run folder.

    The page is mailed and archived, and the names come from the run's own files: a results line naming an
    absolute path, a ``../`` path or a link out of the run must not carry a file of this machine into it."""
    try:
        base = folder.resolve()
        path = (base / name).resolve()
    except (OSError, RuntimeError, ValueError) as e:  # a link loop, a NUL in the name
        problems.append(f"{name}: not a path ({e})")
        return None
    if not path.is_relative_to(base):
        problems.append(f"{name}: outside the run folder, not read")
        return None
    return path


def _jsonl(folder: Path, name: str, problems: list[str]) -> list[Any]:
    path = _confine(folder, name, problems)
    if path is None:
        return []
    if not path.exists():
        problems.append(f"{path.name}: missing")
        return []
    out = []
    for n, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if text.strip():
            try:
                out.append(json.loads(text))
            except json.JSONDecodeError as e:
                problems.append(f"{path.name}:{n}: not JSON ({e.msg})")
    return out


def _json(folder: Path, name: str, problems: list[str]) -> Any:
    path = _confine(folder, name, problems)
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        problems.append(f"{path.name}: missing")
    except json.JSONDecodeError as e:
        problems.append(f"{path.name}: not JSON ({e.msg})")
    return None
