"""What a Coq proof may contain, how its sentences are sent to Coq, and what may stand behind a ``valid``.

The header and the statement belong to the problem; the proof is untrusted text. Four independent walls
keep a proof from proving something other than the statement:

1. **Only tactics, by allowlist** (:func:`forbidden_reason`): a proof sentence is accepted only in a shape
   known to be tactic syntax: a bullet or brace, ``Proof.`` / ``Proof using ...`` / ``Proof with tac`` as the
   first sentence, ``Unshelve.``, ``Show ...``, or an optional goal selector followed by text that starts
   like a tactic (a lowercase letter, ``(`` or ``[``). Anything else is refused as a command, however it is
   spelt (``#[] Abort.``, ``#[local] Axiom``, ``Time Qed.``, a Unicode letter ...). ``admit`` and
   ``give_up`` are refused anywhere in a sentence.
2. **Coq's own parser decides** (:func:`outgoing`): every tactic sentence is sent wrapped as
   ``selector: ( tactic ).``; only the tactic grammar accepts text after ``(``, so a command smuggled past
   wall 1 is a syntax error in Coq, not a command. ``coqc``'s final check receives the same wrapped text.
3. **After the proof** (the prover): no proof is open, no section or module is open, and the kernel's type of
   the checked constant, printed with ``Set Printing All``, is that of the statement elaborated afresh
   (:func:`type_of_check`).
4. **Assumptions by origin** (:func:`assumption_reasons`): ``Print Assumptions`` prints short names, so each
   allowlisted axiom is looked up by its fully qualified name with ``Locate``; a printed assumption is
   allowed only when it is the very object that fully qualified name denotes (a user axiom that shares its
   short name prints differently, and its own ``Locate`` origin differs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .sentences import byte_to_char, is_structural

DEFAULT_AXIOM_ALLOWLIST: tuple[str, ...] = (
    # Every proof about R in Coq's standard library depends on these (constructive reals made classical).
    # Fully qualified: a name is matched with the object it denotes, never by its printed suffix.
    "Coq.Reals.ClassicalDedekindReals.sig_forall_dec",
    "Coq.Reals.ClassicalDedekindReals.sig_not_dec",
    "Coq.Logic.FunctionalExtensionality.functional_extensionality_dep",
)

FORBIDDEN_TACTICS: tuple[str, ...] = ("admit", "give_up")

_SELECTOR = re.compile(r"(?:\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|all|par|!|\[\s*[A-Za-z_][\w']*\s*\])\s*:(?!=)\s*")
_PROOF_USING = re.compile(r"Proof\s+using(?:\s[\w'\s,()*+-]*)?\.")
_PROOF_WITH = re.compile(r"Proof\s+with\s")
_SHOW = re.compile(r"Show(?:\s+[A-Za-z0-9_]+)*\s*\.")
_TACTIC_START = re.compile(r"[a-z(\[]")
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


def _terminator(sentence: str) -> str:
    return "..." if sentence.endswith("...") else "."


def _command_name(code: str) -> str:
    """How to name a refused sentence: its attribute and first word(s), as written."""
    m = re.match(r"\s*((?:#\[[^\]]*\]\s*)*)(\S*)", code)
    attrs, word = (m.group(1).strip(), m.group(2)) if m else ("", code.strip())
    w = _WORD.match(word)
    word = w.group() if w else word[:20].rstrip(".")
    return f"{attrs} {word}".strip() or "?"


def forbidden_reason(sentence: str, forbidden_tactics: tuple[str, ...] = FORBIDDEN_TACTICS, *, first: bool = False) -> str | None:
    """``None`` if the sentence may appear in a proof, else a reason such as ``forbidden: Axiom``.

    Allowlist, not denylist: what is not known to be tactic syntax is a command. ``first`` says the sentence
    opens the proof, where ``Proof.``, ``Proof using ...`` and ``Proof with tac.`` are allowed too.
    """
    if is_structural(sentence):
        return None
    code = strip_comments_and_strings(sentence).strip()
    # these are sent as they are, so they must match in full, with no comment or string inside
    if first and (code == "Proof." or _PROOF_USING.fullmatch(sentence)):
        return None
    if sentence == "Unshelve." or _SHOW.fullmatch(sentence):
        return None
    body = code
    if first and _PROOF_WITH.match(code):
        body = code[_PROOF_WITH.match(code).end() :]
    sel = _SELECTOR.match(body)
    rest = body[sel.end() :] if sel else body
    if not _TACTIC_START.match(rest):
        return f"forbidden: {_command_name(rest)}"
    for w in _WORD.findall(code):
        if w in forbidden_tactics:
            return f"forbidden: {w}"
    return None


@dataclass(frozen=True)
class Outgoing:
    """A proof sentence as Coq receives it, and how to map Coq's offsets in it back to the user's text.

    ``inserts`` are ``(offset in text, length)`` of what we added (the ``Timeout n`` prefix, ``( `` and
    `` )``), in characters and increasing order.
    """

    text: str
    inserts: tuple[tuple[int, int], ...] = ()

    def source_offset_of_byte(self, byte_offset: int) -> int:
        """A UTF-8 byte offset in :attr:`text` (as Coq reports locations) -> a character offset in the original
        sentence, never past its end."""
        original = len(self.text) - sum(length for _, length in self.inserts)
        return min(original, self.source_offset(byte_to_char(self.text, byte_offset)))

    def source_offset(self, char_offset: int) -> int:
        """A character offset in :attr:`text` -> the offset in the original sentence (inserts collapse)."""
        shift = 0
        for at, length in self.inserts:
            if char_offset >= at + length:
                shift += length
            elif char_offset >= at:
                return at - shift
        return char_offset - shift


def outgoing(sentence: str, timeout: float | None = None, *, first: bool = False) -> Outgoing:
    """What to send for an accepted proof sentence: tactics wrapped as ``sel: ( tac ).`` so that Coq's
    parser accepts nothing but tactic syntax, under ``Timeout n`` when ``timeout`` is given (bullets, braces
    and ``Proof`` take neither)."""
    if is_structural(sentence) or (first and re.match(r"Proof\b", sentence) and not _PROOF_WITH.match(sentence)):
        return Outgoing(sentence)  # only ``Proof.`` (comments aside) and ``Proof using ...`` get here
    prefix = f"Timeout {max(1, -(-int(timeout * 1000) // 1000))} " if timeout is not None else ""
    if sentence == "Unshelve." or _SHOW.fullmatch(sentence):
        return Outgoing(prefix + sentence, ((0, len(prefix)),) if prefix else ())
    head = 0
    if first and (m := _PROOF_WITH.match(sentence)):
        head, prefix = m.end(), ""  # Proof with takes no Timeout; its tactic runs later, under each step's
    elif (m := _SELECTOR.match(sentence)) is not None:  # on the text as written: a comment inside = no selector
        head = m.end()
    term = _terminator(sentence)
    body = sentence[head : len(sentence) - len(term)]
    text = f"{prefix}{sentence[:head]}( {body} ){term}"
    inserts = [(len(prefix) + head, 2), (len(prefix) + head + 2 + len(body), 2)]
    if prefix:
        inserts.insert(0, (0, len(prefix)))
    return Outgoing(text, tuple(inserts))


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


_LOCATED = re.compile(r"^\S+ ([\w'.]+)(?:\s*\(shorter name to refer to it in current context is ([\w'.]+)\))?", re.M)


def printed_names(locate_outputs: dict[str, str]) -> dict[str, str]:
    """``{printed name: fully qualified name}`` for the allowlisted axioms that exist, from the output of
    ``Locate FQN.`` for each. ``Locate`` lists every object whose path ends with the query; the entry whose
    path *is* the query is ours, and its note gives the shortest name, the one ``Print Assumptions`` prints
    (without the note, the query itself is that name). Shortest names are unique in one environment, so a
    printed name denotes one object."""
    out: dict[str, str] = {}
    for fqn, text in locate_outputs.items():
        for m in _LOCATED.finditer(text):
            if m.group(1) == fqn:
                out[m.group(2) or fqn] = fqn
    return out


def assumption_reasons(a: Assumptions, theorem_name: str, allowed_printed: dict[str, str] | set[str]) -> list[str]:
    """Reasons to reject: unsafe flags, the theorem itself (``Admitted``), and any assumption whose printed
    name is not one of ``allowed_printed`` (from :func:`printed_names`: exact names, never suffixes)."""
    reasons = [f"unsafe: {u}" for u in a.unsafe]
    for ax in a.axioms:
        if ax == theorem_name:
            reasons.append("admitted")
        elif ax not in allowed_printed:
            reasons.append(f"axiom: {ax}")
    return reasons


REFERENCE_NAME = "proofrl_reference_statement"
"""The statement is elaborated again under this name after the proof, to compare kernel types."""


def reference_statement(statement: str, name_span: tuple[int, int]) -> str:
    """The statement sentence with its name replaced by :data:`REFERENCE_NAME`."""
    return statement[: name_span[0]] + REFERENCE_NAME + statement[name_span[1] :]


def checked_type(check_output: str) -> str:
    """The type in ``Check @name.`` output (``name\\n     : T``), whitespace normalised."""
    text = " ".join(check_output.split())
    _, sep, typ = text.partition(" : ")
    return typ if sep else ""


def type_mismatch(theorem_check: str, reference_check: str) -> str | None:
    """``None`` when the checked constant's type is the statement's, else a reason. Both come from
    ``Check @c.`` under ``Set Printing All`` in the same environment: no notation, coercion or implicit
    argument hides a difference, and equal text means the same term."""
    a, b = checked_type(theorem_check), checked_type(reference_check)
    if not a or not b:
        return "statement check failed: the proved constant's type could not be read"
    if a != b:
        return "statement changed: the proved constant's type is not the statement's"
    return None
