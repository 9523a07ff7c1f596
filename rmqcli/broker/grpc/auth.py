"""The gRPC endpoint under ``aclEnable=true``: every request message is checked against the
broker's plain ACL before its call runs (``acl.grpcacl``; 5.1.1's ``AuthenticationInterceptor``).

A refusal ends the call as 5.1.1's proxy ends it (``AuthenticationInterceptor`` throws
``StatusRuntimeException(PERMISSION_DENIED)``, ``GlobalExceptionInterceptor`` closes the call
with it): gRPC status PERMISSION_DENIED with no description, not a ``Status`` in a response
body. A call without ``authorization`` or ``x-mq-date-time`` ends with INTERNAL, as the
proxy's NullPointerException does there, described in rmq's words. The reason of each refusal
(the ``AclException`` text) goes to rmq's log, at most ``LOG_LINES`` lines a minute; clients
never see it, as with the proxy. (The proxy also echoes the request's metadata as trailers;
rmq sends none.)
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from rmqcli.broker.acl import grpcacl
from rmqcli.broker.acl.ownership import Names
from rmqcli.broker.acl.setup import BrokerAcl, plain_host
from rmqcli.broker.acl.validator import AccessDenied
from rmqcli.broker.grpc.context import MAX_VALUE_LENGTH, parse_peer
from rmqcli.grpcserver import StatusCode
from rmqcli.remoting.server.connection import LogLimiter

log = logging.getLogger(__name__)

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
LOG_LINES = 10
REASON_CHARS = 200  # of an AclException text in the log (it may quote an access key)


def _headers(metadata: Any) -> tuple[str | None, str | None]:
    """The first ``authorization`` and ``x-mq-date-time`` values, each at most
    ``MAX_VALUE_LENGTH`` characters."""
    found: dict[str, str] = {}
    for key, value in metadata or ():
        name = key.lower()
        if name in (AUTHORIZATION, DATE_TIME) and name not in found and isinstance(value, str):
            found[name] = value[:MAX_VALUE_LENGTH]
    return found.get(AUTHORIZATION), found.get(DATE_TIME)


class GrpcAcl:
    """The ACL check of the gRPC calls over a broker's ``BrokerAcl``."""

    def __init__(self, acl: BrokerAcl, names: Names | None = None):
        self.acl = acl
        self.names = names  # the broker's groups, to read a POP retry topic by
        self._refusals = LogLimiter(LOG_LINES, "about refused gRPC calls")

    def refusal(self, metadata: Any, peer: str, message: Any, rpc: str) -> tuple[str, str] | None:
        """None when ``message`` may run, else the gRPC status (``StatusCode`` name) and
        description to end its call with."""
        authorization, date_time = _headers(metadata)
        host = plain_host(parse_peer(peer)[0])
        try:
            grpcacl.validate(self.acl.files, host, authorization, date_time, message, self.names)
        except AccessDenied as exc:
            self._log(rpc, host, str(exc))
            return "PERMISSION_DENIED", ""
        except grpcacl.MissingMetadata as exc:
            self._log(rpc, host, str(exc))
            return "INTERNAL", str(exc)
        return None

    def _log(self, rpc: str, host: str, reason: str) -> None:
        suffix = self._refusals.admit()
        if suffix is not None:
            log.warning("gRPC %s from %s refused: %s%s", rpc, host or "?", reason[:REASON_CHARS], suffix)

    async def check(self, context: Any, message: Any, rpc: str) -> None:
        """Return when ``message`` may run; else end the call (``context.abort`` raises)."""
        refused = self.refusal(context.invocation_metadata(), context.peer(), message, rpc)
        if refused is not None:
            await context.abort(StatusCode[refused[0]], refused[1])

    async def checked(self, context: Any, messages: AsyncIterator[Any], rpc: str) -> AsyncIterator[Any]:
        """``messages`` (a client stream), each checked before it is handed on."""
        async for message in messages:
            await self.check(context, message, rpc)
            yield message
