"""The dashboard's Starlette application: the page shell and its assets (``static/``), the
endpoints of each part (``API_MODULES``, each with ``routes(settings)``), ``/api/info`` and the lag
history. Loopback-only by default is the server's business (``serve``), not this one's."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from rmqcli.dashboard.answers import document, error
from rmqcli.dashboard.lag import LagHistory
from rmqcli.dashboard.settings import DashboardSettings
from rmqcli.errors import UsageError

STATIC = Path(__file__).parent / "static"
API_MODULES = ("admin_api", "messages_api", "store_api")


def create_app(settings: DashboardSettings) -> Starlette:
    from rmqcli import __version__
    from rmqcli.dashboard.admin_api import run_command

    def progress(group: str) -> dict:  # type: ignore[type-arg]
        return run_command(settings, "consumerProgress", {"group_name": group})

    history = LagHistory(progress, settings.lag_interval)

    async def index(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def info(request: Request) -> JSONResponse:
        return document(
            {
                "version": __version__,
                "namesrv": ";".join(settings.namesrv),
                "stores": [str(p) for p in settings.stores],
                "allowWrites": settings.allow_writes,
                "lagInterval": settings.lag_interval,
            }
        )

    async def lag(request: Request) -> JSONResponse:
        try:
            group = request.query_params.get("group", "").strip()
            if not group:
                raise UsageError("lag: give ?group=GROUP")
            if not settings.namesrv:
                raise UsageError("no name server: start rmq dashboard with -n NAMESRV")
            points = await run_in_threadpool(history.watch, group)
            return document({"group": group, "interval": history.interval, "points": points})
        except Exception as exc:  # noqa: BLE001 - one line on the page
            return error(exc)

    async def unknown(request: Request) -> JSONResponse:
        return JSONResponse({"error": f"no such endpoint: {request.url.path}"[:200]}, 404)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        history.start()
        try:
            yield
        finally:
            history.stop()

    routes: list[Route | Mount] = [
        Route("/", index),
        Route("/api/info", info),
        Route("/api/lag", lag),
    ]
    for name in API_MODULES:
        routes += importlib.import_module(f"rmqcli.dashboard.{name}").routes(settings)
    routes.append(Route("/api/{rest:path}", unknown, methods=["GET", "POST"]))
    routes.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
    return Starlette(routes=routes, lifespan=lifespan)
