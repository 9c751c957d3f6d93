"""The sections and modules a (trusted) header leaves open, so the judge can close them after the proof.

A problem stated where a library states it (the file's text before the statement as its header) may sit
inside ``Section``\\ s and ``Module``\\ s: its statement uses the section's variables, hypotheses and local
notations. ``coqc`` refuses a file that ends with one open, and an open section's variables are listed by
``Print Assumptions`` as if they were axioms (inside an open module, so are the fields of modules sealed by a
signature earlier in the file). The judge therefore compares the statement's type inside, where it was
elaborated, then sends ``End X.`` for each open section and module (innermost first; Coq forbids a module
inside a section, so sections are the inner ones), and only then ``Print Assumptions`` on the lemma's name
qualified by the modules (:meth:`OpenBlocks.qualified`): the constant generalised over the section variables
it uses, ordinary binders, no longer assumptions.

Once a module closes, its lemma keeps its name only if the module is a plain structure (``Module M.``, or
``Module M <: S.``, checked against ``S`` but not sealed by it). A lemma in a functor body, a ``Module Type``, or a
module sealed by a signature (``Module M : S.``) has no constant ``M.t`` after ``End``, and Coq would resolve
the qualified name to any other visible object whose path ends that way. For such headers
(:attr:`OpenBlocks.hidden_after_end`) the judge reads the assumptions inside the modules, once the sections
are closed; for the others, after everything is closed. Either way it first makes sure, by the absolute path
Coq prints, that the name it asks about is the constant it just checked.

The header is the problem's, never the proof's: a proof may hold tactics only (``End``, ``Section``,
``Hypothesis`` are refused as commands), and what it might leave open would make the judge's ``End`` fail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .rules import blank_comments
from .sentences import SplitError, split_sentences

_ATTRS = r"(?:#\[[^\]]*\]\s*)*"
_SECTION = re.compile(rf"{_ATTRS}Section\s+([A-Za-z_][\w']*)\s*\.")
_MODULE = re.compile(
    rf"{_ATTRS}(?:(?:Local|Global)\s+)?Module\s+(?P<type>Type\s+)?(?:(?:Import|Export)\s+)?(?P<name>[A-Za-z_][\w']*)"
    r"(?![\w'])(?P<rest>.*)",
    re.S,
)
_END = re.compile(r"End\s+([A-Za-z_][\w']*)\s*\.")


@dataclass(frozen=True)
class OpenBlocks:
    """What a header leaves open, innermost first."""

    sections: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    hidden_after_end: bool = False
    """some open module is a functor body, a ``Module Type`` or sealed by a signature: a lemma declared inside
    has no constant under its qualified name once the modules are closed"""

    @property
    def closing(self) -> tuple[str, ...]:
        """``End X.`` per open section, then per open module, innermost first."""
        return self.closing_sections + self.closing_modules

    @property
    def closing_sections(self) -> tuple[str, ...]:
        return tuple(f"End {x}." for x in self.sections)

    @property
    def closing_modules(self) -> tuple[str, ...]:
        return tuple(f"End {x}." for x in self.modules)

    def qualified(self, name: str) -> str:
        """``name``, declared where the header ends, as it is called once everything is closed (the modules'
        names, outermost first, then ``name``: sections are no part of it)."""
        return ".".join([*self.modules[::-1], name])


NOTHING_OPEN = OpenBlocks()


@lru_cache(maxsize=64)
def open_blocks(header: str) -> OpenBlocks | None:
    """The sections and modules open at the end of ``header``; None when its sentences cannot be read that
    way (an ``End`` naming what is not open, a module inside a section: Coq accepts neither, so the reading
    is what is wrong). A header that never says ``Section`` or ``Module`` is read in no time."""
    if "Section" not in header and "Module" not in header:
        return NOTHING_OPEN
    try:
        sentences = split_sentences(header)
    except SplitError:
        return None
    stack: list[tuple[str, str]] = []  # (kind, name), outermost first; kind: section, module or hidden
    for s in sentences:
        code = blank_comments(s.text).strip()
        if m := _SECTION.fullmatch(code):
            stack.append(("section", m.group(1)))
        elif (m := _MODULE.match(code)) and ":=" not in code:
            if any(kind == "section" for kind, _ in stack):
                return None
            stack.append(("hidden" if _hides(m) else "module", m.group("name")))
        elif m := _END.fullmatch(code):
            if not stack or stack[-1][1] != m.group(1):
                return None
            stack.pop()
    inner = stack[::-1]
    return OpenBlocks(
        tuple(n for kind, n in inner if kind == "section"),
        tuple(n for kind, n in inner if kind != "section"),
        any(kind == "hidden" for kind, _ in inner),
    )


def _hides(module: re.Match[str]) -> bool:
    """Whether the ``Module`` sentence opens a block whose lemmas are not constants of that name after ``End``:
    a ``Module Type``, a functor (parameters ``(X : T)`` before the body), or a module sealed by ``: S``. Only
    ``<: S`` (a check, not a seal) and nothing at all leave the names as they are. Read as Coq's grammar reads
    the rest of the sentence, so any other shape counts as hiding (the judge then reads inside, which is
    always sound)."""
    if module.group("type"):
        return True
    rest = module.group("rest").strip().rstrip(".").strip()
    while rest.startswith("<:"):  # ``<: S1 <: S2``: each a check
        rest = re.sub(r"^<:\s*[A-Za-z_][\w'.]*\s*", "", rest)
    return rest != ""
