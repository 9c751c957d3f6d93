"""A prover subprocess with the guarantees every backend needs.

* started inside the process-wide :mod:`sandbox <proofrl.provers.sandbox>` (no network, writes only to
  its own scratch directory, which is removed with it);
* its own process group (``setsid``), so a timeout kills the prover *and* anything it spawned;
* ``RLIMIT_AS`` so a memory bomb fails inside the prover instead of taking the machine, ``RLIMIT_FSIZE``;
* killed when the server dies (``PR_SET_PDEATHSIG``; children are forked from one long-lived thread, since
  the signal fires when the forking *thread* ends);
* reads with a deadline (``select``), so a silent prover can never hang the caller, in linear time (only
  the new bytes are searched for the end of a frame) and up to a cap on one frame, so a flood of output
  costs neither quadratic time nor unbounded memory;
* stderr drained on a thread into a bounded tail, attached to crash reports.

The threat model is in ``docs/server.md``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import resource
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import psutil

from ..errors import OutputTooLarge, ProverCrashed, ProverTimeout
from .sandbox import Sandbox, current

_STDERR_TAIL = 64 * 1024
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _read_or_eof(fd: int, size: int = 4096) -> bytes:
    try:
        return os.read(fd, size)
    except OSError:
        return b""


def _limits(memory_mb: int | None, max_file_mb: int) -> Callable[[], None]:
    def apply() -> None:  # runs in the child between fork and exec
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_mb * 2**20, max_file_mb * 2**20))
        if memory_mb:
            cap = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    return apply


class _Spawner:
    """Forks every child from one daemon thread that lives as long as the server, so ``PR_SET_PDEATHSIG``
    (and bwrap's ``--die-with-parent``) kill the child when the server dies, not when the thread that asked
    for it ends (a pool or prewarm thread)."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[dict[str, Any], Future]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def popen(self, **kwargs: Any) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, daemon=True, name="proofrl-spawner")
                self._thread.start()
        done: Future = Future()
        self._requests.put((kwargs, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            kwargs, done = self._requests.get()
            try:
                done.set_result(subprocess.Popen(**kwargs))
            except BaseException as e:  # handed to the caller
                done.set_exception(e)


_spawner = _Spawner()


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _wait_dead(procs: list[psutil.Process], timeout: float) -> None:
    """Until each is gone or a zombie: a sandbox's inner processes are reaped by whoever inherits them
    (often the machine's init, on its own schedule), and a zombie holds nothing."""
    deadline = time.monotonic() + timeout
    for p in procs:
        while time.monotonic() < deadline:
            try:
                if p.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.Error:
                break
            time.sleep(0.005)


class ProverProcess:
    """One child process speaking a line/frame protocol over pipes."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        memory_mb: int | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        readable: Sequence[str] = (),
        sandbox: Sandbox | None = None,
    ):
        """``cwd`` None: the scratch directory. ``readable``: paths the prover must read even where the
        sandbox hides their parent (e.g. Coq's library)."""
        self.argv = list(argv)
        self.sandbox = sandbox or current()
        self._scratch = tempfile.TemporaryDirectory(prefix="proofrl-scratch-")
        self.scratch = self._scratch.name
        cwd = cwd or self.scratch
        try:
            self.proc = _spawner.popen(
                args=self.sandbox.wrap(self.argv, scratch=self.scratch, cwd=cwd, readable=readable),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=self.sandbox.env(os.environ if env is None else env, self.scratch),
                start_new_session=True,
                preexec_fn=_limits(memory_mb, self.sandbox.max_file_mb),
                bufsize=0,
            )
        except BaseException:
            self._scratch.cleanup()
            raise
        self._buf = bytearray()
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        """The prover's own process id (inside a sandbox, the process the wrapper started)."""
        if not self.sandbox.has_monitor:
            return self.proc.pid
        try:
            tree = _descendants(self.proc.pid)
            parents = {q.ppid() for q in tree}
        except psutil.Error:
            return self.proc.pid
        leaves = [p.pid for p in tree if p.pid not in parents]
        return leaves[0] if len(leaves) == 1 else self.proc.pid  # before it starts, the wrapper stands for it

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def interrupt(self) -> None:
        """SIGINT: Coq answers ``User interrupt.`` and stays usable. Inside a sandbox the signal goes to the
        wrapper's descendants only (bwrap would die of it, killing the prover; a PID namespace's first
        process ignores it)."""
        if not self.sandbox.has_monitor:
            self._signal(signal.SIGINT)
            return
        for p in _descendants(self.proc.pid):
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL the whole process group, reap it and remove the scratch directory. Idempotent."""
        tree = _descendants(self.proc.pid)
        self._signal(signal.SIGKILL)
        for p in tree:  # a descendant that left the group (setsid) is killed all the same
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # a zombie that will not die
            self.proc.wait(timeout=5)
        _wait_dead(tree, 5.0)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        self._scratch.cleanup()

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

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

    def read_until(
        self,
        find_end: bytes | Callable[[bytearray], int],
        timeout: float | None,
        command: str = "",
        *,
        max_bytes: int | None = None,
    ) -> bytes:
        """Read stdout until a complete frame is buffered: ``find_end`` is the frame's last bytes (a marker such
        as ``b"</value>"``: only bytes not yet searched are searched, so a frame arriving in many pieces costs
        linear time) or a function of the buffer returning the frame's end index (> 0), or -1.

        Returns that frame and keeps the rest buffered. Raises :class:`ProverTimeout` when the deadline
        passes (the caller decides between SIGINT and kill), :class:`ProverCrashed` on EOF and
        :class:`OutputTooLarge` once more than ``max_bytes`` are buffered without a complete frame (the
        stream is then mid-frame: the caller must kill the process).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        searched = 0
        while True:
            if isinstance(find_end, bytes):
                i = self._buf.find(find_end, max(0, searched - len(find_end) + 1))
                end = -1 if i < 0 else i + len(find_end)
                searched = len(self._buf)
            else:
                end = find_end(self._buf) if self._buf else -1
            if end > 0:
                frame = bytes(self._buf[:end])
                del self._buf[:end]
                return frame
            if max_bytes is not None and len(self._buf) > max_bytes:
                raise OutputTooLarge(max_bytes, command)
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
    __slots__ = ("returncode", "stderr", "stdout", "timed_out", "too_large")

    def __init__(self, returncode: int | None, stdout: str, stderr: str, timed_out: bool, too_large: bool = False):
        self.returncode, self.stdout, self.stderr, self.timed_out = returncode, stdout, stderr, timed_out
        self.too_large = too_large
        """the command printed more than ``max_output`` bytes and was killed for it"""


def run_once(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str,
    memory_mb: int | None = None,
    readable: Sequence[str] = (),
    sandbox: Sandbox | None = None,
    max_output: int | None = None,
) -> RunResult:
    """Run a command to completion under the same guards, with ``cwd`` as its scratch directory (the only
    place it may write); on timeout its whole process group is killed. Its stdout and stderr are read as they
    come; past ``max_output`` bytes of both together it is killed too (``too_large``), so a command printing
    without end costs the caller that many bytes, not all it printed."""
    sb = sandbox or current()
    proc = _spawner.popen(
        args=sb.wrap(list(argv), scratch=cwd, cwd=cwd, readable=readable),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=sb.env(os.environ, cwd),
        start_new_session=True,
        preexec_fn=_limits(memory_mb, sb.max_file_mb),
    )
    deadline = time.monotonic() + timeout
    buffers = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}  # type: ignore[union-attr]
    out, err = buffers.values()
    reading, timed_out, too_large = set(buffers), False, False
    while reading and not too_large:
        wait = deadline - time.monotonic()
        if wait <= 0:
            timed_out = True
            break
        for fd in select.select(list(reading), [], [], wait)[0]:
            chunk = _read_or_eof(fd, 1 << 16)
            if not chunk:
                reading.discard(fd)
            buffers[fd].extend(chunk)
        too_large = max_output is not None and len(out) + len(err) > max_output
    if not (timed_out or too_large):
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # both pipes closed, the process still running
            timed_out = True
    if timed_out or too_large:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for f in (proc.stdout, proc.stderr):
        f.close()  # type: ignore[union-attr]
    cap = max_output if max_output is not None else len(out) + len(err)
    decode = lambda b: bytes(b[:cap]).decode("utf-8", "replace")  # noqa: E731
    return RunResult(proc.returncode, decode(out), decode(err), timed_out, too_large)
