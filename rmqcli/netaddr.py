"""Whether a listen address reaches only this machine, for the warnings of ``rmq serve`` and
``rmq exporter`` (rmq's own check; RocketMQ has no such warning).

Standard library only, so that any command can import it without loading a server.
"""

from __future__ import annotations

import ipaddress
import socket


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches only this machine (every address it names is loopback)."""
    host = host.strip().strip("[]")
    if host in ("", "0.0.0.0", "::", "*"):
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {info[4][0].split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)
