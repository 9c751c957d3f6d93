"""A prover subprocess with the guarantees every backend needs.

* its own process group (``setsid``), so a timeout kills the prover *and* anything it spawned;
* ``RLIMIT_AS`` so a memory bomb fails inside the prover instead of taking the machine;
* reads with a deadline (``select``), so a silent prover can never hang the caller;
* stderr drained on a thread into a bounded tail, attached to crash reports.

What is not covered: this is not a security sandbox on its own (see ``docs/`` for the server's threat model).
"""

from __future__ import annotations

import os
import resource
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

import psutil

from ..errors import ProverCrashed, ProverTimeout

_STDERR_TAIL = 64 * 1024


def _read_or_eof(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:
        return b""


def _limits(memory_mb: int | None) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if memory_mb:
            cap = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    return apply


class ProverProcess:
    """One child process speaking a line/frame protocol over pipes."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        memory_mb: int | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ):
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=_limits(memory_mb),
            bufsize=0,
        )
        self._buf = bytearray()
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def interrupt(self) -> None:
        """SIGINT to the group: Coq answers ``User interrupt.`` and stays usable."""
        self._signal(signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL the whole process group and reap it. Idempotent."""
        self._signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a zombie that will not die
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f and f.close()
            except OSError:
                pass

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def rss_bytes(self) -> int:
        """Resident memory of the process and its children."""
        try:
            p = psutil.Process(self.proc.pid)
            return p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
        except psutil.Error:
            return 0

    # -- I/O ---------------------------------------------------------------------------------------
    def stderr_tail(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        for chunk in iter(lambda: _read_or_eof(fd), b""):
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > _STDERR_TAIL and len(self._stderr) > 1:
                self._stderr_size -= len(self._stderr.popleft())

    def write(self, data: bytes) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            raise self._crashed("prover closed its input") from e

    def read_until(self, find_end: Callable[[bytes], int], timeout: float | None, command: str = "") -> bytes:
        """Read stdout until ``find_end(buffer)`` returns the end index (> 0) of a complete frame.

        Returns that frame and keeps the rest buffered. Raises :class:`ProverTimeout` when the deadline
        passes (the caller decides between SIGINT and kill) and :class:`ProverCrashed` on EOF.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while True:
            end = find_end(bytes(self._buf)) if self._buf else -1
            if end > 0:
                frame = bytes(self._buf[:end])
                del self._buf[:end]
                return frame
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                raise ProverTimeout(timeout or 0.0, command)
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise self._crashed("prover closed its output")
            self._buf.extend(chunk)

    def _crashed(self, what: str) -> ProverCrashed:
        try:
            rc = self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            rc = None
        self._stderr_thread.join(timeout=1)
        return ProverCrashed(f"{what} (exit code {rc})", stderr=self.stderr_tail(), returncode=rc)

    def __del__(self) -> None:  # last resort against orphans; normal paths call kill()
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            self._signal(signal.SIGKILL)


class RunResult:
    __slots__ = ("returncode", "stdout", "stderr", "timed_out")

    def __init__(self, returncode: int | None, stdout: str, stderr: str, timed_out: bool):
        self.returncode, self.stdout, self.stderr, self.timed_out = returncode, stdout, stderr, timed_out


def run_once(argv: Sequence[str], *, timeout: float, memory_mb: int | None = None, cwd: str | None = None) -> RunResult:
    """Run a command to completion under the same guards; on timeout its whole process group is killed."""
    proc = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=cwd,
        start_new_session=True, preexec_fn=_limits(memory_mb),
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        timed_out = True
    return RunResult(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out)
