"""Typed models of what the Lean REPL (leanprover-community/repl) answers, and the goal-text parser.

Every shape recorded from real Lean, under every toolchain from ``nightly-2023-03-17`` to ``v4.33``, has a model
here; what a generation of the REPL may send is in :mod:`.generations`, and each parser takes the generation:

* :class:`CommandResponse` (command, file and ``pickleTo``/``unpickleEnvFrom`` requests):
  ``env``, optional ``messages``, ``sorries``, ``tactics`` (``allTactics``), ``infotree``;
* :class:`ProofStepResponse` (``tactic`` and proof-state pickling): ``proofState``, ``goals``,
  ``proofStatus`` (from v4.19; ``None`` before), optional ``messages``, ``sorries``, ``traces``;
* :class:`ReplError`: ``{"message": ...}`` (unknown env/proof state, a tactic that failed to parse or run).

The REPL omits empty lists, so every list field defaults to ``()``. Parsing is strict: a key we do not
know, or a value of the wrong type, raises :class:`~proofrl.errors.ProtocolError` instead of being
silently dropped, so a protocol change shows up as a failing test and not as a wrong verdict.
"""

from __future__ import annotations

import json
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Literal

from ...errors import ProtocolError
from ..base import Goal, Hypothesis
from .generations import CURRENT, Generation

Severity = Literal["error", "warning", "info", "trace"]


def _fail(what: str, d: Any) -> ProtocolError:
    return ProtocolError(f"unexpected {what} in Lean REPL response", raw=json.dumps(d, ensure_ascii=False)[:500])


def _keys(d: Any, what: str, required: Set[str], optional: Set[str] = frozenset()) -> dict[str, Any]:
    if not isinstance(d, dict) or not required <= d.keys() or not d.keys() <= required | optional:
        raise _fail(what, d)
    return d


def _int(v: Any, what: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise _fail(what, v)
    return v


def _str(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise _fail(what, v)
    return v


def _list(d: dict[str, Any], key: str) -> list[Any]:
    v = d.get(key, [])
    if not isinstance(v, list):
        raise _fail(key, d)
    return v


@dataclass(frozen=True)
class Pos:
    """A REPL position: 1-based line, 0-based column in characters. Tactic-mode messages carry 0:0."""

    line: int
    column: int

    @classmethod
    def from_json(cls, d: Any) -> Pos:
        d = _keys(d, "position", {"line", "column"})
        return cls(_int(d["line"], "line"), _int(d["column"], "column"))

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "column": self.column}


def _pos(v: Any) -> Pos | None:
    return None if v is None else Pos.from_json(v)


@dataclass(frozen=True)
class ReplMessage:
    severity: Severity
    data: str
    pos: Pos | None = None
    end_pos: Pos | None = None  # older REPLs printed null here (repl#3)

    @classmethod
    def from_json(cls, d: Any) -> ReplMessage:
        d = _keys(d, "message", {"severity", "data"}, {"pos", "endPos"})
        if d["severity"] not in ("error", "warning", "info", "trace"):
            raise _fail("severity", d)
        return cls(d["severity"], _str(d["data"], "data"), _pos(d.get("pos")), _pos(d.get("endPos")))

    def __str__(self) -> str:
        where = f"{self.pos.line}:{self.pos.column}: " if self.pos else ""
        return f"{where}{self.severity}: {self.data}"


@dataclass(frozen=True)
class Sorry:
    """A ``sorry`` left in the code; ``proof_state`` reopens its goal in tactic mode.
    ``pos`` is absent for sorries created in tactic mode."""

    goal: str
    proof_state: int | None
    pos: Pos | None = None
    end_pos: Pos | None = None

    @classmethod
    def from_json(cls, d: Any) -> Sorry:
        d = _keys(d, "sorry", {"goal"}, {"proofState", "pos", "endPos"})
        ps = d.get("proofState")
        return cls(
            _str(d["goal"], "goal"),
            None if ps is None else _int(ps, "proofState"),
            _pos(d.get("pos")),
            _pos(d.get("endPos")),
        )


@dataclass(frozen=True)
class TacticRecord:
    """One entry of ``allTactics``: the tactic text, the goals before it (one string), its proof state."""

    tactic: str
    goals: str
    proof_state: int | None
    pos: Pos
    end_pos: Pos
    used_constants: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, d: Any, gen: Generation = CURRENT) -> TacticRecord:
        d = _keys(d, "tactic record", gen.tactic_record_required, gen.tactic_record_optional)
        ps = d.get("proofState")
        return cls(
            _str(d["tactic"], "tactic"),
            _str(d["goals"], "goals"),
            None if ps is None else _int(ps, "proofState"),
            Pos.from_json(d["pos"]),
            Pos.from_json(d["endPos"]),
            tuple(_str(c, "constant") for c in _list(d, "usedConstants")),
        )


@dataclass(frozen=True)
class SyntaxRange:
    start: Pos
    finish: Pos
    synthetic: bool

    @classmethod
    def from_json(cls, d: Any) -> SyntaxRange:
        d = _keys(d, "syntax range", {"start", "finish", "synthetic"})
        return cls(Pos.from_json(d["start"]), Pos.from_json(d["finish"]), bool(d["synthetic"]))


@dataclass(frozen=True)
class InfoTree:
    """An infotree node. TacticInfo nodes are typed (``name``, ``pp``, goals before/after); for the other
    kinds the node is kept as ``raw`` JSON text because its fields depend on the elaborator."""

    kind: str
    children: tuple[InfoTree, ...] = ()
    name: str | None = None
    pp: str | None = None
    syntax_kind: str | None = None
    range: SyntaxRange | None = None
    goals_before: tuple[str, ...] = ()
    goals_after: tuple[str, ...] = ()
    raw: str | None = None

    @classmethod
    def from_json(cls, d: Any, gen: Generation = CURRENT) -> InfoTree:
        d = _keys(d, "infotree node", {"kind"}, {"node", "children"})
        children = tuple(cls.from_json(c, gen) for c in _list(d, "children"))
        node = d.get("node")
        if d["kind"] != "TacticInfo" or node is None:
            raw = None if node is None else json.dumps(node, ensure_ascii=False, sort_keys=True)
            return cls(_str(d["kind"], "kind"), children, raw=raw)
        node = _keys(node, "TacticInfo", {"stx", "goalsBefore", "goalsAfter"}, {"name"})
        stx = _keys(node["stx"], "syntax", gen.syntax_required, gen.syntax_optional)
        return cls(
            "TacticInfo",
            children,
            name=node.get("name"),
            pp=stx["pp"],
            syntax_kind=stx.get("kind"),
            range=SyntaxRange.from_json(stx["range"]) if "range" in stx else None,
            goals_before=tuple(_str(g, "goal") for g in node["goalsBefore"]),
            goals_after=tuple(_str(g, "goal") for g in node["goalsAfter"]),
        )


@dataclass(frozen=True)
class CommandResponse:
    env: int
    messages: tuple[ReplMessage, ...] = ()
    sorries: tuple[Sorry, ...] = ()
    tactics: tuple[TacticRecord, ...] = ()
    infotree: tuple[InfoTree, ...] = ()

    @classmethod
    def from_json(cls, d: Any, gen: Generation = CURRENT) -> CommandResponse:
        d = _keys(d, "command response", {"env"}, {"messages", "sorries", "tactics", "infotree"})
        return cls(
            _int(d["env"], "env"),
            tuple(ReplMessage.from_json(m) for m in _list(d, "messages")),
            tuple(Sorry.from_json(s) for s in _list(d, "sorries")),
            tuple(TacticRecord.from_json(t, gen) for t in _list(d, "tactics")),
            tuple(InfoTree.from_json(n, gen) for n in _list(d, "infotree")),
        )

    @property
    def errors(self) -> tuple[ReplMessage, ...]:
        return tuple(m for m in self.messages if m.severity == "error")


@dataclass(frozen=True)
class ProofStepResponse:
    """The answer to a tactic. ``goals == ()`` does *not* mean solved: only ``proofStatus == "Completed"``
    with no error message does (see :func:`proofrl.provers.lean.rules.judge_step`). ``proof_status`` is None
    from a REPL before v4.19, which does not say it."""

    proof_state: int
    goals: tuple[str, ...]
    proof_status: str | None
    messages: tuple[ReplMessage, ...] = ()
    sorries: tuple[Sorry, ...] = ()
    traces: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, d: Any, gen: Generation = CURRENT) -> ProofStepResponse:
        d = _keys(d, "proof step response", gen.step_required, gen.step_optional)
        return cls(
            _int(d["proofState"], "proofState"),
            tuple(_str(g, "goal") for g in _list(d, "goals")),
            _str(d["proofStatus"], "proofStatus") if gen.has_proof_status else None,
            tuple(ReplMessage.from_json(m) for m in _list(d, "messages")),
            tuple(Sorry.from_json(s) for s in _list(d, "sorries")),
            tuple(_str(t, "trace") for t in _list(d, "traces")),
        )

    @property
    def errors(self) -> tuple[ReplMessage, ...]:
        return tuple(m for m in self.messages if m.severity == "error")


@dataclass(frozen=True)
class ReplError:
    """``{"message": ...}``: the REPL refused the request (``Unknown environment.``, ``Lean error: ...``)."""

    message: str

    @classmethod
    def from_json(cls, d: Any) -> ReplError:
        return cls(_str(_keys(d, "error response", {"message"})["message"], "message"))


Response = CommandResponse | ProofStepResponse | ReplError


def parse_response(d: Any, gen: Generation = CURRENT) -> Response:
    """Pick the model by the keys the REPL sent (the three shapes share no required key), and read it as
    generation ``gen`` speaks it."""
    if isinstance(d, dict):
        if "message" in d:
            return ReplError.from_json(d)
        if "env" in d:
            return CommandResponse.from_json(d, gen)
        if "proofState" in d:
            return ProofStepResponse.from_json(d, gen)
    raise _fail("response shape", d)


def parse_as(d: Any, gens: tuple[Generation, ...]) -> tuple[Response, tuple[Generation, ...]]:
    """Read ``d`` as the newest of ``gens`` that it fits; returns the model and the generations it fits
    (the candidates left). Fitting none raises the newest one's :class:`ProtocolError`."""
    fits: list[Generation] = []
    first: Response | None = None
    error: ProtocolError | None = None
    for g in gens:
        try:
            r = parse_response(d, g)
        except ProtocolError as e:
            error = error or e
            continue
        fits.append(g)
        first = r if first is None else first
    if first is None:
        assert error is not None
        names = " or ".join(str(g) for g in gens)
        hint = (
            "" if len(gens) > 1 else ", fixed by the configured toolchain (lean version) or the REPL's earlier answers"
        )
        raise ProtocolError(f"{error.args[0].split(': ', 1)[0]} (read as a REPL {names}{hint})", raw=error.raw)
    return first, tuple(fits)


# -- goal text ----------------------------------------------------------------------------------------
def parse_goal(text: str) -> Goal:
    """Parse one goal as Lean prints it::

        case succ            <- optional case name
        n✝ m : Nat           <- hypotheses, several names share a type
        x : Nat := 3         <- a let-bound hypothesis
        ⊢ n✝ + 1 = 0         <- the conclusion (continuation lines are indented)

    Long types wrap onto indented continuation lines; they are joined back with their newline kept. Early
    REPLs (seen up to v4.11) printed some goals on one line (:func:`_parse_flat_goal`).
    """
    if "\n" not in text and not text.startswith("⊢") and " ⊢ " in text:
        return _parse_flat_goal(text)
    lines = text.split("\n")
    name = None
    if lines and lines[0].startswith("case "):
        name = lines.pop(0)[len("case ") :].strip()
    entries: list[str] = []
    conclusion: str | None = None
    for line in lines:
        if conclusion is not None:
            conclusion += "\n" + line
        elif line.startswith("⊢"):
            conclusion = line[1:].lstrip(" ")
        elif line[:1].isspace() and entries:
            entries[-1] += "\n" + line
        else:
            entries.append(line)
    hyps = []
    for e in entries:
        names, sep, rest = e.partition(" : ")
        if not sep:
            raise ProtocolError("hypothesis without a type in goal text", raw=text)
        typ, sep, value = rest.partition(" := ")
        hyps.append(Hypothesis(tuple(names.split()), typ, value if sep else None))
    if conclusion is None:
        raise ProtocolError("goal text without ⊢", raw=text)
    return Goal(tuple(hyps), conclusion, name)


def _top_level(text: str, sep: str) -> list[int]:
    """Offsets of ``sep`` in ``text`` outside brackets."""
    out, depth = [], 0
    for i, ch in enumerate(text):
        depth += (ch in "([{⟨⦃") - (ch in ")]}⟩⦄")
        if depth == 0 and text.startswith(sep, i):
            out.append(i)
    return out


def _parse_flat_goal(text: str) -> Goal:
    """A goal printed on one line (``case succ x : Nat hx : x + 1 > x ⊢ x + 2 > x + 1``), as early REPLs did.

    The conclusion follows the last top-level `` ⊢ ``; the context is split at its top-level `` : ``, each
    hypothesis after the first taking the last word before its colon as its name. The line does not say
    where a group of several names after the first hypothesis starts (``a : Nat b c : Nat`` reads as
    ``a : Nat b`` and ``c : Nat``); the goal's text is kept whole in every other respect.
    """
    turnstiles = _top_level(text, " ⊢ ")
    if not turnstiles:
        raise ProtocolError("goal text without ⊢", raw=text)
    context, conclusion = text[: turnstiles[-1]], text[turnstiles[-1] + 3 :]
    name = None
    if context.startswith("case "):
        name, _, context = context[len("case ") :].partition(" ")
    hyps: list[Hypothesis] = []
    if context.strip():
        cuts = _top_level(context, " : ")
        if not cuts:
            raise ProtocolError("hypothesis without a type in goal text", raw=text)
        names = context[: cuts[0]].split()
        for k, at in enumerate(cuts):
            end = cuts[k + 1] if k + 1 < len(cuts) else len(context)
            segment = context[at + 3 : end]
            if k + 1 < len(cuts):
                typ, _, nxt = segment.rpartition(" ")
                if not typ:
                    raise ProtocolError("hypothesis without a type in goal text", raw=text)
            else:
                typ, nxt = segment, ""
            typ, sep, value = typ.partition(" := ")
            hyps.append(Hypothesis(tuple(names), typ, value if sep else None))
            names = [nxt]
    return Goal(tuple(hyps), conclusion, name)


def parse_goals_text(text: str) -> tuple[Goal, ...]:
    """Goals printed as one string (``allTactics`` entries): blank-line separated, or ``no goals``."""
    if text.strip() == "no goals":
        return ()
    return tuple(parse_goal(g) for g in text.split("\n\n") if g.strip())
