"""Running the app the way ``proofrl serve`` does: uvicorn with bounds on connections and on the time a client
may take, and a bounded drain at shutdown.

* **Connections.** At most ``max_connections`` open at once. When one more is accepted, the connection that
  has waited longest for its next request (idle, kept alive, or still sending its head) is closed to make room;
  only when every connection has a request in progress is the new one answered ``503`` and closed (uvicorn's
  own ``limit_concurrency`` only answers requests, leaving idle sockets open). So idle sockets, however many,
  never lock clients out.
* **Time to send a request.** The head (request line and headers) must arrive within
  ``request_read_seconds`` of the connection opening, or of the previous response on a kept-alive
  connection; the body within what is left of it (:class:`~proofrl.server.app.BodyLimit`, since uvicorn
  has no body timeout). Past it: ``408`` and the connection closed; a connection that sent nothing is just
  closed. An idle kept-alive connection is closed after ``keep_alive_seconds``.
* **Shutdown.** SIGTERM/SIGINT: uvicorn stops accepting and waits for requests in flight. After
  ``drain_seconds`` the pools are closed: what is still queued or running gets the verdict
  ``error: server shutting down``, so every request is still answered (200), and the server exits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .app import READ_DEADLINE
from .config import ServeConfig

log = logging.getLogger(__name__)

DRAIN_GRACE = 5.0
"""seconds after ``drain_seconds`` for the answers of closed pools to go out before uvicorn cancels"""


def _raw_response(status: int, reason: str, detail: str) -> bytes:
    body = json.dumps({"detail": detail}, separators=(",", ":")).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection cap at accept time and a deadline on receiving a request head.
    ``limits`` is set on a subclass per server (:func:`make_server`)."""

    limits: ServeConfig

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._read_timer: asyncio.TimerHandle | None = None
        self._read_deadline = 0.0
        self._partial = False
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections and not self._close_longest_idle():
            self.logger.warning(
                "refused a connection: %d open, limit %d", len(self.connections) - 1, self.limits.max_connections
            )
            transport.write(
                _raw_response(503, "Service Unavailable", f"too many connections (limit {self.limits.max_connections})")
            )
            transport.close()
            return
        self._arm()

    def _close_longest_idle(self) -> bool:
        """Close the connection that has waited longest for a request (its read clock armed earliest), to let
        this one in; False when every other connection has a request in progress."""
        idle = [
            c
            for c in self.connections
            if isinstance(c, BoundedH11Protocol) and c is not self and c._read_timer is not None
        ]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._read_deadline)
        oldest._disarm()
        oldest.transport.close()
        return True

    def _arm(self) -> None:
        """Start the clock for the next request (head and body)."""
        self._disarm()
        seconds = self.limits.request_read_seconds
        self._read_deadline = time.monotonic() + seconds
        self._partial = False
        self._read_timer = self.loop.call_later(seconds, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def data_received(self, data: bytes) -> None:
        if self._read_timer is not None:
            self._partial = True
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle and self.cycle is not None:  # a request's head arrived; the app reads its body
            self._disarm()
            self.scope[READ_DEADLINE] = self._read_deadline  # type: ignore[literal-required]

    def on_response_complete(self) -> None:
        self._arm()  # before uvicorn starts the next pipelined request, whose head disarms it again
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return
        if self._partial:  # part of a request came: say why it is cut off
            detail = f"request not received within {self.limits.request_read_seconds:g} s"
            self.transport.write(_raw_response(408, "Request Timeout", detail))
        self.transport.close()


class _DrainingServer(uvicorn.Server):
    """At the first SIGTERM/SIGINT, start the drain clock: ``on_drain_deadline`` runs ``drain_seconds`` later
    (uvicorn itself waits ``drain_seconds + DRAIN_GRACE`` before cancelling what is left)."""

    def __init__(self, config: uvicorn.Config, drain_seconds: float, on_drain_deadline: Any) -> None:
        super().__init__(config)
        self._drain_seconds, self._on_drain_deadline = drain_seconds, on_drain_deadline
        self._drain_timer: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self._drain_timer is None:
            self._drain_timer = threading.Timer(self._drain_seconds, self._drain_deadline)
            self._drain_timer.daemon = True
            self._drain_timer.start()
        super().handle_exit(sig, frame)

    def _drain_deadline(self) -> None:
        log.warning("drain: requests still in flight after %g s; closing the pools", self._drain_seconds)
        self._on_drain_deadline()


def make_server(app: Any, config: ServeConfig, *, host: str, port: int, log_level: str = "warning") -> uvicorn.Server:
    """A uvicorn server for ``app`` (from :func:`~proofrl.server.app.create_app`) with ``config``'s limits."""
    protocol = type("BoundedH11Protocol", (BoundedH11Protocol,), {"limits": config})
    uv = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol,
        limit_concurrency=config.max_connections + 1,  # uvicorn counts the connection asking; ours are capped at accept
        timeout_keep_alive=config.keep_alive_seconds,  # type: ignore[arg-type]
        timeout_graceful_shutdown=config.drain_seconds + DRAIN_GRACE,  # type: ignore[arg-type]
    )

    def close_pools() -> None:
        service = getattr(getattr(app, "state", None), "service", None)
        for pool in service.pools.values() if service is not None else ():
            pool.close(reason="server shutting down")

    return _DrainingServer(uv, config.drain_seconds, close_pools)


def run_server(app: Any, config: ServeConfig, *, host: str, port: int) -> None:
    """Serve until SIGTERM/SIGINT, then drain (see the module's docstring)."""
    make_server(app, config, host=host, port=port).run()
