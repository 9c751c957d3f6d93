"""Where Lean sees code, comments and literals: a lexer that follows Lean 4's own, for the verdict rules.

The rules in :mod:`.rules` look for words (``axiom``, ``run_cmd``, ...) and for the statement in code that a
policy wrote. That is only sound if this module and Lean agree, character for character, on what is code.
Where they could disagree, the text is refused (:attr:`Lexed.problems`) instead of guessed at. It follows
``Lean.Parser.whitespace``, ``finishCommentBlock``, ``strLitFnAux``, ``charLitFnAux``, ``rawStrLitFnAux``
and ``identFnAux`` (``Lean/Parser/Basic.lean``):

* ``--`` runs to the end of the line; ``/-`` opens a comment that nests, and the character right after
  ``/-`` is consumed unseen (so ``/-/`` does not nest and ``/--/`` does not close). Doc comments ``/--`` and
  ``/-!`` are tokens whose body is scanned the same way;
* ``"..."`` with backslash escapes, ``r"..."``/``r#"..."#`` raw strings (no escapes), ``'c'`` char literals
  (only at the start of a token: ``h'`` is an identifier);
* ``«...»`` identifier parts, in which nothing is a comment or a string;
* the whitespace Lean knows is space, tab, CR and LF: any other space character is not whitespace to Lean
  (Lean rejects it), so it is not a separator here either.

Refused as ``problems`` (never in honest proofs, and places where the token table, which this module does not
have, could make Lean read the text otherwise): a string literal holding ``{`` (interpolated strings such as
``s!"{...}"`` hold code), syntax quotations (`` `( ``), a comment or a char literal glued to a symbol (``<--``,
``+/-``, ``∑'x'``), anything unterminated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CODE, COMMENT, LITERAL, ESCAPED = "c", "m", "s", "g"
WHITESPACE = " \t\r\n"
# a comment opener after one of these may instead be part of a longer symbol token (``<--``, ``+/-``)
_SAFE_BEFORE_COMMENT = set(WHITESPACE) | set("()[]{}⟨⟩,;\"'`»")


def is_letter_like(c: str) -> bool:
    v = ord(c)
    return (
        (0x3B1 <= v <= 0x3C9 and v != 0x3BB)
        or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
        or 0x3CA <= v <= 0x3FB
        or 0x1F00 <= v <= 0x1FFE
        or 0x2100 <= v <= 0x214F
        or 0x1D49C <= v <= 0x1D59F
        or (0xC0 <= v <= 0xFF and v not in (0xD7, 0xF7))
        or 0x100 <= v <= 0x17F
    )


def is_subscript_alnum(c: str) -> bool:
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A or v == 0x2C7C


def is_id_first(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or c == "_" or is_letter_like(c)


def is_id_rest(c: str) -> bool:
    return is_id_first(c) or ("0" <= c <= "9") or c in "'!?" or is_subscript_alnum(c)


@dataclass(frozen=True)
class Token:
    """A run of code between whitespace and comments; literals and ``«»`` parts inside it are kept whole."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Lexed:
    code: str
    kinds: str
    """per character of ``code``: ``c`` code, ``m`` comment, ``s`` string or char literal, ``g`` inside a
    ``«»`` identifier part (code to Lean, but no comment, string or whitespace in it counts as one)"""
    problems: tuple[str, ...]
    """places where Lean could read the text otherwise than this lexer did (see the module docstring)"""

    @property
    def blanked(self) -> str:
        """``code`` with comments and literals replaced by spaces (newlines kept), so positions stay put."""
        return "".join(
            ch if k in (CODE, ESCAPED) or ch == "\n" else " " for ch, k in zip(self.code, self.kinds, strict=True)
        )

    def words(self) -> str:
        """Like :attr:`blanked`, with the inside of ``«»`` as ``_`` too (``«axiom»`` is not the keyword)."""
        return "".join(
            ch if k == CODE else "\n" if ch == "\n" else "_" if k == ESCAPED else " "
            for ch, k in zip(self.code, self.kinds, strict=True)
        )

    def tokens(self) -> list[Token]:
        out: list[Token] = []
        start = None
        for i, (ch, k) in enumerate(zip(self.code, self.kinds, strict=True)):
            if k == COMMENT or (k == CODE and ch in WHITESPACE):
                if start is not None:
                    out.append(Token(self.code[start:i], start, i))
                    start = None
            elif start is None:
                start = i
        if start is not None:
            out.append(Token(self.code[start:], start, len(self.code)))
        return out


def _finish_comment(code: str, j: int) -> int | None:
    """End of a block comment whose body starts at ``j`` (``finishCommentBlock`` with nesting 1)."""
    n, depth = len(code), 1
    while j < n:
        ch = code[j]
        j += 1
        if ch == "-":
            if j >= n:
                return None
            if code[j] == "/":
                j += 1
                depth -= 1
                if depth == 0:
                    return j
        elif ch == "/":
            if j >= n:
                return None
            if code[j] == "-":
                j += 1
                depth += 1
    return None


def _char_literal_end(code: str, i: int) -> int | None:
    """End of the char literal opening at ``i`` (``'a'``, ``'\\n'``, ``'\\x41'``, ``'\\u03b1'``), or None."""
    m = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[\\\"'rnt])|[^\\])'", re.S).match(code, i)
    return m.end() if m else None


def _number_end(code: str, i: int) -> int:
    n = len(code)
    if code.startswith(("0x", "0X", "0b", "0B", "0o", "0O"), i):
        j = i + 2
        while j < n and (code[j].isascii() and (code[j].isalnum() or code[j] == "_")):
            j += 1
        return j
    j = i
    while j < n and ((code[j].isdigit() and code[j].isascii()) or code[j] == "_"):
        j += 1
    if j < n and code[j] == ".":  # Lean reads ``2.`` as a scientific literal, digits after the dot optional
        j += 1
        while j < n and code[j].isascii() and code[j].isdigit():
            j += 1
    m = re.compile(r"[eE][+-]?[0-9]+").match(code, j)
    return m.end() if m else j


def _ident_end(code: str, i: int, escaped: list[tuple[int, int]]) -> tuple[int, bool]:
    """End of the identifier starting at ``i`` (dotted, with ``«»`` parts, whose insides are added to
    ``escaped``); False if a ``«`` is unterminated."""
    n, j = len(code), i
    while True:
        if j < n and code[j] == "«":
            k = code.find("»", j + 1)
            if k < 0:
                escaped.append((j + 1, n))
                return n, False
            escaped.append((j + 1, k))
            j = k + 1
        else:
            j += 1
            while j < n and is_id_rest(code[j]):
                j += 1
        if j + 1 < n and code[j] == "." and (is_id_first(code[j + 1]) or code[j + 1] == "«"):
            j += 1
            continue
        return j, True


def lex(code: str) -> Lexed:
    n = len(code)
    kinds = [CODE] * n
    problems: list[str] = []
    escaped: list[tuple[int, int]] = []

    def mark(a: int, b: int, kind: str) -> None:
        for k in range(a, min(b, n)):
            kinds[k] = kind

    def glued(i: int) -> bool:  # is the character before ``i`` a symbol that a longer token could include?
        if i == 0:
            return False
        p = code[i - 1]
        return not (p in _SAFE_BEFORE_COMMENT or is_id_rest(p) or kinds[i - 1] != CODE)

    i = 0
    while i < n:
        c = code[i]
        if c in WHITESPACE:
            i += 1
        elif code.startswith("--", i):
            if glued(i):
                problems.append(f"`{code[i - 1]}--` (a comment glued to a symbol)")
            j = code.find("\n", i)
            j = n if j < 0 else j
            mark(i, j, COMMENT)
            i = j
        elif code.startswith("/-", i):
            if glued(i):
                problems.append(f"`{code[i - 1]}/-` (a comment glued to a symbol)")
            end = _finish_comment(code, i + 3) if i + 2 < n else None
            if end is None:
                problems.append("unterminated comment")
                end = n
            mark(i, end, COMMENT)
            i = end
        elif c == '"':
            j = i + 1
            while j < n and code[j] != '"':
                j += 2 if code[j] == "\\" else 1
            if j >= n:
                problems.append("unterminated string")
            if "{" in code[i:j]:
                problems.append("`{` in a string literal (an interpolated string holds code)")
            mark(i, j + 1, LITERAL)
            i = j + 1
        elif c == "'" and code[i + 1 : i + 2] != "'":
            end = _char_literal_end(code, i)
            if end is None:
                i += 1  # not a char literal: Lean fails on it, or it belongs to a symbol such as ``∑'``
            elif glued(i):
                problems.append(f"`{code[i - 1]}'` (a char literal glued to a symbol)")
                i += 1
            else:
                mark(i, end, LITERAL)
                i = end
        elif c == "r" and (m := re.compile(r'r(#*)"').match(code, i)):
            close = '"' + m.group(1)
            j = code.find(close, m.end())
            if j < 0:
                problems.append("unterminated raw string")
                j = n - len(close)
            mark(i, j + len(close), LITERAL)
            i = j + len(close)
        elif c == "`" and i + 1 < n and (is_id_first(code[i + 1]) or code[i + 1] == "«"):
            j, ok = _ident_end(code, i + 1, escaped)  # a name literal
            if not ok:
                problems.append("unterminated `«`")
            i = j
        elif c == "`" and i + 1 < n and code[i + 1] in "([":
            problems.append("a syntax quotation `` `( ``")
            i += 1
        elif "0" <= c <= "9":
            i = _number_end(code, i)
        elif is_id_first(c) or c == "«":
            j, ok = _ident_end(code, i, escaped)
            if not ok:
                problems.append("unterminated `«`")
            i = j
        else:
            i += 1
    for a, b in escaped:
        mark(a, b, ESCAPED)
    return Lexed(code, "".join(kinds), tuple(dict.fromkeys(problems)))
