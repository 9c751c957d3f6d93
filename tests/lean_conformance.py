"""Replaying recorded REPL transcripts of every toolchain through :class:`LeanSession`, as a user's REPL would
answer: the outcome code of each answer, and the compatibility table per toolchain.

Codes: for a command, ``ok`` (no error, no sorry) or the ``+``-joined reasons (``sorry``, ``incomplete``,
``kernel``, ``lean``); for a tactic, ``solved``, ``openN`` (N goals), ``closed`` (no goals left on a REPL
without ``proofStatus``: unconfirmed, never solved) or ``fail:`` + ``error``/``sorry``/``meta``/``kernel``;
``repl`` for ``{"message": ...}``.

``python tests/lean_conformance.py`` prints the table (version, pairs, replayed, parsed, judged as expected)
for ``../shared/lean-repl-versions`` and ``../shared/lean-repl-transcripts``.
"""

from __future__ import annotations

import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lean_replay_support import TRANSCRIPTS, expected_of, replay_config

from proofrl.errors import ProtocolError, ProverError
from proofrl.provers.lean import LeanSession
from proofrl.provers.lean.models import (
    CommandResponse,
    ProofStepResponse,
    ReplError,
    parse_goal,
    parse_goals_text,
)
from proofrl.provers.lean.replay import requests_of
from proofrl.provers.lean.rules import judge_command, judge_step

VERSIONS = TRANSCRIPTS.parent / "lean-repl-versions"
NEWEST = "v4.33.0-rc2"
"""the toolchain of ``../shared/lean-repl-transcripts``"""


def toolchains() -> list[tuple[str, Path]]:
    """``(toolchain, folder)`` for every recorded toolchain, oldest first, the newest recordings last."""
    from proofrl.provers.lean.generations import toolchain_key

    out = []
    if VERSIONS.is_dir():
        dirs = [d for d in VERSIONS.iterdir() if d.is_dir()]
        out = [
            (d.name, d)
            for d in sorted(dirs, key=lambda d: (toolchain_key(d.name), d.name.startswith("nightly"), d.name))
        ]
    if TRANSCRIPTS.is_dir():
        out.append((NEWEST, TRANSCRIPTS))
    return out


def pairs_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.in") if expected_of(p).exists())


def pair_name(inp: Path, folder: Path) -> str:
    return inp.relative_to(folder).as_posix()[: -len(".in")]


def outcome(resp: CommandResponse | ProofStepResponse | ReplError) -> str:
    if isinstance(resp, ReplError):
        return "repl"
    if isinstance(resp, CommandResponse):
        j = judge_command(resp)
        return "ok" if j.status.value == "valid" else "+".join(r.split(":")[0].split(" ")[0] for r in j.reasons)
    j = judge_step(resp)
    if j.solved:
        return "solved"
    if j.ok:
        return f"open{len(resp.goals)}" if resp.goals else "closed"
    m = j.message
    kind = (
        "kernel"
        if m.startswith("Error: kernel")
        else "meta"
        if "metavariable" in m
        else "sorry"
        if "sorry" in m
        else "error"
    )
    return f"fail:{kind}"


def expects_step(request: dict) -> bool:
    return (
        "tactic" in request
        or "unpickleProofStateFrom" in request
        or ("pickleTo" in request and "proofState" in request)
    )


@dataclass
class PairRun:
    codes: list[str]
    replayed: bool = True
    """every request was answered, and the replay agreed with each (the session is alive at the end)"""
    parsed: bool = True
    """every answer was read into its model (strict) and its goals parsed"""
    generations: tuple[str, ...] = ()
    error: str = ""

    @property
    def text(self) -> str:
        return " ".join(self.codes)


def run_pair(inp: Path, version: str | None = None, timeout: float = 10.0) -> PairRun:
    """Replay one recorded pair through a session (the REPL's toolchain named, or None to detect it)."""
    requests = [json.loads(q) for q in requests_of(inp.read_text(encoding="utf-8"))]
    run = PairRun([])
    cfg = replay_config(inp) if version is None else replay_config(inp, version=version)
    session = LeanSession(cfg)
    try:
        for req in requests:
            resp = session.send(req, timeout=timeout)
            kind = ProofStepResponse if expects_step(req) else CommandResponse
            if not isinstance(resp, (kind, ReplError)):
                raise ProtocolError(f"expected {kind.__name__}, got {type(resp).__name__}")
            for goal in _goal_texts(resp):
                g = parse_goal(goal)
                assert g.conclusion and goal.endswith(g.conclusion)
            if isinstance(resp, CommandResponse):
                for t in resp.tactics:
                    assert all(g.conclusion for g in parse_goals_text(t.goals))
            run.codes.append(outcome(resp))
        run.replayed = session.alive
        run.generations = tuple(str(g) for g in getattr(session, "generations", ()))
    except ProtocolError as e:
        run.parsed = False
        run.error = f"{e} {getattr(e, 'raw', '')[:200]}"
    except ProverError as e:
        run.replayed = False
        run.error = str(e)[:300]
    finally:
        session.close()
    return run


def _goal_texts(resp):
    if isinstance(resp, ProofStepResponse):
        yield from resp.goals
    if isinstance(resp, (ProofStepResponse, CommandResponse)):
        yield from (s.goal for s in resp.sorries)


def table(expected: dict[str, dict[str, str]], detect: bool = True) -> list[tuple[str, int, int, int, int]]:
    """``(toolchain, pairs, replayed, parsed, judged as expected)`` per toolchain. A pair counts as parsed only
    if it also replayed, and as judged as expected only if it also parsed."""
    rows = []
    for name, folder in toolchains():
        n = rep = par = judged = 0
        for inp in pairs_in(folder):
            run = run_pair(inp, None if detect else name)
            n += 1
            rep += run.replayed
            par += run.replayed and run.parsed
            judged += run.replayed and run.parsed and run.text == expected.get(name, {}).get(pair_name(inp, folder))
        rows.append((name, n, rep, par, judged))
    return rows


def markdown(rows: list[tuple[str, int, int, int, int]]) -> str:
    out = ["| toolchain | pairs | replayed | parsed | judged as expected |", "|---|---:|---:|---:|---:|"]
    out += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} |" for r in rows]
    tot = [sum(r[i] for r in rows) for i in range(1, 5)]
    out.append(f"| **all** | {tot[0]} | {tot[1]} | {tot[2]} | {tot[3]} |")
    return "\n".join(out)


def expected_tables() -> dict[str, dict[str, str]]:
    """The expected codes per toolchain and pair: the literal tables of ``test_lean_versions.py`` and, for the
    newest toolchain, ``test_lean_transcripts.py`` (read as literals, so no test module is imported)."""

    def literal(name: str) -> dict:
        tree = ast.parse((Path(__file__).parent / name).read_text(encoding="utf-8"))
        for node in tree.body:
            target = (
                node.target
                if isinstance(node, ast.AnnAssign)
                else node.targets[0]
                if isinstance(node, ast.Assign)
                else None
            )
            if isinstance(target, ast.Name) and target.id == "EXPECTED":
                return ast.literal_eval(node.value)
        raise LookupError(f"no EXPECTED table in {name}")

    return {**literal("test_lean_versions.py"), NEWEST: literal("test_lean_transcripts.py")}


if __name__ == "__main__":
    print(markdown(table(expected_tables(), detect="--named" not in sys.argv)))
