"""``rmq dashboard``: the web console over a cluster and store directories (``rmqcli.dashboard``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def dashboard(
    namesrv: Annotated[
        str | None, typer.Option("--namesrvAddr", "-n", help="Name server address list (else $NAMESRV_ADDR).")
    ] = None,
    store: Annotated[
        list[Path] | None,
        typer.Option("--store", help="A store directory the store pages may open (repeat for more)."),
    ] = None,
    listen: Annotated[str, typer.Option("--listen", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP port (0: any free one).")] = 8080,
    allow_writes: Annotated[
        bool,
        typer.Option("--allow-writes", help="Allow the pages' writes (send, reset and skip offsets)."),
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds one admin request may take.")] = 3.0,
    lag_interval: Annotated[
        float, typer.Option("--lag-interval", help="Seconds between two samples of a watched group's lag.")
    ] = 5.0,
    access_key: Annotated[
        str | None, typer.Option("--access-key", help="ACL access key to sign with.")
    ] = None,
    secret_key: Annotated[str | None, typer.Option("--secret-key", help="ACL secret key.")] = None,
) -> None:
    """Serve a web console: the cluster, topics, consumer groups (lag charted over time), messages,
    and the store inspector over the --store directories.

    Every page renders a JSON endpoint; the cluster's answer what `rmq <command> --json` prints
    (/api/admin/clusterList, /api/admin/topicStatus?topic=T, ...). Read-only unless --allow-writes:
    then a page's write (send a test message, reset or skip a group's offsets) shows the command it
    will run and runs it once confirmed. Requests are signed with the ACL keys given, as for the
    mqadmin commands. Listens on loopback unless --listen says otherwise (a warning then)."""
    from rmqcli.admin.credentials import resolve_credentials
    from rmqcli.admin.session import resolve_namesrv
    from rmqcli.dashboard.serve import run_dashboard
    from rmqcli.dashboard.settings import DashboardSettings
    from rmqcli.errors import NotFoundError, UsageError

    if not 0 <= port < 65536:
        raise UsageError(f"--port: bad port {port}")
    if timeout <= 0 or lag_interval <= 0:
        raise UsageError("--timeout and --lag-interval must be positive")
    stores = []
    for given in store or []:
        if not given.is_dir():
            raise NotFoundError(f"--store {given}: no such directory")
        stores.append(given.resolve())
    try:
        addrs = resolve_namesrv(namesrv)
    except UsageError:
        if namesrv or not stores:
            raise
        addrs = []  # stores only: no cluster pages
    settings = DashboardSettings(
        namesrv=addrs,
        stores=stores,
        allow_writes=allow_writes,
        credentials=resolve_credentials(access_key, secret_key),
        timeout=timeout,
        lag_interval=lag_interval,
    )
    run_dashboard(settings, listen, port)
