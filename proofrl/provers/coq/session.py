"""One ``coqidetop`` process: the XML calls, one request one reply, each with a deadline.

The prelude (``Require Import ...``) is run once at start and its state id kept as ``base``; every job
returns there with ``Edit_at(base)``. On a missed deadline the process group gets SIGINT (Coq answers
``User interrupt.`` and lives on); if it stays silent it is killed and the session is dead.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass

from ...errors import (
    BackendUnavailable,
    OutputTooLarge,
    ProtocolError,
    ProverCrashed,
    ProverFailed,
    ProverTimeout,
    StatementError,
)
from ..base import Message
from ..process import ProverProcess
from . import xml
from .sentences import SplitError, split_sentences

INTERRUPT_GRACE = 3.0  # seconds Coq gets to answer a SIGINT before the kill
HEADER_TIMEOUT = 120.0  # seconds a header (prelude) may take to load when the caller sets no limit
MAX_REPLY_BYTES = 4 * 2**20
"""one reply (its feedback included) longer than this kills the process: a proof printing without end
(``Show.`` repeated on a large goal) is rejected as ``output too large``, never buffered whole"""


def coqidetop_path() -> str:
    for name in ("coqidetop.opt", "coqidetop"):
        if path := shutil.which(name):
            return path
    raise BackendUnavailable("coq", "coqidetop not found on PATH (Debian: apt-get install coq)")


@functools.lru_cache(maxsize=1)
def coq_library() -> tuple[str, ...]:
    """Where Coq reads its library (``coqc -where``, ``COQPATH``): kept readable inside the sandbox."""
    paths = [p for p in os.environ.get("COQPATH", "").split(":") if p]
    try:
        where = subprocess.run(["coqc", "-where"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        where = ""
    return tuple(p for p in [where, *paths] if p and os.path.isdir(p))


@dataclass
class CoqFailure(ProverFailed):
    """Coq rejected a sentence (at parse time in ``Add``, or when it ran), or refused a call (``call``: ``Goal``,
    ``Query``, ...). One that escapes the prover is the job's ``error`` verdict (:attr:`reason`)."""

    message: str
    state_id: int | None = None  # the failing sentence's state, when Coq says
    loc: tuple[int, int] | None = None  # byte offsets inside that sentence
    last_good: int | None = None
    call: str = ""

    def __str__(self) -> str:
        return self.message

    @property
    def reason(self) -> str:
        first = " ".join(self.message.split())[:200] or "error"
        if first.startswith("Anomaly"):
            return f"coq anomaly: {first}"
        return f"coq {self.call} failed: {first}" if self.call else f"coq: {first}"


@dataclass(frozen=True)
class ProofStatus:
    path: tuple[str, ...]  # ("Top",) when no module or section is open
    proof: str | None  # the proof being edited
    open_proofs: tuple[str, ...]


class CoqSession:
    def __init__(
        self,
        prelude: str = "",
        *,
        memory_mb: int | None = 4096,
        options: tuple[str, ...] = (),
        header_timeout: float | None = None,
    ):
        """``header_timeout``: seconds the prelude may take (parsing and running it); past it the process is
        killed and ProverTimeout raised. None: ``HEADER_TIMEOUT``."""
        # Runs in its scratch directory (tactics such as lia write caches into the working directory), the
        # only place the sandbox lets it write.
        self._loading = True  # a missed deadline while loading kills at once (nothing to go back to)
        self.process = ProverProcess(
            [coqidetop_path(), "-main-channel", "stdfds", "-async-proofs", "off", *options],
            memory_mb=memory_mb,
            readable=coq_library(),
        )
        reply = self.call(xml.init(), timeout=30)
        sid = reply.value.find("state_id")
        if sid is None:
            raise ProtocolError("Init reply without a state id")
        self.base = xml.int_attr(sid, "val")
        self.tip = self.base
        for line in ("Set Printing Width 100.",):
            self.base = self.add(line, self.base)
        self._load_prelude(prelude, HEADER_TIMEOUT if header_timeout is None else header_timeout)
        self._loading = False

    def _load_prelude(self, prelude: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        left = lambda: max(0.01, deadline - time.monotonic())  # noqa: E731
        try:
            sentences = split_sentences(prelude)
        except SplitError as e:
            self.close()
            raise StatementError(f"header: {e}", messages=(Message("error", str(e)),)) from e
        try:
            for s in sentences:
                self.base = self.add(s.text, self.base, timeout=min(30.0, left()))
            self.run(timeout=left())
        except CoqFailure as e:
            self.close()
            raise StatementError(f"header failed: {e.message}", messages=(Message("error", e.message),)) from e
        except ProverTimeout as e:
            self.close()
            raise ProverTimeout(timeout, "header") from e
        self.tip = self.base

    # -- calls ------------------------------------------------------------------------------------------
    def call(self, request: bytes, timeout: float | None) -> xml.Reply:
        """Send one call and read its reply. On timeout: interrupt, then kill; raises ProverTimeout."""
        self.process.write(request)
        try:
            frame = self.process.read_until(
                xml.END, timeout, command=request[:200].decode("utf-8", "replace"), max_bytes=MAX_REPLY_BYTES
            )
        except ProverTimeout:
            if self._loading:
                self.process.kill()
            else:
                self._interrupt_or_kill()
            raise
        except OutputTooLarge:  # the stream is mid-reply: nothing more can be read from this process
            self.process.kill()
            raise
        return xml.parse_reply(frame)

    def _interrupt_or_kill(self) -> None:
        self.process.interrupt()
        try:
            self.process.read_until(xml.END, INTERRUPT_GRACE, max_bytes=MAX_REPLY_BYTES)  # the interrupted call's reply
            self.edit_at(self.base, timeout=INTERRUPT_GRACE)
        except (ProverTimeout, ProverCrashed, OutputTooLarge, CoqFailure):
            self.process.kill()

    def add(self, sentence: str, state_id: int, timeout: float | None = 30) -> int:
        """Parse one sentence after ``state_id``; returns its new state id (it runs later, on Goal/Status)."""
        r = self.call(xml.add(sentence, state_id), timeout)
        if not r.good:
            raise CoqFailure(r.fail_message, None, r.fail_loc, r.fail_state)
        self.tip = xml.state_id_of_add(r)
        return self.tip

    def run(self, timeout: float | None) -> list[xml.Feedback]:
        """Execute everything added up to the tip (``Status true``); raises CoqFailure at the first error."""
        return self._checked(xml.status(True), timeout).feedback

    def goals(self, timeout: float | None = 30) -> xml.Goals | None:
        return xml.parse_goals(self._checked(xml.goal(), timeout))

    def proof_status(self, timeout: float | None = 30) -> ProofStatus:
        """Coq's own account of what is open at the tip: the module/section path, the proof being edited and
        every open proof (``Status``)."""
        st = self._checked(xml.status(True), timeout).value.find("status")
        if st is None or len(st) < 3:
            raise ProtocolError("Status reply without a status")
        path = tuple(e.text or "" for e in st[0].findall("string"))
        name = st[1].find("string")
        return ProofStatus(
            path, name.text if name is not None else None, tuple(e.text or "" for e in st[2].findall("string"))
        )

    def edit_at(self, state_id: int, timeout: float | None = 30) -> None:
        r = self.call(xml.edit_at(state_id), timeout)
        if not r.good:
            raise CoqFailure(r.fail_message or "Edit_at failed", state_id, None, r.fail_state)
        self.tip = state_id

    def query(self, text: str, state_id: int, timeout: float | None = 60) -> list[xml.Feedback]:
        return self._checked(xml.query(text, state_id), timeout).feedback

    def _checked(self, request: bytes, timeout: float | None) -> xml.Reply:
        r = self.call(request, timeout)
        if r.good:
            return r
        # The runtime error also arrives as feedback naming the failing state and its location.
        err = next(iter(r.errors()), None)
        message = r.fail_message or (err.text if err else "error")
        call = m.group(1).decode() if (m := re.match(rb'<call val="(\w+)"', request)) else ""
        failure = CoqFailure(
            message, err.state_id if err else None, (err.loc if err else None) or r.fail_loc, r.fail_state, call
        )
        # The tip stays on the failed state: go back to the last good one. State 0 is Coq's "dummy": a failure
        # that names no state (goals it could not print, a refused query) moved nothing, and Edit_at(0) would
        # be Coq's own anomaly ("edit_at dummy").
        if r.fail_state:
            self.edit_at(r.fail_state)
        raise failure

    # -- lifecycle --------------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.process.alive

    def close(self) -> None:
        self.process.kill()
