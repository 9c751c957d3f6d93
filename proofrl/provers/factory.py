"""Build provers and pools by backend name (:mod:`proofrl.provers.backend`), so callers never import a backend."""

from __future__ import annotations

from collections.abc import Callable

from .backend import get_backend
from .base import Prover
from .pool import PoolConfig, ProverPool


def prover_factory(backend: str, **options: object) -> Callable[..., Prover]:
    """``factory(header) -> started prover``; ``options`` go to the backend's config dataclass
    (:meth:`~proofrl.provers.backend.Backend.prover_factory`)."""
    return get_backend(backend).prover_factory(**options)


def make_pool(backend: str = "coq", *, pool: PoolConfig | None = None, **options: object) -> ProverPool:
    """The only way to build a pool: ``backend``'s prover factory with ``options``, run by ``pool``'s settings."""
    return ProverPool(prover_factory(backend, **options), pool or PoolConfig())
