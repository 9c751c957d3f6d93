"""Split the header (imports, options, opens) off Lean code, and normalise it into a pool key.

The header runs once per REPL process as ``env 0``; every body is then sent with ``"env": 0``. Lean only
accepts ``import`` in a fresh environment, so imports *must* live in the header. ``set_option`` and ``open``
lines ride along because the REPL keeps the command state (options, open namespaces) in the environment
snapshot, so later commands on ``env 0`` see them.

The comment/string blanker used by the verdict rules lives here too: it replaces comments and string
literals by spaces, keeping every other character (and so every line and column) where it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    """Replace comments (``--``, nested ``/- -/``), string and char literals by spaces, keeping newlines,
    so positions in the result are positions in ``code``."""
    out = list(code)
    i, n = 0, len(code)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = code[i]
        if code.startswith("--", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif code.startswith("/-", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if code.startswith("/-", j):
                    depth, j = depth + 1, j + 2
                elif code.startswith("-/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and code[j] != '"':
                j += 2 if code[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'" and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] in "_'!?.")):
            m = re.match(r"'(\\.[^']*|[^'\\])'", code[i:])  # a char literal such as 'a' or '\n'
            if m:
                blank(i, i + m.end())
                i += m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)
