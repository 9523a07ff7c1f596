"""The Prometheus endpoint of ``rmq serve`` (``metricsExporterType=PROM``) and ``rmq exporter``, as
the 5.1.1 broker's OpenTelemetry ``PrometheusHttpServer`` answers (``metrics.md §2.1``).

Every path answers the metrics but ``/-/healthy`` (``Exporter is Healthy.``); GET and HEAD; the
query's ``name[]`` (repeatable) keeps only those families; ``Accept: application/openmetrics-text``
gets OpenMetrics, ``Accept-Encoding: gzip`` a gzip body. One request per connection (answered with
``Connection: close``). Bounded: a request head of at most ``MAX_HEAD`` bytes read within
``READ_TIMEOUT_S``, at most ``MAX_CONNECTIONS`` at once; anything else is answered 400/405/431 or
dropped, and never logged with its content.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import time
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger(__name__)

MAX_HEAD = 8192
READ_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
HEALTHY = b"Exporter is Healthy."
TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"

Render = Callable[[int, bool, "frozenset[str] | None"], str]


class MetricsServer:
    """The endpoint over ``render(now_ms, openmetrics, names)``."""

    def __init__(self, render: Render, *, threaded: bool = False):
        """``threaded``: ``render`` runs in a worker thread, one at a time (it makes blocking
        requests: ``rmq exporter``); else on the event loop (it reads the loop's state: ``rmq serve``)."""
        self.render = render
        self.threaded = threaded
        self.server: asyncio.AbstractServer | None = None
        self._open = 0
        self._one = asyncio.Lock() if threaded else None

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True, limit=MAX_HEAD)

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open >= MAX_CONNECTIONS:
            writer.close()
            return
        self._open += 1
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except asyncio.LimitOverrunError:
                await self._answer(writer, 431, b"request header too large\n")
                return
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                return
            if self._one is not None:
                async with self._one:
                    status, headers, body = await asyncio.to_thread(self._respond, head)
            else:
                status, headers, body = self._respond(head)
            await self._answer(writer, status, body, headers)
        except ConnectionError:
            pass
        finally:
            self._open -= 1
            writer.close()

    def _respond(self, head: bytes) -> tuple[int, dict[str, str], bytes]:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return 400, {}, b"bad request\n"
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            return 405, {"Allow": "GET, HEAD"}, b""
        fields: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                fields[name.strip().lower()] = value.strip()
        url = urlsplit(target)
        if url.path == "/-/healthy":
            body, kind = HEALTHY, "text/plain; charset=utf-8"
        else:
            names = parse_qs(url.query).get("name[]")
            openmetrics = "application/openmetrics-text" in fields.get("accept", "")
            text = self.render(int(time.time() * 1000), openmetrics, frozenset(names) if names else None)
            body, kind = text.encode("utf-8"), OPENMETRICS if openmetrics else TEXT
        headers = {"Content-Type": kind}
        if "gzip" in fields.get("accept-encoding", ""):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        if method == "HEAD":
            headers["Content-Length"] = str(len(body))
            return 200, headers, b""
        return 200, headers, body

    async def _answer(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        reason = {
            200: "OK",
            400: "Bad Request",
            405: "Method Not Allowed",
            431: "Request Header Fields Too Large",
        }
        fields = {"Connection": "close", **(headers or {})}
        fields.setdefault("Content-Length", str(len(body)))
        head = f"HTTP/1.1 {status} {reason[status]}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
        writer.write(head.encode("latin-1") + b"\r\n" + body)
        await writer.drain()
