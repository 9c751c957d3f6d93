"""One Lean REPL process and its framing.

Framing (from the REPL's ``getLines``/``loop``): a request is read line by line up to a blank line and the
lines are glued *without* their newlines, so a request must be exactly one JSON line followed by a blank
line (``json.dumps`` escapes the newlines inside code). A response is pretty-printed JSON over several lines
followed by one blank line; no line inside it is empty (strings are escaped), so the first ``\\n\\n`` ends it.

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
from typing import Any

from ...errors import OutputTooLarge, ProtocolError, ProverCrashed, ProverTimeout
from ..process import ProverProcess
from .config import LeanConfig
from .models import CommandResponse, ProofStepResponse, ReplError, Response, parse_response

_ids = itertools.count(1)


FRAME_END = b"\n\n"  # a response is JSON followed by a blank line
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""the most of one response kept (infotrees on Mathlib proofs run to megabytes); past it the process is killed"""


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
            except Exception:  # noqa: BLE001 - closing is best effort; kill below is the guarantee
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
            raw = self._proc.read_until(FRAME_END, timeout, command=text, max_bytes=MAX_RESPONSE_BYTES)
        except (ProverTimeout, OutputTooLarge):  # read in linear time; a flood is the proof's, and ends it
            self.kill()
            raise
        except ProverCrashed:
            self.kill()
            raise
        try:
            return parse_response(json.loads(raw.decode("utf-8")))
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
