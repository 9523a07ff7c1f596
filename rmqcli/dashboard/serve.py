"""``rmq dashboard``'s process: the application on uvicorn, on a socket bound here (a port in use
is one line, exit 5), until SIGTERM or SIGINT."""

from __future__ import annotations

import socket
import sys

from rmqcli.dashboard.settings import DashboardSettings
from rmqcli.errors import bind_error
from rmqcli.netaddr import is_loopback


def _bind(listen: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in listen else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((listen, port))
    except OSError as exc:
        sock.close()
        raise bind_error("dashboard", listen, port, exc) from None
    sock.listen(128)
    return sock


def run_dashboard(settings: DashboardSettings, listen: str, port: int) -> None:
    import uvicorn

    from rmqcli.dashboard.app import create_app

    if not is_loopback(listen):
        warning = f"listening on {listen}: anyone who can connect sees the cluster and the stores"
        print(f"rmq dashboard: warning: {warning}", file=sys.stderr)
    sock = _bind(listen, port)
    host, bound = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    mode = "read and write" if settings.allow_writes else "read-only"
    print(f"rmq dashboard: http://{shown}:{bound}/ ({mode})", flush=True)
    app = create_app(settings)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
