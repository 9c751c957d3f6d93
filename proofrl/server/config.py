"""What ``proofrl serve`` runs with: a YAML file, overridden by command-line flags, checked when it loads
(pydantic, :mod:`proofrl.schema`: unknown keys, enumerations and ranges; a mistake is one line naming the key).

```yaml
backends: [coq]            # pools to start; the first is the default for requests that name none
sandbox: auto              # auto | bwrap | unshare | off: how prover processes are confined
host: 127.0.0.1
port: 8000
pool: {workers: 2, timeout: 30, max_uses: 500, max_rss_mb: 2048}
server: {max_inflight: 256, max_batch: 1024, max_body_bytes: 8388608, max_code_chars: 524288, max_timeout: 300,
         retry_after: 1}
prover: {memory_mb: 4096}  # per-process options of the backend (CoqConfig / LeanConfig fields)
```
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, create_model, model_validator

from ..errors import ConfigError
from ..provers.backend import backend_names, get_backend
from ..provers.pool import PoolConfig
from ..provers.sandbox import MODES
from ..schema import Config, one_of, validate
from .app import ServerConfig

Positive = Annotated[float, Field(gt=0.0)]


def _prover_options(backend: str) -> type[Config]:
    """A section of the backend's per-process config dataclass (CoqConfig / LeanConfig), every field optional,
    so ``prover:`` is checked against it (names and types) without restating it."""
    cls = get_backend(backend).config_class()
    hints = typing.get_type_hints(cls)
    fields = {f.name: (hints[f.name] | None, None) for f in dataclasses.fields(cls)}
    return create_model(f"{cls.__name__}Options", __base__=Config, **fields)  # type: ignore[call-overload]


class ServeConfig(Config):
    backends: list[Annotated[str, one_of(backend_names)]] = Field(default_factory=lambda: ["coq"], min_length=1)
    sandbox: Literal[MODES] = "auto"  # type: ignore[valid-type]
    """how prover processes are confined (:mod:`proofrl.provers.sandbox`): auto, bwrap, unshare or off"""
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8000
    pool: PoolConfig = Field(default_factory=PoolConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    prover: dict[str, Any] = Field(default_factory=dict)
    """options of the default backend's config (CoqConfig / LeanConfig fields)"""

    @model_validator(mode="after")
    def _prover_fields(self) -> ServeConfig:
        validate(_prover_options(self.backends[0]), self.prover, "prover")
        return self


def load_serve_config(path: Path | None = None, **overrides: Any) -> ServeConfig:
    """Read ``path`` (if any), then apply ``overrides`` that are not None: ``backend``, ``host``, ``port``,
    ``workers``, ``timeout``, ``api_key``, ``sandbox``; the result is checked as a whole."""
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not YAML: {' '.join(str(e).split())}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
    raw = dict(raw)
    o = {k: v for k, v in overrides.items() if v is not None}
    if "backend" in o:
        backends = raw.get("backends", ["coq"])
        backends = backends if isinstance(backends, list) else [backends]
        raw["backends"] = [o["backend"]] + [b for b in backends if b != o["backend"]]
    for key in ("host", "port", "sandbox"):
        if key in o:
            raw[key] = o[key]
    for section, key, value in (
        ("pool", "workers", o.get("workers")),
        ("pool", "timeout", o.get("timeout")),
        ("server", "api_key", o.get("api_key")),
    ):
        if value is not None:
            part = raw.get(section) or {}
            raw[section] = {**part, key: value} if isinstance(part, dict) else part
    cfg = validate(ServeConfig, raw)
    cfg.server.backend = cfg.backends[0]
    return cfg
