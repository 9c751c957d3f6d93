"""kimina-prover-rl's format reward: the completion must be a reasoning-then-code answer of the agreed shape.

The reward is 1.0 when :func:`check_format` finds no :class:`FormatError`, else 0.0; the kimina recipe
multiplies it into the verifier reward (R = valid × format ok, as kimina-prover-rl does). The shape, in order of
the checks (the first failing one is reported):

    <think>
    reasoning … ```tactics
    (tactic lines the model tries)
    ``` … more reasoning, at least two tactics blocks …
    </think>
    ```lean4                                   (``coq`` for Coq problems)
    (the final code, containing the formal statement)
    ```

1. a closed code block in the problem's language, and nothing but blank text after the last one;
2. exactly one ``<think>`` and one ``</think>``, in that order;
3. exactly one code block in that language after ``<think>`` (none inside the reasoning);
4. no "significant" reasoning line (≥ 10 tokens that are not stop words) repeated ≥ 6 times;
5. tactics blocks closed, at least 2 of them, each at most max(5, ⌊0.95 × final-code lines⌋) lines;
6. the tactics lines cover ≥ 0.7 of the final code's lines (intersection over the final code's line set,
   comments and blank lines removed);
7. no forbidden keyword in the code (Lean: ``axiom``, ``local_instance``; Coq: ``Axiom``, ``Parameter``, …);
8. every block of the formal statement appears in the code (whitespace and comments normalised).

Every threshold is a :class:`FormatRules` field with kimina's default; the comment-ratio rules are off by
default, as in kimina. Differences from kimina's code: keywords match whole words (kimina: substrings, so
``axiomatic`` tripped it); nested comments are stripped properly; "text after the code block" and "tactics
block malformed" have their own error names; the stop-word list is our own.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from ..problems import Problem
from ..provers.backend import get_backend


class FormatError(StrEnum):
    """What :func:`check_format` found; the value is a stable key for metrics (``format/<value>``)."""

    NONE = "none"
    EMPTY = "empty"
    NO_CODE_BLOCK = "no_code_block"
    TEXT_AFTER_CODE_BLOCK = "text_after_code_block"
    NO_THINK_BLOCK = "no_think_block"
    THINK_BLOCK_COUNT = "think_block_count"
    CODE_BLOCK_COUNT = "code_block_count"
    GENERATION_REPEATS = "generation_repeats"
    TACTICS_BLOCK_MALFORMED = "tactics_block_malformed"
    TOO_FEW_TACTICS_BLOCKS = "too_few_tactics_blocks"
    TACTICS_BLOCK_TOO_LONG = "tactics_block_too_long"
    TACTICS_TOO_MANY_COMMENT_LINES = "tactics_too_many_comment_lines"
    TACTICS_TOO_MANY_COMMENT_CHARS = "tactics_too_many_comment_chars"
    TACTICS_CODE_MISMATCH = "tactics_code_mismatch"
    FORBIDDEN_KEYWORD = "forbidden_keyword"
    STATEMENT_MISSING = "statement_missing"
    CODE_TOO_MANY_COMMENT_LINES = "code_too_many_comment_lines"
    CODE_TOO_MANY_COMMENT_CHARS = "code_too_many_comment_chars"


# English function words and proof connectives: words that make a line long without making it say anything.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "nor",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "into",
        "onto",
        "as",
        "than",
        "then",
        "so",
        "if",
        "else",
        "when",
        "while",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "has",
        "had",
        "have",
        "having",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "we",
        "you",
        "they",
        "he",
        "she",
        "i",
        "me",
        "my",
        "our",
        "your",
        "their",
        "his",
        "her",
        "them",
        "us",
        "not",
        "no",
        "yes",
        "only",
        "also",
        "just",
        "very",
        "all",
        "any",
        "each",
        "every",
        "some",
        "such",
        "both",
        "either",
        "neither",
        "other",
        "another",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "where",
        "why",
        "how",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "let",
        "assume",
        "suppose",
        "consider",
        "take",
        "fix",
        "define",
        "set",
        "choose",
        "given",
        "note",
        "notice",
        "observe",
        "see",
        "get",
        "obtain",
        "conclude",
        "hence",
        "thus",
        "therefore",
        "since",
        "because",
        "implies",
        "imply",
        "iff",
        "now",
        "next",
        "first",
        "second",
        "third",
        "finally",
        "again",
        "moreover",
        "furthermore",
        "clearly",
        "obviously",
        "one",
        "two",
        "three",
        "proof",
        "qed",
        "theorem",
        "lemma",
        "claim",
    ]
)

LANGUAGES = {"lean": "lean4", "coq": "coq"}
FORBIDDEN = {
    "lean": ("axiom", "local_instance"),
    "coq": (
        "Axiom",
        "Axioms",
        "Parameter",
        "Parameters",
        "Conjecture",
        "Hypothesis",
        "Hypotheses",
        "Variable",
        "Variables",
    ),
}


@dataclass(frozen=True)
class FormatRules:
    """The thresholds of kimina-prover-rl's ``FormatReward`` (defaults are its defaults)."""

    language: str | None = None
    """code-block language of the final answer; None: ``lean4`` for Lean problems, ``coq`` for Coq"""
    think_open: str = "<think>"
    think_close: str = "</think>"
    repeat_min_tokens: int = 10
    """a reasoning line is "significant" with at least this many non-stop-word tokens"""
    repeat_max_count: int = 6
    """a significant line seen this many times (or more) is GENERATION_REPEATS"""
    tactics_language: str = "tactics"
    min_tactics_blocks: int = 2
    """0 turns the tactics-block rules (count, length, match) off"""
    tactics_lines_ratio: float | None = 0.95
    """a tactics block may have at most max(tactics_lines_floor, ⌊ratio × final-code lines⌋) lines; None: no limit"""
    tactics_lines_floor: int = 5
    min_tactics_match: float | None = 0.7
    """share of the final code's lines found in the tactics blocks; None: not checked"""
    forbidden_keywords: tuple[str, ...] | None = None
    """whole words refused in the final code; None: the backend's (see ``FORBIDDEN``)"""
    require_statement: bool = True
    tactics_comment_lines_ratio: float | None = None
    """comment lines / code lines allowed in a tactics block (kimina: off)"""
    tactics_comment_chars_ratio: float | None = None
    code_comment_lines_ratio: float | None = None
    """comment lines / code lines allowed in the final code after the statement (kimina: off)"""
    code_comment_chars_ratio: float | None = None

    def __post_init__(self) -> None:
        if self.repeat_min_tokens < 1 or self.repeat_max_count < 2:
            raise ValueError("repeat_min_tokens must be >= 1 and repeat_max_count >= 2")
        if self.min_tactics_blocks < 0 or self.tactics_lines_floor < 0:
            raise ValueError("min_tactics_blocks and tactics_lines_floor must be >= 0")
        if not self.think_open or not self.think_close or not self.tactics_language:
            raise ValueError("think_open, think_close and tactics_language must be non-empty")
        if isinstance(self.forbidden_keywords, str):
            raise ValueError("forbidden_keywords is a list of words, not one string")


def format_reward(completion: str, problem: Problem, rules: FormatRules = FormatRules()) -> float:
    """1.0 if the completion has kimina's format (:func:`check_format` is NONE), else 0.0."""
    return 1.0 if check_format(completion, problem, rules) is FormatError.NONE else 0.0


def check_format(completion: str, problem: Problem, rules: FormatRules = FormatRules()) -> FormatError:
    """The first rule the completion breaks (module docstring), or ``FormatError.NONE``."""
    if not completion or not completion.strip():
        return FormatError.EMPTY
    language = rules.language or LANGUAGES[problem.backend]
    blocks = _fenced_blocks(completion)
    answers = [b for b in blocks if b.language == language and b.closed]
    if not answers:
        return FormatError.NO_CODE_BLOCK
    last = blocks[-1]
    if last is not answers[-1] or completion[last.end :].strip():
        return FormatError.TEXT_AFTER_CODE_BLOCK
    if rules.think_open not in completion:
        return FormatError.NO_THINK_BLOCK
    start = completion.index(rules.think_open)
    stop = completion.find(rules.think_close, start)
    if completion.count(rules.think_open) != 1 or completion.count(rules.think_close) != 1 or stop < 0:
        return FormatError.THINK_BLOCK_COUNT
    if sum(b.language == language and b.start > start for b in blocks) != 1:
        return FormatError.CODE_BLOCK_COUNT
    think = completion[start + len(rules.think_open) : stop]
    code = answers[-1].content
    error = _check_think(think, code, problem, rules)
    if error is not FormatError.NONE:
        return error
    return _check_code(code, problem, rules)


def _check_think(think: str, code: str, problem: Problem, rules: FormatRules) -> FormatError:
    tactic_blocks = [b for b in _fenced_blocks(think) if b.language == rules.tactics_language]
    prose = think
    for b in reversed(tactic_blocks):
        prose = prose[: b.start] + prose[b.end :]
    counts = Counter(line for line in _significant_lines(prose, rules))
    if any(n >= rules.repeat_max_count for n in counts.values()):
        return FormatError.GENERATION_REPEATS
    if rules.min_tactics_blocks == 0:
        return FormatError.NONE
    if any(not b.closed or "```" in b.content for b in tactic_blocks):
        return FormatError.TACTICS_BLOCK_MALFORMED
    if len(tactic_blocks) < rules.min_tactics_blocks:
        return FormatError.TOO_FEW_TACTICS_BLOCKS
    code_lines = len(code.strip().split("\n"))
    for b in tactic_blocks:
        if rules.tactics_lines_ratio is not None and len(b.content.split("\n")) > max(
            rules.tactics_lines_floor, int(rules.tactics_lines_ratio * code_lines)
        ):
            return FormatError.TACTICS_BLOCK_TOO_LONG
        lines_ratio, chars_ratio = comment_ratios(b.content, problem.backend)
        if rules.tactics_comment_lines_ratio is not None and lines_ratio > rules.tactics_comment_lines_ratio:
            return FormatError.TACTICS_TOO_MANY_COMMENT_LINES
        if rules.tactics_comment_chars_ratio is not None and chars_ratio > rules.tactics_comment_chars_ratio:
            return FormatError.TACTICS_TOO_MANY_COMMENT_CHARS
    if (
        rules.min_tactics_match is not None
        and tactics_match([b.content for b in tactic_blocks], code, problem.backend) < rules.min_tactics_match
    ):
        return FormatError.TACTICS_CODE_MISMATCH
    return FormatError.NONE


def _check_code(code: str, problem: Problem, rules: FormatRules) -> FormatError:
    bare = strip_comments(code, problem.backend)
    words = rules.forbidden_keywords if rules.forbidden_keywords is not None else FORBIDDEN[problem.backend]
    if any(re.search(rf"(?<![\w.']){re.escape(w)}(?![\w'])", bare) for w in words):
        return FormatError.FORBIDDEN_KEYWORD
    if rules.require_statement:
        flat = _normalise(bare)
        for part in strip_comments(problem.formal_statement, problem.backend).split("\n\n"):
            want = _normalise(part)
            if want and not want.startswith(("import", "set_option", "open")) and want not in flat:
                return FormatError.STATEMENT_MISSING
    after = code.split(problem.formal_statement.strip(), 1)[-1]
    lines_ratio, chars_ratio = comment_ratios(after, problem.backend)
    if rules.code_comment_lines_ratio is not None and lines_ratio > rules.code_comment_lines_ratio:
        return FormatError.CODE_TOO_MANY_COMMENT_LINES
    if rules.code_comment_chars_ratio is not None and chars_ratio > rules.code_comment_chars_ratio:
        return FormatError.CODE_TOO_MANY_COMMENT_CHARS
    return FormatError.NONE


# -- text helpers -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Block:
    language: str
    content: str
    start: int  # offset of the opening fence
    end: int  # offset just after the closing fence (end of text when unclosed)
    closed: bool


_FENCE = re.compile(r"^[ \t]*```[ \t]*([^\s`]*)[ \t]*$", re.M)


def _fenced_blocks(text: str) -> list[_Block]:
    """Markdown code blocks: a line ```` ```lang ```` opens one, the next line that is just ```` ``` ```` closes it.

    Blocks never nest: an opening fence met inside an open block ends that block there, unclosed (a model
    that forgot to close its ``tactics`` block must not swallow the final answer). A bare fence with nothing
    open is skipped.
    """
    out: list[_Block] = []
    current: tuple[str, int, int] | None = None  # (language, fence start, body start)
    for m in _FENCE.finditer(text):
        if current is not None:
            language, start, body = current
            content = text[body : m.start()]
            content = content[:-1] if content.endswith("\n") else content
            out.append(_Block(language, content, start, m.end() if not m.group(1) else m.start(), not m.group(1)))
            current = None
            if not m.group(1):
                continue
        if m.group(1):
            current = (m.group(1), m.start(), min(len(text), m.end() + 1))
    if current is not None:
        language, start, body = current
        out.append(_Block(language, text[body:], start, len(text), False))
    return out


def _significant_lines(prose: str, rules: FormatRules) -> list[str]:
    out = []
    for raw in prose.splitlines():
        line = raw.strip().lower()
        tokens = re.findall(r"\b\w+\b", line)
        if sum(t not in STOPWORDS for t in tokens) >= rules.repeat_min_tokens:
            out.append(line)
    return out


def strip_comments(code: str, backend: str) -> str:
    """``code`` without comments: Lean ``-- …`` and nested ``/- … -/``; Coq nested ``(* … *)``."""
    lang = get_backend(backend)
    opener, closer = lang.block_comment
    out: list[str] = []
    i, depth, n = 0, 0, len(code)
    while i < n:
        if code.startswith(opener, i):
            depth, i = depth + 1, i + 2
        elif depth and code.startswith(closer, i):
            depth, i = depth - 1, i + 2
        elif depth:
            out.append("\n" if code[i] == "\n" else "")  # keep line structure
            i += 1
        elif lang.line_comment and code.startswith(lang.line_comment, i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(code[i])
            i += 1
    return "".join(out)


def comment_ratios(code: str, backend: str) -> tuple[float, float]:
    """(comment-only lines / code lines, comment characters / code characters), blank lines not counted."""
    bare = strip_comments(code, backend)
    code_lines = sum(1 for line in bare.split("\n") if line.strip())
    comment_lines = sum(1 for line in code.split("\n") if line.strip()) - code_lines
    code_chars = len(bare)
    return comment_lines / (code_lines + 1e-5), (len(code) - code_chars) / (code_chars + 1e-5)


def _code_lines(code: str, backend: str) -> set[str]:
    return {line.strip() for line in strip_comments(code, backend).split("\n") if line.strip()}


def tactics_match(tactic_blocks: list[str], code: str, backend: str) -> float:
    """|T ∩ F| / |F| with T the tactics blocks' lines and F the final code's (stripped, no comments, no
    blanks): how much of the final proof was tried in the reasoning. 0.0 when F is empty."""
    final = _code_lines(code, backend)
    if not final:
        return 0.0
    tried: set[str] = set()
    for block in tactic_blocks:
        tried |= _code_lines(block, backend)
    return len(tried & final) / len(final)


def _normalise(text: str) -> str:
    return " ".join(re.sub(r"\bsorry\b", " ", text).split())
