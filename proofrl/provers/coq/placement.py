"""Where a library theorem stands in its file, and the wall that keeps its proof to what precedes it.

A theorem taken from a compiled library (``Coq.Lists.List.app_nil_r``) is stated after a header that loads
its own module, so that the definitions, notations and lemmas before it exist. Everything after it exists
too, the theorem itself included: ``apply app_nil_r.`` would prove it, and so would any later lemma proved
from it, named or found by a hint database. The header says where the theorem stands with one comment::

    (* proofrl: stated before Coq.Lists.List.app_nil_r *)

and the judge then refuses a proof whose constant depends, at any depth, on a constant of that module
declared at or after the theorem. Which those are is read from Coq itself: ``Print Module`` lists a
module's fields in the order they were declared (a section's lemmas where the section ends, after the
lemmas before it), and a field module declared after the theorem is read the same way, field by field
(:func:`later_fields`). What a proof depends on is ``Print All Dependencies`` of the checked constant (after
``Qed``), or the names of a partial proof term (a step that closes a goal); each printed name is Coq's
shortest name for a constant in that environment, which is what ``Locate`` of the constant's full path
prints as its "shorter name" (:func:`reach_reasons`). An earlier lemma cannot depend on a later one, so a
proof that depends on none of the later fields by name depends on none of them at all.

A placement restricts the problem it is written in; a header without one gets no such wall (the other
walls hold everywhere).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..base import PLACEMENT

_FIELD = re.compile(
    r"^ {5}(?P<kind>Parameter|Definition|Inductive|CoInductive|Variant|Record|Structure|Class|Module Type|Module)"
    r"\b\s*(?P<name>[A-Za-z_][\w']*)?",
    re.M,
)
_NEXT_NAME = re.compile(r"\s*([A-Za-z_][\w']*)")
_CONSTANT = re.compile(
    r"^Constant ([\w'.]+)(?:\s*\(shorter name to refer to it in current context is ([\w'.]+)\))?", re.M
)
MAX_DEPTH = 6
"""field modules nested deeper than this are not read: the placement is then unreadable (fail closed)"""


def placement_line(path: str) -> str:
    """The header comment that places a problem just before the library constant ``path``."""
    return f"(* proofrl: stated before {path} *)"


def placement(header: str) -> str | None:
    """The full path of the constant the header places its problem before, or None (no placement).

    Raises ValueError for two different placements: a problem stands in one place."""
    found = set(PLACEMENT.findall(header))
    if len(found) > 1:
        raise ValueError(f"header: {len(found)} placements ({', '.join(sorted(found))}); a problem stands in one")
    return found.pop() if found else None


@dataclass(frozen=True)
class Field:
    kind: str  # "Parameter", "Definition", "Module", "Module Type", "Inductive", ...
    name: str


def module_fields(printed: str) -> list[Field]:
    """The fields of ``Print Module M`` output, in declaration order (one level: a field module's own fields
    need ``Print Module M.X``). A field's name may stand on the line after its keyword (``Record``)."""
    out: list[Field] = []
    for m in _FIELD.finditer(printed):
        name = m.group("name")
        if name is None:
            nxt = _NEXT_NAME.match(printed, m.end())
            if nxt is None:
                continue
            name = nxt.group(1)
        out.append(Field(m.group("kind"), name))
    return out


class PlacementUnreadable(Exception):
    """The module's fields after the theorem cannot be listed, so the wall cannot be built."""


def later_fields(path: str, ask: Callable[[list[str]], list[str]]) -> frozenset[str]:
    """Full paths of the constants that the module of ``path`` declares at or after ``path`` itself: its
    later fields, and every field of a field module declared after it, read at any depth up to
    :data:`MAX_DEPTH`. ``ask`` runs Coq commands where the header is loaded and returns their outputs, one
    per command (a failed command's output is its error message).

    Raises :class:`PlacementUnreadable` when the theorem is not a field of its module or a later field module
    cannot be read."""
    module, name = path.rsplit(".", 1)
    (printed,) = ask([f"Print Module {module}."])
    fields = module_fields(printed)
    at = next((i for i, f in enumerate(fields) if f.name == name and f.kind in ("Parameter", "Definition")), None)
    if at is None:
        raise PlacementUnreadable(f"{name} is not a constant of {module}")
    out = {f"{module}.{f.name}" for f in fields[at:] if f.kind != "Module Type"}
    todo = [f"{module}.{f.name}" for f in fields[at:] if f.kind == "Module"]
    depth = 0
    while todo:
        depth += 1
        if depth > MAX_DEPTH:
            raise PlacementUnreadable(f"modules nested deeper than {MAX_DEPTH} after {name} in {module}")
        answers = ask([f"Print Module {m}." for m in todo])
        nested: list[str] = []
        for m, printed in zip(todo, answers, strict=True):
            if not printed.lstrip().startswith("Module"):
                raise PlacementUnreadable(f"cannot read module {m}: {printed.strip()[:200]}")
            for f in module_fields(printed):
                if f.kind == "Module Type":
                    continue
                out.add(f"{m}.{f.name}")
                if f.kind == "Module":
                    nested.append(f"{m}.{f.name}")
        todo = nested
    return frozenset(out)


DEPENDENCY_DEPTH = 4
"""``Printing Depth`` while the final check's ``coqc`` runs ``Print All Dependencies``: each constant's name
stays, its type is ``...``. A proof by ``lia`` depends on some 2,000 constants whose types, printed whole,
took 0.4 MB; at this depth 39 kB. (A session's replies ignore the option: there the types come whole, and a
reply over its 4 MiB cap refuses the proof, fail closed.) The axioms' lines are elided too: the axiom audit
reads ``Print Assumptions`` at full depth, and this list is read for constants only."""

_KEYWORDS = frozenset({"forall", "fun", "let", "in", "match", "with", "end", "return", "as", "fix", "cofix", "if"})


def dependency_names(printed: str) -> list[str]:
    """The transparent and opaque constants ``Print All Dependencies`` lists, each as printed: Coq's shortest
    name for it where the question was asked.

    An entry starts at the line's start with its name, but a long type may wrap back to the line's start
    too, so the first word of every unindented line counts: what a type names is itself a dependency, so
    reading more never misses one. Raises ValueError where an entry's name was elided (``...``)."""
    out: list[str] = []
    title = ""
    for line in printed.splitlines():
        if not line.strip() or line[0].isspace():
            continue
        if re.fullmatch(r"[A-Z][a-z]+(?: [A-Za-z]+)*:", line.rstrip()):
            title = line.rstrip()
            continue
        if title not in ("Transparent constants:", "Opaque constants:"):
            continue
        if line.startswith("..."):
            raise ValueError(f"a dependency's name is elided: {line.strip()[:100]!r}")
        word = re.match(r"[A-Za-z_][\w'.]*", line)
        if word and word.group(0) not in _KEYWORDS:
            out.append(word.group(0))
    return out


def candidates(names: Iterable[str], later: Iterable[str]) -> list[str]:
    """The later fields that could be printed as one of ``names``: those whose last component ends one of
    them. Only these need ``Locate`` (a printed name's last component is the constant's own)."""
    tails = {n.rsplit(".", 1)[-1] for n in names}
    return sorted(p for p in later if p.rsplit(".", 1)[-1] in tails)


def reach_reasons(names: Iterable[str], located: str, later: frozenset[str], theorem: str) -> list[str]:
    """Reasons to refuse a proof whose constant (or partial term) uses ``names``: each one that is the printed
    name of a later field. ``located`` holds ``Locate`` of the later fields (every one that :func:`candidates`
    picks, or more) in the same environment as ``names``: a constant's entry there gives its printed name
    (no "shorter name" note: its full path is that name). ``theorem`` is the placement's full path."""
    printed: dict[str, str] = {}
    for m in _CONSTANT.finditer(located):
        if m.group(1) in later:
            printed[m.group(2) or m.group(1)] = m.group(1)
    out: list[str] = []
    for n in dict.fromkeys(names):
        if (path := printed.get(n)) is None:
            continue
        short = theorem.rsplit(".", 1)[-1]
        out.append(f"forbidden: cites {short}" if path == theorem else f"forbidden: uses {path}, stated after {short}")
    return out
