"""Verdict rules for Lean, as pure functions over REPL responses and source text.

A whole proof is ``valid`` only when *all* hold:

1. no forbidden word in the source (``sorry``, ``admit``, ``native_decide`` by default, and any unqualified
   word ending in ``?`` such as ``exact?``), comments and strings ignored; checked before Lean runs;
2. the text is one Lean reads as :mod:`.lexer` does (:func:`unsupported`), and holds nothing that runs code
   at elaboration time, extends the syntax, skips the kernel or changes scopes, anywhere
   (:func:`untrusted_constructs`: ``run_cmd``, ``#eval``, ``macro``, ``notation``, ``axiom``, ``namespace``,
   ``@[implemented_by]``, ``set_option debug.skipKernelTC``, ...);
3. the problem's statement occurs unchanged (token for token, literals included; whitespace and comments
   aside), as a top-level command that starts its line, and nothing before it can change its meaning: only
   ``theorem``/``lemma``/``example`` helpers (:func:`meaning_changers`, :func:`prefix_problems`);
4. no message of severity ``error`` (kernel errors such as ``(kernel) declaration has metavariables`` only
   arrive this way);
5. no ``sorries`` and no sorry warning, in either spelling (``declaration uses `sorry``` now,
   ``declaration uses 'sorry'`` in older Lean);
6. ``#print axioms`` answers exactly once, about the statement's own declaration (the name it prints is the
   one the statement declares), and lists only allowed axioms, matched by full name (``sorryAx``,
   ``Lean.ofReduceBool`` from ``native_decide``, and any user ``axiom`` reject) (:func:`judge_audit`).

A tactic step counts as a step only with no error, no sorry, and ``proofStatus`` either ``Completed`` (solved)
or ``Incomplete: open goals remain``. ``goals == []`` alone means nothing: Lean also returns it for
``Incomplete: contains sorry``/``contains metavariable(s)`` and ``Error: kernel type check failed``; an
``Error: …`` status with no goals left (the REPL's kernel check of the finished term) is a ``kernel`` failure.
A REPL before v4.19 sends no ``proofStatus`` (:mod:`.generations`): a step that leaves goals is open as
before, and one that leaves none is *unconfirmed* (:data:`UNCONFIRMED`), never solved on that answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base import FailureKind, Status
from .config import DEFAULT_OPTIONS
from .lexer import Lexed, lex
from .models import CommandResponse, ProofStepResponse, ReplError, ReplMessage

SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")
_ID_FIRST = (
    "A-Za-z_\u03b1-\u03ba\u03bc-\u03c9\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9\u03ca-\u03fb\u1f00-\u1ffe"
    "\u2100-\u214f\U0001d49c-\U0001d59f\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017f"
)
_ID_REST = _ID_FIRST + "0-9'!?\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a\u2c7c"
_WORD = re.compile(f"[{_ID_FIRST}][{_ID_REST}]*(?:\\.[{_ID_FIRST}][{_ID_REST}]*)*")  # identifiers as Lean reads them
_HASH_WORD = re.compile(f"#[{_ID_FIRST}][{_ID_REST}]*")
_ATTRIBUTES = re.compile(r"@\[")
_SET_OPTION = re.compile(r"\bset_option\s+([^\s]+)")
_AUDIT = re.compile(r"'(.*)' (?:depends on axioms: \[(.*)\]|does not depend on any axioms)", re.S)
_DECL_NAME = re.compile(
    r"^\s*(?:@\[[^\]]*\]\s*)?(?:private\s+|protected\s+)?(theorem|lemma|example)\b\s*([^\s(:{\[⦃]*)"
)

# Commands that, placed before the statement, can change what the statement means.
MEANING_CHANGERS = frozenset(
    [
        "variable",
        "include",
        "omit",
        "namespace",
        "section",
        "open",
        "export",
        "notation",
        "infix",
        "infixl",
        "infixr",
        "prefix",
        "postfix",
        "macro",
        "macro_rules",
        "syntax",
        "elab",
        "elab_rules",
        "term_elab",
        "command_elab",
        "tactic",
        "instance",
        "default_instance",
        "attribute",
        "set_option",
        "universe",
        "local",
        "scoped",
        "def",
        "abbrev",
        "structure",
        "class",
        "inductive",
        "axiom",
        "opaque",
        "import",
        "end",
        "mutual",
        "deriving",
        "notation3",
        "binder_predicate",
        "unif_hint",
        "seal",
        "unseal",
        "declare_syntax_cat",
        "noncomputable",
        "irreducible_def",
        "alias",
    ]
)

# Commands and keywords refused anywhere in untrusted text (the proof, or a whole file bar its statement):
# they run code while Lean elaborates (and so can rewrite the environment or fake the audit), extend the
# syntax (a macro can turn the ``#print axioms`` that follows into anything), skip the kernel, declare
# axioms, or leave scopes open that the audit would run in. None has a use in a proof.
FORBIDDEN_COMMANDS = frozenset(
    [
        "run_cmd",
        "run_elab",
        "run_meta",
        "run_tac",
        "run_conv",
        "by_elab",
        "elab",
        "elab_rules",
        "macro",
        "macro_rules",
        "syntax",
        "declare_syntax_cat",
        "notation",
        "notation3",
        "infix",
        "infixl",
        "infixr",
        "prefix",
        "postfix",
        "binder_predicate",
        "initialize",
        "builtin_initialize",
        "simproc",
        "dsimproc",
        "simproc_decl",
        "dsimproc_decl",
        "unif_hint",
        "implemented_by",
        "extern",
        "export",
        "unsafe",
        "opaque",
        "axiom",
        "namespace",
        "section",
        "end",
        "universe",
        "variable",
        "omit",
        "include",
        "mutual",
        "attribute",
        "local",
        "scoped",
        "instance",
        "default_instance",
        "def",
        "abbrev",
        "structure",
        "class",
        "inductive",
        "coinductive",
        "deriving",
        "import",
        "seal",
        "unseal",
        "declare_config_elab",
        "register_option",
        "register_simp_attr",
        "register_label_attr",
        "add_aesop_rules",
        "declare_aesop_rule_sets",
        "grind_pattern",
        "partial",
        "nonrec",
        "noncomputable",
        "irreducible_def",
    ]
)
# Names that let code evaluated while Lean elaborates (a tactic's ``(config := ...)`` term, ``decide +native``,
# ``plausible``) reach outside: IO (writing to the REPL's own stdout could forge its answers), ``unsafe*``
# casts, and the ``Lean``/``Std`` APIs (environment, kernel, IO helpers). No proof needs them.
_ESCAPE = re.compile(r"(?:^|\.)(?:IO|EIO|BaseIO|EStateM|System|unsafe[^.]*)(?:\.|$)|^(?:Lean|Std)(?:\.|$)|^native$")
# ``#`` commands (``#eval`` runs code, ``#guard_msgs`` drops messages, ``#exit`` stops reading); ``#s``
# (``Finset.card``), ``#[...]`` and ``#{...}`` are notation, so short words after ``#`` are left alone
_HASH_COMMANDS = frozenset(
    [
        "#eval",
        "#eval!",
        "#exit",
        "#print",
        "#check",
        "#check_failure",
        "#reduce",
        "#guard_msgs",
        "#guard",
        "#synth",
        "#help",
        "#lint",
        "#find",
        "#simp",
        "#conv",
        "#where",
        "#time",
        "#exec",
        "#norm_num",
        "#widget",
        "#html",
    ]
)
ALLOWED_ATTRIBUTES = frozenset({"simp"})
"""attributes a helper may carry (anything else registers code, changes elaboration or the audit's parse)"""
SAFE_OPTIONS = DEFAULT_OPTIONS
"""``set_option`` names a proof or header may set by default: resource limits, linters and printing (a
trailing ``.`` allows the family). ``debug.skipKernelTC`` (no kernel check), ``debug.*``, ``warn.sorry``,
``Elab.async``, ``compiler.*`` and every other option are refused."""
# the last word before the statement must not make it part of another command
_GLUE = frozenset(["in", "private", "protected", "noncomputable", "unsafe", "partial", "nonrec", "local", "scoped"])
# the words that may start a line (column 0) before the statement: helper declarations and their terms
PREFIX_STARTERS = frozenset(["theorem", "lemma", "example", "private", "protected", "by", "fun", "calc", "show"])


@dataclass(frozen=True)
class Judgement:
    status: Status
    reasons: tuple[str, ...] = ()


def _words(lexed: Lexed) -> list[tuple[str, int]]:
    """Keywords and identifiers, ``#`` commands included, as Lean reads them (comments, literals, ``«»`` out)."""
    text = lexed.words()
    found = [(m.group(), m.start()) for m in _WORD.finditer(text) if not (m.start() and text[m.start() - 1] == "#")]
    found += [(m.group(), m.start()) for m in _HASH_WORD.finditer(text)]
    return sorted(found, key=lambda w: w[1])


def declares(code: str) -> bool:
    """Whether ``code`` holds a ``theorem``, ``lemma`` or ``example`` (as code), i.e. is a whole file."""
    return any(w in ("theorem", "lemma", "example") for w, _ in _words(lex(code)))


def forbidden_words(
    code: str, forbidden: tuple[str, ...] | frozenset[str], search_tactics: bool = True
) -> tuple[str, ...]:
    """Forbidden words used in ``code`` outside comments and strings, in order of appearance, no repeats."""
    found: list[str] = []
    for m in _WORD.finditer(lex(code).words()):
        w = m.group()
        if (w in forbidden or (search_tactics and w.endswith("?") and "." not in w)) and w not in found:
            found.append(w)
    return tuple(found)


def unsupported(code: str) -> tuple[str, ...]:
    """Places where Lean could read ``code`` otherwise than :mod:`.lexer` (so no rule could be sure of it)."""
    return lex(code).problems


def _is_hash_command(w: str) -> bool:
    # Lean reads the longest token, so ``#evalX`` is ``#eval X``: a prefix is enough
    return any(w.startswith(c) for c in _HASH_COMMANDS) or re.match(r"#[a-z_]{4}", w) is not None


def _option_allowed(name: str, allowed: tuple[str, ...]) -> bool:
    return any(name == a or (a.endswith(".") and name.startswith(a)) for a in allowed)


def _attributes(lexed: Lexed, lo: int = 0, hi: int | None = None) -> list[tuple[str, int, int]]:
    """``(name, start, end)`` of every attribute in ``@[...]`` blocks starting in ``[lo, hi)``."""
    text, out = lexed.words(), []
    hi = len(text) if hi is None else hi
    for m in _ATTRIBUTES.finditer(text, lo, hi):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"[": 1, "]": -1}.get(text[j], 0)
            j += 1
        for item in re.split(r",", text[m.end() : j - 1]):
            words = [w for w in _WORD.findall(item) if w not in ("local", "scoped")]
            out.append((words[0] if words else item.strip() or "?", m.start(), j))
    return out


def untrusted_constructs(
    code: str, allowed_options: tuple[str, ...] = SAFE_OPTIONS, skip: tuple[int, int] | None = None
) -> tuple[str, ...]:
    """What ``code`` (untrusted text) may not hold anywhere, as ``forbidden: X`` in order of appearance:
    :data:`FORBIDDEN_COMMANDS`, ``#`` commands, names that reach outside from evaluated code (``IO.*``,
    ``unsafeBaseIO``, ``Lean.*``, ``decide +native``), attributes outside :data:`ALLOWED_ATTRIBUTES`, options
    outside ``allowed_options``. ``skip`` is a span left out (the problem's own statement)."""
    lexed = lex(code)
    hits: list[tuple[int, str]] = []
    inside = (lambda i: skip[0] <= i < skip[1]) if skip else (lambda i: False)
    options = [m for m in _SET_OPTION.finditer(lexed.words()) if not inside(m.start())]
    for m in options:
        if not _option_allowed(m.group(1), allowed_options):
            hits.append((m.start(), f"set_option {m.group(1)}"))
    named = {m.start(1) for m in options}  # an option's name is judged with its ``set_option``
    for w, i in _words(lexed):
        if inside(i) or i in named:
            continue
        if (
            w in FORBIDDEN_COMMANDS
            or (w.startswith("#") and _is_hash_command(w))
            or w.startswith("debug.")
            or _ESCAPE.search(w)
        ):
            hits.append((i, w))
    for name, a, _ in _attributes(lexed):
        if not inside(a) and name not in ALLOWED_ATTRIBUTES:
            hits.append((a, f"@[{name}]"))
    return tuple(dict.fromkeys(f"forbidden: {what}" for _, what in sorted(hits)))


def header_problems(header: str, allowed_options: tuple[str, ...] = SAFE_OPTIONS) -> tuple[str, ...]:
    """Options in a header that are not allowed (through the server the header is the client's text)."""
    out = []
    for m in _SET_OPTION.finditer(lex(header).words()):
        if not _option_allowed(m.group(1), allowed_options):
            out.append(f"forbidden: set_option {m.group(1)} (header)")
    return tuple(dict.fromkeys(out))


def declaration_name(statement: str) -> tuple[str, str]:
    """(keyword, name) of the statement's declaration; name is ``""`` for ``example``."""
    m = _DECL_NAME.match(lex(statement).blanked)
    if not m:
        return "", ""
    if m.group(1) == "example":
        return m.group(1), ""
    tokens = lex(statement[m.start(2) :]).tokens()  # a ``«»`` name may hold spaces and brackets
    name = tokens[0].text if tokens else m.group(2)
    return m.group(1), name if name.startswith("«") else re.split(r"[(:{\[⦃]", name, maxsplit=1)[0]


def find_statement(code: str, statement: str) -> tuple[int, int] | None:
    """The span of ``statement`` in ``code``: its tokens in order, as code (never inside a comment, a literal
    or a ``«»`` name), compared as written (literals included), whitespace and comments aside. None if it
    does not occur."""
    want = [t.text for t in lex(statement).tokens()]
    have = lex(code).tokens()
    if not want:
        return None
    for i in range(len(have) - len(want) + 1):
        if have[i].text == want[0] and [t.text for t in have[i : i + len(want)]] == want:
            return have[i].start, have[i + len(want) - 1].end
    return None


def meaning_changers(prefix: str) -> tuple[str, ...]:
    """Commands in the code ahead of the statement that could change what it means."""
    out: list[str] = []
    for w, _ in _words(lex(prefix)):
        bad = w in MEANING_CHANGERS or w in FORBIDDEN_COMMANDS or (w.startswith("#") and _is_hash_command(w))
        if bad and w not in out:
            out.append(w)
    return tuple(out)


def prefix_problems(code: str, start: int) -> tuple[str, ...]:
    """What stands wrongly ahead of the statement (which starts at ``start``), as the text to blame.

    Only helpers may stand there, and this is an allowlist: every line that does not start with a space and
    holds code must start with a word of :data:`PREFIX_STARTERS`, an attribute block, or a symbol (binders
    continued); attributes must be in :data:`ALLOWED_ATTRIBUTES`; the statement must start its own line; and
    the code just before it may be no modifier, attribute block or ``... in`` that would make the statement
    part of another command. Commands that no list here knows are refused by the first rule when they start
    a line, and by :func:`meaning_changers`/:func:`untrusted_constructs` when they are known.
    """
    lexed = lex(code)
    tokens = [t for t in lexed.tokens() if t.end <= start]
    out: list[str] = []
    for name, _, _ in _attributes(lexed, 0, start):
        if name not in ALLOWED_ATTRIBUTES:
            out.append(f"@[{name}]")
    seen_line = -1
    for t in tokens:
        line_begin = code.rfind("\n", 0, t.start) + 1
        if line_begin == seen_line:
            continue
        seen_line = line_begin
        if code[line_begin] in " \t" or t.text.startswith("@["):
            continue
        word = _HASH_WORD.match(t.text) or _WORD.match(t.text)
        if t.text.startswith("«") or (word and word.group() not in PREFIX_STARTERS):
            out.append(word.group() if word else t.text)
    if tokens:
        last = tokens[-1]
        blocks = _attributes(lexed, 0, start)
        if last.start >= code.rfind("\n", 0, start) + 1:
            out.append(last.text)  # on the statement's own line
        elif blocks and blocks[-1][2] == last.end:
            out.append(code[blocks[-1][1] : blocks[-1][2]])
        elif last.text in _GLUE:
            out.append(last.text)
    return tuple(dict.fromkeys(out))


def _split_unquoted(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside ``«»`` (the guillemets are kept)."""
    out, cur, esc = [], "", False
    for ch in text:
        if ch == "«":
            esc = True
        elif ch == "»":
            esc = False
        if ch == sep and not esc:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def _name_parts(name: str) -> tuple[str, ...]:
    """``a.«b c».d`` → ``("a", "b c", "d")``, without a leading ``_root_``."""
    parts = [p.replace("«", "").replace("»", "") for p in _split_unquoted(name.strip(), ".")]
    return tuple(parts[1:] if parts and parts[0] == "_root_" else parts)


def _split_names(text: str) -> tuple[str, ...]:
    """The names in the body of ``[a, b.c, «d, e»]``, split at commas outside ``«»``."""
    return tuple(" ".join(n.split()) for n in _split_unquoted(text, ",") if n.strip())


def parse_audit(text: str) -> tuple[str, tuple[str, ...]] | None:
    """``(name, axioms)`` from one ``#print axioms`` message (``'t' depends on axioms: [propext, sorryAx]`` or
    ``'t' does not depend on any axioms``); None when the message is neither, as a whole."""
    m = _AUDIT.fullmatch(text.strip())
    if not m:
        return None
    return m.group(1), () if m.group(2) is None else _split_names(m.group(2))


def parse_axioms(text: str) -> tuple[str, ...] | None:
    """Axioms named by ``#print axioms`` output; None when the text is not such output."""
    audit = parse_audit(text)
    return None if audit is None else audit[1]


def audited_name_matches(printed: str, expected: str) -> bool:
    """Whether ``#print axioms`` printed the statement's own declaration (a private one carries a prefix)."""
    got, want = _name_parts(printed), _name_parts(expected)
    if got == want:
        return True
    if got[:1] == ("_private",) and "0" in got:
        return got[got.index("0") + 1 :] == want
    return False


def judge_audit(
    messages: tuple[ReplMessage, ...], name: str, allowed: frozenset[str]
) -> tuple[Judgement, tuple[str, ...]]:
    """Rule 6 over the audit command's messages: one ``#print axioms`` answer about ``name`` itself, with
    only ``allowed`` axioms. Returns the judgement and the axioms listed.

    Lean answers once per declaration the name resolves to. An answer about another declaration (``X.t``
    when ``t`` also means ``X.t`` through an ``open``) is not the statement's and is not judged; when no
    answer is about ``name`` itself (a namespace left open made ``t`` mean ``X.t`` only) nothing is valid.
    """
    answers = [a for m in messages if (a := parse_audit(m.data)) is not None]
    if not answers:
        return Judgement(Status.REJECTED, ("axioms unknown",)), ()
    ours = [a for a in answers if audited_name_matches(a[0], name)]
    if not ours:
        printed = answers[0][0]
        return Judgement(Status.REJECTED, (f"axiom audit of `{printed}`, not `{name}`",)), answers[0][1]
    if len(ours) > 1:
        return Judgement(Status.REJECTED, (f"axiom audit answered {len(ours)} times",)), ()
    axioms = ours[0][1]
    return judge_axioms(axioms, allowed), axioms


def _error_reason(m: ReplMessage) -> str:
    if m.data.startswith("(kernel)"):
        return "kernel: " + m.data.split("\n", 1)[0][len("(kernel) ") :]
    if m.data.startswith("unsolved goals"):
        return "incomplete"
    return "lean error: " + m.data.split("\n", 1)[0][:120]


def judge_command(resp: CommandResponse | ReplError) -> Judgement:
    """Verdict of an elaborated whole proof, before the axiom check (rules 3 and 4)."""
    if isinstance(resp, ReplError):
        return Judgement(Status.ERROR, ("repl: " + resp.message.split("\n")[-1][:200],))
    reasons: list[str] = []
    for m in resp.errors:
        r = _error_reason(m)
        if r not in reasons:
            reasons.append(r)
    if resp.sorries or any(SORRY_WARNING.search(m.data) for m in resp.messages if m.severity == "warning"):
        reasons.append("sorry")
    if not reasons:
        return Judgement(Status.VALID)
    rejecting = any(r == "incomplete" or r == "sorry" or r.startswith("kernel:") for r in reasons)
    return Judgement(Status.REJECTED if rejecting else Status.ERROR, tuple(reasons))


def judge_axioms(axioms: tuple[str, ...] | None, allowed: frozenset[str]) -> Judgement:
    """Rule 5. ``None`` (no ``#print axioms`` answer we could read) rejects: never valid by default."""
    if axioms is None:
        return Judgement(Status.REJECTED, ("axioms unknown",))
    bad = tuple(f"axiom: {a}" for a in axioms if a not in allowed)
    return Judgement(Status.REJECTED, bad) if bad else Judgement(Status.VALID)


UNCONFIRMED = (
    "no goals left, but a REPL before v4.19 sends no proofStatus, so a kernel failure, a leftover "
    "metavariable or a sorry an earlier step left in the term cannot be seen in tactic mode"
)


@dataclass(frozen=True)
class StepJudgement:
    """``ok`` and ``solved`` for a good step; otherwise ``kind`` and ``message`` say why it failed.
    ``unconfirmed`` (an ok step that left no goals on a REPL without ``proofStatus``) says why it is not
    ``solved``: only elaborating the whole path can confirm it."""

    ok: bool
    solved: bool = False
    kind: FailureKind | None = None
    message: str = ""
    message_obj: ReplMessage | None = None
    unconfirmed: str = ""


def judge_step(resp: ProofStepResponse | ReplError) -> StepJudgement:
    if isinstance(resp, ReplError):
        msg = resp.message.removeprefix("Lean error:\n")
        return StepJudgement(False, kind=FailureKind.ERROR, message=msg)
    if resp.errors:
        e = resp.errors[0]
        return StepJudgement(False, kind=FailureKind.ERROR, message=e.data, message_obj=e)
    if resp.sorries:
        return StepJudgement(False, kind=FailureKind.FORBIDDEN, message="sorry")
    status = resp.proof_status
    if status is None:  # a REPL before v4.19: the goals are all it says
        return StepJudgement(True) if resp.goals else StepJudgement(True, unconfirmed=UNCONFIRMED)
    if status == "Completed" and not resp.goals:
        return StepJudgement(True, solved=True)
    if status == "Incomplete: open goals remain" and resp.goals:
        return StepJudgement(True)
    if status.startswith("Error:") and not resp.goals:  # the REPL's check of the finished term refused it
        return StepJudgement(False, kind=FailureKind.KERNEL, message=status)
    return StepJudgement(False, kind=FailureKind.ERROR, message=status)
