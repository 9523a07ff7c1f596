"""The endpoints' answers: JSON documents, and errors as one line with an HTTP status.

An ``RmqError`` keeps its one-line message (the host, the file and offset, the option); anything
else is reported by its type and message, never with a traceback."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from rmqcli.errors import BrokerError, CorruptDataError, NetworkError, NotFoundError, RmqError, UsageError

MAX_BODY = 64 * 1024  # a request body larger than this is refused before it is read whole


class Forbidden(RmqError):
    """A request the dashboard's settings do not allow (a write when read-only, a store not given)."""

    exit_code = 2


_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (Forbidden, 403),
    (UsageError, 400),
    (NotFoundError, 404),
    (CorruptDataError, 422),
    (NetworkError, 502),
    (BrokerError, 502),
)


def one_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name when it has none)."""
    text = str(exc)
    return text.splitlines()[0] if text.strip() else type(exc).__name__


def document(doc: Any) -> JSONResponse:
    return JSONResponse(doc)


def error(exc: BaseException) -> JSONResponse:
    """``{"error": line}`` with the status of ``exc``'s kind (500 for what rmq does not expect)."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return JSONResponse({"error": one_line(exc)}, status)
    return JSONResponse({"error": f"internal error: {type(exc).__name__}: {one_line(exc)}"}, 500)


async def read_json(request: Any) -> Any:
    """The request's JSON body, at most ``MAX_BODY`` bytes (a UsageError beyond, or for bad JSON)."""
    import json

    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise UsageError(f"request body larger than {MAX_BODY} bytes")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks) or b"{}")
    except ValueError as exc:
        raise UsageError(f"request body is not JSON: {exc}") from None
