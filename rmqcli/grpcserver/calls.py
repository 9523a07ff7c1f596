"""gRPC call semantics over one HTTP/2 stream (gRPC's PROTOCOL-HTTP2.md), and the servicer context.

A ``Call`` is both the stream's gRPC state (its requests, read from length-prefixed messages, and
its responses) and the context handed to the behaviour, which mimics the part of grpc.aio's
``ServicerContext`` the broker uses: ``invocation_metadata()``, ``peer()``, ``time_remaining()``,
``abort()``, ``write()``, ``cancelled()``, ``done()``. The connection (``connection.py``) owns the
HTTP/2 side: frames, flow control, the windows fields of the call.

Statuses and texts follow grpcio's server where a client could tell: "Method not found!" for an
unknown method, "Unexpected <class 'X'>: text" for an exception, "Deadline Exceeded", "Received
message larger than max (N vs. M)".
"""

from __future__ import annotations

import asyncio
import base64
import enum
import inspect
import logging
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from formats.http2 import MESSAGE_PREFIX_SIZE, MESSAGE_PREFIX_STRUCT
from rmqcli.remoting.server.connection import LogLimiter

log = logging.getLogger(__name__)
FAILURE_LINES = 10  # lines about failed calls per LOG_WINDOW and server; the rest are counted


def failure_log() -> LogLimiter:
    """A server's bound on its lines about failed calls (a client repeating a failing call must
    not fill the log)."""
    return LogLimiter(FAILURE_LINES, "about failed gRPC calls")


class Kind(enum.Enum):
    """Whether requests and responses are single messages or streams."""

    UNARY_UNARY = (False, False)
    UNARY_STREAM = (False, True)
    STREAM_UNARY = (True, False)
    STREAM_STREAM = (True, True)


class StatusCode(enum.IntEnum):
    """gRPC status codes (grpc's ``statuscodes.md``), with grpc's names and numbers."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


def _identity(data: bytes) -> Any:
    return data


@dataclass(slots=True)
class MethodHandler:
    """How one method is served: its ``kind``, its ``behaviour`` and the message codecs.

    A request message over ``request_limit`` bytes is skipped as it arrives, never held: the
    behaviour gets ``too_large(size)`` in its place."""

    kind: Kind
    behaviour: Callable[..., Any]
    request_deserializer: Callable[[bytes], Any] | None = None
    response_serializer: Callable[[Any], bytes] | None = None
    request_limit: int | None = None
    too_large: Callable[[int], Any] | None = None
    generator: bool = field(init=False)  # the behaviour is an async generator function

    def __post_init__(self) -> None:
        self.generator = inspect.isasyncgenfunction(self.behaviour)
        if self.request_deserializer is None:
            self.request_deserializer = _identity
        if self.response_serializer is None:
            self.response_serializer = _identity
        if self.request_limit is not None and self.too_large is None:
            raise ValueError("request_limit needs too_large")


class AbortError(Exception):
    """Raised by ``abort()``: ends the call with its status (grpc.aio's ``AbortError``)."""

    def __init__(self, code: StatusCode, details: str):
        super().__init__(code, details)
        self.code = code
        self.details = details


class _RequestError(Exception):
    """A request that cannot be read: the call ends with this status."""

    def __init__(self, code: StatusCode, details: str):
        super().__init__(code, details)
        self.code = code
        self.details = details


# --- header encoding (RFC 7541 §6.2.2: literal without indexing, no Huffman) ----------------


def hpack_int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    """An HPACK integer with an N-bit prefix (RFC 7541 §5.1); ``first`` carries the pattern bits."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name: bytes, value: bytes) -> bytes:
    """One header field, literal without indexing with a new name (RFC 7541 §6.2.2)."""
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def literal_indexed_name(index: int, value: bytes) -> bytes:
    """Literal without indexing, the name from the static table (RFC 7541 §6.2.2, Appendix A)."""
    return hpack_int(index, 4) + hpack_int(len(value), 7) + value


STATUS_INDEX = 8  # ":status" (RFC 7541 Appendix A; entry 8 is ":status: 200")
CONTENT_TYPE_INDEX = 31
RESPONSE_HEADERS = b"\x88" + literal_indexed_name(CONTENT_TYPE_INDEX, b"application/grpc")
"""``:status: 200`` (static entry 8, indexed) and ``content-type: application/grpc``."""


def _status_field(code: int) -> bytes:
    return literal(b"grpc-status", str(code).encode())


_STATUS_FIELDS = {code: _status_field(code) for code in StatusCode}
TRAILERS_OK = _STATUS_FIELDS[StatusCode.OK]

_UNRESERVED = frozenset(range(0x20, 0x7F)) - {ord("%")}


def percent_encode(details: str) -> bytes:
    """grpc-message: UTF-8, then every byte outside 0x20-0x7E and "%" as %XX (PROTOCOL-HTTP2.md)."""
    raw = details.encode("utf-8", "surrogatepass")
    if all(b in _UNRESERVED for b in raw):
        return raw
    return b"".join(bytes((b,)) if b in _UNRESERVED else b"%%%02X" % b for b in raw)


def status_fields(code: int, details: str) -> bytes:
    """The grpc-status and grpc-message fields of trailers (PROTOCOL-HTTP2.md "Status")."""
    fields = _STATUS_FIELDS.get(code) or _status_field(code)
    if details:
        fields += literal(b"grpc-message", percent_encode(details))
    return fields


def trailers_only(code: int, details: str) -> bytes:
    """A whole answer in one header block: :status 200, content-type and the status."""
    return RESPONSE_HEADERS + status_fields(code, details)


def http_error_fields(http_status: int, code: StatusCode, details: str) -> bytes:
    """A trailers-only answer with another HTTP status (415, 405): also a gRPC status for grpc."""
    return literal_indexed_name(STATUS_INDEX, str(http_status).encode()) + status_fields(code, details)


# --- request headers ------------------------------------------------------------------------

_TIMEOUT_UNITS = {
    ord("H"): 3600.0,
    ord("M"): 60.0,
    ord("S"): 1.0,
    ord("m"): 1e-3,
    ord("u"): 1e-6,
    ord("n"): 1e-9,
}

NOT_PUBLISHED = frozenset(
    b"te content-type grpc-timeout grpc-encoding grpc-accept-encoding grpc-internal-encoding-request "
    b"grpc-message grpc-status grpc-trace-bin grpc-tags-bin grpc-server-stats-bin "
    b"endpoint-load-metrics-bin x-envoy-peer-metadata lb-cost-bin".split()
)
"""Headers grpc's server keeps from the application (its metadata traits with kPublishToApp false);
pseudo-headers are never published either."""


def parse_timeout(value: bytes) -> float | None:
    """grpc-timeout: at most 8 digits and a unit (PROTOCOL-HTTP2.md "Timeout"); None if malformed."""
    if not 2 <= len(value) <= 9 or not value[:-1].isdigit():
        return None
    unit = _TIMEOUT_UNITS.get(value[-1])
    return None if unit is None else int(value[:-1]) * unit


def published_metadata(headers: list[tuple[bytes, bytes]]) -> tuple[tuple[str, str | bytes], ...]:
    """What grpc's server hands the application: user-agent first (grpc publishes its known keys
    before the others), then the custom metadata in order, ``-bin`` values base64-decoded."""
    first: list[tuple[str, str | bytes]] = []
    rest: list[tuple[str, str | bytes]] = []
    for name, value in headers:
        if name[:1] == b":" or name in NOT_PUBLISHED:
            continue
        key = name.decode("latin-1")
        if key.endswith("-bin"):
            rest.append((key, _b64decode(value)))
        elif key == "user-agent":
            first.append((key, value.decode("latin-1")))
        else:
            rest.append((key, value.decode("latin-1")))
    return tuple(first + rest)


def _b64decode(value: bytes) -> bytes:
    """A ``-bin`` value: base64, padded or not (PROTOCOL-HTTP2.md "Custom-Metadata")."""
    value = value.strip()
    try:
        return base64.b64decode(value + b"=" * (-len(value) % 4))
    except ValueError:
        return value


def peer_string(address: Any) -> str:
    """grpc's peer form: ``ipv4:1.2.3.4:5`` or ``ipv6:[::1]:5`` (or ``unix:path``)."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
    return f"unix:{address}" if address else "unknown"


# --- decompression (PROTOCOL-HTTP2.md "Message-Encoding") -------------------------------------

_WBITS = {"gzip": 31, "deflate": 15}
SUPPORTED_ENCODINGS = ("identity", "gzip", "deflate")
ACCEPT_ENCODING = literal(b"grpc-accept-encoding", ",".join(SUPPORTED_ENCODINGS).encode())


def too_large_text(size: int | str, limit: int) -> str:
    """grpc's text for a message over max_receive_message_length."""
    return f"Received message larger than max ({size} vs. {limit})"


def decompress(encoding: str, data: bytes, limit: int) -> bytes:
    """``data`` inflated, at most ``limit`` bytes (else RESOURCE_EXHAUSTED, never more held)."""
    inflater = zlib.decompressobj(_WBITS[encoding])
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise _RequestError(StatusCode.INTERNAL, f"Failed to decompress the message: {exc}") from None
    if len(out) > limit:
        raise _RequestError(StatusCode.RESOURCE_EXHAUSTED, too_large_text(f"{len(out)}+", limit))
    if not inflater.eof:
        raise _RequestError(StatusCode.INTERNAL, "Failed to decompress the message: truncated")
    return out


# --- the call ------------------------------------------------------------------------------


class Stream(Protocol):
    """What a call needs of its connection (``connection.Connection``)."""

    loop: asyncio.AbstractEventLoop
    max_receive_message_length: int
    peer_initial_window: int
    local_initial_window: int
    held: int  # request bytes held across the connection's streams
    paused: bool
    failures: LogLimiter  # the server's ``failure_log``

    def peer(self) -> str: ...
    def released(self, call: Call, size: int) -> None: ...
    def send_unary(self, call: Call, payload: bytes) -> None: ...
    def send_message(self, call: Call, payload: bytes) -> None: ...
    def send_status(self, call: Call, code: int, details: str) -> None: ...
    def writable(self, call: Call) -> asyncio.Future[None]: ...


_END = object()  # the request stream's end, in the queue of requests


class Call:
    """One gRPC call on stream ``sid``: reads its requests, runs its behaviour, answers."""

    __slots__ = (
        "conn", "sid", "handler", "path", "headers", "encoding", "deadline", "timer", "task",
        # request side: the partial message, what to skip, the messages not taken yet
        "rbuf", "skip", "skipped_size", "requests", "queued", "waiter", "remote_closed", "request_error",
        # response side (the connection reads and writes these)
        "send_window", "recv_window", "unreturned", "out", "out_end", "headers_sent",
        "finished", "closed", "aborted", "expired", "drain", "_metadata",
    )  # fmt: skip

    def __init__(self, conn: Stream, sid: int, handler: MethodHandler, path: str):
        self.conn = conn
        self.sid = sid
        self.handler = handler
        self.path = path
        self.headers: list[tuple[bytes, bytes]] = []
        self.encoding: str | None = None  # grpc-encoding of the requests (None: identity)
        self.deadline: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[Any] | None = None
        self.rbuf = bytearray()
        self.skip = 0  # bytes of an over-limit message still to skip
        self.skipped_size = 0
        self.requests: deque[Any] = deque()
        self.queued = 0  # bytes of the messages in ``requests`` (held by the connection)
        self.waiter: asyncio.Future[None] | None = None
        self.remote_closed = False
        self.request_error: _RequestError | None = None
        self.send_window = conn.peer_initial_window
        self.recv_window = conn.local_initial_window
        self.unreturned = 0
        self.out = bytearray()  # DATA payload waiting for a window
        self.out_end: bytes | None = None  # the trailers' block, sent once ``out`` is written
        self.headers_sent = False
        self.finished = False  # the status is decided (trailers sent or queued)
        self.closed = False  # the stream is gone (reset, or the connection lost)
        self.aborted: AbortError | None = None
        self.expired = False
        self.drain: asyncio.Future[None] | None = None  # a writer waiting for the client to read
        self._metadata: tuple[tuple[str, str | bytes], ...] | None = None

    # --- ServicerContext ----------------------------------------------------------------
    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        """The request's custom metadata, as grpc's server publishes it (``published_metadata``)."""
        if self._metadata is None:
            self._metadata = published_metadata(self.headers)
        return self._metadata

    def peer(self) -> str:
        return self.conn.peer()

    def time_remaining(self) -> float | None:
        """Seconds left of the grpc-timeout, None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self.conn.loop.time())

    async def abort(self, code: StatusCode, details: str = "") -> None:
        """End the call with ``code`` and ``details``: raises, never returns."""
        if not isinstance(code, int):  # grpc.StatusCode: its value is (number, name)
            code = StatusCode(code.value[0])
        if code == StatusCode.OK:
            raise ValueError("abort with StatusCode.OK")
        self.aborted = AbortError(StatusCode(code), details)
        raise self.aborted

    async def write(self, message: Any) -> None:
        """Send one response message of a streaming call (waits while the client reads slowly)."""
        if self.finished or self.closed:
            raise asyncio.InvalidStateError("the call is over")
        assert self.handler.response_serializer is not None
        self.conn.send_message(self, self.handler.response_serializer(message))
        if self.out or self.conn.paused:
            await self.conn.writable(self)

    def cancelled(self) -> bool:
        return self.closed and not self.finished

    def done(self) -> bool:
        return self.finished or self.closed

    # --- requests (PROTOCOL-HTTP2.md "Length-Prefixed-Message") ---------------------------
    def feed(self, data: bytes | memoryview) -> None:
        """Take one DATA payload: whole messages queued, a partial one kept (both counted in the
        connection's ``held``); over-limit messages are skipped here as they arrive."""
        pos, n = 0, len(data)
        while pos < n and self.request_error is None:
            if self.skip:
                step = min(self.skip, n - pos)
                self.skip -= step
                pos += step
                if not self.skip:
                    self._deliver_too_large(self.skipped_size)
                continue
            rbuf = self.rbuf
            if not rbuf and n - pos >= MESSAGE_PREFIX_SIZE:  # a whole message in this frame: no copy
                flag, length = MESSAGE_PREFIX_STRUCT.unpack_from(data, pos)
                if self._check_length(length):
                    pos += MESSAGE_PREFIX_SIZE
                    continue
                if n - pos - MESSAGE_PREFIX_SIZE >= length:
                    start = pos + MESSAGE_PREFIX_SIZE
                    self._message(flag, bytes(data[start : start + length]))
                    pos = start + length
                    continue
            take = min(self._needed(), n - pos)
            rbuf += data[pos : pos + take]
            self.conn.held += take
            pos += take
            self._take_buffered()

    def _needed(self) -> int:
        """Bytes the partial message still lacks (its prefix first)."""
        have = len(self.rbuf)
        if have < MESSAGE_PREFIX_SIZE:
            return MESSAGE_PREFIX_SIZE - have
        return MESSAGE_PREFIX_SIZE + MESSAGE_PREFIX_STRUCT.unpack_from(self.rbuf)[1] - have

    def _take_buffered(self) -> None:
        """A message of ``rbuf`` once complete (an over-limit prefix switches to skipping)."""
        rbuf = self.rbuf
        if len(rbuf) < MESSAGE_PREFIX_SIZE:
            return
        flag, length = MESSAGE_PREFIX_STRUCT.unpack_from(rbuf)
        if len(rbuf) == MESSAGE_PREFIX_SIZE and self._check_length(length):
            self.conn.held -= len(rbuf)
            rbuf.clear()
            return
        if len(rbuf) == MESSAGE_PREFIX_SIZE + length:
            with memoryview(rbuf) as view:
                message = bytes(view[MESSAGE_PREFIX_SIZE:])
            self.conn.held -= len(rbuf)
            rbuf.clear()
            self._message(flag, message)

    def _check_length(self, length: int) -> bool:
        """True when a message of ``length`` is not read but skipped (or refused)."""
        limit = self.conn.max_receive_message_length
        if length > limit:
            self._fail(StatusCode.RESOURCE_EXHAUSTED, too_large_text(length, limit))
            return True
        request_limit = self.handler.request_limit
        if request_limit is not None and length > request_limit:
            self.skip = self.skipped_size = length
            if not length:
                self._deliver_too_large(0)
            return True
        return False

    def _message(self, flag: int, data: bytes) -> None:
        """One whole request message: inflated if flagged, queued as it is (decoded when taken)."""
        if flag:
            if self.encoding is None:
                self._fail(StatusCode.INTERNAL, "Compressed message without grpc-encoding")
                return
            try:
                data = decompress(self.encoding, data, self.conn.max_receive_message_length)
            except _RequestError as exc:
                self._fail(exc.code, exc.details)
                return
            limit = self.handler.request_limit
            if limit is not None and len(data) > limit:
                self._deliver_too_large(len(data))
                return
        self.requests.append(data)
        self.queued += len(data)
        self.conn.held += len(data)
        self._wake()

    def _deliver_too_large(self, size: int) -> None:
        assert self.handler.too_large is not None
        self.requests.append(_TooLarge(self.handler.too_large(size)))
        self._wake()

    def _fail(self, code: StatusCode, details: str) -> None:
        """The request stream cannot be read on: the call ends with this status."""
        self.request_error = _RequestError(code, details)
        self.skip = 0
        if self.task is not None:
            self.task.cancel()
        else:
            self.finish(code, details)

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def end_of_requests(self) -> None:
        """END_STREAM from the client: a unary request's call starts; a stream's iterator ends."""
        self.remote_closed = True
        if self.finished or self.closed or self.request_error is not None:
            return
        if self.rbuf or self.skip:
            self._fail(StatusCode.INTERNAL, "Incomplete request message at the end of the stream")
            return
        if self.handler.kind.value[0]:
            self.requests.append(_END)
            self._wake()
            return
        if len(self.requests) != 1:
            many = "Too many requests" if self.requests else "Missing request message"
            self._fail(StatusCode.INTERNAL, f"{many} for a unary request call")
            return
        self._start_unary_request()

    def _take(self) -> Any:
        """The next request, decoded (its bytes no longer held)."""
        item = self.requests.popleft()
        if type(item) is _TooLarge:
            return item.request
        size = len(item)
        self.queued -= size
        self.conn.released(self, size)
        try:
            assert self.handler.request_deserializer is not None
            return self.handler.request_deserializer(item)
        except Exception as exc:
            self._log_failure("Exception deserializing a request", exc)
            raise _RequestError(StatusCode.INTERNAL, "Exception deserializing request!") from None

    # --- running the behaviour --------------------------------------------------------------
    def start(self, timeout: float | None) -> None:
        """The headers are read: arm the deadline; a streaming request's behaviour starts now."""
        loop = self.conn.loop
        if timeout is not None:
            self.deadline = loop.time() + timeout
            self.timer = loop.call_at(self.deadline, self._expire)
        if self.handler.kind.value[0]:
            self._start(self._run_stream_request())

    def _start_unary_request(self) -> None:
        try:
            request = self._take()
        except _RequestError as exc:
            self.finish(exc.code, exc.details)
            return
        handler = self.handler
        try:
            if handler.kind is Kind.UNARY_UNARY:
                self.task = task = self.conn.loop.create_task(handler.behaviour(request, self))
                task.add_done_callback(self._unary_done)
            else:
                self._start(self._stream_out(handler.behaviour(request, self)))
        except Exception as exc:  # a behaviour that is not a coroutine function (an async generator)
            self.finish(*self._unexpected(exc))

    def _start(self, coroutine: Any) -> None:
        self.task = task = self.conn.loop.create_task(coroutine)
        task.add_done_callback(self._stream_done)

    async def _run_stream_request(self) -> Any:
        handler = self.handler
        if handler.kind is Kind.STREAM_UNARY:
            return await handler.behaviour(self._request_iterator(), self)
        if handler.generator:
            await self._stream_out(handler.behaviour(self._request_iterator(), self))
            return None
        await handler.behaviour(self._request_iterator(), self)
        return None

    async def _stream_out(self, responses: AsyncIterator[Any]) -> None:
        async for response in responses:
            await self.write(response)

    async def _request_iterator(self) -> AsyncIterator[Any]:
        """The requests of a streaming call, as they arrive."""
        requests = self.requests
        while True:
            while not requests:
                if self.request_error is not None:
                    raise self.request_error
                self.waiter = self.conn.loop.create_future()
                try:
                    await self.waiter
                finally:
                    self.waiter = None
            if requests[0] is _END:
                return
            yield self._take()

    def _expire(self) -> None:
        """The deadline passed: the behaviour is cancelled, the call ends DEADLINE_EXCEEDED."""
        self.timer = None
        if self.finished or self.closed:
            return
        self.expired = True
        if self.task is not None and not self.task.done():
            self.task.cancel()
        else:
            self.finish(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")

    def _ended_otherwise(self, task: asyncio.Task[Any]) -> bool:
        """The behaviour's task ended with the call already over, or with an abort, an error or a
        cancellation (the call ended with its status): nothing is left to answer."""
        if self.closed or self.finished:
            _retrieve(task)
            return True
        outcome = self._outcome(task)
        if outcome is not None:
            self.finish(*outcome)
            return True
        return False

    def _unary_done(self, task: asyncio.Task[Any]) -> None:
        """A unary answer: headers, message and trailers in one write when the windows allow."""
        if not self._ended_otherwise(task):
            self._answer(task.result())

    def _answer(self, response: Any) -> None:
        """The one response of a call sent, and its OK status (grpc's INTERNAL if it does not
        serialize)."""
        assert self.handler.response_serializer is not None
        try:
            payload = self.handler.response_serializer(response)
        except Exception as exc:
            self._log_failure("Exception serializing a response", exc)
            self.finish(StatusCode.INTERNAL, f"Exception serializing response: {exc}")
            return
        self.conn.send_unary(self, payload)

    def _stream_done(self, task: asyncio.Task[Any]) -> None:
        if self._ended_otherwise(task):
            return
        result = task.result()
        if result is not None and self.handler.kind is Kind.STREAM_UNARY:
            self._answer(result)
            return
        self.finish(StatusCode.OK, "")

    def _outcome(self, task: asyncio.Task[Any]) -> tuple[StatusCode, str] | None:
        """The status of an ended behaviour other than a normal return, None for a normal return."""
        if self.aborted is not None:
            return self.aborted.code, self.aborted.details
        if self.request_error is not None:
            return self.request_error.code, self.request_error.details
        if self.expired:
            return StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"
        if task.cancelled():
            return StatusCode.CANCELLED, "Cancelled"
        exc = task.exception()
        if exc is None:
            return None
        if isinstance(exc, AbortError):
            return exc.code, exc.details
        if isinstance(exc, _RequestError):
            return exc.code, exc.details
        return self._unexpected(exc)

    def _log_failure(self, message: str, exc: BaseException) -> None:
        """A failure in the application's code, logged with its traceback within the server's
        ``failure_log``."""
        suffix = self.conn.failures.admit()
        if suffix is not None:
            log.error("%s [%s]%s", message, self.path, suffix, exc_info=exc)

    def _unexpected(self, exc: BaseException) -> tuple[StatusCode, str]:
        """UNKNOWN with grpc's text; logged with the traceback (within ``FAILURE_LINES``)."""
        self._log_failure("Unexpected error raised by servicer method", exc)
        return StatusCode.UNKNOWN, f"Unexpected {type(exc)}: {exc}"

    def finish(self, code: int, details: str) -> None:
        """End the call with this status (trailers, or a trailers-only answer)."""
        if self.finished or self.closed:
            return
        self.conn.send_status(self, code, details)

    def ended(self) -> None:
        """The stream is over (answered, reset or lost): timers and task let go."""
        timer = self.timer
        if timer is not None:
            timer.cancel()
            self.timer = None
        task = self.task
        if task is not None and not task.done():
            task.cancel()
        self._wake()


def _retrieve(task: asyncio.Task[Any]) -> None:
    """The outcome of a call nobody waits for any more, taken (no "never retrieved" warning)."""
    if not task.cancelled():
        task.exception()


class _TooLarge:
    """An over-limit request's stand-in (``too_large(size)``), queued as it is."""

    __slots__ = ("request",)

    def __init__(self, request: Any):
        self.request = request
