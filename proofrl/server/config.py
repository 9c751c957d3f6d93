"""What ``proofrl serve`` runs with: a YAML file, overridden by command-line flags, checked when it loads
(pydantic, :mod:`proofrl.schema`: unknown keys, enumerations and ranges; a mistake is one line naming the key).

```yaml
backends: [coq]            # pools to start; the first is the default for requests that name none
sandbox: auto              # auto | bwrap | unshare | off: how prover processes are confined
host: 127.0.0.1
port: 8000
api_key: null              # requests must carry it (Authorization: Bearer …) when set
max_inflight: 256          # the HTTP limits, top-level keys like the rest
max_batch: 1024
pool: {workers: 2, timeout: 30, max_uses: 500, max_rss_mb: 2048}
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

Positive = Annotated[float, Field(gt=0.0)]
PositiveInt = Annotated[int, Field(ge=1)]


def _prover_options(backend: str) -> type[Config]:
    """A section of the backend's per-process config dataclass (CoqConfig / LeanConfig), every field optional,
    so ``prover:`` is checked against it (names and types) without restating it."""
    cls = get_backend(backend).config_class()
    hints = typing.get_type_hints(cls)
    fields = {f.name: (hints[f.name] | None, None) for f in dataclasses.fields(cls)}
    return create_model(f"{cls.__name__}Options", __base__=Config, **fields)  # type: ignore[call-overload]


class ServeConfig(Config):
    """Everything ``proofrl serve`` runs with: the pools, the address, and the limits the app and uvicorn apply
    (:func:`~proofrl.server.app.create_app`, :func:`~proofrl.server.run.make_server`)."""

    backends: list[Annotated[str, one_of(backend_names)]] = Field(default_factory=lambda: ["coq"], min_length=1)
    """pools to start; the first is the backend of requests that name none"""
    sandbox: Literal[MODES] = "auto"  # type: ignore[valid-type]
    """how prover processes are confined (:mod:`proofrl.provers.sandbox`): auto, bwrap, unshare or off"""
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8000
    api_key: str | None = None
    """when set, every request but ``/health`` must carry it (``Authorization: Bearer KEY``)"""
    pool: PoolConfig = Field(default_factory=PoolConfig)
    prover: dict[str, Any] = Field(default_factory=dict)
    """options of the default backend's config (CoqConfig / LeanConfig fields)"""

    # -- limits --
    max_inflight: PositiveInt = 256
    """items admitted and not yet judged, across all requests; beyond it: 429 (a batch larger than this alone
    could never be admitted: 413)"""
    max_batch: PositiveInt = 1024
    """items in one request; beyond it (or beyond ``max_inflight``): 413"""
    max_body_bytes: PositiveInt = 8 * 2**20
    max_code_chars: PositiveInt = 2**19
    """characters in one item's code; a longer one is ``error: code too long`` at once, never cut into sentences
    (cutting is pure Python, about a second per MiB; the Coq prover refuses proofs over 256 KiB anyway)"""
    max_timeout: Positive = 300.0
    """cap on a request's ``timeout`` (seconds per item); ``timeout: 0`` means the pool's default"""
    retry_after: Annotated[int, Field(ge=0)] = 1
    """seconds suggested to a client turned away with 429"""
    max_connections: PositiveInt = 512
    """open connections at once; one more is answered 503 and closed when accepted"""
    keep_alive_seconds: Positive = 5.0
    """an idle kept-alive connection is closed after this long"""
    request_read_seconds: Positive = 30.0
    """a request's head must arrive within this long of the connection opening (or of the previous response),
    its body within what is left: past it, 408 and the connection closed"""
    drain_seconds: Annotated[float, Field(ge=0.0)] = 30.0
    """on SIGTERM/SIGINT, requests in flight get this long to finish; then the pools close and what is left
    gets ``error: server shutting down`` (still a 200), and the server exits"""

    @property
    def backend(self) -> str:
        """The backend of requests that name none (the first of ``backends``)."""
        return self.backends[0]

    @model_validator(mode="before")
    @classmethod
    def _server_section_moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("server"), dict):
            keys = ", ".join(sorted(data["server"])) or "its keys"
            raise ConfigError(f"server: no longer a section, its keys are one level up ({keys})")
        return data

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
    for key in ("host", "port", "sandbox", "api_key"):
        if key in o:
            raw[key] = o[key]
    for section, key, value in (
        ("pool", "workers", o.get("workers")),
        ("pool", "timeout", o.get("timeout")),
    ):
        if value is not None:
            part = raw.get(section) or {}
            raw[section] = {**part, key: value} if isinstance(part, dict) else part
    return validate(ServeConfig, raw)
