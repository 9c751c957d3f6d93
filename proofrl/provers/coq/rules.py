"""What a Coq proof may contain, how its sentences are sent to Coq, and what may stand behind a ``valid``.

The header and the statement belong to the problem; the proof is untrusted text. Four independent walls
keep a proof from proving something other than the statement:

1. **Only tactics, by allowlist** (:func:`forbidden_reason`): a proof sentence is accepted only in a shape
   known to be tactic syntax: a bullet or brace, ``Proof.`` / ``Proof using ...`` / ``Proof with tac`` /
   ``Proof using ... with tac`` as the first sentence (comments and blanks between its words as Coq allows
   them; ``tac`` is scanned and wrapped like any tactic), ``Unshelve.``, ``Show ...``, or an optional goal selector
   followed by text that starts like a tactic (a lowercase letter, ``(`` or ``[``). Anything else is refused as a
   command, however it is spelt (``#[] Abort.``, ``#[local] Axiom``, ``Time Qed.``, a Unicode letter ...). ``admit`` and
   ``give_up`` are refused anywhere in a sentence.
2. **Coq's own parser decides** (:func:`outgoing`): every tactic sentence is sent wrapped as
   ``selector: ( tactic ).``; only the tactic grammar accepts text after ``(``, so a command smuggled past
   wall 1 is a syntax error in Coq, not a command. ``coqc``'s final check receives the same wrapped text.
3. **After the proof** (the prover): no proof is open, no section or module is open, and the kernel's type of
   the checked constant, printed with ``Set Printing All``, is that of the statement elaborated afresh
   (:func:`type_mismatch`), every output read after :data:`PRINTING_RESET`.
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

_SELECTOR = re.compile(
    r"(?:\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|all|par|!|\[\s*[A-Za-z_][\w']*\s*\])\s*:(?!=)\s*"
)
_PROOF = re.compile(r"Proof\s*\.")
_PROOF_USING = re.compile(r"Proof\s+using\b(?:(?!\bwith\b)[\w'\s,()*+-])*(?:\bwith\b(?P<tac>.*))?\.", re.S)
"""``Proof using <section variables> [with <tactic>].``, on the text with comments blanked (strings kept, so a
string is never taken for section variables)"""
_PROOF_WITH = re.compile(r"Proof\s+with\s")
_END = re.compile(r"(?P<end>Qed|Defined|Admitted)\s*\.")
_SHOW = re.compile(r"Show(?:\s+[A-Za-z0-9_]+)*\s*\.")
_TACTIC_START = re.compile(r"[a-z(\[]")
_WORD = re.compile(r"[A-Za-z_][\w']*")


def blank_comments(sentence: str, *, strings: bool = False) -> str:
    """The sentence with each comment (and each string literal too when ``strings``) replaced by as many
    blanks, so that offsets in the result are offsets in the sentence. Strings inside comments are read as
    Coq reads them (``(* "*)" *)`` is one comment)."""
    out, i, n, depth = list(sentence), 0, len(sentence), 0
    while i < n:
        if sentence.startswith("(*", i):
            depth += 1
            out[i] = out[i + 1] = " "
            i += 2
            continue
        if depth and sentence.startswith("*)", i):
            depth -= 1
            out[i] = out[i + 1] = " "
            i += 2
            continue
        if sentence[i] == '"':
            j = i + 1
            while j < n and not (sentence[j] == '"' and not sentence.startswith('""', j)):
                j += 2 if sentence.startswith('""', j) else 1
            if depth or strings:
                out[i : j + 1] = " " * len(out[i : j + 1])
            i = j + 1
            continue
        if depth:
            out[i] = " " if sentence[i] != "\n" else "\n"
        i += 1
    return "".join(out)


def proof_end(sentence: str) -> str | None:
    """``Qed``, ``Defined`` or ``Admitted`` when the sentence is that command and nothing else (comments and
    blanks aside: ``Qed .`` and ``Qed (* done *).`` are Coq's ``Qed`` too), else None."""
    m = _END.fullmatch(blank_comments(sentence).strip())
    return m.group("end") if m else None


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


def forbidden_reason(
    sentence: str, forbidden_tactics: tuple[str, ...] = FORBIDDEN_TACTICS, *, first: bool = False
) -> str | None:
    """``None`` if the sentence may appear in a proof, else a reason such as ``forbidden: Axiom``.

    Allowlist, not denylist: what is not known to be tactic syntax is a command. ``first`` says the sentence
    opens the proof, where ``Proof.``, ``Proof using ...`` and ``Proof with tac.`` are allowed too.
    """
    if is_structural(sentence):
        return None
    code = strip_comments_and_strings(sentence).strip()
    if first and (span := _proof_tactic(sentence)) is not None:
        if span == (0, 0):  # ``Proof.`` or ``Proof using <variables>.``: sent as written (Coq skips the comments)
            return None
        body = blank_comments(sentence, strings=True)[span[0] : span[1]].strip()  # the tactic of ``with``
        if not _TACTIC_START.match(body):
            return f"forbidden: {_command_name(body)}"
        return _forbidden_word(body, forbidden_tactics)
    if sentence == "Unshelve." or _SHOW.fullmatch(sentence):
        return None
    sel = _SELECTOR.match(code)
    rest = code[sel.end() :] if sel else code
    if not _TACTIC_START.match(rest):
        return f"forbidden: {_command_name(rest)}"
    return _forbidden_word(code, forbidden_tactics)


def _forbidden_word(code: str, forbidden_tactics: tuple[str, ...]) -> str | None:
    for w in _WORD.findall(code):
        if w in forbidden_tactics:
            return f"forbidden: {w}"
    return None


def _proof_tactic(sentence: str) -> tuple[int, int] | None:
    """For a sentence that opens a proof (``Proof.``, ``Proof using X.``, ``Proof with T.``, ``Proof using X
    with T.``, comments anywhere between the words): the span of ``T`` in the sentence, ``(0, 0)`` when there
    is none; None for any other sentence. Read on the sentence with its comments blanked, so the span is one
    of the text as written."""
    blank = blank_comments(sentence)
    lead = len(blank) - len(blank.lstrip())
    code = blank.strip()
    if _PROOF.fullmatch(code):
        return (0, 0)
    if m := _PROOF_USING.fullmatch(code):
        if m.group("tac") is None:
            return (0, 0)
        tac = m.group("tac")
        return (lead + m.end("tac") - len(tac.lstrip()), lead + m.end("tac"))
    if m := _PROOF_WITH.match(code):
        return (lead + m.end(), lead + len(code) - len(_terminator(code)))
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
    span = _proof_tactic(sentence) if first else None
    if is_structural(sentence) or span == (0, 0):
        return Outgoing(sentence)  # ``Proof.`` and ``Proof using <variables>.``, comments as written
    if span is not None:  # ``Proof [using X] with T.``: T wrapped, no Timeout (it runs later, under each step's)
        head, tail = span
        text = f"{sentence[:head]}( {sentence[head:tail]} ){sentence[tail:]}"
        return Outgoing(text, ((head, 2), (tail + 2, 2)))
    prefix = f"Timeout {max(1, -(-int(timeout * 1000) // 1000))} " if timeout is not None else ""
    if sentence == "Unshelve." or _SHOW.fullmatch(sentence):
        return Outgoing(prefix + sentence, ((0, len(prefix)),) if prefix else ())
    head = 0
    if (m := _SELECTOR.match(sentence)) is not None:  # on the text as written: a comment inside = no selector
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
    section_variables: tuple[str, ...] = ()
    """variables of a section still open where the question was asked: binders once it closes"""


_UNSAFE = (
    ("is assumed to be guarded.", "guard checking"),
    ("is assumed to be positive.", "positivity checking"),
    ("relies on an unsafe hierarchy.", "universe checking"),
    ("relies on definitional UIP.", "definitional UIP"),
)


_USED_IN = re.compile(r"used in \S+ to prove\b")
_TITLE = re.compile(r"[A-Z][a-z]+(?: [A-Z]?[a-z]+)*:")
"""a title line of ``Print Assumptions``: ``Axioms:``, ``Section Variables:``, ``Opaque constants:``"""


def parse_assumptions(text: str) -> Assumptions:
    """Read ``Print Assumptions`` output. Long types continue on indented lines, and a name may stand alone
    on its line with ``: type`` on the next, so only unindented lines start an entry. Entries come under
    titles (``Axioms:``, ``Section Variables:``); those under ``Section Variables:`` are kept apart."""
    axioms: list[str] = []
    unsafe: list[str] = []
    variables: list[str] = []
    title = ""
    for line in text.splitlines():
        if not line.strip() or line[0].isspace() or line[0] == ":" or "Closed under the global context" in line:
            continue
        if _TITLE.fullmatch(line.rstrip()):
            title = line.rstrip()
            continue
        if _USED_IN.match(line):
            continue  # where the entry above is used ("used in t to prove: ..."), not an assumption
        for suffix, what in _UNSAFE:
            if line.rstrip().endswith(suffix):
                unsafe.append(what)
                break
        else:
            if line.startswith("Fetching opaque proofs"):
                continue
            name = line.split(" : ", 1)[0].strip()
            (variables if title == "Section Variables:" else axioms).append(name)
    return Assumptions(tuple(axioms), tuple(dict.fromkeys(unsafe)), tuple(variables))


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


def assumption_reasons(
    a: Assumptions, theorem_name: str, allowed_printed: dict[str, str] | set[str], *, open_section: bool = False
) -> list[str]:
    """Reasons to reject: unsafe flags, the theorem itself (``Admitted``), and any assumption whose printed
    name is not one of ``allowed_printed`` (from :func:`printed_names`: exact names, never suffixes). Section
    variables are reasons too, unless ``open_section`` says the question was asked inside the problem's own
    sections, which the judge closes before the proof counts (they are binders then)."""
    reasons = [f"unsafe: {u}" for u in a.unsafe]
    if not open_section:
        reasons += [f"section variable: {v}" for v in a.section_variables]
    for ax in a.axioms:
        if ax == theorem_name:
            reasons.append("admitted")
        elif ax not in allowed_printed:
            reasons.append(f"axiom: {ax}")
    return reasons


PRINTING_RESET: tuple[str, ...] = ("Unset Printing Depth.", "Set Printing Width 100.", "Unset Printing Universes.")
"""Sent after ``Qed`` and before every output the verdict reads (``Print Assumptions``, ``Locate``, markers,
``Check``): a header's printing options must neither elide them (``Set Printing Depth 2`` prints ``...``) nor
make honest types differ (``Set Printing Universes`` names each constant's universes apart)."""

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


_EXPANDS = re.compile(r"^Expands to:\s+Constant\s+(\S+)\s*$", re.M)  # a long path goes to the next line


def constant_path(about_output: str) -> str | None:
    """The absolute path of the constant an ``About`` names (``Expands to: Constant Top.M.t``), None when it
    names no constant, several, or nothing (a notation, an inductive, an unknown name)."""
    found = _EXPANDS.findall(about_output)
    return found[0] if len(found) == 1 else None


def identity_reason(name: str, about_name: str, about_reference: str, about_asked: str | None = None) -> str | None:
    """``None`` when the name whose assumptions are read denotes the constant just checked, else a reason.

    ``about_name`` and ``about_reference`` are ``About`` of the lemma's short name and of
    :data:`REFERENCE_NAME` where the header's sections are closed and its modules still open: the reference was
    declared right after the lemma, so the two must share their absolute path but for the last component (a
    short name that reaches an imported namesake has another path). ``about_asked`` is ``About`` of the name
    the assumptions are then asked for once the modules are closed too (None when they are read inside): it
    must expand to that same path, never to another object whose path merely ends the same way."""
    here, ref = constant_path(about_name), constant_path(about_reference)
    if here is None or ref is None:
        return f"assumptions unreadable: {name} does not name one constant after its proof"
    prefix, _, last = here.rpartition(".")
    if last != name or ref.rpartition(".")[0] != prefix:
        return f"assumptions unreadable: {name} names {here}, not the constant just proved"
    if about_asked is not None and constant_path(about_asked) != here:
        return (
            f"assumptions unreadable: {here} is not visible under its name once its modules are closed "
            "(a functor body, a module type or a sealed module)"
        )
    return None


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
