"""``rmq exporter``: Prometheus metrics of a whole cluster of any version, with apache/rocketmq-exporter's
family names and labels, over the admin protocol (``rmqcli.exporter``)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def exporter(
    namesrv: Annotated[
        str | None, typer.Option("--namesrvAddr", "-n", help="Name server address list (else $NAMESRV_ADDR).")
    ] = None,
    port: Annotated[int, typer.Option("--port", help="HTTP port of the metrics.")] = 5557,
    listen: Annotated[str, typer.Option("--listen", help="Address to listen on.")] = "127.0.0.1",
    scrape_timeout: Annotated[
        float,
        typer.Option("--scrape-timeout", help="Seconds one scrape may take; later requests are skipped."),
    ] = 20.0,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds one request may take.")] = 3.0,
    once: Annotated[bool, typer.Option("--once", help="Print one scrape to stdout and exit.")] = False,
    access_key: Annotated[
        str | None, typer.Option("--access-key", help="ACL access key to sign with.")
    ] = None,
    secret_key: Annotated[str | None, typer.Option("--secret-key", help="ACL secret key.")] = None,
) -> None:
    """Serve a RocketMQ cluster's metrics (4.x or 5.x) to Prometheus, as apache/rocketmq-exporter does.

    Each scrape asks the cluster now, over the admin protocol (cluster info, every broker's runtime
    table, statistics, topic offsets, consumer progress and connections), within --scrape-timeout;
    the families and labels are rocketmq-exporter's (rocketmq_group_diff, rocketmq_producer_offset,
    rocketmq_consumer_tps, rocketmq_broker_tps, rocketmq_brokeruntime_*, ...), plus
    rmq_exporter_broker_up for each broker (0: it did not answer) and the scrape's duration and failed
    requests. Requests are signed when ACL keys are given (as for the mqadmin commands). --once prints
    one scrape and exits. Listens on loopback unless --listen says otherwise (a warning then)."""
    from rmqcli.admin.credentials import resolve_credentials
    from rmqcli.admin.session import resolve_namesrv
    from rmqcli.errors import UsageError
    from rmqcli.exporter.run import run_exporter, scrape_text

    addrs = resolve_namesrv(namesrv)
    if scrape_timeout <= 0 or timeout <= 0:
        raise UsageError("--scrape-timeout and --timeout must be positive")
    if not 0 <= port < 65536:
        raise UsageError(f"--port: bad port {port}")
    credentials = resolve_credentials(access_key, secret_key)
    if once:
        sys.stdout.write(scrape_text(addrs, credentials, scrape_timeout, timeout))
        return
    run_exporter(addrs, credentials, listen, port, scrape_timeout, timeout)
