"""What ``proofrl serve`` runs with: a YAML file, overridden by command-line flags.

```yaml
backends: [coq]            # pools to start; the first is the default for requests that name none
sandbox: auto              # auto | bwrap | unshare | off: how prover processes are confined
host: 127.0.0.1
port: 8000
pool: {workers: 2, timeout: 30, max_uses: 500, max_rss_mb: 2048}
server: {max_inflight: 256, max_batch: 1024, max_body_bytes: 8388608, max_timeout: 300, retry_after: 1}
prover: {memory_mb: 4096}  # per-process options of the backend (CoqConfig / LeanConfig fields)
```
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..provers.factory import BACKENDS
from ..provers.pool import PoolConfig
from ..provers.sandbox import MODES
from .app import ServerConfig


@dataclass
class ServeConfig:
    backends: list[str] = field(default_factory=lambda: ["coq"])
    sandbox: str = "auto"
    """how prover processes are confined (:mod:`proofrl.provers.sandbox`): auto, bwrap, unshare or off"""
    host: str = "127.0.0.1"
    port: int = 8000
    pool: PoolConfig = field(default_factory=PoolConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    prover: dict[str, Any] = field(default_factory=dict)


def _build(cls: type, values: dict[str, Any], where: str) -> Any:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown keys in {where}: {unknown}; known: {sorted(known)}")
    return cls(**values)


def load_serve_config(path: Path | None = None, **overrides: Any) -> ServeConfig:
    """Read ``path`` (if any), then apply ``overrides`` that are not None: ``backend``, ``host``, ``port``,
    ``workers``, ``timeout``, ``api_key``, ``sandbox``."""
    raw: dict[str, Any] = {}
    if path is not None:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
    extra = sorted(set(raw) - {"backends", "sandbox", "host", "port", "pool", "server", "prover"})
    if extra:
        raise ConfigError(f"{path}: unknown keys {extra}")
    cfg = ServeConfig(
        backends=list(raw.get("backends", ["coq"])),
        sandbox=str(raw.get("sandbox", "auto")),
        host=raw.get("host", "127.0.0.1"),
        port=int(raw.get("port", 8000)),
        pool=_build(PoolConfig, raw.get("pool") or {}, "pool"),
        server=_build(ServerConfig, raw.get("server") or {}, "server"),
        prover=dict(raw.get("prover") or {}),
    )
    o = {k: v for k, v in overrides.items() if v is not None}
    if "backend" in o:
        cfg.backends = [o["backend"]] + [b for b in cfg.backends if b != o["backend"]]
    cfg.host = o.get("host", cfg.host)
    cfg.port = o.get("port", cfg.port)
    cfg.pool.workers = o.get("workers", cfg.pool.workers)
    cfg.pool.timeout = o.get("timeout", cfg.pool.timeout)
    cfg.server.api_key = o.get("api_key", cfg.server.api_key)
    cfg.sandbox = o.get("sandbox", cfg.sandbox)
    if cfg.sandbox not in MODES:
        raise ConfigError(f"sandbox must be one of {list(MODES)}, got {cfg.sandbox!r}")
    bad = [b for b in cfg.backends if b not in BACKENDS]
    if bad or not cfg.backends:
        raise ConfigError(f"backends must be among {list(BACKENDS)}, got {cfg.backends}")
    cfg.server.backend = cfg.backends[0]
    return cfg
