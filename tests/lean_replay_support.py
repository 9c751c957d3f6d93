"""Helpers for the Lean tests: where the recorded transcripts are, and configs that start the replay REPL.

The transcripts are real Lean v4.33.0-rc2 I/O, read in place from ``../shared/lean-repl-transcripts`` (never
copied here); those of 29 older toolchains are in ``../shared/lean-repl-versions`` (:mod:`lean_conformance`).
Tests that need a conversation the recordings do not contain (the ``#print axioms`` audit a check ends with)
write a small transcript into ``tmp_path``; every such synthetic answer is built with :func:`synthetic_axioms`,
shaped with :func:`legacy_shape` or copied from a recorded block, so it is easy to see which is which.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from proofrl.provers.lean import LeanConfig, replay
from proofrl.provers.lean.replay import split_blocks

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "shared" / "lean-repl-transcripts"

needs_transcripts = pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason=f"no transcripts at {TRANSCRIPTS}")


def pairs() -> list[Path]:
    """Every recorded ``X.in`` that has its ``X.expected.out`` (71 of them)."""
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(p for p in TRANSCRIPTS.rglob("*.in") if expected_of(p).exists())


def expected_of(inp: Path) -> Path:
    return inp.with_name(inp.name[: -len(".in")] + ".expected.out")


def replay_config(transcript: Path, *flags: str, expected: Path | None = None, **overrides: object) -> LeanConfig:
    # the script by path, not ``-m``: a stdlib-only process starts in a fraction of the time
    cmd = [sys.executable, "-I", replay.__file__, str(transcript), *flags]
    if expected is not None:
        cmd += ["--expected", str(expected)]
    return LeanConfig(command=tuple(cmd), memory_mb=2048, timeout=10.0, header_timeout=10.0).with_overrides(**overrides)


def recorded(name: str, i: int) -> tuple[dict, str]:
    """The i-th (1-based) recorded request (as JSON) and response block (as text) of transcript ``name``."""
    from proofrl.provers.lean.replay import requests_of

    inp = TRANSCRIPTS / f"{name}.in"
    return json.loads(requests_of(inp.read_text())[i - 1]), split_blocks(expected_of(inp).read_text())[i - 1]


def write_transcript(tmp: Path, name: str, exchanges: list[tuple[dict, str | dict]], *, framing: str = "\n\n") -> Path:
    """Write ``name.in``/``name.expected.out`` from (request, response) pairs; returns the ``.in`` path.
    ``framing`` follows each answer (``"\\n"``: the earliest REPLs, no blank line between answers)."""
    inp = tmp / f"{name}.in"
    inp.write_text("\n\n".join(json.dumps(q, ensure_ascii=False) for q, _ in exchanges) + "\n", encoding="utf-8")
    answers = [a if isinstance(a, str) else json.dumps(a, ensure_ascii=False) for _, a in exchanges]
    expected_of(inp).write_text(framing.join(answers) + framing, encoding="utf-8")
    return inp


LEGACY_TOOLCHAIN = "v4.9.0"
"""a toolchain of the REPL generation before ``proofStatus`` (DeepSeek-Prover-V1.5's)"""


def legacy_shape(answer: dict) -> dict:
    """An answer as a REPL before v4.19 shaped it: no ``proofStatus``, messages ended by ``"endPos": null``
    (repl#3), a sorry warning spelled ``declaration uses 'sorry'``, and a command answer with its empty
    ``sorries``/``messages`` lists printed (as the earliest REPLs did)."""
    out = {k: v for k, v in answer.items() if k != "proofStatus"}
    if "messages" in out or "env" in out:
        out["messages"] = [
            {**m, "endPos": None, "data": m["data"].replace("uses `sorry`", "uses 'sorry'")}
            for m in out.get("messages", [])
        ]
    if "env" in out:
        out.setdefault("sorries", [])
    return out


def synthetic_axioms(name: str, axioms: list[str] | None, env: int) -> dict:
    """SYNTHETIC: the answer to ``#print axioms name`` in the format Lean prints (not in the recordings)."""
    text = (
        f"'{name}' does not depend on any axioms"
        if not axioms
        else f"'{name}' depends on axioms: [{', '.join(axioms)}]"
    )
    cols = len("#print axioms")
    return {
        "messages": [
            {"severity": "info", "pos": {"line": 1, "column": 0}, "endPos": {"line": 1, "column": cols}, "data": text}
        ],
        "env": env,
    }
