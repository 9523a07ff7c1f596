"""Requests that do not decode, and how they are logged (rmq's own; issue 41).

The servicer is registered with request decoders of its own (``servicer_handlers``): a request
whose bytes are not its protobuf message (or a Telemetry command over ``MAX_TELEMETRY_BYTES``,
whose bytes the server skips as they arrive) is
handed to the servicer as an ``Undecodable``, which answers BAD_REQUEST (a Telemetry stream ends
with INVALID_ARGUMENT), instead of grpc's "Unexpected [DecodeError]" ERROR with a traceback per
call. ``BadRequests`` logs them: one line per client address and kind per ``LOG_WINDOW``, with the
count of those held back.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rmqcli.remoting.server.connection import LOG_WINDOW, LogLimiter

log = logging.getLogger(__name__)

SERVICE = "apache.rocketmq.v2.MessagingService"
MAX_TELEMETRY_BYTES = 1024 * 1024  # a settings command is a few KiB (1,024 topics fit many times)
MAX_KEYS = 1024  # (address, kind) pairs with a limiter of their own; more share one


@dataclass(frozen=True)
class Undecodable:
    """The request of a call whose bytes did not decode."""

    method: str
    size: int
    reason: str


def decoder(cls: Any, method: str) -> Callable[[bytes], Any]:
    """``cls.FromString`` that hands back an ``Undecodable`` instead of raising."""

    def decode(raw: bytes) -> Any:
        try:
            return cls.FromString(raw)
        except Exception as exc:  # DecodeError, or anything the parser raises
            return Undecodable(method, len(raw), str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    return decode


def too_large(method: str, limit: int) -> Callable[[int], Undecodable]:
    """The request the servicer gets for a message over ``limit`` (its bytes were never held)."""
    return lambda size: Undecodable(method, size, f"{size} bytes, more than {limit}")


async def _not_implemented(request: Any, context: Any) -> Any:
    """A method the endpoint does not serve (the generated servicer's default)."""
    from rmqcli.grpcserver import StatusCode

    await context.abort(StatusCode.UNIMPLEMENTED, "Method not implemented!")


def servicer_handlers(stubs: Any, servicer: Any) -> dict[str, Any]:
    """``rmqcli.grpcserver`` handlers of every method of ``MessagingService``, with ``decoder``s:
    the servicer's own where it has the method, else UNIMPLEMENTED."""
    from rmqcli.grpcserver import Kind, MethodHandler

    kinds = {
        (False, False): Kind.UNARY_UNARY,
        (False, True): Kind.UNARY_STREAM,
        (True, False): Kind.STREAM_UNARY,
        (True, True): Kind.STREAM_STREAM,
    }
    service = stubs.service.DESCRIPTOR.services_by_name["MessagingService"]
    handlers = {}
    for method in service.methods:
        request = getattr(stubs.service, method.input_type.name)
        response = getattr(stubs.service, method.output_type.name)
        limit = MAX_TELEMETRY_BYTES if method.name == "Telemetry" else None
        behaviour = getattr(servicer, method.name, None)
        if behaviour is None:
            kind, behaviour = Kind.UNARY_UNARY, _not_implemented
        else:
            kind = kinds[(method.client_streaming, method.server_streaming)]
        handlers[f"/{SERVICE}/{method.name}"] = MethodHandler(
            kind,
            behaviour,
            request_deserializer=decoder(request, method.name),
            response_serializer=response.SerializeToString,
            request_limit=limit,
            too_large=too_large(method.name, limit) if limit is not None else None,
        )
    return handlers


class BadRequests:
    """Log lines about bad requests, limited per client address and kind."""

    def __init__(self, window: float = LOG_WINDOW):
        self.window = window
        self._limits: OrderedDict[tuple[str, str], LogLimiter] = OrderedDict()
        self._shared = LogLimiter(1, "about bad gRPC requests of other clients", window)

    def note(self, address: str, client_id: str, kind: str, detail: str) -> None:
        """One bad request of ``kind`` from ``address``: logged unless its line is held back."""
        key = (address, kind)
        limiter = self._limits.get(key)
        if limiter is None:
            if len(self._limits) < MAX_KEYS:
                limiter = self._limits[key] = LogLimiter(1, f"about {kind} from {address}", self.window)
            else:
                limiter = self._shared
        suffix = limiter.admit()
        if suffix is not None:
            log.warning("gRPC %s from %s (client %r): %s%s", kind, address, client_id[:128], detail, suffix)
