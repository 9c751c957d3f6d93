"""Is a prover (or a package) installed here? Asked by every command before it starts work, so that a missing proof
assistant is one line with the command that installs it, not a traceback minutes later.

:func:`require_backend` raises :class:`~proofrl.errors.BackendUnavailable`; the CLI prints its message as is
(``proofrl demo: coq backend unavailable: coqidetop not found on PATH (Debian: apt-get install coq)``) and
exits with status 2. ``proofrl doctor`` reports the same reasons without stopping.
"""

from __future__ import annotations

from .errors import BackendUnavailable, ConfigError


def require_backend(backend: str) -> None:
    """Raise :class:`BackendUnavailable` (one line, naming the install command) unless ``backend`` can run here;
    an unknown name is a :class:`~proofrl.errors.ConfigError` naming the registered ones."""
    from .provers.backend import backend_names, get_backend

    if backend not in backend_names():
        raise ConfigError(f"backend must be one of {backend_names()}, got {backend!r}")
    get_backend(backend).require()


def diagnose_backend(backend: str) -> tuple[bool, str]:
    """``(usable, why not)`` for ``proofrl doctor``: the message :func:`require_backend` would raise."""
    try:
        require_backend(backend)
    except BackendUnavailable as e:
        return False, e.why
    return True, ""


def installed_version(package: str, missing: str = "-") -> str:
    """The installed version of the Python distribution ``package``, or ``missing`` where it is not installed (for
    records that say what a result ran on)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return missing
