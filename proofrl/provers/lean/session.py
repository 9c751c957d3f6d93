"""One Lean REPL process and its framing.

Framing (from the REPL's ``getLines``/``loop``): a request is read line by line up to a blank line and the
lines are glued *without* their newlines, so a request must be exactly one JSON line followed by a blank
line (``json.dumps`` escapes the newlines inside code). A response is one pretty-printed JSON object over
several lines; REPLs since late 2023 follow it with a blank line, the earliest with a single newline, so the
session reads exactly one JSON value (:class:`JsonEnd`) and skips the whitespace between values.

Which shapes the answers may have depends on the REPL's generation (:mod:`.generations`): the config names
the toolchain, or the session starts with every generation as a candidate and keeps those the answers fit.

A crash is never reported in the stream: the REPL prints ``uncaught exception: ...`` on stderr and stdout
reaches EOF. Hence EOF, a non-zero exit and output that is not JSON all raise
:class:`~proofrl.errors.ProverCrashed` with the stderr tail attached, and the process is killed. A read that
passes its deadline kills the process group (the REPL has no timeout of its own, repl#94) and raises
:class:`~proofrl.errors.ProverTimeout`. After either, the session is dead; make a new one.

``env`` and ``proofState`` ids are array indices the REPL never frees, so they only mean something inside
this process (``session_id`` tells processes apart) and memory only grows (recycle the process).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from typing import Any

from ...errors import OutputTooLarge, ProtocolError, ProverCrashed, ProverTimeout
from ..process import ProverProcess
from .config import LeanConfig
from .generations import Generation, candidates
from .models import CommandResponse, ProofStepResponse, ReplError, Response, parse_as

_ids = itertools.count(1)


MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""the most of one response kept (infotrees on Mathlib proofs run to megabytes); past it the process is killed"""


class JsonEnd:
    """Where the first JSON object or array in a growing buffer ends (-1 until all of it has arrived).

    Resumable: each call scans only the bytes not yet seen (brackets counted outside strings, escapes
    skipped), so a response arriving in many pieces costs linear time. Leading whitespace (the blank line
    that ended the previous answer) is part of the frame. Output that does not start with ``{`` or ``[`` is
    framed up to its first newline, so it fails as "not JSON" instead of waiting for a bracket.
    """

    _OUTSIDE = re.compile(rb'[{}\[\]"]')
    _INSIDE = re.compile(rb'["\\]')

    def __init__(self) -> None:
        self.pos = 0
        self.depth = 0
        self.started = False
        self.in_string = False

    def __call__(self, buf: bytearray) -> int:
        if not self.started:
            while self.pos < len(buf) and buf[self.pos] in b" \t\r\n":
                self.pos += 1
            if self.pos == len(buf):
                return -1
            if buf[self.pos] not in b"{[":
                nl = buf.find(b"\n", self.pos)
                return -1 if nl < 0 else nl + 1
            self.started = True
        while True:
            m = (self._INSIDE if self.in_string else self._OUTSIDE).search(buf, self.pos)
            if m is None:
                self.pos = len(buf)
                return -1
            c = buf[m.start()]
            if self.in_string:
                if c == ord("\\"):
                    if m.start() + 1 >= len(buf):  # the escaped byte has not arrived yet
                        self.pos = m.start()
                        return -1
                    self.pos = m.start() + 2
                    continue
                self.in_string = False
            elif c == ord('"'):
                self.in_string = True
            elif c in b"{[":
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth == 0:
                    return m.start() + 1
            self.pos = m.start() + 1


def encode_request(request: dict[str, Any]) -> bytes:
    """One JSON line and one blank line. Non-ASCII stays UTF-8 (``ensure_ascii=False``) because Lean's JSON
    parser is only sure to read ``\\u`` escapes inside the BMP; control characters are always escaped."""
    line = json.dumps(request, ensure_ascii=False)
    assert "\n" not in line  # json.dumps escapes newlines; this guards the framing invariant
    return (line + "\n\n").encode("utf-8")


class LeanSession:
    """A started REPL process. Every method sends one request and returns its typed response."""

    def __init__(self, config: LeanConfig):
        self.config = config
        self.session_id = next(_ids)
        self.requests = 0
        # the project directory (cwd) stays readable inside the sandbox; the scratch directory is for writes
        self._proc = ProverProcess(config.command, memory_mb=config.memory_mb, cwd=config.cwd or os.getcwd())
        self._dead = False
        self.generations: tuple[Generation, ...] = candidates(config.version)
        """the REPL generations its answers so far fit, newest first (one, once a tactic answer decided)"""

    @property
    def generation(self) -> Generation:
        """The generation answers are read as: the newest candidate left."""
        return self.generations[0]

    # -- lifecycle --------------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return not self._dead and self._proc.alive

    @property
    def pid(self) -> int:
        return self._proc.pid

    def rss_bytes(self) -> int:
        return self._proc.rss_bytes() if self.alive else 0

    def kill(self) -> None:
        self._dead = True
        self._proc.kill()

    def close(self) -> None:
        """Close stdin (the REPL exits cleanly at EOF), then make sure the group is gone."""
        if not self._dead:
            self._dead = True
            try:
                if self._proc.proc.stdin:
                    self._proc.proc.stdin.close()
                self._proc.proc.wait(timeout=2)
            except Exception:  # closing is best effort; kill below is the guarantee
                pass
        self._proc.kill()

    def stderr_tail(self) -> str:
        return self._proc.stderr_tail()

    # -- requests -------------------------------------------------------------------------------------------
    def send(self, request: dict[str, Any], timeout: float | None) -> Response:
        """Send one request and read its one response (``timeout`` seconds, ``None`` = wait forever)."""
        if self._dead:
            raise ProverCrashed("Lean REPL session is closed")
        text = json.dumps(request, ensure_ascii=False)
        self.requests += 1
        try:
            self._proc.write(encode_request(request))
            raw = self._proc.read_until(JsonEnd(), timeout, command=text, max_bytes=MAX_RESPONSE_BYTES)
        except (ProverTimeout, OutputTooLarge):  # read in linear time; a flood is the proof's, and ends it
            self.kill()
            raise
        except ProverCrashed:
            self.kill()
            raise
        try:
            resp, self.generations = parse_as(json.loads(raw.decode("utf-8")), self.generations)
            return resp
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            self.kill()
            raise ProverCrashed(
                f"Lean REPL printed something that is not JSON: {raw[:300]!r}", stderr=self.stderr_tail()
            ) from e
        except ProtocolError:
            self.kill()
            raise

    def command(
        self,
        cmd: str,
        *,
        env: int | None = None,
        timeout: float | None = None,
        all_tactics: bool = False,
        root_goals: bool = False,
        infotree: str | None = None,
    ) -> CommandResponse | ReplError:
        """Elaborate ``cmd`` (in a fresh environment when ``env`` is None; only then may it ``import``)."""
        req: dict[str, Any] = {"cmd": cmd}
        if env is not None:
            req["env"] = env
        if all_tactics:
            req["allTactics"] = True
        if root_goals:
            req["rootGoals"] = True
        if infotree is not None:
            req["infotree"] = infotree
        return self._expect(self.send(req, timeout), CommandResponse)  # type: ignore[return-value]

    def file(self, path: str, *, env: int | None = None, timeout: float | None = None) -> CommandResponse | ReplError:
        req: dict[str, Any] = {"path": path}
        if env is not None:
            req["env"] = env
        return self._expect(self.send(req, timeout), CommandResponse)  # type: ignore[return-value]

    def tactic(self, proof_state: int, tactic: str, *, timeout: float | None = None) -> ProofStepResponse | ReplError:
        resp = self.send({"tactic": tactic, "proofState": proof_state}, timeout)
        return self._expect(resp, ProofStepResponse)  # type: ignore[return-value]

    def _expect(self, resp: Response, kind: type) -> Response:
        if not isinstance(resp, (kind, ReplError)):
            self.kill()
            raise ProtocolError(f"expected {kind.__name__}, got {type(resp).__name__}", raw=repr(resp)[:500])
        return resp

    def __enter__(self) -> LeanSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
