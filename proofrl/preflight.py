"""Is a prover installed here? Asked by every command before it starts work, so that a missing proof
assistant is one line with the command that installs it, not a traceback minutes later.

:func:`require_backend` raises :class:`~proofrl.errors.BackendUnavailable`; the CLI prints its message as is
(``proofrl demo: coq backend unavailable: coqidetop not found on PATH (Debian: apt-get install coq)``) and
exits with status 2. ``proofrl doctor`` reports the same reasons without stopping.
"""

from __future__ import annotations

import shutil

from .errors import BackendUnavailable, ConfigError

COQ_INSTALL = "apt-get install coq"
LEAN_INSTALL = (
    "install Lean with elan (curl https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh -sSf | sh), "
    "build leanprover-community/repl and set PROOFRL_LEAN_REPL (docs/lean.md)"
)


def require_backend(backend: str) -> None:
    """Raise :class:`BackendUnavailable` (one line, naming the install command) unless ``backend`` can run here."""
    if backend == "coq":
        from .provers.coq.session import coqidetop_path

        coqidetop_path()  # raises: coqidetop not found on PATH (Debian: apt-get install coq)
        if not shutil.which("coqc"):
            raise BackendUnavailable("coq", f"coqc not found on PATH (Debian: {COQ_INSTALL})")
        return
    if backend == "lean":
        from .provers.lean.config import diagnose

        ok, why = diagnose()
        if not ok:
            raise BackendUnavailable("lean", f"{why}; {LEAN_INSTALL}")
        return
    from .provers.factory import BACKENDS

    raise ConfigError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")


def diagnose_backend(backend: str) -> tuple[bool, str]:
    """``(usable, why not)`` for ``proofrl doctor``: the message :func:`require_backend` would raise."""
    try:
        require_backend(backend)
    except BackendUnavailable as e:
        return False, e.why
    return True, ""
