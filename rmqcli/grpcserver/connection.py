"""One HTTP/2 server connection (RFC 9113) carrying gRPC calls: an ``asyncio.Protocol``.

Frames are parsed from one ``bytearray`` with ``struct`` (formats/http2.py); control frames
answered while reading (SETTINGS ACK, PING ACK, WINDOW_UPDATE) leave in one write per read.
Connection errors end the connection with GOAWAY (§5.4.1), stream errors reset the stream
(§5.4.2). Flow control both ways (§5.2, §6.9): DATA waits for the client's windows; our windows
are given back as request bytes arrive, except the bytes of whole messages a streaming behaviour
has not taken yet (so a slow reader holds back its client).

Bounds for untrusted clients: ``MAX_STREAMS`` open streams, ``Server.max_held`` request bytes held
across a connection's streams (ENHANCE_YOUR_CALM past it), ``Server.max_unsent`` bytes of answers
the client has not read (the connection is dropped past it), a preface within
``Server.preface_timeout``, header blocks of at most ``MAX_HEADER_BLOCK`` bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from formats.http2 import (
    CLIENT_PREFACE,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_WINDOW_SIZE,
    FLAG_ACK,
    FLAG_END_HEADERS,
    FLAG_END_STREAM,
    FLAG_PADDED,
    FLAG_PRIORITY,
    FRAME_HEADER_SIZE,
    FRAME_HEADER_STRUCT,
    GOAWAY_SIZE,
    GOAWAY_STRUCT,
    MAX_ALLOWED_FRAME_SIZE,
    MAX_WINDOW_SIZE,
    MESSAGE_PREFIX_STRUCT,
    PING_SIZE,
    PRIORITY_SIZE,
    PRIORITY_STRUCT,
    RST_STREAM_SIZE,
    RST_STREAM_STRUCT,
    SETTING_SIZE,
    SETTING_STRUCT,
    STREAM_ID_MASK,
    WINDOW_UPDATE_SIZE,
    WINDOW_UPDATE_STRUCT,
    ErrorCode,
    FrameType,
    SettingId,
    frame_header,
)
from rmqcli.grpcserver.calls import (
    ACCEPT_ENCODING,
    RESPONSE_HEADERS,
    SUPPORTED_ENCODINGS,
    TRAILERS_OK,
    Call,
    MethodHandler,
    StatusCode,
    http_error_fields,
    parse_timeout,
    peer_string,
    status_fields,
    trailers_only,
)
from rmqcli.grpcserver.hpack_decode import HeaderListTooLarge, HpackDecoder, HpackError
from rmqcli.remoting.server.connection import LogLimiter

log = logging.getLogger(__name__)

MAX_STREAMS = 1000  # SETTINGS_MAX_CONCURRENT_STREAMS we advertise (and enforce: REFUSED_STREAM)
MAX_HEADER_LIST_SIZE = 16384
MAX_HEADER_BLOCK = 64 * 1024  # HEADERS + CONTINUATION fragments of one block
CONNECTION_WINDOW = 16 * 1024 * 1024  # our connection receive window, raised at once (§6.9.2)
WRITE_HIGH_WATER = 1024 * 1024  # the transport's buffer above which streaming writers wait
WRITE_LOW_WATER = 256 * 1024
CLOSE_LINGER = 5.0  # seconds a closing connection's last writes may take

_DATA, _HEADERS, _CONTINUATION = FrameType.DATA, FrameType.HEADERS, FrameType.CONTINUATION
_END_HEADERS_STREAM = FLAG_END_HEADERS | FLAG_END_STREAM
_pack_header = FRAME_HEADER_STRUCT.pack
_pack_prefix = MESSAGE_PREFIX_STRUCT.pack


class Host(Protocol):
    """What a connection needs of its server (``server.Server``)."""

    loop: asyncio.AbstractEventLoop
    handlers: Mapping[str, MethodHandler]
    max_receive_message_length: int
    preface_timeout: float
    max_unsent: int
    max_held: int
    initial_window: int
    connections: set[Connection]
    stopping: bool
    failures: LogLimiter


class ConnectionError_(Exception):
    """A connection error (RFC 9113 §5.4.1): GOAWAY with ``code``, then close."""

    def __init__(self, code: ErrorCode, text: str):
        super().__init__(code, text)
        self.code = code
        self.text = text


def _settings_frame(settings: dict[SettingId, int]) -> bytes:
    payload = b"".join(SETTING_STRUCT.pack(key, value) for key, value in settings.items())
    return frame_header(len(payload), FrameType.SETTINGS, 0, 0) + payload


def _window_update(stream_id: int, increment: int) -> bytes:
    header = frame_header(WINDOW_UPDATE_SIZE, FrameType.WINDOW_UPDATE, 0, stream_id)
    return header + WINDOW_UPDATE_STRUCT.pack(increment)


def _rst_stream(stream_id: int, code: ErrorCode) -> bytes:
    return frame_header(RST_STREAM_SIZE, FrameType.RST_STREAM, 0, stream_id) + RST_STREAM_STRUCT.pack(code)


def header_frames(stream_id: int, block: bytes, end_stream: bool, max_frame: int) -> bytes:
    """A header block as HEADERS (+ CONTINUATION) frames (RFC 9113 §6.2, §6.10)."""
    end = FLAG_END_STREAM if end_stream else 0
    if len(block) <= max_frame:
        return _pack_header((len(block) << 8) | _HEADERS, end | FLAG_END_HEADERS, stream_id) + block
    parts = []
    for pos in range(0, len(block), max_frame):
        chunk = block[pos : pos + max_frame]
        last = pos + max_frame >= len(block)
        kind = _HEADERS if pos == 0 else _CONTINUATION
        flags = (end if pos == 0 else 0) | (FLAG_END_HEADERS if last else 0)
        parts += (_pack_header((len(chunk) << 8) | kind, flags, stream_id), chunk)
    return b"".join(parts)


class Connection(asyncio.Protocol):
    """The server side of one HTTP/2 connection (RFC 9113 §3.4 on) and its gRPC calls."""

    def __init__(self, server: Host):
        self.server = server
        self.loop = server.loop
        self.max_receive_message_length = server.max_receive_message_length
        self.failures = server.failures
        self.transport: Any = None
        self.buf = bytearray()
        self.preface = False  # the client's preface was read (§3.4)
        self.settings_seen = False  # its first frame, SETTINGS, was read
        self.streams: dict[int, Call] = {}
        self.last_stream_id = 0
        self.decoder = HpackDecoder(MAX_HEADER_LIST_SIZE)
        self.block_sid = 0  # a header block awaiting CONTINUATION: its stream, flags, fragments
        self.block_flags = 0
        self.block = bytearray()
        # flow control (§5.2, §6.9): what we may send, what the client may send us
        self.send_window = DEFAULT_WINDOW_SIZE
        self.peer_initial_window = DEFAULT_WINDOW_SIZE
        self.peer_max_frame = DEFAULT_MAX_FRAME_SIZE
        self.local_initial_window = server.initial_window
        self.recv_window = CONNECTION_WINDOW
        self.unreturned = 0
        self.held = 0  # request bytes held across the streams (partial and untaken messages)
        self.queued_out = 0  # bytes of DATA waiting for a window
        self.blocked: dict[Call, None] = {}  # calls with DATA waiting for a window, in order
        self.paused = False  # the transport asked us to stop writing
        self.batch: list[bytes] | None = None  # writes gathered while reading
        self.goaway_sent = False
        self.goaway_received = False
        self.dead = False
        self.preface_timer: asyncio.TimerHandle | None = None
        self.linger: asyncio.TimerHandle | None = None
        self._peer: str | None = None
        self.handlers = [self._on_unknown] * 256
        for kind, handler in (
            (FrameType.DATA, self._on_data),
            (FrameType.HEADERS, self._on_headers),
            (FrameType.PRIORITY, self._on_priority),
            (FrameType.RST_STREAM, self._on_rst_stream),
            (FrameType.SETTINGS, self._on_settings),
            (FrameType.PUSH_PROMISE, self._on_push_promise),
            (FrameType.PING, self._on_ping),
            (FrameType.GOAWAY, self._on_goaway),
            (FrameType.WINDOW_UPDATE, self._on_window_update),
            (FrameType.CONTINUATION, self._on_continuation),
        ):
            self.handlers[kind] = handler

    # --- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        """Our preface (SETTINGS, then the connection window raised) goes first (§3.4, §6.9.2)."""
        self.transport = transport
        if self.server.stopping:  # accepted (a TLS handshake finished) as the server stops
            self.dead = True
            transport.close()
            return
        self.server.connections.add(self)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)
        settings = {
            SettingId.MAX_CONCURRENT_STREAMS: MAX_STREAMS,
            SettingId.INITIAL_WINDOW_SIZE: self.local_initial_window,
            SettingId.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
            SettingId.ENABLE_PUSH: 0,
        }
        transport.write(
            _settings_frame(settings) + _window_update(0, CONNECTION_WINDOW - DEFAULT_WINDOW_SIZE)
        )
        self.preface_timer = self.loop.call_later(self.server.preface_timeout, self._preface_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        """Every call still running is cancelled."""
        self.dead = True
        self.server.connections.discard(self)
        if self.preface_timer is not None:
            self.preface_timer.cancel()
        if self.linger is not None:
            self.linger.cancel()
        for call in list(self.streams.values()):
            self._drop(call)
        self.streams.clear()
        self.blocked.clear()
        self.queued_out = 0

    def pause_writing(self) -> None:
        self.paused = True
        self._check_unsent()

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_writers()

    def data_received(self, data: bytes) -> None:
        """Parse every whole frame of the buffer (§4.1); writes gathered and sent once."""
        buf = self.buf
        buf += data
        if not self.preface and not self._read_preface():
            return
        batch = self.batch
        own = batch is None  # else writes wait already for ``_flush_writes``, which takes these too
        if own:
            self.batch = batch = []
        try:
            self._frames(buf)
        except ConnectionError_ as exc:
            self.goaway(exc.code, exc.text)
            self.close()
        finally:
            if own:
                self.batch = None
                if batch and not self.transport.is_closing():
                    self.transport.write(b"".join(batch))
        if self.held > self.server.max_held and not self.dead:
            self.goaway(ErrorCode.ENHANCE_YOUR_CALM, "too many request bytes held")
            self.close()

    def _frames(self, buf: bytearray) -> None:
        unpack = FRAME_HEADER_STRUCT.unpack_from
        handlers = self.handlers
        pos, n = 0, len(buf)
        try:
            while n - pos >= FRAME_HEADER_SIZE and not self.dead:
                length_type, flags, stream_id = unpack(buf, pos)
                length = length_type >> 8
                if length > DEFAULT_MAX_FRAME_SIZE:  # we never raise SETTINGS_MAX_FRAME_SIZE (§4.2)
                    raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, f"a frame of {length} bytes")
                start = pos + FRAME_HEADER_SIZE
                end = start + length
                if end > n:
                    break
                kind = length_type & 0xFF
                if self.block_sid and kind != _CONTINUATION:
                    raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "a frame inside a header block")
                if not self.settings_seen:
                    if kind != FrameType.SETTINGS or flags & FLAG_ACK:
                        raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "the preface's SETTINGS missing")
                    self.settings_seen = True
                handlers[kind](flags, stream_id & STREAM_ID_MASK, buf, start, end)
                pos = end
        finally:
            del buf[:pos]

    def _read_preface(self) -> bool:
        """The client's 24-byte preface (§3.4); anything else closes the connection."""
        buf = self.buf
        size = len(CLIENT_PREFACE)
        if buf[:size] != CLIENT_PREFACE[: len(buf)]:
            self.close()
            return False
        if len(buf) < size:
            return False
        del buf[:size]
        self.preface = True
        if self.preface_timer is not None:
            self.preface_timer.cancel()
            self.preface_timer = None
        return True

    def _preface_timeout(self) -> None:
        self.preface_timer = None
        if not self.preface:
            self.close()

    # --- frames received (RFC 9113 §6) -------------------------------------------------------
    def _on_data(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§6.1: counted against both windows, its padding dropped, the rest to the call."""
        if sid == 0:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0")
        length = end - start
        self.recv_window -= length
        if self.recv_window < 0:
            raise ConnectionError_(ErrorCode.FLOW_CONTROL_ERROR, "the connection window overrun")
        self._return_connection_window(length)
        if flags & FLAG_PADDED:
            start, end = self._unpad(buf, start, end)
        call = self.streams.get(sid)
        if call is None:
            if sid > self.last_stream_id:
                raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "DATA on an idle stream")
            return  # a stream we closed: frames in flight are ignored (§5.1)
        if call.remote_closed:
            self._reset(call, ErrorCode.STREAM_CLOSED)
            return
        call.recv_window -= length
        if call.recv_window < 0:
            self._reset(call, ErrorCode.FLOW_CONTROL_ERROR)
            return
        if end > start:
            with memoryview(buf) as view:
                call.feed(view[start:end])
        if flags & FLAG_END_STREAM:
            call.end_of_requests()
        else:
            call.unreturned += length
            self._return_stream_window(call)

    def _unpad(self, buf: bytearray, start: int, end: int) -> tuple[int, int]:
        """The payload without its Pad Length byte and padding (§6.1, §6.2)."""
        if end == start or buf[start] >= end - start:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "padding longer than the frame")
        return start + 1, end - buf[start]

    def _on_headers(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§6.2: a new call's request headers, or a client's trailers; fragments wait for
        CONTINUATION (§6.10)."""
        if sid == 0 or not sid & 1:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, f"HEADERS on stream {sid}")
        if flags & FLAG_PADDED:
            start, end = self._unpad(buf, start, end)
        if flags & FLAG_PRIORITY:
            if end - start < PRIORITY_SIZE:
                raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "HEADERS too short for its priority")
            start += PRIORITY_SIZE
        if flags & FLAG_END_HEADERS:
            self._header_block(sid, flags, buf[start:end])
            return
        self.block_sid = sid
        self.block_flags = flags
        self.block = buf[start:end]

    def _on_continuation(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§6.10: the rest of a header block, at most ``MAX_HEADER_BLOCK`` bytes in all."""
        if sid == 0 or sid != self.block_sid:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "CONTINUATION without its HEADERS")
        block = self.block
        block += buf[start:end]
        if len(block) > MAX_HEADER_BLOCK:
            text = f"a header block over {MAX_HEADER_BLOCK} bytes"
            raise ConnectionError_(ErrorCode.ENHANCE_YOUR_CALM, text)
        if flags & FLAG_END_HEADERS:
            self.block_sid = 0
            self.block = bytearray()
            self._header_block(sid, self.block_flags, block)

    def _header_block(self, sid: int, flags: int, block: bytearray) -> None:
        """A whole header block: decoded (always: the HPACK state is shared), then a new call."""
        try:
            headers = self.decoder.decode(block)
        except HeaderListTooLarge as exc:
            if sid > self.last_stream_id:
                self.last_stream_id = sid
                text = f"Received header list larger than max ({exc.size} vs. {exc.limit})"
                self._refuse(
                    sid,
                    trailers_only(StatusCode.RESOURCE_EXHAUSTED, text),
                    flags,
                )
            return
        except HpackError as exc:
            raise ConnectionError_(ErrorCode.COMPRESSION_ERROR, str(exc)) from None
        call = self.streams.get(sid)
        if call is not None:  # the client's trailers: they end its stream (§8.1)
            if not flags & FLAG_END_STREAM:
                self._reset(call, ErrorCode.PROTOCOL_ERROR)
            elif not call.remote_closed:
                call.end_of_requests()
            return
        if sid <= self.last_stream_id:
            return  # a stream we answered or reset: frames in flight are ignored (§5.1)
        self.last_stream_id = sid
        if self.goaway_sent or self.goaway_received or len(self.streams) >= MAX_STREAMS:
            self._write(_rst_stream(sid, ErrorCode.REFUSED_STREAM))
            return
        self._open(sid, flags, headers)

    def _open(self, sid: int, flags: int, headers: list[tuple[bytes, bytes]]) -> None:
        """A request's headers checked (RFC 9113 §8.3.1, PROTOCOL-HTTP2.md "Requests"), its call
        started; an invalid one answered at once."""
        method = path = content_type = encoding = timeout = None
        for name, value in headers:
            if name[:1] == b":":
                if name == b":path":
                    path = value
                elif name == b":method":
                    method = value
            elif name == b"content-type":
                content_type = value
            elif name == b"grpc-encoding":
                encoding = value
            elif name == b"grpc-timeout":
                timeout = value
            elif name == b"connection" or (name == b"te" and value != b"trailers"):
                self._write(_rst_stream(sid, ErrorCode.PROTOCOL_ERROR))  # malformed (§8.2.2)
                return
        if method is None or path is None:
            self._write(_rst_stream(sid, ErrorCode.PROTOCOL_ERROR))  # malformed (§8.3.1)
            return
        refusal = self._refusal(method, content_type, encoding)
        if refusal is not None:
            self._refuse(sid, refusal, flags)
            return
        handler = self.server.handlers.get(path.decode("latin-1"))
        if handler is None:
            self._refuse(
                sid,
                trailers_only(StatusCode.UNIMPLEMENTED, "Method not found!"),
                flags,
            )
            return
        call = Call(self, sid, handler, path.decode("latin-1"))
        call.headers = headers
        if encoding is not None and encoding != b"identity":
            call.encoding = encoding.decode()
        self.streams[sid] = call
        call.start(None if timeout is None else parse_timeout(timeout))
        if flags & FLAG_END_STREAM:
            call.end_of_requests()

    @staticmethod
    def _refusal(method: bytes, content_type: bytes | None, encoding: bytes | None) -> bytes | None:
        """The trailers-only answer to a request gRPC cannot serve, None for a good one."""
        if method != b"POST":
            return http_error_fields(405, StatusCode.UNIMPLEMENTED, "only POST is served")
        if content_type is None or not content_type.startswith(b"application/grpc"):
            return http_error_fields(415, StatusCode.UNKNOWN, "content-type is not application/grpc")
        if encoding is not None and encoding.decode("latin-1") not in SUPPORTED_ENCODINGS:
            text = f"Compression algorithm '{encoding.decode('latin-1')}' not supported"
            return trailers_only(StatusCode.UNIMPLEMENTED, text) + ACCEPT_ENCODING
        return None

    def _refuse(self, sid: int, block: bytes, flags: int) -> None:
        """A trailers-only answer on a stream with no call; the client's half reset if open."""
        frames = header_frames(sid, block, True, self.peer_max_frame)
        if not flags & FLAG_END_STREAM:
            frames += _rst_stream(sid, ErrorCode.NO_ERROR)
        self._write(frames)

    def _on_priority(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§6.3: checked, then ignored (§5.3.2)."""
        if sid == 0:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0")
        if end - start != PRIORITY_SIZE:
            self._write(_rst_stream(sid, ErrorCode.FRAME_SIZE_ERROR))
            return
        PRIORITY_STRUCT.unpack_from(buf, start)

    def _on_rst_stream(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§6.4: the client cancels the call (its task is cancelled)."""
        if sid == 0:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if end - start != RST_STREAM_SIZE:
            raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM of the wrong size")
        if sid > self.last_stream_id:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on an idle stream")
        call = self.streams.get(sid)
        if call is not None:
            self._drop(call)

    def _on_settings(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§6.5: applied in order, then acknowledged."""
        if sid != 0:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream")
        length = end - start
        if flags & FLAG_ACK:
            if length:
                raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload")
            return
        if length % SETTING_SIZE:
            raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS of a partial entry")
        for pos in range(start, end, SETTING_SIZE):
            self._setting(*SETTING_STRUCT.unpack_from(buf, pos))
        self._write(frame_header(0, FrameType.SETTINGS, FLAG_ACK, 0))
        self._flush_blocked()

    def _setting(self, key: int, value: int) -> None:
        """One setting (§6.5.2); the others (table size: our encoder never indexes) ignored."""
        if key == SettingId.INITIAL_WINDOW_SIZE:
            if value > MAX_WINDOW_SIZE:
                raise ConnectionError_(ErrorCode.FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE too large")
            delta = value - self.peer_initial_window
            self.peer_initial_window = value
            for call in self.streams.values():  # §6.9.2: every stream's window moves
                call.send_window += delta
                if call.send_window > MAX_WINDOW_SIZE:
                    raise ConnectionError_(ErrorCode.FLOW_CONTROL_ERROR, "a stream window over 2^31-1")
        elif key == SettingId.MAX_FRAME_SIZE:
            if not DEFAULT_MAX_FRAME_SIZE <= value <= MAX_ALLOWED_FRAME_SIZE:
                raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE out of range")
            self.peer_max_frame = value
        elif key == SettingId.ENABLE_PUSH and value > 1:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH not 0 or 1")

    def _on_push_promise(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE from a client")  # §8.4

    def _on_ping(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§6.7: answered with the same payload and ACK."""
        if sid != 0:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "PING on a stream")
        if end - start != PING_SIZE:
            raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "PING of the wrong size")
        if not flags & FLAG_ACK:
            self._write(frame_header(PING_SIZE, FrameType.PING, FLAG_ACK, 0) + buf[start:end])

    def _on_goaway(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§6.8: no new streams; the connection closes once the calls are answered."""
        if sid != 0:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream")
        if end - start < GOAWAY_SIZE:
            raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY too short")
        GOAWAY_STRUCT.unpack_from(buf, start)
        self.goaway_received = True
        if not self.streams:
            self.close()

    def _on_window_update(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§6.9: more room to send; 0 is an error, so is a window over 2^31-1 (§6.9.1)."""
        if end - start != WINDOW_UPDATE_SIZE:
            raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE of the wrong size")
        increment = WINDOW_UPDATE_STRUCT.unpack_from(buf, start)[0] & STREAM_ID_MASK
        if sid == 0:
            if not increment:
                raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self.send_window += increment
            if self.send_window > MAX_WINDOW_SIZE:
                raise ConnectionError_(ErrorCode.FLOW_CONTROL_ERROR, "the connection window over 2^31-1")
            self._flush_blocked()
            return
        call = self.streams.get(sid)
        if call is None:
            if sid > self.last_stream_id:
                raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream")
            return
        if not increment:
            self._reset(call, ErrorCode.PROTOCOL_ERROR)
            return
        call.send_window += increment
        if call.send_window > MAX_WINDOW_SIZE:
            self._reset(call, ErrorCode.FLOW_CONTROL_ERROR)
            return
        if call in self.blocked:
            self._flush_blocked()

    def _on_unknown(self, flags: int, sid: int, buf: bytearray, start: int, end: int) -> None:
        """§4.1: frames of unknown types are ignored."""

    # --- our windows (§6.9) ----------------------------------------------------------------------
    def _return_connection_window(self, length: int) -> None:
        self.unreturned += length
        if self.unreturned >= CONNECTION_WINDOW // 4:
            self._write(_window_update(0, self.unreturned))
            self.recv_window += self.unreturned
            self.unreturned = 0

    def _return_stream_window(self, call: Call) -> None:
        """Given back while the call's untaken messages stay under half its window."""
        window = self.local_initial_window
        if call.unreturned < window // 4 or call.queued >= window // 2:
            return
        if not (call.remote_closed or call.finished or call.closed):
            self._write(_window_update(call.sid, call.unreturned))
            call.recv_window += call.unreturned
            call.unreturned = 0

    def released(self, call: Call, size: int) -> None:
        """A behaviour took a message of ``size`` bytes: no longer held, its window may return."""
        self.held -= size
        if call.unreturned and not call.remote_closed and not self.dead:
            self._return_stream_window(call)

    # --- sending ---------------------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        """Bytes for the client: gathered while frames are read, else until the loop's next turn
        (the messages a streaming behaviour writes in one step, the answers of calls that end in
        the same turn: one ``transport.write``, one system call)."""
        if self.batch is not None:
            self.batch.append(data)
        elif not self.dead and not self.transport.is_closing():
            self.batch = [data]
            self.loop.call_soon(self._flush_writes)

    def _flush_writes(self) -> None:
        batch, self.batch = self.batch, None
        if batch and not self.dead and not self.transport.is_closing():
            self.transport.write(b"".join(batch) if len(batch) > 1 else batch[0])
            if self.paused:  # the transport's buffer passed its high-water mark
                self._check_unsent()

    def send_unary(self, call: Call, payload: bytes) -> None:
        """The whole answer of a call: headers, its one message, OK trailers (one write if the
        windows allow)."""
        call.finished = True
        self._send(call, _pack_prefix(0, len(payload)) + payload, TRAILERS_OK)

    def send_message(self, call: Call, payload: bytes) -> None:
        """One message of a streaming answer."""
        self._send(call, _pack_prefix(0, len(payload)) + payload, None)

    def send_status(self, call: Call, code: int, details: str) -> None:
        """The call's status: trailers after its messages, or a trailers-only answer."""
        call.finished = True
        if call.headers_sent:
            self._send(call, b"", status_fields(code, details))
            return
        call.headers_sent = True
        block = trailers_only(code, details)
        self._write(header_frames(call.sid, block, True, self.peer_max_frame))
        self._close_stream(call)

    def _send(self, call: Call, data: bytes, trailers: bytes | None) -> None:
        """DATA (what the windows allow now, the rest queued on the call), then the trailers."""
        if call.closed or self.dead:
            return
        parts: list[Any] = []
        if not call.headers_sent:
            call.headers_sent = True
            parts.append(header_frames(call.sid, RESPONSE_HEADERS, False, self.peer_max_frame))
        if call.out:
            call.out += data
            self.queued_out += len(data)
        else:
            sent = self._emit(call, data, parts) if data else 0
            if sent < len(data):
                call.out += memoryview(data)[sent:]
                self.queued_out += len(data) - sent
                self.blocked[call] = None
        done = False
        if trailers is not None:
            if call.out:
                call.out_end = trailers
            else:
                parts.append(header_frames(call.sid, trailers, True, self.peer_max_frame))
                done = True
        if parts:
            self._write(b"".join(parts) if len(parts) > 1 else parts[0])
        if done:
            self._close_stream(call)
        if call.out or self.paused:
            self._check_unsent()

    def _emit(self, call: Call, data: bytes | bytearray, parts: list[Any]) -> int:
        """DATA frames of ``data``'s head, as much as both windows allow; returns the bytes sent."""
        avail = min(self.send_window, call.send_window, len(data))
        if avail <= 0:
            return 0
        view = memoryview(data) if type(data) is bytes else bytes(data[:avail])
        max_frame = self.peer_max_frame
        sid = call.sid
        pos = 0
        while pos < avail:
            size = min(avail - pos, max_frame)
            parts.append(_pack_header((size << 8) | _DATA, 0, sid))
            parts.append(view[pos : pos + size])
            pos += size
        self.send_window -= avail
        call.send_window -= avail
        return avail

    def _flush_blocked(self) -> None:
        """DATA that waited for a window, stream by stream in order, while the window lasts."""
        if not self.blocked or self.dead:
            return
        parts: list[Any] = []
        done: list[Call] = []
        for call in list(self.blocked):
            if self.send_window <= 0:
                break
            out = call.out
            sent = self._emit(call, out, parts)
            if sent:
                del out[:sent]
                self.queued_out -= sent
            if not out:
                del self.blocked[call]
                if call.out_end is not None:
                    parts.append(header_frames(call.sid, call.out_end, True, self.peer_max_frame))
                    call.out_end = None
                    done.append(call)
        if parts:
            self._write(b"".join(parts))
        for call in done:
            self._close_stream(call)
        self._wake_writers()

    def writable(self, call: Call) -> asyncio.Future[None]:
        """A future done once ``call`` has nothing waiting for a window and the transport takes
        more (a streaming writer's backpressure)."""
        if call.drain is None or call.drain.done():
            call.drain = self.loop.create_future()
        return call.drain

    def _wake_writers(self) -> None:
        if self.paused:
            return
        for call in self.streams.values():
            drain = call.drain
            if drain is not None and not call.out and not drain.done():
                drain.set_result(None)

    def _check_unsent(self) -> None:
        """Drop a client that reads nothing while its answers pile up past ``max_unsent``."""
        if self.dead:
            return
        gathered = sum(map(len, self.batch)) if self.batch else 0
        if self.queued_out + gathered + self.transport.get_write_buffer_size() > self.server.max_unsent:
            log.debug("dropping %s: over %d bytes of answers unread", self.peer(), self.server.max_unsent)
            self.dead = True
            self.transport.abort()

    # --- the end of streams and of the connection ------------------------------------------------
    def _close_stream(self, call: Call) -> None:
        """The call is answered: the stream leaves (the client's half reset if still open, §8.1)."""
        if self.streams.pop(call.sid, None) is None:
            return
        if not call.remote_closed:
            self._write(_rst_stream(call.sid, ErrorCode.NO_ERROR))
        self._let_go(call)
        if (self.goaway_sent or self.goaway_received) and not self.streams:
            self.close()

    def _reset(self, call: Call, code: ErrorCode) -> None:
        """A stream error (§5.4.2): RST_STREAM, the call dropped."""
        self._write(_rst_stream(call.sid, code))
        self._drop(call)

    def _drop(self, call: Call) -> None:
        """The stream is gone without an answer (reset, lost): the behaviour is cancelled."""
        call.closed = True
        self.streams.pop(call.sid, None)
        self._let_go(call)

    def _let_go(self, call: Call) -> None:
        self.held -= len(call.rbuf) + call.queued
        call.rbuf.clear()
        call.requests.clear()
        call.queued = 0
        if call.out:
            self.queued_out -= len(call.out)
            call.out.clear()
        self.blocked.pop(call, None)
        drain = call.drain
        if drain is not None and not drain.done():
            drain.set_result(None)
        call.ended()

    def reset_all(self, code: ErrorCode) -> None:
        """Every open stream reset (the server stops after its grace)."""
        for call in list(self.streams.values()):
            self._reset(call, code)

    def goaway(self, code: ErrorCode, text: str = "") -> None:
        """GOAWAY (§6.8) naming the last stream we took."""
        if self.dead:
            return
        self.goaway_sent = True
        payload = GOAWAY_STRUCT.pack(self.last_stream_id, code) + text.encode()[:256]
        self._write(frame_header(len(payload), FrameType.GOAWAY, 0, 0) + payload)

    def close(self) -> None:
        """Close after the writes buffered so far (calls still running are cancelled); a client
        that does not read them within ``CLOSE_LINGER`` seconds is cut off."""
        if self.batch:
            self.transport.write(b"".join(self.batch))
            self.batch.clear()
        if not self.transport.is_closing():
            self.linger = self.loop.call_later(CLOSE_LINGER, self.transport.abort)
        self.dead = True
        self.transport.close()

    def peer(self) -> str:
        """The client's address in grpc's form (``peer_string``)."""
        if self._peer is None:
            self._peer = peer_string(self.transport.get_extra_info("peername"))
        return self._peer
