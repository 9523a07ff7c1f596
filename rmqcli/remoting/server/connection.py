"""Server side of the remoting protocol: listeners, connections, dispatch (protocol.md A.1, A.6, A.7).

A ``Connection`` is an ``asyncio.Protocol``: bytes are cut into frames by ``FrameDecoder`` (16 MiB
limit, as ``NettyDecoder``), each request goes to the server's dispatch function, and its answer
(a ``RemotingCommand``, ``None`` for nothing, or an awaitable of either, e.g. a held pull) is written
back with the response bit and the request's opaque. Oneway requests are never answered. A frame
that does not decode closes the connection (``NettyDecoder`` does the same); a handler that raises
answers ``SYSTEM_ERROR`` (``NettyRemotingAbstract.processRequestCommand``).

Back-pressure: the write buffer has a high-water mark; above it the connection stops handling the
frames it has and stops reading from its socket, so a client that does not read its answers cannot
make the server buffer without limit (one answer larger than the hard cap drops it). Connections
idle for ``idle_seconds`` are closed (``serverChannelMaxIdleTimeSeconds``).

Limits shared by the servers of one process (``ServerLimits``, rmq's own; RocketMQ has none):
the bytes held in partly received frames (256 MiB) and the open connections (10,000). A connection
whose partial frame would take the total over its budget is dropped: pausing it would hold its bytes
and, with every holder paused, no frame could complete; dropped, its memory is freed at once and a
RocketMQ client reconnects and resends. A connection beyond the cap is closed as it is accepted.
Each limit logs one line when it is hit, then at most one a minute. Lines about a client's bad
requests (undecodable frames, failing handlers) are limited to ``BAD_REQUEST_LINES`` a minute per
connection and ``SERVER_BAD_REQUEST_LINES`` a minute in all; the last one admitted says so.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, cast

from formats.remoting import FLAG_ONEWAY, FLAG_RESPONSE, MAX_FRAME_LENGTH
from rmqcli.remoting.codec import FrameDecoder, ProtocolError, RemotingCommand, decode, encode
from rmqcli.remoting.codes import ResponseCode
from rmqcli.remoting.headers import HeaderError
from rmqcli.remoting.json_body import BodyError

log = logging.getLogger(__name__)

Reply = RemotingCommand | None
Dispatch = Callable[[RemotingCommand, "Connection"], "Reply | Awaitable[Reply]"]

WRITE_HIGH_WATER = 4 * 1024 * 1024
WRITE_HARD_CAP = 64 * 1024 * 1024
IDLE_SECONDS = 120.0
MAX_INFLIGHT = 4096  # requests being answered asynchronously (held pulls) per connection
MAX_PENDING_FRAME_BYTES = 256 * 1024 * 1024  # all connections' partly received frames
MAX_CONNECTIONS = 10_000
LOG_WINDOW = 60.0  # seconds
BAD_REQUEST_LINES = 10  # per connection and window
SERVER_BAD_REQUEST_LINES = 100  # all connections, per window

_opaques = itertools.count(1)


def next_opaque() -> int:
    """Opaque of a request the server sends to a client (B.5): its own counter, sign bit clear."""
    return next(_opaques) & 0x7FFFFFFF


def not_supported(request: RemotingCommand) -> RemotingCommand:
    """``REQUEST_CODE_NOT_SUPPORTED`` with Java's remark (leading space included, A.6)."""
    return request.response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
    )


class LogLimiter:
    """At most ``lines`` log lines per ``window`` seconds; the lines held back are counted."""

    __slots__ = ("lines", "window", "what", "_start", "_used", "held")

    def __init__(self, lines: int, what: str, window: float = LOG_WINDOW):
        self.lines = lines
        self.window = window
        self.what = what  # "about this client": names the lines held back
        self._start = -window
        self._used = 0
        self.held = 0

    def admit(self) -> str | None:
        """``None`` to hold a line back; else a suffix for it: empty, how many lines were held
        back before it, or, on the window's last line, that the next ones will be."""
        now = time.monotonic()
        suffix = ""
        if now - self._start >= self.window:
            if self.held:
                suffix = f" ({self.held} more lines {self.what} were held back)"
            self._start, self._used, self.held = now, 0, 0
        if self._used >= self.lines:
            self.held += 1
            return None
        self._used += 1
        if self._used == self.lines:
            suffix += f"; further lines {self.what} held back for {self.window:.0f} s"
        return suffix


class ServerLimits:
    """The budget of partly received frames and the connection cap, shared by a process's servers."""

    def __init__(
        self,
        max_pending_bytes: int = MAX_PENDING_FRAME_BYTES,
        max_connections: int = MAX_CONNECTIONS,
        bad_request_lines: int = SERVER_BAD_REQUEST_LINES,
    ):
        self.max_pending_bytes = max_pending_bytes
        self.max_connections = max_connections
        self.pending_bytes = 0  # held in the decoders of all connections
        self.connections = 0  # open, counted ones
        self.budget_log = LogLimiter(1, "about the budget of partly received frames")
        self.cap_log = LogLimiter(1, "about refused connections")
        self.bad_requests = LogLimiter(bad_request_lines, "about bad requests")


class Connection(asyncio.Protocol):
    """One client socket of a ``Server``."""

    def __init__(self, server: Server):
        self.server = server
        self.decoder = FrameDecoder(server.max_frame_length)
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("0.0.0.0", 0)
        self.closed = False
        self.last_active = time.monotonic()
        self.tasks: set[asyncio.Task[Any] | LaterAnswer] = set()  # requests answered asynchronously
        self.attributes: dict[str, Any] = {}  # per-connection state of the processors (client ids)
        self.backlog: deque[bytes] = deque()  # frames received, not yet handled (back-pressure)
        self.paused = False
        self.held = 0  # bytes of a partial frame counted in the server's budget
        self.counted = False  # counted in the server's open connections
        self.log_limit = LogLimiter(BAD_REQUEST_LINES, "about this client")

    # --- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        transport = self.transport
        transport.set_write_buffer_limits(high=self.server.write_high_water)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        limits = self.server.limits
        if limits.connections >= limits.max_connections:
            self._drop(
                limits.cap_log,
                "%s: refused a connection from %s: %d connections are open, the limit "
                "(--max-connections, rmqMaxConnections)%s",
                limits.connections,
            )
            return
        limits.connections += 1
        self.counted = True
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        decoder = self.decoder
        try:
            frames = decoder.feed(data)
        except ProtocolError as exc:
            self.log_bad(logging.WARNING, "%s; closing", exc)
            self.abort()
            return
        if decoder.pending != self.held and not self._hold_pending():
            return
        self.backlog.extend(frames)
        self._drain()

    def _hold_pending(self) -> bool:
        """Count this connection's partial frame in the server's budget; False when that takes
        the budget over its limit and the connection was dropped for it."""
        limits = self.server.limits
        pending = self.decoder.pending
        grew = pending > self.held
        limits.pending_bytes += pending - self.held
        self.held = pending
        if not grew or limits.pending_bytes <= limits.max_pending_bytes:
            return True
        self._drop(
            limits.budget_log,
            "%s: dropped %s: partly received frames would hold %d bytes, more than the budget of "
            "%d (--max-buffered-bytes, rmqMaxPendingFrameBytes)%s",
            limits.pending_bytes,
            limits.max_pending_bytes,
        )
        return False

    def _drop(self, log_limit: LogLimiter, message: str, *args: object) -> None:
        """Abort the connection over a server limit, with a warning when ``log_limit`` admits one:
        ``message`` takes the server's name, the client's address, ``args`` and the limiter's suffix."""
        suffix = log_limit.admit()
        if suffix is not None:
            log.warning(message, self.server.name, self.address, *args, suffix)
        self.abort()

    def _release_pending(self) -> None:
        self.decoder.clear()
        self.server.limits.pending_bytes -= self.held
        self.held = 0

    def log_bad(self, level: int, message: str, *args: Any, exc_info: Any = None) -> None:
        """A line about a bad request of this client, within the per-connection and the server's
        rates (see the module's docstring); ``message`` is prefixed with the client's address."""
        suffix = self.log_limit.admit()
        if suffix is None:
            return
        shared = self.server.limits.bad_requests.admit()
        if shared is None:
            return
        log.log(level, "%s: " + message + "%s", self.address, *args, suffix + shared, exc_info=exc_info)

    def _drain(self) -> None:
        """Handle the frames received, stopping while the write buffer is above its high-water mark.

        The server's ``settle`` runs before each request and once the answers are written: what a
        handler left for after its answer (the reput of a stored message) is done before anything
        else can look at the store, while the client already reads its answer. The server's
        ``frame_handler`` sees each frame first and may answer it itself (the broker's send lane:
        ``b""`` for a oneway request); ``None`` sends the frame on to ``decode`` and ``dispatch``."""
        settle = self.server.settle
        lane = self.server.frame_handler
        try:
            while self.backlog and not self.paused and not self.closed:
                frame = self.backlog.popleft()
                if settle is not None:
                    settle()
                if lane is not None:
                    answer = lane(frame, self)
                    if answer is not None:
                        if answer:
                            self.write_frame(answer)
                        continue
                try:
                    command = decode(frame)
                except ProtocolError as exc:
                    self.log_bad(logging.WARNING, "undecodable frame (%s); closing", exc)
                    self.abort()
                    return
                if command.flag & FLAG_RESPONSE:
                    self.server.on_response(command, self)
                    continue
                self._handle(command)
        except Exception as exc:  # a bug met by a frame: one line for it, not asyncio's fatal error
            trace = _traceback(exc)
            self.log_bad(logging.ERROR, "a frame failed (%s); closing", _summary(exc), exc_info=trace)
            self.abort()
        finally:
            if settle is not None:
                settle()

    def pause_writing(self) -> None:
        self.paused = True
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()
            self._drain()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.backlog.clear()
        self._release_pending()
        if self.counted:
            self.counted = False
            self.server.limits.connections -= 1
        self.server.connections.discard(self)
        for task in list(self.tasks):
            task.cancel()
        for callback in self.server.close_callbacks:
            try:
                callback(self)
            except Exception:  # a processor's clean-up must not break the others
                log.exception("close callback failed for %s", self.address)

    # --- requests -----------------------------------------------------------------------------
    def _handle(self, request: RemotingCommand) -> None:
        try:
            reply = self.server.dispatch(request, self)
        except Exception as exc:
            self.reply(request, self._error_response(request, exc))
            return
        if reply is None or type(reply) is RemotingCommand:  # the usual, synchronous answer
            self.reply(request, reply)
        elif inspect.isawaitable(reply):
            if len(self.tasks) >= MAX_INFLIGHT:
                close_awaitable(reply)
                self.reply(
                    request,
                    request.response(
                        ResponseCode.SYSTEM_BUSY, "[REJECTREQUEST]system busy, start flow control for a while"
                    ),
                )
                return
            task = asyncio.get_running_loop().create_task(self._finish(request, reply))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            task.add_done_callback(lambda done, pending=reply: done.cancelled() and close_awaitable(pending))
        else:
            self.reply(request, reply)

    def answer_later(self) -> LaterAnswer | None:
        """A place for an answer frame written once it is known (the send lane's on a SYNC_MASTER),
        counted with the requests answered asynchronously; ``None`` when ``MAX_INFLIGHT`` are."""
        if len(self.tasks) >= MAX_INFLIGHT:
            return None
        later = LaterAnswer(self)
        self.tasks.add(later)
        return later

    async def _finish(self, request: RemotingCommand, pending: Awaitable[Reply]) -> None:
        try:
            reply = await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reply = self._error_response(request, exc)
        self.reply(request, reply)

    def _error_response(self, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        """``SYSTEM_ERROR`` with the exception's summary (``RemotingHelper.exceptionSimpleDesc``);
        an unexpected exception is logged, within this client's rate."""
        if isinstance(exc, HeaderError | BodyError):
            remark = str(exc)
        else:
            self.log_bad(
                logging.ERROR,
                "processing %s failed (%s)",
                request.describe(),
                _summary(exc),
                exc_info=_traceback(exc),
            )
            remark = f"{type(exc).__name__}: {exc}"
        return request.response(ResponseCode.SYSTEM_ERROR, remark)

    def reply(self, request: RemotingCommand, response: Reply) -> None:
        """Write ``response`` unless the request was oneway (A.6) or there is nothing to say."""
        if response is None or request.flag & FLAG_ONEWAY:
            return
        self.write(response)

    def write(self, command: RemotingCommand) -> bool:
        """Encode and write one command; False when the connection is gone or was dropped."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return False
        try:
            frame = encode(command, max_frame_length=self.server.max_frame_length)
        except ProtocolError as exc:
            log.error("%s: cannot encode %s: %s", self.address, command.describe(), exc)
            frame = encode(
                RemotingCommand(
                    code=ResponseCode.SYSTEM_ERROR,
                    opaque=command.opaque,
                    flag=command.flag,
                    remark=f"response too large: {exc}",
                )
            )
        return self.write_frame(frame)

    def write_frame(self, frame: bytes) -> bool:
        """Write one encoded frame; False when the connection is gone or was dropped."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        transport.write(frame)
        self.last_active = time.monotonic()
        if transport.get_write_buffer_size() > self.server.write_hard_cap:
            log.warning("%s: client does not read its answers; dropping it", self.address)
            self.abort()
            return False
        return True

    def send_oneway(self, code: int, header: dict[str, Any] | None = None, body: bytes = b"") -> bool:
        """A oneway request to the client (B.5, e.g. NOTIFY_CONSUMER_IDS_CHANGED)."""
        return self.write(RemotingCommand.request(code, header, body, oneway=True, opaque=next_opaque()))

    # --- state --------------------------------------------------------------------------------
    @property
    def address(self) -> str:
        """``ip:port`` of the peer (``RemotingHelper.parseChannelRemoteAddr``)."""
        host, port = self.peer
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def abort(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.abort()
        self.closed = True
        self.backlog.clear()
        self._release_pending()  # at once: connection_lost comes a loop turn later


def close_awaitable(value: Any) -> None:
    if inspect.iscoroutine(value):
        value.close()


def _summary(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _traceback(exc: BaseException) -> BaseException | None:
    """The traceback a log line carries for ``exc``: none for a ``RecursionError`` (a thousand
    frames, one line each)."""
    return None if isinstance(exc, RecursionError) else exc


class LaterAnswer:
    """An answer of ``Connection.answer_later``: ``write`` it once (a callback, so the frame goes
    out in the same turn of the loop as the event that decided it); dropped with its connection."""

    __slots__ = ("conn", "done")

    def __init__(self, conn: Connection):
        self.conn: Connection = conn
        self.done = False

    def write(self, frame: bytes) -> None:
        if self.done:
            return
        self.done = True
        self.conn.tasks.discard(self)
        self.conn.write_frame(frame)

    def cancel(self) -> None:
        self.done = True


class Server:
    """One listening socket and its connections, answering requests with ``dispatch``."""

    def __init__(
        self,
        name: str,
        dispatch: Dispatch,
        *,
        max_frame_length: int = MAX_FRAME_LENGTH,
        write_high_water: int = WRITE_HIGH_WATER,
        write_hard_cap: int = WRITE_HARD_CAP,
        idle_seconds: float = IDLE_SECONDS,
        limits: ServerLimits | None = None,
    ):
        """``limits``: shared with the process's other servers (``rmq serve`` passes one); by
        default, the defaults for this server alone."""
        self.name = name
        self.limits = limits if limits is not None else ServerLimits()
        self.dispatch = dispatch
        self.max_frame_length = max_frame_length
        self.write_high_water = write_high_water
        self.write_hard_cap = write_hard_cap
        self.idle_seconds = idle_seconds
        self.connections: set[Connection] = set()
        self.close_callbacks: list[Callable[[Connection], None]] = []
        self.response_callbacks: list[Callable[[RemotingCommand, Connection], None]] = []
        self.settle: Callable[[], None] | None = None  # deferred work of the handlers (see _drain)
        # answers a frame before it is decoded, or returns None to leave it to dispatch (see _drain)
        self.frame_handler: Callable[[bytes, Connection], bytes | None] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._idle_task: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (port 0: any free port); returns the port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: Connection(self), host, port, reuse_address=True)
        self._idle_task = loop.create_task(self._close_idle())
        return int(self._server.sockets[0].getsockname()[1])

    def on_response(self, command: RemotingCommand, connection: Connection) -> None:
        for callback in self.response_callbacks:
            callback(command, connection)

    async def _close_idle(self) -> None:
        while True:
            await asyncio.sleep(min(10.0, self.idle_seconds))
            now = time.monotonic()
            for conn in list(self.connections):
                if now - conn.last_active > self.idle_seconds and not conn.tasks:
                    log.info("%s: idle for %.0f s; closing", conn.address, self.idle_seconds)
                    conn.abort()

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        if self._idle_task is not None:
            self._idle_task.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except TimeoutError:
                pass
