"""The Messages page's own endpoints (the look-ups by key and id are ``/api/admin/queryMsgByKey``,
``queryMsgById`` and ``queryMsgByUniqueKey``, the same documents as ``rmq <command> --json``):

- ``GET /api/messages?topic=T&begin=B&end=E&limit=N``: the topic's messages stored from B to E
  (millis or ``yyyy-MM-dd#HH:mm:ss:SSS``; begin 0 and end now by default), at most N (64, at most
  512), ``truncated`` when the range holds more (``msgsearch.search``);
- ``GET /api/messages/body?offset_msg_id=ID``: one body, bounded, as text or base64;
- ``GET /api/messages/trace?msg_id=ID``: ``queryMsgTraceById``'s document, and when the trace topic
  has no such trace (or does not exist) an empty list with the broker's line as ``note``, since a
  message without a trace is no error of the page's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rmqcli.dashboard.answers import document, error, one_line
from rmqcli.dashboard.settings import DashboardSettings
from rmqcli.errors import BrokerNotFoundError, UsageError


def _time(params: Any, name: str, default: int) -> int:
    from rmqcli.admin.group import parse_timestamp

    text = params.get(name, "").strip()
    return default if not text else parse_timestamp(text)


def _int(params: Any, name: str, default: int) -> int:
    text = params.get(name, "").strip()
    try:
        return default if not text else int(text)
    except ValueError:
        raise UsageError(f"{name}: not an integer: {text[:40]!r}") from None


def with_session(settings: DashboardSettings, read: Callable[..., Any], *args: Any) -> Any:
    """``read(session, *args)`` in one admin session on the dashboard's name server, with its keys."""
    from rmqcli.admin.session import AdminSession

    if not settings.namesrv:
        raise UsageError("no name server: start rmq dashboard with -n NAMESRV")
    with AdminSession(settings.namesrv, timeout=settings.timeout, credentials=settings.credentials) as s:
        return read(s, *args)


def routes(settings: DashboardSettings) -> list[Route]:
    from rmqcli.dashboard import msgsearch

    async def search(request: Request) -> JSONResponse:
        try:
            q = request.query_params
            topic = q.get("topic", "").strip()
            if not topic:
                raise UsageError("messages: give ?topic=TOPIC (and begin, end, limit)")
            begin = _time(q, "begin", 0)
            end = _time(q, "end", int(time.time() * 1000))
            limit = msgsearch.check_limit(_int(q, "limit", msgsearch.LIMIT))
            found = await run_in_threadpool(
                with_session, settings, msgsearch.search, topic, begin, end, limit
            )
            return document(found)
        except Exception as exc:  # noqa: BLE001 - every failure is one line on the page
            return error(exc)

    async def body(request: Request) -> JSONResponse:
        try:
            msg_id = request.query_params.get("offset_msg_id", "").strip()
            if not msg_id:
                raise UsageError("messages/body: give ?offset_msg_id=ID")
            return document(await run_in_threadpool(with_session, settings, msgsearch.body, msg_id))
        except Exception as exc:  # noqa: BLE001
            return error(exc)

    async def trace(request: Request) -> JSONResponse:
        from rmqcli.dashboard.admin_api import run_command

        try:
            given = {k: v for k, v in request.query_params.items() if k in ("msg_id", "trace_topic")}
            if not given.get("msg_id", "").strip():
                raise UsageError("messages/trace: give ?msg_id=ID")
            try:
                found = await run_in_threadpool(run_command, settings, "queryMsgTraceById", given)
            except BrokerNotFoundError as exc:  # no trace topic, or no trace of this message in it
                return document({"trace": [], "note": one_line(exc)})
            return document({"trace": found, "note": None if found else "no trace of this message"})
        except Exception as exc:  # noqa: BLE001
            return error(exc)

    return [
        Route("/api/messages", search, methods=["GET"]),
        Route("/api/messages/body", body, methods=["GET"]),
        Route("/api/messages/trace", trace, methods=["GET"]),
    ]
