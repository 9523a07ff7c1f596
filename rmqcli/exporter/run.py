"""``rmq exporter``'s process: one admin session, a collection per scrape (``collect``), the HTTP
endpoint of ``rmqcli.metrics.http`` (scrapes one at a time, in a worker thread)."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

from rmqcli.errors import bind_error
from rmqcli.netaddr import is_loopback
from rmqcli.stopsignal import until_stopped

if TYPE_CHECKING:
    from rmqcli.remoting.acl import Credentials


def scrape_text(namesrv: list[str], credentials: Credentials | None, budget: float, timeout: float) -> str:
    """One scrape's Prometheus text."""
    from rmqcli.admin.session import AdminSession
    from rmqcli.exporter.collect import Collector, render

    with AdminSession(namesrv, timeout=timeout, credentials=credentials) as session:
        return render(Collector(session, budget).run())


def run_exporter(
    namesrv: list[str], credentials: Credentials | None, listen: str, port: int, budget: float, timeout: float
) -> None:
    """Serve until SIGTERM/SIGINT; a port in use is a one-line ``NetworkError``."""
    from rmqcli.admin.session import AdminSession
    from rmqcli.exporter.collect import Collector, render
    from rmqcli.metrics.http import MetricsServer

    if not is_loopback(listen):
        warning = f"listening on {listen}: anyone who can connect sees the cluster's metrics"
        print(f"rmq exporter: warning: {warning}", file=sys.stderr)
    session = AdminSession(namesrv, timeout=timeout, credentials=credentials)

    def render_scrape(now_ms: int, openmetrics: bool, names: frozenset[str] | None) -> str:
        text = render(Collector(session, budget).run(), names)
        return text + "# EOF\n" if openmetrics else text

    async def main() -> None:
        server = MetricsServer(render_scrape, threaded=True)
        try:
            await server.start(listen, port)
        except OSError as exc:
            raise bind_error("exporter", listen, port, exc) from None
        print(
            f"rmq exporter: metrics of {';'.join(namesrv)} on http://{listen}:{server.port}/metrics",
            flush=True,
        )
        try:
            await until_stopped()
        finally:
            await server.close()

    try:
        asyncio.run(main())
    finally:
        session.close()
