"""A stand-in Lean REPL that plays a recorded transcript: ``python -m proofrl.provers.lean.replay X.in``.

It reads requests exactly as the real REPL does (lines up to a blank line, each stripped of trailing
whitespace and glued without newlines; a query starting with ``#`` or ``--`` is skipped), checks the i-th
request equals the i-th recorded one in ``X.in`` (as JSON values, so spacing and key order do not matter),
and prints the i-th answer of ``X.expected.out`` framed as recorded: followed by a blank line, or by one
newline where the recording shows the earliest REPLs' framing (answers split as JSON values, not at blank
lines, since those REPLs printed none).

* a request that differs: a message on stderr, exit 2 (so a test sees a crash, never a wrong answer);
* more requests than recorded: exit 3; EOF on stdin: exit 0, as the REPL does;
* an empty query (an extra blank line) or one that is not JSON: ``uncaught exception`` and exit 1, as the REPL;
* ``--crash-at N``: on the N-th request (1-based) print ``uncaught exception`` to stderr and exit 1 unanswered;
* ``--hang-at N``: on the N-th request, never answer (sleep until killed);
* ``--garbage-at N``: on the N-th request, answer with a frame that is not JSON;
* ``--start K``: skip the first K-1 recorded exchanges (play a transcript from its middle);
* ``--expected FILE``: read responses from FILE instead of the sibling ``.expected.out``;
* ``--also Y.in``: another transcript (repeatable); the first request picks the one whose first recorded
  request it is (a prover's fresh process for its final check plays its own recording).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path
from typing import TextIO, cast


def split_blocks(text: str) -> list[str]:
    """Blocks separated by blank lines (a line with only whitespace is blank, as in ``getLines``)."""
    blocks, cur = [], []
    for line in text.split("\n"):
        if line.strip():
            cur.append(line)
        elif cur:
            blocks.append("\n".join(cur))
            cur = []
    if cur:
        blocks.append("\n".join(cur))
    return blocks


def answers_of(text: str) -> list[str]:
    """The recorded answers, each with the framing it was recorded with (``\\n\\n`` or ``\\n``). An answer is
    one JSON value; text that is not JSON runs to the next blank line (a deliberately broken answer)."""
    decoder = json.JSONDecoder()
    out: list[str] = []
    i = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        if i >= len(text):
            return out
        try:
            _, j = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            j = text.find("\n\n", i)
            j = len(text) if j < 0 else j
        gap = text[j : len(text) - len(text[j:].lstrip(" \t\r\n"))]
        out.append(text[i:j] + ("\n" if gap.count("\n") == 1 and j + len(gap) < len(text) else "\n\n"))
        i = j


def glue(block: str) -> str:
    """What the REPL makes of a block of request lines: each line right-stripped, joined with no newline."""
    return "".join(line.rstrip() for line in block.split("\n"))


def requests_of(text: str) -> list[str]:
    return [q for q in (glue(b) for b in split_blocks(text)) if not (q.startswith("#") or q.startswith("--"))]


def same_request(got: str, want: str) -> bool:
    try:
        return json.loads(got) == json.loads(want)
    except json.JSONDecodeError:
        return got == want


def _read_query(stdin: TextIO) -> str | None:
    """One query as ``getLines`` reads it; None at EOF before any line."""
    parts: list[str] = []
    while True:
        line = stdin.readline()
        if line == "":
            return None if not parts else "".join(parts)
        if not line.strip():
            return "".join(parts)
        parts.append(line.rstrip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proofrl.provers.lean.replay", description=__doc__.split("\n")[0])
    ap.add_argument("transcript", type=Path, help="the recorded X.in")
    ap.add_argument("--expected", type=Path, help="responses (default: X.expected.out beside X.in)")
    ap.add_argument(
        "--also", type=Path, action="append", default=[], help="another transcript, picked by its first request"
    )
    ap.add_argument("--start", type=int, default=1, help="begin at this recorded request (1-based)")
    ap.add_argument("--crash-at", type=int, default=0, help="exit unanswered on this request (1-based)")
    ap.add_argument("--hang-at", type=int, default=0, help="never answer this request (1-based)")
    ap.add_argument("--garbage-at", type=int, default=0, help="answer this request with non-JSON (1-based)")
    args = ap.parse_args(argv)

    def load(inp: Path, expected: Path | None) -> tuple[list[str], list[str]]:
        expected = expected or inp.with_name(inp.name[: -len(".in")] + ".expected.out")
        wanted = requests_of(inp.read_text(encoding="utf-8"))
        answers = answers_of(expected.read_text(encoding="utf-8"))
        return wanted[args.start - 1 :], answers[args.start - 1 :]

    wanted, answers = load(args.transcript, args.expected)
    others = [load(t, None) for t in args.also]
    cast(io.TextIOWrapper, sys.stdin).reconfigure(encoding="utf-8")  # a process's own streams are TextIOWrappers
    cast(io.TextIOWrapper, sys.stdout).reconfigure(encoding="utf-8", newline="\n")
    stdin = sys.stdin
    out = sys.stdout
    n = 0
    while True:
        query = _read_query(stdin)
        if query is None:
            return 0
        if query.startswith("#") or query.startswith("--"):
            continue
        n += 1
        if n == args.crash_at:
            print("uncaught exception: replay told to crash here", file=sys.stderr, flush=True)
            return 1
        if n == args.hang_at:
            while True:
                time.sleep(3600)
        if n == args.garbage_at:
            out.write("this is not JSON\n\n")
            out.flush()
            continue
        try:
            json.loads(query)
        except json.JSONDecodeError as e:
            print(f'uncaught exception: {{"message": "Could not parse JSON:\\n{e}"}}', file=sys.stderr, flush=True)
            return 1
        if n == 1 and wanted and not same_request(query, wanted[0]):
            for w, a in others:
                if w and same_request(query, w[0]):
                    wanted, answers = w, a
                    break
        if n > len(wanted) or n > len(answers):
            print(
                f"replay: request {n} is past the end of {args.transcript.name}: {query[:300]}",
                file=sys.stderr,
                flush=True,
            )
            return 3
        if not same_request(query, wanted[n - 1]):
            print(
                f"replay: request {n} differs from {args.transcript.name}\n  got:      {query[:500]}\n"
                f"  recorded: {wanted[n - 1][:500]}",
                file=sys.stderr,
                flush=True,
            )
            return 2
        out.write(answers[n - 1])
        out.flush()


if __name__ == "__main__":
    sys.exit(main())
