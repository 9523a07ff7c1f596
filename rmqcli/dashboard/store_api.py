"""``/api/store/...``: the store inspector's endpoints over the ``--store`` directories only.

``GET /api/store/{i}/{report}`` (``i`` an index of ``info.stores``) or ``GET
/api/store/{report}?store=INDEX_OR_PATH``; ``report`` is ``files`` (``store_files``), ``stats``,
``verify`` (``?crc=false&topic=T&max_problems=N``), ``lag`` (``?group=G&topic=T``), ``delay`` or
``tx``: the document of ``rmq stats|verify|lag|delay-report|tx-report STORE --json``
(``store_reports``). A store not given is refused (``store_box``, 403). Each report reads in a
worker thread, one at a time per store and report (a second is refused, 409, while one runs)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rmqcli.dashboard import store_reports
from rmqcli.dashboard.answers import document, error
from rmqcli.dashboard.settings import DashboardSettings
from rmqcli.dashboard.store_box import store_at
from rmqcli.dashboard.store_files import store_files
from rmqcli.errors import NotFoundError, UsageError

REPORTS = ("files", "stats", "verify", "lag", "delay", "tx")


class Busy(Exception):
    """The same report of the same store is being read for another request."""


def _flag(name: str, text: str | None, default: bool) -> bool:
    if text is None or text == "":
        return default
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{name}: not true or false: {text[:40]!r}")


def _count(name: str, text: str | None, default: int, most: int) -> int:
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit()) or int(text) > most:
        raise UsageError(f"{name}: not an integer from 0 to {most}: {text[:40]!r}")
    return int(text)


def _reader(report: str, query: dict[str, str]) -> Callable[[Path], str]:
    """The function answering ``report`` for a store path, its options read from ``query``."""
    text = lambda name: query.get(name) or None  # noqa: E731
    if report == "files":
        return lambda path: json.dumps(store_files(path), ensure_ascii=False)
    if report == "stats":
        return store_reports.stats_json
    if report == "verify":
        crc = _flag("crc", query.get("crc"), True)
        most = store_reports.MAX_PROBLEMS
        limit = _count("max_problems", query.get("max_problems"), most, most)
        return lambda path: store_reports.verify_json(path, crc=crc, topic=text("topic"), max_problems=limit)
    if report == "lag":
        return lambda path: store_reports.lag_json(path, text("group"), text("topic"))
    if report == "delay":
        return store_reports.delay_json
    if report == "tx":
        return store_reports.tx_json
    raise NotFoundError(f"no store report {report[:40]!r}: one of {', '.join(REPORTS)}")


def routes(settings: DashboardSettings) -> list[Route]:
    running: set[tuple[int, str]] = set()
    lock = threading.Lock()

    def answer(index: int, path: Path, report: str, read: Callable[[Path], str]) -> str:
        with lock:
            if (index, report) in running:
                raise Busy(f"{report} of store {index} is already being read: wait for its answer")
            running.add((index, report))
        try:
            return read(path)
        finally:
            with lock:
                running.discard((index, report))

    async def serve(request: Request, ref: str) -> Response:
        report = request.path_params["report"]
        try:
            read = _reader(report, dict(request.query_params))
            index, path = store_at(settings.stores, ref)
            text = await run_in_threadpool(answer, index, path, report, read)
            return Response(text, media_type="application/json")
        except Busy as exc:
            return JSONResponse({"error": str(exc)}, 409)
        except Exception as exc:  # noqa: BLE001 - every failure is one line on the page
            return error(exc)

    async def by_index(request: Request) -> Response:
        return await serve(request, request.path_params["index"])

    async def by_query(request: Request) -> Response:
        ref = request.query_params.get("store")
        if ref is None:
            return error(UsageError("give ?store=INDEX_OR_PATH (or /api/store/INDEX/REPORT)"))
        return await serve(request, ref)

    async def stores(request: Request) -> JSONResponse:
        return document([{"index": i, "path": str(p)} for i, p in enumerate(settings.stores)])

    return [
        Route("/api/stores", stores, methods=["GET"]),
        Route("/api/store/{report}", by_query, methods=["GET"]),
        Route("/api/store/{index}/{report}", by_index, methods=["GET"]),
    ]
