"""The commands and paths the docs quote are ones that exist.

Scanned: ``README.md``, ``docs/*.md`` and the docstrings (whole source) of ``benchmarks/*.py`` and
``proofrl/**/*.py``. Checked:

* ``benchmarks/X.py``: the script exists, and every ``--flag`` a quoted ``python benchmarks/X.py …`` command
  passes is one the script declares;
* ``python -m proofrl.…``: the module exists;
* ``runs/demo/…``: a path ``proofrl demo`` writes — its first name is a demo part (``DEMO_PARTS``) or a file the
  demo writes at its root, and the next name is one that part's module (or the root's) writes.
  Upper-case names (``NAME``, ``OUT``) are placeholders.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEXTS = sorted(
    [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "benchmarks").glob("*.py"),
        *(ROOT / "proofrl").rglob("*.py"),
    ]
)

SCRIPT = re.compile(r"\bbenchmarks/(\w+)\.py")
COMMAND = re.compile(r"python\s+benchmarks/(\w+)\.py([^`\n]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
MODULE = re.compile(r"python\s+-m\s+(proofrl(?:\.\w+)*)")
DEMO_PATH = re.compile(r"\bruns/demo((?:/[\w.+-]+)*)")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*$")


def mentions(pattern: re.Pattern[str], texts: list[Path] = TEXTS) -> list[tuple[str, re.Match[str]]]:
    """(``file:line``, match) for every match in ``texts``."""
    out = []
    for p in texts:
        text = p.read_text()
        name = p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name
        out += [(f"{name}:{text.count(chr(10), 0, m.start()) + 1}", m) for m in pattern.finditer(text)]
    return out


def literals(path: Path) -> set[str]:
    """Every string constant in a module, and each '/'-separated piece of it."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out |= {node.value, *node.value.split("/")}
    return out


def declared_flags(script: Path) -> set[str]:
    """Flags named in the script's source (and ``--smoke``, from ``benchmarks/_bench.py``, where it is added)."""
    text = script.read_text()
    if "add_smoke(" in text:
        text += (script.parent / "_bench.py").read_text()
    return set(re.findall(r"""["'](--[a-z][\w-]*)["']""", text))


def test_quoted_benchmark_scripts_exist():
    missing = [
        (where, m.group(0)) for where, m in mentions(SCRIPT) if not (ROOT / "benchmarks" / f"{m.group(1)}.py").is_file()
    ]
    assert not missing, missing


def unknown_flags(texts: list[Path]) -> list[tuple[str, str, str]]:
    bad = []
    for where, m in mentions(COMMAND, texts):
        script = ROOT / "benchmarks" / f"{m.group(1)}.py"
        if script.is_file():
            bad += [(where, m.group(0).strip(), f) for f in FLAG.findall(m.group(2)) if f not in declared_flags(script)]
    return bad


def test_quoted_benchmark_commands_use_flags_the_script_declares():
    bad = unknown_flags(TEXTS)
    assert not bad, bad


@pytest.mark.parametrize(
    "command, ok",
    [
        ("python benchmarks/rl_step.py --model M --steps 4 --smoke", True),
        ("python benchmarks/rl_step.py --model M --no-such-flag", False),
    ],
)
def test_the_flag_check_tells_a_stale_flag(command, ok, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"run `{command}`\n")
    assert (unknown_flags([doc]) == []) == ok


def test_quoted_python_modules_exist():
    missing = [(where, m.group(1)) for where, m in mentions(MODULE) if importlib.util.find_spec(m.group(1)) is None]
    assert not missing, missing


def demo_names() -> tuple[set[str], dict[str, set[str]]]:
    """(names the demo writes at its root, {part: names that part writes in its folder})."""
    from proofrl.demo import DEMO_PARTS

    demo = ROOT / "proofrl" / "demo"
    root = literals(demo / "__init__.py") | literals(
        ROOT / "proofrl" / "data" / "assets.py"
    )  # the shared tactic assets
    parts = {}
    for name, part in DEMO_PARTS.items():
        module = part.target.split(":")[0].rsplit(".", 1)[1]
        parts[name] = literals(demo / f"{module}.py")
    return root, parts


def stale_demo_paths(texts: list[Path]) -> list[tuple[str, str]]:
    root, parts = demo_names()
    bad = []
    for where, m in mentions(DEMO_PATH, texts):
        names = [x for x in m.group(1).split("/") if x]
        if not names:
            continue
        first, rest = names[0], names[1:2]
        if PLACEHOLDER.match(first):
            ok = not rest or PLACEHOLDER.match(rest[0]) or any(rest[0] in p for p in parts.values())
        elif first in parts:
            ok = not rest or PLACEHOLDER.match(rest[0]) or rest[0] in parts[first]
        else:
            ok = first in root and first not in parts
        if not ok:
            bad.append((where, m.group(0)))
    return bad


def test_demo_paths_in_docs_are_ones_the_demo_writes():
    bad = stale_demo_paths(TEXTS)
    assert not bad, bad


@pytest.mark.parametrize(
    "path, ok",
    [
        ("runs/demo/sft-model", False),
        ("runs/demo/whole-proof/sft-model", True),
        ("runs/demo/whole-proof/no-such-model", False),
        ("runs/demo/report.md", True),
        ("runs/demo/NAME/report.md", True),
    ],
)
def test_the_demo_path_check_tells_stale_from_current(path, ok, tmp_path):
    """The check above, on one made-up doc: a path the demo no longer writes is caught."""
    doc = tmp_path / "doc.md"
    doc.write_text(f"see `{path}`\n")
    assert (stale_demo_paths([doc]) == []) == ok
