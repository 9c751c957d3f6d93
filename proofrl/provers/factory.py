"""Build provers and pools by backend name, so callers (CLI, server, trainer) never import a backend."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ConfigError
from .base import Prover
from .pool import PoolConfig, ProverPool

BACKENDS = ("coq", "lean")


def prover_factory(backend: str, **options: object) -> Callable[..., Prover]:
    """``factory(header) -> started prover``; ``options`` go to the backend's config dataclass. Coq's factory
    also takes ``timeout=``: the header must load within it (the pool passes each job's time limit)."""
    if backend == "coq":
        from .coq import CoqConfig, CoqProver

        cfg = CoqConfig(**options)  # type: ignore[arg-type]
        return lambda header, timeout=None: CoqProver(header, cfg, header_timeout=timeout)
    if backend == "lean":
        from .lean import LeanConfig, LeanProver  # type: ignore[attr-defined]

        # the REPL is where PROOFRL_LEAN_REPL says (unset: one-line BackendUnavailable); options override it
        cfg = LeanConfig(**options) if "command" in options else LeanConfig.from_env(**options)  # type: ignore[arg-type]
        return lambda header: LeanProver(cfg, header)
    raise ConfigError(f"unknown backend {backend!r}; choose one of {list(BACKENDS)}")


def make_pool(backend: str = "coq", *, pool: PoolConfig | None = None, **options: object) -> ProverPool:
    return ProverPool(prover_factory(backend, **options), pool or PoolConfig())
