"""Split the header (imports, options, opens) off Lean code, and normalise it into a pool key.

The header runs once per REPL process as ``env 0``; every body is then sent with ``"env": 0``. Lean only
accepts ``import`` in a fresh environment, so imports *must* live in the header. ``set_option`` and ``open``
lines ride along because the REPL keeps the command state (options, open namespaces) in the environment
snapshot, so later commands on ``env 0`` see them.

The comment/string blanker lives here too (the server's snippet splitter uses it): it replaces comments and
literals by spaces, keeping every other character (and so every line and column) where it was, reading the
text as Lean does (:mod:`.lexer`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lexer import lex

_HEADER_LINE = re.compile(r"^(import|set_option|open)\s")
_OPEN_IN = re.compile(r"\bin\s*$")  # ``open Foo in`` scopes one command: it belongs to the body


@dataclass(frozen=True)
class HeaderSplit:
    header_lines: tuple[str, ...]
    """the ``import``/``set_option``/``open`` lines, in order (blank and ``--`` lines dropped)"""
    body: str
    """everything after the header, unchanged"""
    line_count: int
    """how many lines of the original text the header took (the shift for body positions)"""

    @property
    def imports(self) -> tuple[str, ...]:
        return tuple(line for line in self.header_lines if line.startswith("import "))


def split_header(text: str) -> HeaderSplit:
    """Take the leading header lines; stop at the first line that is anything else."""
    lines = text.split("\n")
    taken: list[str] = []
    n = 0
    for line in lines:
        s = line.strip()
        if not s or s.startswith("--"):
            n += 1
            continue
        if _HEADER_LINE.match(s) and not _OPEN_IN.search(s):
            taken.append(" ".join(s.split()))
            n += 1
            continue
        break
    if n == len(lines):  # nothing but header: no trailing newline to keep
        return HeaderSplit(tuple(taken), "", n)
    return HeaderSplit(tuple(taken), "\n".join(lines[n:]), n)


def normalise_header(text: str, *, collapse_mathlib: bool = False) -> str:
    """The canonical form of a header: imports first (deduplicated, in order), then the other lines
    (deduplicated, in order), one per line, whitespace collapsed. Anything after the header lines is kept
    verbatim at the end. With ``collapse_mathlib`` any ``import Mathlib.X`` becomes ``import Mathlib``."""
    split = split_header(text)
    imports: list[str] = []
    others: list[str] = []
    for line in split.header_lines:
        if line.startswith("import "):
            for mod in line.split()[1:]:
                if collapse_mathlib and (mod == "Mathlib" or mod.startswith("Mathlib.")):
                    mod = "Mathlib"
                if f"import {mod}" not in imports:
                    imports.append(f"import {mod}")
        elif line not in others:
            others.append(line)
    out = "\n".join(imports + others)
    rest = split.body.strip()
    return f"{out}\n{rest}" if out and rest else out or rest


def blank_comments_and_strings(code: str) -> str:
    """Replace comments (``--``, nested ``/- -/``), string, raw string and char literals by spaces, keeping
    newlines, so positions in the result are positions in ``code``. Lean's own reading
    (:func:`~proofrl.provers.lean.lexer.lex`): ``/--/`` does not close, ``r"\\"`` has no escapes, ``«--»`` is a
    name."""
    return lex(code).blanked
