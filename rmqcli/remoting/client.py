"""An asyncio remoting client and a synchronous facade for the CLI (protocol.md A.1, A.6).

One TCP connection per address (``host:port``, ``[v6]:port`` or ``v6:port``), requests matched to
responses by opaque, a deadline per request, oneway sends, and requests that the server sends to
us (B.5: NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, GET_CONSUMER_RUNNING_INFO, ...)
dispatched to registered handlers and answered unless oneway. Every failure is a ``NetworkError``
naming the address. asyncio and the codec are imported on first use, so importing this module
costs nothing (``rmq --help`` stays fast).
"""

from __future__ import annotations

import inspect
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from rmqcli.errors import BrokerError, BrokerNotFoundError, NetworkError, UsageError
from rmqcli.remoting.codes import ResponseCode

if TYPE_CHECKING:
    import asyncio

    from rmqcli.remoting.acl import Credentials
    from rmqcli.remoting.codec import RemotingCommand

DEFAULT_TIMEOUT = 5.0
# TOPIC_NOT_EXIST, QUERY_NOT_FOUND, SUBSCRIPTION_GROUP_NOT_EXIST, NO_MESSAGE: exit 3 like every "not found"
NOT_FOUND_CODES = frozenset({17, 22, 26, 208})
READ_CHUNK = 256 * 1024
HEAD_BYTES = 32  # how much of a non-RocketMQ answer an error quotes

RequestHandler = Callable[
    ["RemotingCommand", str], "Awaitable[RemotingCommand | None] | RemotingCommand | None"
]
"""``handler(request, address)``: the response to send back, or None to send nothing."""


def parse_address(addr: str) -> tuple[str, int]:
    """``host:port``, ``[::1]:9876`` or ``::1:9876`` (the last colon separates the port, as Java's
    ``RemotingHelper.string2SocketAddress``)."""
    text = addr.strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"bad address {addr!r}: expected host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


def _frame_shaped(head: bytes) -> bool:
    """Whether ``head`` can begin a remoting frame (A.1): a length word of at least 4, then a
    serialize type JSON or ROCKETMQ and a header length within the frame."""
    from formats import remoting as rfmt

    if len(head) < rfmt.FRAME_PREFIX_STRUCT.size:
        return False
    length, word = rfmt.FRAME_PREFIX_STRUCT.unpack_from(head)
    return (
        length >= 4
        and rfmt.serialize_type_of(word) in tuple(rfmt.SerializeType)
        and rfmt.header_length_of(word) <= length - 4
    )


def _preview(data: bytes) -> str:
    """The first bytes of an answer, as text when they are printable ASCII (``'HTTP/1.1 400 Bad'``),
    else as hex."""
    text = data.split(b"\r")[0].split(b"\n")[0]
    if len(text) >= 4 and all(32 <= b < 127 for b in text):
        return repr(text.decode("ascii"))
    return f"bytes {data[:16].hex(' ')}"


def expect(response: RemotingCommand, addr: str, *ok: int) -> RemotingCommand:
    """``response`` if its code is one of ``ok`` (default SUCCESS), else a ``BrokerError`` naming
    the address, the response code and the remark."""
    if response.code in (ok or (0,)):
        return response
    remark = f": {response.remark.strip()}" if response.remark and response.remark.strip() else ""
    error = BrokerNotFoundError if response.code in NOT_FOUND_CODES else BrokerError
    raise error(f"{addr}: {response.describe()}{remark}")


class _Connection:
    """One socket: a reader task that routes responses to waiting requests and requests to handlers."""

    def __init__(self, client: RemotingClient, addr: str, reader: Any, writer: Any):
        import asyncio

        self.client = client
        self.addr = addr
        self.reader = reader
        self.writer = writer
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.closed: NetworkError | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.read_task = asyncio.get_running_loop().create_task(self._read_loop())

    async def send(self, frame: bytes) -> None:
        if self.closed is not None:
            raise self.closed
        try:
            self.writer.write(frame)
            await self.writer.drain()
        except (OSError, RuntimeError) as exc:
            error = NetworkError(f"{self.addr}: {_os_reason(exc)}")
            self._fail(error)
            raise error from None

    async def _read_loop(self) -> None:
        import asyncio

        from rmqcli.remoting.codec import FrameDecoder, ProtocolError, decode

        decoder = FrameDecoder()
        head: bytes | None = b""  # the first bytes the peer sent, until a whole command was decoded
        try:
            while True:
                data = await self.reader.read(READ_CHUNK)
                if not data:
                    if head and not _frame_shaped(head):  # some bytes, never a command
                        raise ProtocolError("connection closed within its first answer")
                    raise NetworkError(f"{self.addr}: connection closed by peer")
                if head is not None and len(head) < HEAD_BYTES:
                    head += data[: HEAD_BYTES - len(head)]
                for frame in decoder.feed(data):
                    command = decode(frame)
                    head = None
                    if command.is_response:
                        future = self.pending.pop(command.opaque, None)
                        if future is not None and not future.done():
                            future.set_result(command)
                    else:
                        task = asyncio.get_running_loop().create_task(self._serve(command))
                        self.tasks.add(task)
                        task.add_done_callback(self.tasks.discard)
        except ProtocolError as exc:
            if head is not None and not _frame_shaped(head):  # say what the peer is not
                self._fail(
                    ProtocolError(f"not a RocketMQ server at {self.addr}: it answered {_preview(head)}")
                )
            else:
                self._fail(ProtocolError(f"{self.addr}: {exc}"))
        except NetworkError as exc:
            self._fail(exc)
        except OSError as exc:
            self._fail(NetworkError(f"{self.addr}: {_os_reason(exc)}"))
        except asyncio.CancelledError:
            self._fail(NetworkError(f"{self.addr}: connection closed"))
            raise

    async def _serve(self, request: RemotingCommand) -> None:
        """Answer a request the server sent us (A.6): handler, or REQUEST_CODE_NOT_SUPPORTED."""
        from rmqcli.remoting.codec import encode

        handler = self.client.handlers.get(request.code, self.client.default_handler)
        response: RemotingCommand | None
        if handler is None:
            response = request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
            )
        else:
            try:
                result = handler(request, self.addr)
                response = await result if inspect.isawaitable(result) else result
            except Exception as exc:  # a handler bug answers SYSTEM_ERROR, as Java's processors do
                response = request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if response is None or request.is_oneway or self.closed is not None:
            return
        response.flag |= 1
        response.opaque = request.opaque
        try:
            await self.send(encode(response))
        except NetworkError:
            pass

    def _fail(self, error: NetworkError) -> None:
        if self.closed is None:
            self.closed = error
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()
        try:
            self.writer.close()
        except RuntimeError:  # the loop is already closed
            pass
        self.client._forget(self)

    async def close(self) -> None:
        import asyncio

        self._fail(NetworkError(f"{self.addr}: connection closed"))
        self.read_task.cancel()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(self.read_task, *self.tasks, return_exceptions=True)
        try:
            await self.writer.wait_closed()
        except (OSError, RuntimeError):
            pass


class RemotingClient:
    """Asyncio remoting client: ``await invoke(addr, request, timeout)``, ``invoke_oneway``, ``close``.

    ``handlers`` maps request codes of server-originated requests to ``RequestHandler``s;
    ``default_handler`` takes the rest (none: answer REQUEST_CODE_NOT_SUPPORTED, as Java does).
    With ``credentials`` every request is signed for the broker's plain ACL (``AclClientRPCHook``).
    """

    def __init__(
        self,
        handlers: dict[int, RequestHandler] | None = None,
        default_handler: RequestHandler | None = None,
        credentials: Credentials | None = None,
    ):
        self.handlers: dict[int, RequestHandler] = dict(handlers or {})
        self.default_handler = default_handler
        self.credentials = credentials
        self._connections: dict[str, _Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._opaque = -1

    def register(self, code: int, handler: RequestHandler) -> None:
        """Answer server-originated requests with ``code`` by ``handler`` (B.5)."""
        self.handlers[int(code)] = handler

    def next_opaque(self) -> int:
        """A fresh request id: counts from 0 and wraps within the positive int32 range."""
        self._opaque = (self._opaque + 1) & 0x7FFFFFFF
        return self._opaque

    @property
    def addresses(self) -> list[str]:
        """Addresses with an open connection."""
        return list(self._connections)

    def _forget(self, connection: _Connection) -> None:
        if self._connections.get(connection.addr) is connection:
            del self._connections[connection.addr]

    async def connection(self, addr: str, timeout: float = DEFAULT_TIMEOUT) -> _Connection:
        """The open connection to ``addr``, connecting first if needed."""
        import asyncio

        existing = self._connections.get(addr)
        if existing is not None and existing.closed is None:
            return existing
        host, port = parse_address(addr)
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            existing = self._connections.get(addr)
            if existing is not None and existing.closed is None:
                return existing
            try:
                async with asyncio.timeout(timeout):
                    reader, writer = await asyncio.open_connection(host, port, limit=READ_CHUNK)
            except TimeoutError:
                raise NetworkError(f"{addr}: connect timed out after {timeout:g} s") from None
            except OSError as exc:
                raise NetworkError(f"{addr}: {_os_reason(exc)}") from None
            sock = writer.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass
            connection = _Connection(self, addr, reader, writer)
            self._connections[addr] = connection
            return connection

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout: float = DEFAULT_TIMEOUT
    ) -> RemotingCommand:
        """Send ``request`` (with a fresh opaque) and wait up to ``timeout`` s for its response."""
        import asyncio

        from rmqcli.remoting.codec import encode

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        connection = await self.connection(addr, timeout)
        request.opaque = self.next_opaque()
        request.flag &= ~3
        self._sign(request)
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        connection.pending[request.opaque] = future
        try:
            async with asyncio.timeout_at(deadline):
                await connection.send(encode(request))
                return await future
        except TimeoutError:
            raise NetworkError(f"{addr}: no response to {request.describe()} within {timeout:g} s") from None
        finally:
            connection.pending.pop(request.opaque, None)

    async def invoke_oneway(
        self, addr: str, request: RemotingCommand, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Send ``request`` with the oneway bit (A.6); nothing comes back."""
        import asyncio

        from rmqcli.remoting.codec import encode

        request.opaque = self.next_opaque()
        request.flag = (request.flag & ~1) | 2
        self._sign(request)
        try:
            async with asyncio.timeout(timeout):
                connection = await self.connection(addr, timeout)
                await connection.send(encode(request))
        except TimeoutError:
            raise NetworkError(f"{addr}: could not send {request.describe()} within {timeout:g} s") from None

    def _sign(self, request: RemotingCommand) -> None:
        if self.credentials is not None:
            from rmqcli.remoting.acl import sign

            sign(request, self.credentials)

    async def close(self) -> None:
        """Close every connection; requests still waiting fail with NetworkError."""
        import asyncio

        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SyncClient:
    """A blocking facade over ``RemotingClient`` with its own event loop, for one CLI command:
    connections stay open between calls until ``close`` (server requests are served while a call
    is in progress)."""

    def __init__(
        self,
        handlers: dict[int, RequestHandler] | None = None,
        default_handler: RequestHandler | None = None,
        credentials: Credentials | None = None,
    ):
        import asyncio

        self._runner = asyncio.Runner()
        self.client = RemotingClient(handlers, default_handler, credentials)
        self._closed = False

    def invoke(
        self, addr: str, command: RemotingCommand, timeout: float = DEFAULT_TIMEOUT
    ) -> RemotingCommand:
        return self._runner.run(self.client.invoke(addr, command, timeout))

    def invoke_oneway(self, addr: str, command: RemotingCommand, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._runner.run(self.client.invoke_oneway(addr, command, timeout))

    def invoke_all(
        self, calls: Iterable[tuple[str, RemotingCommand]], timeout: float = DEFAULT_TIMEOUT
    ) -> list[RemotingCommand | NetworkError]:
        """Several requests concurrently; each result is its response or the NetworkError it met."""
        import asyncio

        async def run() -> list[Any]:
            return await asyncio.gather(
                *(self.client.invoke(addr, cmd, timeout) for addr, cmd in calls), return_exceptions=True
            )

        results = self._runner.run(run())
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, NetworkError):
                raise result
        return results

    def close(self) -> None:
        """Close the connections (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._runner.run(self.client.close())
        finally:
            self._runner.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
