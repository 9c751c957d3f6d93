"""Confine prover processes: no network, no writes outside a per-process scratch directory.

A proof is a program from a stranger (Coq's ``Redirect``/``Load``/``Extraction``, Lean's ``#eval`` and
``IO``), so every prover process is started through :meth:`Sandbox.wrap`. Mechanisms, best first; ``auto``
takes the first that works on this machine, tried once per server process:

* ``bwrap`` (bubblewrap; Debian: ``apt-get install bubblewrap``);
* ``unshare`` (util-linux, on every Debian): the same namespaces, set up by a short bash script, with
  capabilities dropped by ``setpriv`` before the prover runs;
* ``off``: no confinement. Chosen by ``auto`` only when neither works (e.g. user namespaces disabled); a
  warning is logged once and the mode is reported by ``/health``.

What ``bwrap`` and ``unshare`` give the prover:

* **network**: a new network namespace holding only a loopback that is down, so no address is reachable,
  not even the host's own loopback services;
* **writes**: the root filesystem read-only; the scratch directory is the only writable place;
* **reads**: ``HIDDEN_DIRS`` (home directories, temp directories, ``/run`` with its sockets, ...) become
  empty read-only directories and ``HIDDEN_FILES`` unreadable, except the prover's own install prefix, the
  paths on its command line, its working directory and ``readable`` (bound back read-only);
* **processes**: a new PID namespace (it sees and can signal only itself), all capabilities dropped, and
  killed with its parent (``--die-with-parent`` / ``--kill-child``).

In every mode, ``off`` included: ``RLIMIT_AS`` (set by the caller), ``RLIMIT_FSIZE`` (no file above
``max_file_mb``), no core dumps, environment variables that look like secrets removed, ``TMPDIR`` = scratch.

What is not covered: world-readable system files (``/etc``, ``/usr``) stay readable; the number of files and
total bytes in scratch are not bounded (only each file's size); CPU is bounded by the caller's deadline, not
here; a kernel exploit escapes any namespace.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import ConfigError

log = logging.getLogger("proofrl.sandbox")

MODES = ("auto", "bwrap", "unshare", "off")
ENV_MODE = "PROOFRL_SANDBOX"
"""environment variable with the process-wide mode when nothing configures one (default ``auto``)"""

HIDDEN_DIRS = ("/home", "/root", "/run", "/tmp", "/var/tmp", "/dev/shm", "/mnt", "/media", "/srv", "/etc/ssh")
HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow")
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)


@dataclass(frozen=True)
class Sandbox:
    mode: str
    """``bwrap``, ``unshare`` or ``off``"""
    reason: str = ""
    """why this mode (what ``auto`` tried and how it failed)"""
    max_file_mb: int = 1024
    """RLIMIT_FSIZE: the largest file a prover may write (Lean's ``pickleTo`` of a Mathlib env is large)"""

    @property
    def confined(self) -> bool:
        return self.mode != "off"

    @property
    def has_monitor(self) -> bool:
        """The process we start is a wrapper that forks the prover: signals meant for the prover only (SIGINT)
        must go to its descendants, since the wrapper would die of them and take the prover along."""
        return self.confined

    def describe(self) -> dict[str, object]:
        """What ``/health`` and ``proofrl doctor`` report."""
        return {"mode": self.mode, "network": self.confined, "filesystem": self.confined, "reason": self.reason}

    def wrap(self, argv: Sequence[str], *, scratch: str, cwd: str, readable: Sequence[str] = ()) -> list[str]:
        """The command line that runs ``argv`` in ``cwd``, confined, with ``scratch`` its only writable place."""
        argv = list(argv)
        if self.mode == "off":
            return argv
        scratch = os.path.realpath(scratch)
        binds = _readable(argv, cwd, readable, scratch)
        if self.mode == "bwrap":
            return _bwrap(argv, scratch, cwd, binds)
        if self.mode == "unshare":
            return _unshare(argv, scratch, cwd, binds)
        raise ConfigError(f"unknown sandbox mode {self.mode!r}; choose one of {list(MODES)}")

    def env(self, base: Mapping[str, str], scratch: str) -> dict[str, str]:
        """``base`` without variables whose names look like secrets (an API key in the server's environment
        must not be one ``IO.getEnv`` away), with temporary files sent to scratch."""
        out = {k: v for k, v in base.items() if not _SECRET.search(k)}
        out["TMPDIR"] = scratch
        return out


# -- which paths come back into view --------------------------------------------------------------------------
def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _prefix(exe: str) -> str:
    """``/opt/coq/bin/coqidetop`` -> ``/opt/coq``: the installation a binary's libraries live in."""
    d = os.path.dirname(exe)
    return os.path.dirname(d) if os.path.basename(d) == "bin" else d


def _readable(argv: list[str], cwd: str, extra: Sequence[str], scratch: str) -> list[tuple[str, str]]:
    """Paths under a hidden directory that the prover needs: its install prefix (before and after symlinks),
    the directories of absolute paths on its command line, its working directory and ``extra``."""
    wanted: list[str] = []
    found = shutil.which(argv[0]) if argv else None
    if found:
        wanted += [_prefix(os.path.abspath(found)), _prefix(os.path.realpath(found))]
    for a in argv[1:]:
        if a.startswith("/") and os.path.exists(a):
            wanted.append(a if os.path.isdir(a) else os.path.dirname(a))
    wanted += [cwd, *extra]
    # Bind each directory at its real path and, when reached through a symlink that lies under a hidden
    # directory (/tmp/x -> /data/x), at that path too: the prover opens the path it was given.
    pairs = set()
    for p in wanted:
        if p and os.path.isdir(p):
            real = os.path.realpath(p)
            pairs |= {(real, real), (real, os.path.abspath(p))}
    out: list[tuple[str, str]] = []
    for src, dest in sorted(pairs, key=lambda sd: (len(sd[1]), sd)):
        if _under(dest, scratch) or not any(_under(dest, h) for h in HIDDEN_DIRS):
            continue
        if not any(_under(dest, d) and src == os.path.join(s, os.path.relpath(dest, d)) for s, d in out):
            out.append((src, dest))  # not covered by a parent already bound
    return out


def _hidden_dirs() -> list[str]:
    return [h for h in HIDDEN_DIRS if os.path.isdir(h) and not os.path.islink(h)]


# -- the two mechanisms ---------------------------------------------------------------------------------------
def _bwrap(argv: list[str], scratch: str, cwd: str, binds: list[tuple[str, str]]) -> list[str]:
    hidden = _hidden_dirs()
    cmd = [
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    for h in hidden:
        cmd += ["--tmpfs", h]
    for f in HIDDEN_FILES:
        if os.path.isfile(f):
            cmd += ["--ro-bind", "/dev/null", f]
    for src, dest in binds:
        cmd += ["--ro-bind", src, dest]
    cmd += ["--bind", scratch, scratch]
    for h in [*hidden, "/dev"]:
        cmd += ["--remount-ro", h]
    return [*cmd, "--chdir", cwd, "--", *argv]


# Runs inside the new namespaces as their root: open what must stay visible (file descriptors survive the
# mounts that hide their paths), hide, bind back, make every mount read-only but scratch, drop capabilities.
_UNSHARE_SCRIPT = """set -e
{opens}
for h in {hidden}; do mount -t tmpfs -o mode=755,size=64k tmpfs "$h"; done
for f in {files}; do mount --bind /dev/null "$f"; done
{binds}
while read -r _ mp _; do
  mp=$(printf '%b' "$mp")
  case "$mp" in {scratch}|/proc|/proc/*) continue;; esac
  [ -e "$mp" ] || continue  # under a hidden directory: out of reach already
  mount -o remount,bind,ro "$mp" || {{ echo "proofrl sandbox: cannot make $mp read-only" >&2; exit 97; }}
done < /proc/self/mounts
cd {cwd}
exec setpriv --bounding-set -all --inh-caps -all --no-new-privs -- "$@"
"""


def _unshare(argv: list[str], scratch: str, cwd: str, binds: list[tuple[str, str]]) -> list[str]:
    q = shlex.quote
    kept = [(scratch, scratch), *binds]
    opens = "\n".join(f"exec {10 + i}<{q(src)}" for i, (src, _) in enumerate(kept))
    rebinds = "\n".join(  # separate lines, so set -e stops at any failure (an open fd must not survive)
        f"mkdir -p {q(dest)}\nmount --no-canonicalize --bind /proc/self/fd/{10 + i} {q(dest)}\nexec {10 + i}<&-"
        for i, (_, dest) in reversed(list(enumerate(kept)))  # scratch last: bound on top of any read-only parent
    )
    script = _UNSHARE_SCRIPT.format(
        opens=opens,
        hidden=" ".join(map(q, _hidden_dirs())),
        files=" ".join(q(f) for f in HIDDEN_FILES if os.path.isfile(f)),
        binds=rebinds,
        scratch=q(scratch),
        cwd=q(cwd),
    )
    return [
        "unshare",
        "--net",
        "--mount",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--map-root-user",
        "--propagation",
        "private",
        "--",
        "bash",
        "-c",
        script,
        "proofrl-sandbox",
        *argv,
    ]


# -- choosing a mode, once per process ------------------------------------------------------------------------
def probe(mode: str) -> str | None:
    """``None`` if ``mode`` confines a process here, else why not. Runs a shell that must write into its
    scratch directory and must fail to write next to it."""
    if mode == "off":
        return None
    tools = {"bwrap": ("bwrap",), "unshare": ("unshare", "setpriv")}.get(mode)
    if tools is None:
        raise ConfigError(f"unknown sandbox mode {mode!r}; choose one of {list(MODES)}")
    tool = tools[0]
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not on PATH" + (
            " (Debian: apt-get install bubblewrap)" if mode == "bwrap" else ""
        )
    with tempfile.TemporaryDirectory(prefix="proofrl-probe-") as parent:
        scratch = os.path.join(parent, "scratch")
        os.mkdir(scratch)
        argv = Sandbox(mode).wrap(
            ["sh", "-c", "echo ok > inside && ! echo no > ../outside"], scratch=scratch, cwd=scratch
        )
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{tool} failed to start: {e}"
        if os.path.exists(os.path.join(parent, "outside")):
            return f"{tool} ran but did not stop a write outside scratch"
        if r.returncode != 0 or not os.path.exists(os.path.join(scratch, "inside")):
            return f"{tool} exit {r.returncode}: {(r.stderr.strip() or r.stdout.strip())[-300:]}"
    return None


def resolve(mode: str = "auto") -> Sandbox:
    """The sandbox for ``mode``. An explicit ``bwrap``/``unshare`` that does not work here raises
    :class:`ConfigError`; ``auto`` falls back, down to ``off`` with a logged warning."""
    if mode not in MODES:
        raise ConfigError(f"unknown sandbox mode {mode!r}; choose one of {list(MODES)}")
    if mode == "off":
        sb = Sandbox("off", "disabled by configuration")
        _warn(sb)
        return sb
    if mode != "auto":
        why = probe(mode)
        if why is not None:
            raise ConfigError(f"sandbox {mode!r} does not work here: {why}")
        return Sandbox(mode, f"{mode} (configured)")
    failures: list[str] = []
    for m in ("bwrap", "unshare"):
        why = probe(m)
        if why is None:
            return Sandbox(m, f"{m} (auto)" + (f"; {'; '.join(failures)}" if failures else ""))
        failures.append(f"{m}: {why}")
    sb = Sandbox("off", "no mechanism works: " + "; ".join(failures))
    _warn(sb)
    return sb


def _warn(sb: Sandbox) -> None:
    log.warning(
        "PROVER PROCESSES ARE NOT SANDBOXED (%s): untrusted proofs can read the user's files, write anywhere "
        "the user can and open network connections. Install bubblewrap, or run inside a container without "
        "network. See docs/server.md, threat model.",
        sb.reason,
    )


_current: Sandbox | None = None


def configure(mode: str | Sandbox) -> Sandbox:
    """Set the process-wide sandbox every prover process starts in (``proofrl serve --sandbox``)."""
    global _current
    _current = mode if isinstance(mode, Sandbox) else resolve(mode)
    return _current


def current() -> Sandbox:
    """The process-wide sandbox; resolved on first use from ``PROOFRL_SANDBOX`` (default ``auto``)."""
    return _current if _current is not None else configure(os.environ.get(ENV_MODE, "auto"))
