"""What an untrusted Coq header (a snippet's, through the server) may hold, read by Coq's grammar.

A header comes from the client, and a header can change what an unchanged statement means or how the judge
runs: a notation, a coercion, an axiom named like an allowed one, ``Unset Guard Checking``, ``Set Firstorder
Solver admit`` (``firstorder`` then calls ``admit``), ``Set Ltac Debug`` (Coq waits for a debugger),
``#[bypass_check(guard)]``. So a header sentence is accepted only in one of these shapes, each read word by
word after comments and blanks are normalised:

* ``[From Q] Require [Import|Export] Q ...`` and ``Import|Export Q ...``: load and open installed libraries;
* ``[Local|Global] Open|Close Scope S``;
* ``[Local|Global|Export] Set|Unset O [value]`` for an option ``O`` of :data:`HARMLESS_OPTIONS`, its value of
  the kind listed there (no value for a flag, a bounded number, a string from a fixed shape).

Localities are normalised first: the words ``Local``/``Global``/``Export`` (``Export`` before ``Set`` is a
locality, as Coq reads it, not an ``Export`` of a module named ``Set``) and the attributes ``#[local]``,
``#[global]``, ``#[export]``; any other attribute, a control prefix (``Time``, ``Fail``, ``Redirect``, ...) and
every other command is refused. Printing options are allowed because the judge resets them before each
output it reads (:data:`~proofrl.provers.coq.rules.PRINTING_RESET`, ``Set Printing All``).
"""

from __future__ import annotations

import re

from .rules import blank_comments, strip_comments_and_strings
from .sentences import COQ_BLANKS

_FLAG = "flag"
_Value = str | tuple[int, int] | re.Pattern[str]

HARMLESS_OPTIONS: dict[str, _Value] = {
    # implicit arguments and patterns: how later terms are elaborated, never what a proof proves
    **dict.fromkeys(
        (
            "Implicit Arguments",
            "Strict Implicit",
            "Strongly Strict Implicit",
            "Contextual Implicit",
            "Reversible Pattern Implicit",
            "Maximal Implicit Insertion",
            "Asymmetric Patterns",
        ),
        _FLAG,
    ),
    # printing: reset or overridden before every output the judge reads
    **dict.fromkeys(
        (
            "Printing All",
            "Printing Notations",
            "Printing Implicit",
            "Printing Coercions",
            "Printing Universes",
            "Printing Parentheses",
            "Printing Compact Contexts",
            "Printing Unfocused",
        ),
        _FLAG,
    ),
    "Printing Width": (1, 10_000),
    "Printing Depth": (1, 10_000),
    # tactic behaviour: what a tactic tries, never what the kernel accepts
    **dict.fromkeys(
        (
            "Keyed Unification",
            "Structural Injection",
            "Ltac Backtrace",
            "Typeclasses Strict Resolution",
            "Typeclasses Unique Instances",
            "Typeclasses Dependency Order",
            "Typeclasses Iterative Deepening",
        ),
        _FLAG,
    ),
    "Firstorder Depth": (0, 100),
    "Typeclasses Depth": (0, 10_000),
    "Hyps Limit": (0, 10_000),
    "Bullet Behavior": re.compile(r"None|Strict Subproofs"),
    "Default Goal Selector": re.compile(r"!|all|\d{1,4}"),
    "Default Proof Using": re.compile(r"[\w'\s*+(),-]*"),
    "Warnings": re.compile(r"[\w\s,+-]*"),
}
"""Options a snippet header may set, by Coq's name, with the kind of value ``Set`` takes: ``"flag"`` (none), a
``(low, high)`` range of numbers, or the shape of a string's contents. ``Unset`` takes no value. Anything else
is refused, the kernel's switches (``Guard Checking``, ``Positivity Checking``, ``Universe Checking``,
``Definitional UIP``) and options that run a tactic or wait for a person (``Firstorder Solver``, ``Ltac
Debug``, ``Ltac Batch Debug``) among them."""

FORBIDDEN_NAMES = (
    "Load",
    "Cd",
    "Redirect",
    "Drop",
    "Declare ML Module",
    "Add LoadPath",
    "Add Rec LoadPath",
    "Add ML Path",
    "Remove LoadPath",
    "Extraction",
    "Separate Extraction",
    "Recursive Extraction",
    "Set Extraction",
)
"""Commands named as such when refused: they read or write files by path, change directory, load native
plugins or leave the toplevel."""
LOCALITIES = ("local", "global", "export")
_CONTROLS = ("Time", "Instructions", "Fail", "Succeed", "Timeout")
_CONTROL = re.compile(r"^\s*(?:#\[[^\]]*\]\s*|(?:Time|Instructions|Fail|Succeed|Local|Global|Timeout\s+\d+)\s+)")
_TOKEN = re.compile(r'"(?:[^"]|"")*"|[A-Za-z_][\w\']*(?:\.[A-Za-z_][\w\']*)*|[0-9]+|[^ ]')
_BLANKS = re.compile(f"[{re.escape(COQ_BLANKS)}]+")
_QUALID = re.compile(r"[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*")
_IDENT = re.compile(r"[A-Za-z_][\w']*")
_OPTION_WORD = re.compile(r"[A-Z][\w']*")


def header_refusal(sentence: str) -> str | None:
    """``None`` if a snippet header may hold the sentence, else the reason (``forbidden: Notation``,
    ``forbidden: Set Firstorder Solver``, ``forbidden: #[bypass_check(guard)]``)."""
    text = _BLANKS.sub(" ", blank_comments(sentence)).strip(" ")  # Coq's blanks only: a no-break space is a token
    if not text.endswith(".") or text.endswith(".."):
        return f"forbidden: {_name(sentence)}"
    body, localities = text[:-1].rstrip(), []
    while body.startswith("#["):
        end = _attribute_end(body)
        inside = body[2:end].strip() if end > 0 else body[2:]
        attrs = [a.strip() for a in inside.split(",")]
        if end < 0 or not all(a in LOCALITIES for a in attrs):
            return f"forbidden: #[{inside}]"
        localities += attrs
        body = body[end + 1 :].lstrip()
    words = _TOKEN.findall(body)
    if len(words) > 1 and (words[0] in ("Local", "Global") or (words[0] == "Export" and words[1] in ("Set", "Unset"))):
        localities.append(words.pop(0).lower())
    if len(localities) > 1:
        return f"forbidden: {' '.join(localities)} (one locality at most)"
    head = words[0] if words else ""
    if head in ("Set", "Unset"):
        return _option_refusal(head, words[1:])
    if head in ("Open", "Close") and localities != ["export"]:
        ok = len(words) == 3 and words[1] == "Scope" and _IDENT.fullmatch(words[2])
        return None if ok else f"forbidden: {head} {' '.join(words[1:2])}".rstrip()
    if not localities and _loads_libraries(words):
        return None
    name = _name(sentence)
    return f"forbidden: {head if head in _CONTROLS and name not in FORBIDDEN_NAMES else name}"


def _attribute_end(body: str) -> int:
    """Index of the ``]`` that closes the attribute ``#[`` at the start of ``body`` (strings skipped), or -1."""
    i = 2
    while i < len(body):
        if body[i] == '"':
            m = re.compile(r'"(?:[^"]|"")*"').match(body, i)
            i = m.end() if m else len(body)
            continue
        if body[i] == "]":
            return i
        i += 1
    return -1


def _loads_libraries(words: list[str]) -> bool:
    """``[From Q] Require [Import|Export] Q+`` or ``Import|Export Q+``."""
    if words[:1] == ["From"]:
        if len(words) < 3 or not _QUALID.fullmatch(words[1]) or words[2] != "Require":
            return False
        words = words[2:]
    if words[:1] == ["Require"]:
        words = words[1:]
        if words[:1] in (["Import"], ["Export"]):
            words = words[1:]
    elif words[:1] in (["Import"], ["Export"]):
        words = words[1:]
    else:
        return False
    return bool(words) and all(_QUALID.fullmatch(w) and w not in ("Import", "Export", "Require", "From") for w in words)


def _option_refusal(verb: str, words: list[str]) -> str | None:
    """``Set``/``Unset`` and the words after it: the option's name is its leading capitalised words."""
    n = 0
    while n < len(words) and _OPTION_WORD.fullmatch(words[n]):
        n += 1
    name, value = " ".join(words[:n]), words[n:]
    # the longest listed name that the words start with; the rest is the value
    for k in range(n, 0, -1):
        if " ".join(words[:k]) in HARMLESS_OPTIONS:
            name, value = " ".join(words[:k]), words[k:]
            break
    kind = HARMLESS_OPTIONS.get(name)
    if kind is None:
        return f"forbidden: {verb} {name}".rstrip()
    shown = f"forbidden: {verb} {name} {' '.join(value)}"
    if verb == "Unset" or kind == _FLAG:
        return None if not value else shown
    if len(value) != 1:
        return shown
    (v,) = value
    if isinstance(kind, tuple):
        return None if re.fullmatch("[0-9]+", v) and kind[0] <= int(v) <= kind[1] else shown
    if (
        isinstance(kind, re.Pattern)
        and len(v) >= 2
        and v[0] == v[-1] == '"'
        and kind.fullmatch(v[1:-1].replace('""', '"'))
    ):
        return None
    return shown


def _name(sentence: str) -> str:
    """How to name a refused sentence: a command of :data:`FORBIDDEN_NAMES` under any prefix, else its first
    word (two for ``Tactic Notation``, ``Hint Extern``, ...), after attributes and control prefixes."""
    text = strip_comments_and_strings(sentence)
    while (m := _CONTROL.match(text)) is not None and m.end() > 0:
        text = text[m.end() :]
    words = " ".join(text.replace(".", " ").split())
    named = next((c for c in sorted(FORBIDDEN_NAMES, key=len, reverse=True) if (words + " ").startswith(c + " ")), None)
    if named:
        return named
    first = re.findall(r"[A-Za-z_][\w']*", text)[:2]
    if (
        first
        and first[0] in ("Tactic", "Reserved", "Number", "String", "Declare", "Hint", "Existing", "Program")
        and len(first) > 1
    ):
        return " ".join(first)
    return first[0] if first else (text.strip()[:20] or "?")
