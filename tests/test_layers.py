"""The layer order of docs/architecture.md, enforced: ``lint-imports`` checks the import-linter contracts in
pyproject.toml (each package imports only the packages below it; one prover's folder never imports another's),
so a layer violation fails the tests. The second test adds an upward import to a copy of the package and
checks that the same command then fails, naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # the package in ``cwd`` is the one analysed
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold():
    r = lint_imports(ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 kept, 0 broken" in r.stdout


def test_an_upward_import_breaks_the_layers(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(ROOT / "proofrl", tmp_path / "proofrl", ignore=shutil.ignore_patterns("__pycache__"))
    base = tmp_path / "proofrl" / "provers" / "base.py"
    base.write_text(base.read_text() + "\n\ndef _upward() -> None:\n    from ..objectives import grpo  # noqa: F401\n")
    r = lint_imports(tmp_path)
    assert r.returncode != 0
    assert "proofrl.provers.base -> proofrl.objectives.grpo" in r.stdout, r.stdout[-3000:]


def import_cycles(package: str) -> list[list[str]]:
    """Every set of modules of ``package`` that import one another in a circle (strongly connected components
    of more than one module), imports inside functions and under ``TYPE_CHECKING`` included: the import-linter
    contracts compare packages, so a circle inside one package is invisible to them. The graph is grimp's
    (import-linter's own); the components are found here."""
    import grimp

    graph = grimp.build_graph(package, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []
    for start in sorted(graph.modules):  # Tarjan's algorithm, iteratively
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


KNOWN_CYCLES: list[list[str]] = []
"""circles not yet untied (none left; the list may only shrink)"""


def test_no_module_imports_itself_through_others_beyond_the_known_circles():
    found = import_cycles("proofrl")
    assert [c for c in found if c not in KNOWN_CYCLES] == []


def test_a_circle_inside_one_package_is_found(tmp_path, monkeypatch):
    """Mutation: a copy of the package where the sentence splitter imports the Coq prover back."""
    shutil.copytree(ROOT / "proofrl", tmp_path / "proofrl")
    path = tmp_path / "proofrl" / "provers" / "coq" / "sentences.py"
    path.write_text(path.read_text() + "\nfrom . import prover  # noqa\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "proofrl" or m.startswith("proofrl.")]:
        monkeypatch.delitem(sys.modules, name)
    (cycle,) = [c for c in import_cycles("proofrl") if "proofrl.provers.coq.sentences" in c]
    assert "proofrl.provers.coq.prover" in cycle


def test_progress_bars_are_built_only_by_progress_bar():
    """Every long job's bar has the same columns because one function builds them: no other module imports
    rich's ``Progress``."""
    import ast

    offenders = []
    for path in sorted((ROOT / "proofrl").rglob("*.py")):
        if path.name == "progress.py" and path.parent.name == "proofrl":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            is_rich = isinstance(node, ast.ImportFrom) and node.module == "rich.progress"
            if is_rich and any(a.name == "Progress" for a in node.names):  # type: ignore[attr-defined]
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
