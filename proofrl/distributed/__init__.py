"""proofrl's own workers on Ray (the ``distributed`` extra): shared verification, proof-state sessions, search.

* :mod:`.verification` — one named verification actor per node wrapping a :class:`~proofrl.provers.pool.ProverPool`
  (header affinity kept for every caller on the node); ``averify_on_ray`` / ``verify_on_ray``.
* :mod:`.sessions` — a proof-state session actor: states stay in its process, callers hold ids.
* :mod:`.search` — ``proofrl search --ray ADDRESS``: theorems spread over search workers.

Ray is imported only when one of these runs, so the rest of proofrl works without it.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from ..errors import ConfigError

INSTALL = 'pip install -e ".[distributed]"'
NAMESPACE = "proofrl"
"""Ray namespace of proofrl's named actors: every job (driver) finds the same ones by name."""


def require_ray() -> Any:
    """The ``ray`` module, or a one-line :class:`ConfigError` naming the install command."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"Ray is not installed here: {INSTALL}") from None
    return ray


def connect(address: str | None = None) -> Any:
    """Join a Ray cluster (``local``: start one in this process; ``auto``: the one started on this machine by
    ``ray start``; ``host:port``: a head node) unless this process is already connected; returns ``ray``."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    kwargs: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": True}
    if address in (None, "", "local"):
        kwargs["include_dashboard"] = False
        # workers started here import what this process imports from its source tree (tests, editable installs)
        path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p)
        kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
    else:
        if address != "auto":
            _require_answer(address)
        kwargs["address"] = address
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ConfigError(f"--ray {address}: cannot join the Ray cluster: {' '.join(str(e).split())[:300]}") from None
    return ray


ANSWER_SECONDS = 5.0
"""how long a head node's port gets to accept a connection before ``--ray host:port`` gives up"""


def _require_answer(address: str) -> None:
    """A one-line :class:`ConfigError` unless something listens at ``host:port``: ``ray.init`` would otherwise
    retry a dead address for minutes."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray {address}: expected local, auto or host:port (a Ray head node)")
    try:
        socket.create_connection((host, int(port)), timeout=ANSWER_SECONDS).close()
    except OSError as e:
        raise ConfigError(f"--ray {address}: no Ray cluster answers there ({e.strerror or e})") from None
