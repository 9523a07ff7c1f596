"""Who is calling: the request metadata the 5.x clients send (``InterceptorConstants``) and the
peer's address (``GrpcMessagingApplication.createContext`` / ``validateContext``).

Every call of a 5.x client carries ``x-mq-client-id`` (``host@pid@index@time``), ``x-mq-language``,
``x-mq-client-version``, ``x-mq-protocol``, ``x-mq-namespace``, ``x-mq-request-id``,
``x-mq-date-time`` and ``authorization``. The proxy keys its per-client state (settings, telemetry
stream, producer and consumer registration) by the client id and refuses a call without one:
CLIENT_ID_REQUIRED "client id cannot be empty".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from rmqcli.broker.grpc.status import CLIENT_ID_REQUIRED, GrpcStatusError

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
PROTOCOL = "x-mq-protocol"
NAMESPACE = "x-mq-namespace"
REQUEST_ID = "x-mq-request-id"
MAX_VALUE_LENGTH = 1024  # longer metadata values are cut (grpc itself caps all metadata at 8 KiB)


class CallContext(NamedTuple):
    """One call's context (a tuple: immutable, and made at every call at little cost)."""

    client_id: str
    language: str
    client_version: str
    protocol: str
    namespace: str
    request_id: str
    remote_host: str  # the peer's address, "" when it is not an IP peer
    remote_port: int

    @property
    def remote_address(self) -> str:
        """``host:port`` (the proxy's ``getRemoteAddress``: BORN_HOST when the message has none)."""
        if not self.remote_host:
            return ""
        host = f"[{self.remote_host}]" if ":" in self.remote_host else self.remote_host
        return f"{host}:{self.remote_port}"

    def require_client_id(self) -> str:
        if not self.client_id.strip():
            raise GrpcStatusError(CLIENT_ID_REQUIRED, "client id cannot be empty")
        return self.client_id


def parse_peer(peer: str) -> tuple[str, int]:
    """grpc's ``context.peer()``: ``ipv4:127.0.0.1:5555``, ``ipv6:[::1]:5555`` (or ``unix:...``)."""
    found = _peers.get(peer)
    if found is None:
        found = _parse_peer(peer)
        if len(_peers) >= MAX_PEERS:
            _peers.clear()
        _peers[peer] = found
    return found


def _parse_peer(peer: str) -> tuple[str, int]:
    scheme, _, rest = (peer or "").partition(":")
    if scheme not in ("ipv4", "ipv6") or ":" not in rest:
        return "", 0
    host, _, port = rest.rpartition(":")
    host = host.strip("[]").split("%")[0]
    return host, int(port) if port.isdigit() and int(port) < 65536 else 0


MAX_PEERS = 4096  # peer strings parsed once each (a client keeps its connection: one per client)
_peers: dict[str, tuple[str, int]] = {}
_WANTED = frozenset((CLIENT_ID, LANGUAGE, CLIENT_VERSION, PROTOCOL, NAMESPACE, REQUEST_ID))


def from_call(metadata: Iterable[tuple[str, str | bytes]] | None, peer: str) -> CallContext:
    """The context of one call from its invocation metadata and peer string (the first value of
    each key, in any case, counts; values of "-bin" keys are bytes and none of ours)."""
    values: dict[str, str] = {}
    for key, value in metadata or ():
        if key not in _WANTED:
            key = key.lower()
            if key not in _WANTED:
                continue
        if key in values or isinstance(value, bytes):
            continue
        values[key] = value[:MAX_VALUE_LENGTH]
    host, port = parse_peer(peer)
    get = values.get
    return CallContext(
        get(CLIENT_ID, ""),
        get(LANGUAGE, ""),
        get(CLIENT_VERSION, ""),
        get(PROTOCOL, ""),
        get(NAMESPACE, ""),
        get(REQUEST_ID, ""),
        host,
        port,
    )
