"""Split Coq text into sentences, the unit ``coqidetop``'s ``Add`` accepts (it silently drops anything after
the first sentence, so the split must be ours and exact).

A sentence ends at a ``.`` followed by a blank (:data:`COQ_BLANKS`) or the end of text (``Nat.add`` and ``..`` do not
end one), or is a bullet (``-``, ``+``, ``*``, repeated) or a brace (``{``, ``}``, also after a goal selector such as
``2: {`` or ``[x]: {``). Comments nest and may hold strings; strings escape ``"`` by doubling it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base import Position


class SplitError(ValueError):
    """The text is not a sequence of complete sentences (``offset`` is a character index)."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class Sentence:
    text: str
    start: int  # character offsets into the source text
    end: int


COQ_BLANKS = " \t\n\r\x0c\x1a"
"""The characters Coq's lexer takes as blanks: only these end a sentence after a period (a no-break space
or any other Unicode space does not, so ``exact I.\u00a0`` is not a complete sentence for Coq, nor for us)."""
_BULLET = re.compile(r"-+|\++|\*+")
_SELECTOR_BRACE = re.compile(r"(?:\d+|\[\s*[A-Za-z_][\w']*\s*\]|all)\s*:\s*\{")


def is_structural(sentence: str) -> bool:
    """A bullet or a brace, possibly after a goal selector (``-``, ``{``, ``}``, ``2: {``): the sentences the
    splitter cuts on their own, which focus goals and do no work."""
    return bool(_BULLET.fullmatch(sentence) or sentence in ("{", "}") or _SELECTOR_BRACE.fullmatch(sentence))


def split_sentences(text: str) -> list[Sentence]:
    """Split ``text``; raises :class:`SplitError` for an unterminated comment or string, or trailing text
    without a final period."""
    out: list[Sentence] = []
    i, n = 0, len(text)
    start: int | None = None  # start of the current sentence (first non-blank, non-comment char)
    while i < n:
        c = text[i]
        if text.startswith("(*", i):
            i = _skip_comment(text, i)
            continue
        if c.isspace():
            i += 1
            continue
        if start is None:
            start = i
            # bullets and braces are whole sentences when they open one
            if c in "{}":
                out.append(Sentence(c, i, i + 1))
                start, i = None, i + 1
                continue
            m = _BULLET.match(text, i)  # no tactic starts with - + *, so a leading run is a bullet
            if m:
                out.append(Sentence(m.group(), i, m.end()))
                start, i = None, m.end()
                continue
            m = _SELECTOR_BRACE.match(text, i)
            if m:
                out.append(Sentence(m.group(), i, m.end()))
                start, i = None, m.end()
                continue
        if c == '"':
            i = _skip_string(text, i)
            continue
        if (
            c == "."
            and (i + 1 == n or text[i + 1] in COQ_BLANKS)
            and not (i > 0 and text[i - 1] == "." and not text.startswith("...", i - 2))
        ):
            out.append(Sentence(text[start : i + 1], start, i + 1))
            start, i = None, i + 1
            continue
        i += 1
    if start is not None:
        raise SplitError("missing final period", start)
    return out


def _skip_comment(text: str, i: int) -> int:
    depth, start, n = 0, i, len(text)
    while i < n:
        if text.startswith("(*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*)", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        elif text[i] == '"':
            i = _skip_string(text, i, in_comment_at=start)
        else:
            i += 1
    raise SplitError("unterminated comment", start)


def _skip_string(text: str, i: int, in_comment_at: int | None = None) -> int:
    start, i, n = i, i + 1, len(text)
    while i < n:
        if text[i] == '"':
            if text.startswith('""', i):
                i += 2
                continue
            return i + 1
        i += 1
    if in_comment_at is not None:
        raise SplitError("unterminated comment", in_comment_at)
    raise SplitError("unterminated string", start)


def position(text: str, offset: int) -> Position:
    """Character offset -> (1-based line, 0-based column)."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1)
    return Position(line, col)


def byte_to_char(s: str, byte_offset: int) -> int:
    """Coq reports UTF-8 byte offsets; Python and users count characters."""
    return len(s.encode("utf-8")[:byte_offset].decode("utf-8", "ignore"))


def normalise(sentence: str) -> str:
    """One sentence (as :func:`split_sentences` cuts it) in a canonical form that Coq's lexer reads as the same
    tokens: each run of blanks becomes one space and each comment that follows a blank goes (a comment is a
    blank to the lexer). Strings are kept as written, ``(*`` in them included, and so is a comment right after
    a non-blank: after a period it keeps the period from ending the sentence, which a blank would do.
    Texts that differ only in comments and blanks share one form (the prover pool's key for a header)."""
    out: list[str] = []
    i, n, blank = 0, len(sentence), True
    while i < n:
        c = sentence[i]
        if sentence.startswith("(*", i):
            j = _skip_comment(sentence, i)
            if not blank:
                out.append(sentence[i:j])
            i = j
        elif c == '"':
            j = _skip_string(sentence, i)
            out.append(sentence[i:j])
            i, blank = j, False
        elif c in COQ_BLANKS:
            if not blank:
                out.append(" ")
            i, blank = i + 1, True
        else:
            out.append(c)
            i, blank = i + 1, False
    return "".join(out).rstrip(" ")
