"""Where the Lean REPL is, and the rules it judges by.

One setting points proofrl at Lean: the environment variable ``PROOFRL_LEAN_REPL``, the command that starts
the REPL inside your Lean project (the one with Mathlib), for example::

    export PROOFRL_LEAN_REPL="lake -d /path/to/mathlib-project env /path/to/repl/.lake/build/bin/repl"

``PROOFRL_LEAN_PROJECT`` (optional) sets the working directory the command runs in, for those who prefer
``lake env`` without ``-d``. ``PROOFRL_LEAN_VERSION`` (optional) names the toolchain the REPL was built with
(``v4.9.0``); without it the REPL's generation is detected from its answers (:mod:`.generations`).
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field, replace

from ...errors import BackendUnavailable
from .generations import toolchain_key

ENV_REPL = "PROOFRL_LEAN_REPL"
ENV_PROJECT = "PROOFRL_LEAN_PROJECT"
ENV_VERSION = "PROOFRL_LEAN_VERSION"

DEFAULT_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
DEFAULT_FORBIDDEN = ("sorry", "admit", "native_decide")
DEFAULT_OPTIONS = (
    "maxHeartbeats",
    "maxRecDepth",
    "synthInstance.maxHeartbeats",
    "synthInstance.maxSize",
    "exponentiation.threshold",
    "checkBinderAnnotations",
    "autoImplicit",
    "relaxedAutoImplicit",
    "linter.",
    "pp.",
    "trace.",
    "profiler",
)


@dataclass(frozen=True)
class LeanConfig:
    command: tuple[str, ...]
    """argv that starts one REPL process (``PROOFRL_LEAN_REPL``, split like a shell would)"""
    cwd: str | None = None
    """working directory for ``command`` (``PROOFRL_LEAN_PROJECT``); None = the current one"""
    memory_mb: int | None = 16384
    """RLIMIT_AS per REPL; Mathlib needs several GiB just to import, so 16 GiB leaves room to work"""
    timeout: float = 60.0
    """default seconds for one proof or tactic"""
    header_timeout: float = 600.0
    """seconds to run the header (``import Mathlib`` takes tens of seconds on a cold disk cache)"""
    allowed_axioms: frozenset[str] = DEFAULT_AXIOMS
    """``#print axioms`` must stay within these; ``sorryAx``, ``Lean.ofReduceBool`` and user axioms reject"""
    forbidden_tactics: tuple[str, ...] = DEFAULT_FORBIDDEN
    """words refused before anything is sent to Lean (comments and strings ignored)"""
    forbid_search_tactics: bool = True
    """refuse unqualified words ending in ``?`` (``exact?``, ``apply?``, ``rw?``): slow, and not a proof"""
    allowed_options: tuple[str, ...] = DEFAULT_OPTIONS
    """``set_option`` names a header or a proof may set (a trailing ``.`` allows a family): limits, linters,
    printing. Any other option (``debug.skipKernelTC`` turns the kernel check off) rejects the proof"""
    collapse_mathlib_imports: bool = False
    """normalise ``import Mathlib.X`` to ``import Mathlib`` so more jobs share a process (changes what is
    in scope, hence off by default)"""
    env: dict[str, str] | None = field(default=None, compare=False)
    """environment of the REPL process; None = inherit"""
    version: str | None = None
    """the Lean toolchain the REPL was built with (``v4.9.0``, ``leanprover/lean4:v4.15.0``), which fixes the
    response shapes it is read with; None = detect them from its answers (:mod:`.generations`)"""

    def __post_init__(self) -> None:
        if self.version is not None:
            toolchain_key(self.version)  # a name that is no toolchain is a one-line ConfigError

    @classmethod
    def from_env(cls, **overrides: object) -> LeanConfig:
        """The configuration ``PROOFRL_LEAN_REPL`` describes; raises :class:`BackendUnavailable` if unset."""
        value = os.environ.get(ENV_REPL, "").strip()
        if not value:
            raise BackendUnavailable("lean", f"{ENV_REPL} is not set (see docs/lean.md)")
        base = cls(
            command=tuple(shlex.split(value)),
            cwd=os.environ.get(ENV_PROJECT) or None,
            version=os.environ.get(ENV_VERSION, "").strip() or None,
        )
        return replace(base, **overrides)  # type: ignore[arg-type]

    def with_overrides(self, **changes: object) -> LeanConfig:
        return replace(self, **changes)  # type: ignore[arg-type]


def diagnose() -> tuple[bool, str]:
    """Whether a Lean REPL can be started here, and a one-line reason (for ``proofrl doctor``)."""
    try:
        cfg = LeanConfig.from_env()
    except BackendUnavailable as e:
        found = [t for t in ("lean", "lake", "repl") if shutil.which(t)]
        hint = f"; on PATH: {', '.join(found)}" if found else "; lean/lake not on PATH"
        return False, e.why + hint
    exe = cfg.command[0]
    path = shutil.which(exe) or (exe if os.path.isfile(exe) and os.access(exe, os.X_OK) else None)
    if path is None:
        return False, f"{ENV_REPL} starts {exe!r}, which is not an executable here"
    if cfg.cwd and not os.path.isdir(cfg.cwd):
        return False, f"{ENV_PROJECT}={cfg.cwd!r} is not a directory"
    for arg in cfg.command[1:]:
        if arg.startswith("/") and not os.path.exists(arg):
            return False, f"{ENV_REPL} names {arg!r}, which does not exist"
    return True, f"REPL command {shlex.join(cfg.command)} (found {path})"
