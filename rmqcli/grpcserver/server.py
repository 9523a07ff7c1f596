"""The listener: ``Server`` binds, accepts HTTP/2 connections (``connection.Connection``), stops.

TLS is the caller's ``ssl.SSLContext`` (ALPN "h2", RFC 9113 §3.2); ``server_ssl_context`` builds
one from a certificate chain and key. The port is not shared (no SO_REUSEPORT), so a port in use
is an ``OSError`` from ``start``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping

from formats.http2 import ErrorCode
from rmqcli.grpcserver.calls import MethodHandler, failure_log
from rmqcli.grpcserver.connection import Connection

DEFAULT_MAX_RECEIVE = 4 * 1024 * 1024  # grpc's default max_receive_message_length
INITIAL_WINDOW = 4 * 1024 * 1024  # the SETTINGS_INITIAL_WINDOW_SIZE we advertise
MAX_HELD = 256 * 1024 * 1024
MAX_UNSENT = 64 * 1024 * 1024
PREFACE_TIMEOUT = 120.0
STOP_POLL = 0.01


def server_ssl_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    """A TLS server context for HTTP/2: the chain and key loaded, ALPN "h2" (RFC 9113 §3.2)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    context.set_alpn_protocols(["h2"])
    return context


class Server:
    """A gRPC server for ``handlers`` (``"/package.Service/Method"`` -> ``MethodHandler``)."""

    def __init__(
        self,
        handlers: Mapping[str, MethodHandler],
        max_receive_message_length: int = DEFAULT_MAX_RECEIVE,
        *,
        preface_timeout: float = PREFACE_TIMEOUT,
        max_unsent: int = MAX_UNSENT,
        max_held: int = MAX_HELD,
        initial_window: int = INITIAL_WINDOW,
    ):
        self.handlers = dict(handlers)
        self.max_receive_message_length = max_receive_message_length
        self.preface_timeout = preface_timeout
        self.max_unsent = max_unsent
        self.max_held = max_held
        self.initial_window = initial_window
        self.connections: set[Connection] = set()
        self.failures = failure_log()
        self.stopping = False  # stop() began: connections accepted now are closed at once
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by start
        self._listener: asyncio.AbstractServer | None = None

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> int:
        """Listen on ``host:port`` (0: any free port); returns the port bound. OSError propagates.
        A wildcard host ("") binds every family, each to its own free port when ``port`` is 0."""
        self.loop = asyncio.get_running_loop()
        self._listener = await self.loop.create_server(
            lambda: Connection(self), host or None, port, ssl=ssl_context, reuse_port=False
        )
        return self._listener.sockets[0].getsockname()[1]

    def port(self) -> int | None:
        return None if self._listener is None else self._listener.sockets[0].getsockname()[1]

    async def stop(self, grace: float | None = None) -> None:
        """Stop accepting; every connection gets GOAWAY; running calls have ``grace`` seconds,
        then are cancelled (RST_STREAM CANCEL) and the connections closed."""
        self.stopping = True
        if self._listener is not None:
            self._listener.close()
        for connection in list(self.connections):
            connection.goaway(ErrorCode.NO_ERROR)
            if not connection.streams:
                connection.close()
        deadline = self.loop.time() + (grace or 0.0)
        while self.loop.time() < deadline and any(c.streams for c in self.connections):
            await asyncio.sleep(STOP_POLL)
        for connection in list(self.connections):
            connection.reset_all(ErrorCode.CANCEL)
            connection.close()
        await asyncio.sleep(0)  # the cancelled behaviours run their cleanup
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None

    def calls(self) -> int:
        """Calls open on every connection."""
        return sum(len(c.streams) for c in self.connections)

    def __repr__(self) -> str:
        return f"Server({len(self.handlers)} methods, {len(self.connections)} connections)"
