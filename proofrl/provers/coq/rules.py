"""What a Coq proof may contain, and what its ``Print Assumptions`` may list.

The header and the statement belong to the problem; the proof is untrusted text and may hold only tactic
sentences. Every vernacular command is refused (``Axiom``, ``Admitted``, ``Abort``, ``Unset Guard Checking``,
``Notation``, ``Require``, ...): they all start with a capital letter, and no tactic of Coq's does, so the
rule is "a sentence whose first word is capitalised is a command". ``admit`` and ``give_up`` are refused
anywhere in a sentence. After ``Qed``, ``Print Assumptions`` must list nothing outside the allowlist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_AXIOM_ALLOWLIST: tuple[str, ...] = (
    # Every proof about R in Coq's standard library depends on these (constructive reals made classical).
    "ClassicalDedekindReals.sig_forall_dec",
    "ClassicalDedekindReals.sig_not_dec",
    "FunctionalExtensionality.functional_extensionality_dep",
)

FORBIDDEN_TACTICS: tuple[str, ...] = ("admit", "give_up")
PROOF_MODE_COMMANDS: tuple[str, ...] = ("Unshelve", "Show")  # capitalised, but harmless inside a proof

_SELECTOR = re.compile(r"^\s*(?:\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|all|par|!|\[\s*[\w']+\s*\])\s*:(?!=)")
_WORD = re.compile(r"[A-Za-z_][\w']*")


def strip_comments_and_strings(sentence: str) -> str:
    """Replace comments and string literals by blanks (so ``idtac "admit"`` is not a use of admit)."""
    out, i, n, depth = [], 0, len(sentence), 0
    while i < n:
        if sentence.startswith("(*", i):
            depth, i = depth + 1, i + 2
            continue
        if depth and sentence.startswith("*)", i):
            depth, i = depth - 1, i + 2
            continue
        c = sentence[i]
        if c == '"':
            j = i + 1
            while j < n and not (sentence[j] == '"' and not sentence.startswith('""', j)):
                j += 2 if sentence.startswith('""', j) else 1
            i = j + 1
            out.append(" ")
            continue
        if not depth:
            out.append(c)
        i += 1
    return "".join(out)


def forbidden_reason(sentence: str, forbidden_tactics: tuple[str, ...] = FORBIDDEN_TACTICS) -> str | None:
    """``None`` if the sentence may appear in a proof, else a reason such as ``forbidden: Axiom``."""
    code = strip_comments_and_strings(sentence)
    body = _SELECTOR.sub("", code, count=1).strip()
    m = _WORD.match(body)
    if m and m.group()[0].isupper() and m.group() not in PROOF_MODE_COMMANDS:
        return f"forbidden: {m.group()}"
    for w in _WORD.findall(code):
        if w in forbidden_tactics:
            return f"forbidden: {w}"
    return None


@dataclass(frozen=True)
class Assumptions:
    axioms: tuple[str, ...]
    unsafe: tuple[str, ...]  # "guard checking", "positivity checking", "universe checking", ...


_UNSAFE = (
    ("is assumed to be guarded.", "guard checking"),
    ("is assumed to be positive.", "positivity checking"),
    ("relies on an unsafe hierarchy.", "universe checking"),
    ("relies on definitional UIP.", "definitional UIP"),
)


def parse_assumptions(text: str) -> Assumptions:
    """Read ``Print Assumptions`` output. Long types continue on indented lines, and a name may stand alone
    on its line with ``: type`` on the next, so only unindented lines start an entry."""
    axioms: list[str] = []
    unsafe: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line[0].isspace() or "Closed under the global context" in line:
            continue
        if line.rstrip().endswith(":") and " " not in line.strip()[:-1]:
            continue  # a section title such as "Axioms:"
        for suffix, what in _UNSAFE:
            if line.rstrip().endswith(suffix):
                unsafe.append(what)
                break
        else:
            if line.startswith("Fetching opaque proofs"):
                continue
            axioms.append(line.split(" : ", 1)[0].strip())
    return Assumptions(tuple(axioms), tuple(dict.fromkeys(unsafe)))


def allowed(axiom: str, allowlist: tuple[str, ...]) -> bool:
    """Coq prints the shortest unambiguous name (``sig_forall_dec`` once ``ClassicalDedekindReals`` is
    imported), so a printed name matches an allowlisted one when it is a dotted suffix of it. Proof text
    cannot declare axioms (commands are refused), so a short name can only come from the header's imports."""
    return any(axiom == a or a.endswith("." + axiom) for a in allowlist)


def assumption_reasons(a: Assumptions, theorem_name: str, allowlist: tuple[str, ...]) -> list[str]:
    reasons = [f"unsafe: {u}" for u in a.unsafe]
    for ax in a.axioms:
        if ax == theorem_name or ax.endswith("." + theorem_name):
            reasons.append("admitted")
        elif not allowed(ax, allowlist):
            reasons.append(f"axiom: {ax}")
    return reasons
